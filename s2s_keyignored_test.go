package grantretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"

	"github.com/grantretry/grantretry/internal/fakes2s"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The exactly-once targets, against internal/fakes2s: a Grants.gov S2S
// funder that ignores Idempotency-Key and records DefaultDropRate (10%) of
// the submissions it accepts before hanging up, over real loopback
// keep-alive connections with mutual TLS, through one client. Each
// submission's id is its SubmissionTitle, the one tie the service keeps
// between an application and the pipeline's submission. The default size runs in CI;
// the figures in docs/exactly-once.md are reproduced by
//
//	GRANTRETRY_S2S_SUBMISSIONS=1000 go test -run KeyIgnoringFunder -v .

const (
	s2sSeed    = 12 // the funder's drops, and its failed queries
	s2sWorkers = 4  // submissions in flight at once
)

// s2sSize is the number of submissions: 200 for go test ./..., or
// GRANTRETRY_S2S_SUBMISSIONS.
func s2sSize(t *testing.T) int {
	if v := os.Getenv("GRANTRETRY_S2S_SUBMISSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("GRANTRETRY_S2S_SUBMISSIONS=%q: want a positive count", v)
		}
		return n
	}
	return 200
}

// lookupReconciler asks the funder, with a GetApplicationList filtered on
// the SubmissionTitle (the submission id) and sent to the URL the
// submission went to, whether it recorded the submission, as a pipeline
// would. It has it: the funder's own answer to a submission, with the
// first tracking number and its ReceivedDateTime; it has not: (nil, nil);
// the query failed: (nil, err).
//
// The query goes through client, a plain *http.Client, not a grantretry
// Transport: the Transport that asks already waits and asks again, within
// the call's budget and deadline, when the reconciler cannot tell, and a
// second policy inside it would multiply the waits. A grantretry Transport
// would also derive an Idempotency-Key for the query's POST, retry it on
// its own, and log its attempts as attempt lines of the submission's
// trail. Unkeyed, the POST is one that net/http resends only if it never
// wrote it: every query on the wire is one question, and one reconcile
// line.
func lookupReconciler(client *http.Client) ReconcileFunc {
	return func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
		if q.SubmissionID == "" {
			return nil, errors.New("no submission id to ask the funder about")
		}
		apps, err := fakes2s.Lookup(ctx, client, q.Request.URL.String(), q.SubmissionID)
		if err != nil || len(apps) == 0 {
			return nil, err
		}
		ct, body := fakes2s.SubmitResponse(apps[0].TrackingNumber, apps[0].ReceivedDateTime)
		return &http.Response{
			Status: "200 OK", StatusCode: http.StatusOK,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {ct}},
			Body:          io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)),
		}, nil
	}
}

// s2sRun is what one run of submissions produced.
type s2sRun struct {
	funder   *fakes2s.Funder
	ids      []string
	outcomes []Outcome
	tracking []string // the tracking number each caller was given, "" if none
	logs     *observer.ObservedLogs
}

