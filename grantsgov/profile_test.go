package grantsgov_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantsgov"
	"github.com/grantretry/grantretry/internal/fakes2s"
)

// profileClient is a client whose Transport gives the funder's host the
// grantsgov profile, over inner, on a clock that does not wait.
func profileClient(t *testing.T, f *fakes2s.Funder, inner http.RoundTripper, reconcileClient *http.Client) (*http.Client, *grantretry.Transport) {
	t.Helper()
	return profileClientOn(t, f, inner, reconcileClient, instantClock{})
}

// profileClientOn is profileClient on clock.
func profileClientOn(t *testing.T, f *fakes2s.Funder, inner http.RoundTripper, reconcileClient *http.Client, clock grantretry.Clock) (*http.Client, *grantretry.Transport) {
	t.Helper()
	u, err := url.Parse(f.URL())
	if err != nil {
		t.Fatal(err)
	}
	tr := grantretry.New(inner, grantretry.WithClock(clock),
		grantsgov.Profile(u.Host, newReconciler(t, reconcileClient)))
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}, tr
}

// send posts a SubmitApplication envelope under the submission id, with
// SOAPAction action, and returns its outcome and the body read.
func send(t *testing.T, client *http.Client, u, id, action string, envelope []byte) (grantretry.Outcome, *http.Response, []byte) {
	t.Helper()
	req := submitRequest(t, grantretry.WithSubmissionID(context.Background(), id), u, envelope)
	req.Header.Set("SOAPAction", action)
	resp, err := client.Do(req)
	if err != nil {
		var gerr *grantretry.Error
		if errors.As(err, &gerr) {
			return gerr.Outcome, nil, nil
		}
		t.Fatalf("%s: %v", id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := grantretry.OutcomeOf(resp)
	return o, resp, body
}

func TestProfileAcceptsWSDLShapedSubmission(t *testing.T) {
	f, lookup := startFunder(t, fakes2s.Options{DropRate: -1})
	client, _ := profileClient(t, f, f.NewTransport(), lookup)
	o, resp, body := send(t, client, f.URL(), "PROP-10", fakes2s.Action(fakes2s.OpSubmitApplication), fakes2s.SubmitEnvelope("PROP-10", "<SF424/>"))
	if o.Disposition != grantretry.Succeeded || o.Attempts != 1 || resp.StatusCode != http.StatusOK {
		t.Fatalf("outcome %s (%s) after %d attempts, status %v", o.Disposition, o.StopReason, o.Attempts, resp)
	}
	r, err := grantsgov.ParseSubmitResponse(body)
	if err != nil || len(f.TrackingNumbers("PROP-10")) != 1 || r.TrackingNumber != f.TrackingNumbers("PROP-10")[0] {
		t.Errorf("receipt %+v, %v; the funder recorded %v", r, err, f.TrackingNumbers("PROP-10"))
	}
}

// The funder's refusals, each the real fault: the same request meets it
// again, so each ends after one attempt, and none counts toward the
// breaker: more of them than its threshold leave the next call unblocked.
func TestProfileRefusalsAreTerminalAndNotCountedByBreaker(t *testing.T) {
	cases := []struct {
		name     string
		inner    func(f *fakes2s.Funder) http.RoundTripper
		action   string
		envelope []byte
		reason   string
	}{
		{"wrong SOAPAction", func(f *fakes2s.Funder) http.RoundTripper { return f.NewTransport() },
			fakes2s.Action(fakes2s.OpGetApplicationList), fakes2s.SubmitEnvelope("PROP-20", "<SF424/>"), "terminal:500;grantsgov:action"},
		{"missing client certificate", func(f *fakes2s.Funder) http.RoundTripper {
			return &http.Transport{TLSClientConfig: f.AnonymousTLS(), ForceAttemptHTTP2: false}
		}, fakes2s.Action(fakes2s.OpSubmitApplication), fakes2s.SubmitEnvelope("PROP-21", "<SF424/>"), "terminal:500;grantsgov:certificate"},
		{"schema-invalid request", func(f *fakes2s.Funder) http.RoundTripper { return f.NewTransport() },
			fakes2s.Action(fakes2s.OpSubmitApplication), fakes2s.ResubmitEnvelope("GRANT123", "PROP-22", "<SF424/>"), "terminal:500;grantsgov:validation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, lookup := startFunder(t, fakes2s.Options{DropRate: -1})
			inner := tc.inner(f)
			client, _ := profileClient(t, f, inner, lookup)
			n := grantsgov.ProfileBreakerThreshold * 2
			for i := range n {
				id := fmt.Sprintf("PROP-2x-%d", i)
				o, resp, body := send(t, client, f.URL(), id, tc.action, tc.envelope)
				if o.Disposition != grantretry.FailedTerminal || o.Attempts != 1 || o.Reason != tc.reason {
					t.Fatalf("call %d of %d: %s (%s) after %d attempts, reason %q; want failed_terminal after 1, %q",
						i+1, n, o.Disposition, o.StopReason, o.Attempts, o.Reason, tc.reason)
				}
				if resp.StatusCode != http.StatusInternalServerError || len(body) == 0 {
					t.Fatalf("call %d: status %d, %d bytes of body; want the fault's 500", i+1, resp.StatusCode, len(body))
				}
			}
			if got := f.Received(); got != n {
				t.Errorf("the funder received %d requests for %d calls", got, n)
			}
			if f.TotalApplications() != 0 {
				t.Errorf("%d applications recorded from refused requests", f.TotalApplications())
			}
			if _, ok := inner.(*http.Transport); ok {
				inner.(*http.Transport).CloseIdleConnections()
			}
		})
	}
}

// skipClock is instantClock, set ahead by skip: the test skips the time
// a pipeline would wait before sending a call refused with circuit_open
// again. The funder dates its applications on the same clock.
type skipClock struct{ offset atomic.Int64 }

func (c *skipClock) Now() time.Time                                   { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *skipClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
func (c *skipClock) skip(d time.Duration)                             { c.offset.Add(int64(d)) }

// A thousand submissions to a funder that drops a tenth of them after
// recording them: each is recorded once, and none is lost. A run of
// drops may open the profile's breaker, as five failed calls in a row
// should: the calls it refuses were never sent, and go again once the
// cooldown has passed, under the same submission id.
func TestProfileThousandSubmissionsTenthDroppedNoDuplicateNoLoss(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	clock := new(skipClock)
	f, lookup := startFunder(t, fakes2s.Options{DropRate: 0.1, Seed: 7, Now: clock.Now})
	inner := f.NewTransport()
	defer inner.CloseIdleConnections()
	client, _ := profileClientOn(t, f, inner, lookup, clock)
	var refused atomic.Int64
	var wg sync.WaitGroup
	outcomes := make([]grantretry.Outcome, n)
	tracking := make([]string, n)
	submit := func(id string) (grantretry.Outcome, string) {
		o, resp, body := send(t, client, f.URL(), id, fakes2s.Action(fakes2s.OpSubmitApplication), fakes2s.SubmitEnvelope(id, "<SF424/>"))
		if resp != nil && resp.StatusCode == http.StatusOK {
			if r, err := grantsgov.ParseSubmitResponse(body); err == nil {
				return o, r.TrackingNumber
			}
		}
		return o, ""
	}
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			id := fmt.Sprintf("PROP-%04d", i)
			outcomes[i], tracking[i] = submit(id)
		}()
	}
	wg.Wait()
	// The calls the open breaker refused were never sent: the funder holds
	// none of them. Once the cooldown has passed they go again, one at a
	// time, as a pipeline's queue would send them.
	for i, o := range outcomes {
		id := fmt.Sprintf("PROP-%04d", i)
		for tries := 0; o.Disposition == grantretry.CircuitOpen && tries < 10; tries++ {
			refused.Add(1)
			if got := f.TrackingNumbers(id); len(got) != 0 {
				t.Errorf("%s: refused by the open breaker, but the funder recorded %v", id, got)
			}
			clock.skip(grantsgov.ProfileBreakerCooldown)
			o, tracking[i] = submit(id)
			outcomes[i] = o
		}
	}
	reconciled, lost := 0, 0
	for i, o := range outcomes {
		id := fmt.Sprintf("PROP-%04d", i)
		recorded := f.TrackingNumbers(id)
		if o.Disposition != grantretry.Succeeded || len(recorded) != 1 || tracking[i] != recorded[0] {
			lost++
			t.Errorf("%s: %s (%s), receipt %q, the funder recorded %v", id, o.Disposition, o.StopReason, tracking[i], recorded)
		}
		if o.StopReason == grantretry.StopReconciled {
			reconciled++
		}
	}
	t.Logf("%d submissions: %d dropped after recording, %d reconciled, %d queries, %d refused by the open breaker and sent again, %d duplicates, %d lost",
		n, f.Dropped(), reconciled, f.Queries(), refused.Load(), f.Duplicates(), lost)
	if f.Duplicates() != 0 || f.TotalApplications() != n {
		t.Errorf("%d duplicates, %d applications for %d submissions", f.Duplicates(), f.TotalApplications(), n)
	}
	if f.Dropped() == 0 || reconciled == 0 {
		t.Errorf("%d dropped, %d reconciled; want drops, each reconciled", f.Dropped(), reconciled)
	}
}

