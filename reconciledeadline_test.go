package grantretry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A reconciler's response, once RoundTrip returned it, is the caller's to
// read with no deadline on it, like any returned response: the question's
// deadline must not cut its body when the call's deadline passes while
// the caller reads it.
func TestReconciledResponseIsNotCutAtTheCallDeadline(t *testing.T) {
	const deadline = 1500 * time.Millisecond
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/list" {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusInternalServerError) // ambiguous: it may have been applied
			return
		}
		w.Write([]byte("<ApplicationList>"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte("<Application id=\"GRANT-42\"/></ApplicationList>"))
	}))
	defer srv.Close()
	ask := &http.Client{Transport: &http.Transport{}}
	defer ask.CloseIdleConnections()
	reconciler := func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/list", nil)
		if err != nil {
			return nil, err
		}
		return ask.Do(req)
	}
	tr := New(nil, WithBudget(0, deadline), WithReconciler(reconciler))
	defer tr.CloseIdleConnections()

	req, _ := http.NewRequestWithContext(WithSubmissionID(context.Background(), "GRANT-42"),
		http.MethodPost, srv.URL+"/submit", strings.NewReader("<Application/>"))
	resp, err := tr.RoundTrip(req)
	returned := time.Now()
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	defer resp.Body.Close()
	if o := mustOutcome(t, resp); o.Disposition != Succeeded || o.StopReason != StopReconciled {
		t.Fatalf("outcome %+v, want succeeded (reconciled)", o)
	}
	// The call started before RoundTrip returned: past this, its
	// deadline has passed.
	time.Sleep(time.Until(returned.Add(deadline + 200*time.Millisecond)))
	close(release)
	b, err := io.ReadAll(resp.Body)
	if want := `<ApplicationList><Application id="GRANT-42"/></ApplicationList>`; err != nil || string(b) != want {
		t.Errorf("read %q, %v; want %q whole", b, err, want)
	}
}

// R7: askBeforeGivingUp asks while the last attempt's response is held, so
// the call's deadline only goes pending and never ends the reconciler's
// context: a reconciler that waits on ctx (as it should) holds RoundTrip
// far past the call deadline (here: forever).
func TestQuestionBeforeGivingUpEndsAtTheDeadline(t *testing.T) {
	inner := rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 502, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	release := make(chan struct{})
	defer close(release)
	tr := New(inner, WithClock(newFakeClock()), WithBudget(0, 200*time.Millisecond),
		WithReconciler(func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
			select { // a well-behaved reconciler: bounded by ctx
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return nil, context.Canceled
			}
		}))
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		resp, err := tr.RoundTrip(postReq(t, "https://funder.test/x"))
		if err == nil {
			resp.Body.Close()
		}
		done <- time.Since(start)
	}()
	select {
	case d := <-done:
		t.Logf("RoundTrip returned after %v", d)
	case <-time.After(3 * time.Second):
		t.Fatal("RoundTrip still blocked 3s into a call with a 200ms deadline: the reconciler's ctx never ended")
	}
}