// startS2S starts a funder with the given options, seeded, that the test
// closes when it ends.
func startS2S(t *testing.T, o fakes2s.Options) *fakes2s.Funder {
	t.Helper()
	o.Seed = s2sSeed
	f, err := fakes2s.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// keepAliveTransport is a net/http Transport with f's client certificate
// that keeps every worker's connection open between calls, closed when
// the test ends.
func keepAliveTransport(t *testing.T, f *fakes2s.Funder) *http.Transport {
	tr := f.NewTransport()
	tr.MaxIdleConnsPerHost = s2sWorkers
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// runS2S submits n applications to f, s2sWorkers at a time, through one client whose Transport has opts.
//
// The clock is frozen, so no backoff is slept and no budget deadline is
// reached: a call ends by the reconcile rule or its retries, never by how
// the workers' waits add up on one clock. The breaker and the retry
// throttle are off: at 10% drops the throttle would refuse some retries,
// and the breaker open on a run of drops, turning ambiguous attempts into
// dead letters by the order the workers happen to run in. The run is about
// what one call does after an ambiguous attempt.
func runS2S(t *testing.T, f *fakes2s.Funder, n int, opts ...Option) s2sRun {
	t.Helper()
	clock := newFakeClock()
	clock.freeze()
	core, logs := observer.New(zapcore.InfoLevel)
	base := []Option{WithClock(clock), WithLogger(zap.New(core)), WithoutBreaker(), WithoutRetryThrottle()}
	client := &http.Client{Transport: New(keepAliveTransport(t, f), append(base, opts...)...)}

	r := s2sRun{funder: f, ids: make([]string, n), outcomes: make([]Outcome, n), tracking: make([]string, n), logs: logs}
	eachSubmission(n, func(i int) {
		r.ids[i] = fmt.Sprintf("GRANT-2026-%05d", i)
		r.outcomes[i], r.tracking[i] = submitS2S(t, client, f.URL(), r.ids[i])
	})
	return r
}

// eachSubmission calls fn for 0..n-1, s2sWorkers at a time.
func eachSubmission(n int, fn func(i int)) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range s2sWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				fn(i)
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

// submitS2S sends one SubmitApplication titled id, with its SOAPAction,
// through client and returns its outcome and the tracking number it was
// answered with.
func submitS2S(t *testing.T, client *http.Client, url, id string) (Outcome, string) {
	ctx := WithSubmissionID(context.Background(), id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(fakes2s.SubmitEnvelope(id, "<SF424/>")))
	if err != nil {
		t.Error(err)
		return Outcome{}, ""
	}
	req.Header.Set("Content-Type", fakes2s.ContentType)
	req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpSubmitApplication))
	resp, err := client.Do(req)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: %v is no *Error", id, err)
			return Outcome{}, ""
		}
		return e.Outcome, ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	o, _ := OutcomeOf(resp)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("%s: status %d, body read: %v", id, resp.StatusCode, err)
		return o, ""
	}
	r, err := fakes2s.ParseSubmitResponse(resp.Header.Get("Content-Type"), body)
	if err != nil {
		t.Errorf("%s: %v", id, err)
	}
	return o, r.TrackingNumber
}

// s2sCounts are the figures of one run, as the targets state them.
type s2sCounts struct {
	submissions, received, attempts, attemptLines int
	duplicates, lost                              int
	reconciles, reconcileLines, queries           int
	reconciled, unanswered, notSent               int // calls ended StopReconciled, StopUnreconciled, or not Succeeded with nothing recorded
	multiAttempt                                  int // calls that sent the submission more than once
}

// count reads the figures of r off the outcomes, the audit lines and the
// funder. A lost submission is one whose caller was told it succeeded
// with a tracking number the funder does not hold for it, or no number.
func (r s2sRun) count() s2sCounts {
	c := s2sCounts{
		submissions:    len(r.ids),
		received:       r.funder.Received(),
		attemptLines:   r.logs.FilterMessage(MsgAttempt).Len(),
		reconcileLines: r.logs.FilterMessage(MsgReconcile).Len(),
		queries:        r.funder.Queries(),
		duplicates:     r.funder.Duplicates(),
	}
	for i, o := range r.outcomes {
		c.attempts += o.Attempts
		c.reconciles += o.Reconciles
		recorded := r.funder.TrackingNumbers(r.ids[i])
		switch {
		case o.Disposition == Succeeded && !slices.Contains(recorded, r.tracking[i]):
			c.lost++
		case o.StopReason == StopReconciled:
			c.reconciled++
		case o.StopReason == StopUnreconciled:
			c.unanswered++
		case o.Disposition != Succeeded && len(recorded) == 0:
			c.notSent++
		}
		if o.Attempts > 1 {
			c.multiAttempt++
		}
	}
	return c
}

// log writes the figures as a small table.
func (c s2sCounts) log(t *testing.T, name string) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "submissions\treceived\tattempts\tattempt lines\tduplicates\tlost\treconciles\tqueries\treconciled\tunanswered\t")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", c.submissions, c.received, c.attempts, c.attemptLines,
		c.duplicates, c.lost, c.reconciles, c.queries, c.reconciled, c.unanswered)
	tw.Flush()
	t.Logf("%s:\n%s", name, b.String())
}