// A title sent again, an hour after an application the service accepted
// under it, and dropped after recording: the call is reconciled with its
// own application, the one received after its first attempt, which the
// Transport's FirstAttempt tells apart.
func TestProfileReconcilesResubmissionWithItsOwnApplication(t *testing.T) {
	var offset atomic.Int64
	offset.Store(int64(-time.Hour))
	f, lookup := startFunder(t, fakes2s.Options{
		Drop: func(title string, n int) bool { return n == 2 },
		Now:  func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
	})
	earlier := submitDirect(t, f, lookup, fakes2s.SubmitEnvelope("PROP-30", "<SF424/>"))
	offset.Store(0)
	inner := f.NewTransport()
	defer inner.CloseIdleConnections()
	client, _ := profileClient(t, f, inner, lookup)
	o, resp, body := send(t, client, f.URL(), "PROP-30", fakes2s.Action(fakes2s.OpSubmitApplication), fakes2s.SubmitEnvelope("PROP-30", "<SF424/>"))
	recorded := f.TrackingNumbers("PROP-30")
	if o.Disposition != grantretry.Succeeded || o.StopReason != grantretry.StopReconciled || len(recorded) != 2 {
		t.Fatalf("%s (%s) after %d attempts; the funder recorded %v; want reconciled, 2 applications", o.Disposition, o.StopReason, o.Attempts, recorded)
	}
	r, err := grantsgov.ParseSubmitResponse(body)
	if err != nil || resp.StatusCode != http.StatusOK || r.TrackingNumber != recorded[1] {
		t.Errorf("receipt %+v, %v; want the call's own %s, not the earlier %s", r, err, recorded[1], earlier.TrackingNumber)
	}
}

// Without its reconciler the profile would resend an ambiguous
// submission: the Transport is invalid, and sends nothing.
func TestProfileWithNilReconcilerMakesTransportInvalid(t *testing.T) {
	tr := grantretry.New(http.DefaultTransport, grantsgov.Profile("ws07.grants.gov", nil))
	if err := tr.Err(); !errors.Is(err, grantretry.ErrInvalidOption) {
		t.Fatalf("Err() = %v, want ErrInvalidOption", err)
	}
}