// checkEveryAttemptCounted asserts the first target: every
// submission request the funder received is an attempt in an Outcome and
// an attempt line, and every query one the reconciler was asked and a
// reconcile line.
func (c s2sCounts) checkEveryAttemptCounted(t *testing.T) {
	t.Helper()
	if c.received != c.attempts || c.attempts != c.attemptLines {
		t.Errorf("the funder received %d submission requests; the outcomes count %d attempts and the trail %d attempt lines: want all equal",
			c.received, c.attempts, c.attemptLines)
	}
	if c.queries != c.reconciles || c.reconciles != c.reconcileLines {
		t.Errorf("the funder received %d queries; the outcomes count %d reconciles and the trail %d reconcile lines: want all equal",
			c.queries, c.reconciles, c.reconcileLines)
	}
}

// Without a reconciler, each ambiguous drop is retried, and at a funder
// that ignores the key each retry is a new application: the duplicates are
// there, and every one is an attempt the caller's Outcome and the trail
// show. None is hidden.
func TestKeyIgnoringFunderCountsEveryAttempt(t *testing.T) {
	r := runS2S(t, startS2S(t, fakes2s.Options{}), s2sSize(t))
	c := r.count()
	c.log(t, "grantretry, no reconciler")
	c.checkEveryAttemptCounted(t)

	implied := 0
	for i, o := range r.outcomes {
		// Every attempt reached the funder and was recorded; all but the
		// last were dropped after it recorded them.
		if got := r.funder.Applications(r.ids[i]); got != o.Attempts {
			t.Errorf("%s: %d attempts, %d applications at the funder; want them equal", r.ids[i], o.Attempts, got)
		}
		if o.Disposition != Succeeded || o.StopReason != StopSuccess || o.Reconciles != 0 {
			t.Errorf("%s: %s (%s) after %d reconciles, want succeeded (%s) after none", r.ids[i], o.Disposition, o.StopReason, o.Reconciles, StopSuccess)
		}
		implied += o.Attempts - 1
	}
	if c.duplicates != implied || c.lost != 0 {
		t.Errorf("%d duplicates and %d lost at the funder; the outcomes imply %d duplicates and none lost", c.duplicates, c.lost, implied)
	}
	if c.duplicates == 0 {
		t.Errorf("no duplicates: the funder dropped %d submissions, which without a reconciler are sent again", r.funder.Dropped())
	}
	t.Logf("%d of %d submissions were sent again after an ambiguous drop: %d duplicate applications, each an attempt in its Outcome and its audit line",
		c.multiAttempt, c.submissions, c.duplicates)
}

// With a reconciler, an ambiguous drop is followed by a question, never by
// a resend the funder was not asked about: no duplicate, and every
// submission either recorded once and Succeeded with the funder's tracking
// number, or, when the funder could not be asked within the budget,
// recorded once and reported dead_letter (reconcile_unanswered), owed a
// question and not a send. Nothing is lost. A third of the queries failing
// exercises the "cannot tell" path: the Transport waits and asks again.
func TestKeyIgnoringFunderWithReconcilerHasNoDuplicateAndNoLoss(t *testing.T) {
	for _, tc := range []struct {
		name          string
		queryFailRate float64
		opts          []Option
	}{
		{"queries answered", 0, nil},
		{"a third of queries fail", 0.3, nil},
		// The throttle, on a clock that never refills it, ends more and
		// more calls before their resend: each still asks once first.
		{"default breaker and throttle", 0, []Option{
			WithBreaker(DefaultBreakerThreshold, DefaultBreakerCooldown),
			WithRetryThrottle(DefaultThrottleMaxTokens, DefaultThrottleTokenRatio)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startS2S(t, fakes2s.Options{QueryFailRate: tc.queryFailRate})
			lookup := &http.Client{Transport: keepAliveTransport(t, f)}
			r := runS2S(t, f, s2sSize(t), append(tc.opts, WithReconciler(lookupReconciler(lookup)))...)
			c := r.count()
			c.log(t, "grantretry, reconciler, "+tc.name)
			c.checkEveryAttemptCounted(t)
			if c.duplicates != 0 || c.lost != 0 {
				t.Errorf("%d duplicates and %d lost, want none", c.duplicates, c.lost)
			}
			for i, o := range r.outcomes {
				checkReconciledSubmission(t, r.ids[i], o, r.funder.TrackingNumbers(r.ids[i]), r.tracking[i])
			}
			if c.reconciled+c.unanswered != r.funder.Dropped() {
				t.Errorf("%d calls reconciled and %d unanswered; the funder dropped %d, each of which must be asked about",
					c.reconciled, c.unanswered, r.funder.Dropped())
			}
			unknown := 0
			for _, l := range r.logs.FilterMessage(MsgReconcile).AllUntimed() {
				if l.ContextMap()[FieldVerdict] == ReconcileUnknown {
					unknown++
				}
			}
			if (tc.queryFailRate > 0) != (unknown > 0) {
				t.Errorf("%d questions the reconciler could not answer, at a query failure rate of %v", unknown, tc.queryFailRate)
			}
		})
	}
}

// checkReconciledSubmission asserts that a submission made through a
// reconciling Transport was recorded once, and that the caller was told
// so with the funder's tracking number, or told that it may have been
// applied and the funder could not be asked.
func checkReconciledSubmission(t *testing.T, id string, o Outcome, recorded []string, tracking string) {
	t.Helper()
	// Every submission reaches the funder: this one records whatever it
	// receives, so none can be "not sent".
	if len(recorded) != 1 {
		t.Errorf("%s: the funder recorded %v, want one application", id, recorded)
		return
	}
	switch {
	case o.Disposition == Succeeded && (o.StopReason == StopSuccess || o.StopReason == StopReconciled):
		if tracking != recorded[0] {
			t.Errorf("%s: %s, answered %q; the funder recorded %q", id, o.StopReason, tracking, recorded[0])
		}
	case o.Disposition == DeadLetter && o.StopReason == StopUnreconciled && o.Ambiguous:
	default:
		t.Errorf("%s: %s (%s), ambiguous %v, with %v recorded: neither a success nor an unanswered question",
			id, o.Disposition, o.StopReason, o.Ambiguous, recorded)
	}
	if o.Attempts != 1 {
		t.Errorf("%s: %d attempts, want 1: every drop was recorded, so no question may answer \"not applied\"", id, o.Attempts)
	}
}

// The control, without grantretry: a pipeline that sets its own
// Idempotency-Key and sends through net/http alone. net/http resends a
// dropped request on a reused connection by itself; the funder ignores the
// key, so each resend is a duplicate the caller never sees, and only a drop
// it did not resend reaches the caller, as an error that cannot say
// whether the funder recorded the application.
func TestKeyIgnoringFunderPlainNetHTTPDuplicatesUnseen(t *testing.T) {
	n := s2sSize(t)
	f := startS2S(t, fakes2s.Options{})
	client := &http.Client{Transport: keepAliveTransport(t, f)}
	var mu sync.Mutex
	sent, failed := 0, 0 // requests on the wire, by the client's trace; calls that failed
	eachSubmission(n, func(i int) {
		id := fmt.Sprintf("GRANT-2026-%05d", i)
		conns, err := submitPlain(client, f.URL(), id)
		mu.Lock()
		defer mu.Unlock()
		sent += conns
		if err != nil {
			failed++
		}
	})
	resent := sent - n
	t.Logf("plain net/http, Idempotency-Key set:\n  submissions %d, received %d, resent by net/http %d, duplicates %d, ambiguous errors %d",
		n, f.Received(), resent, f.Duplicates(), failed)
	if f.Received() != sent || f.Duplicates() != resent || f.Dropped() != resent+failed {
		t.Errorf("received %d, sent %d, duplicates %d, resent %d, dropped %d, failed %d: want received = sent, duplicates = resent, dropped = resent + failed",
			f.Received(), sent, f.Duplicates(), resent, f.Dropped(), failed)
	}
	if resent == 0 {
		t.Error("net/http resent nothing: the control no longer shows what grantretry stops")
	}
}

// submitPlain posts a keyed SubmitApplication through client and returns
// how many connections net/http sent it on: more than one means it resent
// the request by itself.
func submitPlain(client *http.Client, url, id string) (conns int, err error) {
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { conns++ }}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	payload := fakes2s.SubmitEnvelope(id, "<SF424/>")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", fakes2s.ContentType)
	req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpSubmitApplication))
	req.Header.Set(HeaderIdempotencyKey, IdempotencyKey(id, payload))
	resp, err := client.Do(req)
	if err != nil {
		return conns, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return conns, err
}
