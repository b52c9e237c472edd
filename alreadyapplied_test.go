package grantretry

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/goleak"
)

// notInProgress is the body of Simpler Grants.gov's answer to the submit
// of an application already submitted (see its .source file).
func notInProgress(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("simplergrants", "testdata", "submit-not-in-progress.body"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// appliedRule is a pipeline's rule for that answer, as docs/teaching.md
// writes it.
var appliedRule = Rule{Status: http.StatusForbidden, Contains: `"not_in_progress"`,
	Verdict: Classification{Applied: true, Reason: "applied:not_in_progress"}}

// appliedHarness is a harness whose classifier knows appliedRule.
func appliedHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	return newHarness(t, append([]Option{WithClassifier(ClassifyRules(appliedRule))}, opts...)...)
}

// thenNotInProgress answers the first attempt with first (a status, or an
// error when err is set), and every later one with the funder's 403
// not_in_progress, whose bodies it keeps.
type thenNotInProgress struct {
	first  int
	err    error
	body   string
	n      atomic.Int64
	bodies []*respBody
}

func (f *thenNotInProgress) responder() httpmock.Responder {
	return func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
		}
		if f.n.Add(1) == 1 && f.first != http.StatusForbidden {
			if f.err != nil {
				return nil, f.err
			}
			return httpmock.NewStringResponse(f.first, "first"), nil
		}
		b := &respBody{r: strings.NewReader(f.body)}
		f.bodies = append(f.bodies, b)
		return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}, nil
	}
}

// submit POSTs one keyed submission through h under ctx, and returns what
// the caller got.
func (h *harness) submit(t *testing.T, ctx context.Context) (*http.Response, Outcome, error) {
	t.Helper()
	req, _ := newPost(t, WithSubmissionID(ctx, "GRANT-42"), `{"amount":1}`, true)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		return nil, mustError(t, err).Outcome, err
	}
	return resp, mustOutcome(t, resp), nil
}

func TestAppliedAnswerAfterAnAmbiguousAttemptIsASuccess(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		err    error
	}{
		{"after a 502", http.StatusBadGateway, nil},
		{"after a reset once the request was written", 0, syscall.ECONNRESET},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := appliedHarness(t)
			f := &thenNotInProgress{first: c.status, err: c.err, body: notInProgress(t)}
			h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
			resp, o, err := h.submit(t, context.Background())
			if err != nil {
				t.Fatalf("error %v, want the funder's answer with a nil error", err)
			}
			defer resp.Body.Close()
			if o.Disposition != Succeeded || o.StopReason != StopAlreadyApplied || o.Attempts != 2 {
				t.Errorf("outcome %+v, want succeeded (already_applied) after 2 attempts", o)
			}
			if resp.StatusCode != http.StatusForbidden || o.Status != http.StatusForbidden {
				t.Errorf("status %d (outcome %d), want the funder's 403", resp.StatusCode, o.Status)
			}
			if got := readAll(t, resp); got != f.body {
				t.Errorf("body %q, want the funder's answer", got)
			}
			if o.Ambiguous {
				t.Error("Ambiguous is set: the funder said the earlier attempt was applied")
			}
			if o.Reason != "terminal:403;applied:not_in_progress" {
				t.Errorf("Reason = %q, want terminal:403;applied:not_in_progress", o.Reason)
			}
		})
	}
}

func TestAppliedAnswerWithoutAnEarlierAmbiguousAttemptIsARefusal(t *testing.T) {
	for _, c := range []struct {
		name  string
		first int
	}{
		{"on the first attempt", http.StatusForbidden},
		{"after a 503, which says nothing was done", http.StatusServiceUnavailable},
		{"after a 429", http.StatusTooManyRequests},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := appliedHarness(t)
			f := &thenNotInProgress{first: c.first, body: notInProgress(t)}
			h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
			resp, o, err := h.submit(t, context.Background())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if o.Disposition != FailedTerminal || o.StopReason != StopTerminal {
				t.Errorf("outcome %+v, want failed_terminal (terminal)", o)
			}
			if o.Reason != "terminal:403;applied:not_in_progress" {
				t.Errorf("Reason = %q", o.Reason)
			}
		})
	}
}

func TestAppliedAnswerAsksTheReconcilerForTheFundersRecord(t *testing.T) {
	rec := &scriptedReconciler{answers: []reconcileAnswer{{}, {has: true}}}
	h := appliedHarness(t, WithReconciler(rec.fn))
	f := &thenNotInProgress{first: http.StatusBadGateway, body: notInProgress(t)}
	h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
	resp, o, err := h.submit(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := readAll(t, resp); got != "receipt GRANT0001" {
		t.Errorf("the caller got %q, want the reconciler's record", got)
	}
	if o.Disposition != Succeeded || o.StopReason != StopAlreadyApplied || o.Status != http.StatusOK {
		t.Errorf("outcome %+v, want succeeded (already_applied) with the record's status", o)
	}
	// Asked before the resend (the 502 was ambiguous), then once about the
	// answer that said the submission was applied.
	asked := rec.asked()
	if len(asked) != 2 || o.Reconciles != 2 {
		t.Fatalf("asked %d times (Reconciles %d), want 2", len(asked), o.Reconciles)
	}
	if q := asked[1]; q.Attempt != 2 || q.Status != http.StatusForbidden {
		t.Errorf("the second question is about attempt %d, status %d; want the 403 of attempt 2", q.Attempt, q.Status)
	}
	if len(f.bodies) != 1 || !f.bodies[0].closed.Load() {
		t.Error("the 403's body was not closed in place of the record")
	}
	lines := h.logs.FilterMessage(MsgReconcile).AllUntimed()
	if len(lines) != 2 || lines[1].ContextMap()[FieldVerdict] != ReconcileApplied {
		t.Errorf("reconcile lines %v, want 2, the last applied", lines)
	}
}

func TestAppliedAnswerStandsWhenTheReconcilerHasNoRecord(t *testing.T) {
	for _, c := range []struct {
		name    string
		second  reconcileAnswer
		verdict string
	}{
		{"not applied", reconcileAnswer{}, ReconcileNotApplied},
		{"cannot tell", reconcileAnswer{err: context.DeadlineExceeded}, ReconcileUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &scriptedReconciler{answers: []reconcileAnswer{{}, c.second}}
			h := appliedHarness(t, WithReconciler(rec.fn))
			f := &thenNotInProgress{first: http.StatusBadGateway, body: notInProgress(t)}
			h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
			resp, o, err := h.submit(t, context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || readAll(t, resp) != f.body {
				t.Errorf("the caller got %d, want the funder's 403 itself", resp.StatusCode)
			}
			if o.Disposition != Succeeded || o.StopReason != StopAlreadyApplied || o.Ambiguous {
				t.Errorf("outcome %+v, want succeeded (already_applied), not ambiguous", o)
			}
			lines := h.logs.FilterMessage(MsgReconcile).AllUntimed()
			if len(lines) != 2 || lines[1].ContextMap()[FieldVerdict] != c.verdict {
				t.Errorf("reconcile lines %v, want 2, the last %s", lines, c.verdict)
			}
		})
	}
}

func TestAppliedAnswerIsNotAFailureOfTheBreaker(t *testing.T) {
	// Two failed calls in a row open a breaker of threshold 2: a call
	// whose first attempt failed and whose second was answered applied
	// must leave it closed, as any answer does.
	h := appliedHarness(t, WithBreaker(2, time.Minute))
	f := &thenNotInProgress{first: http.StatusBadGateway, body: notInProgress(t)}
	h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
	resp, o, err := h.submit(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o.StopReason != StopAlreadyApplied {
		t.Fatalf("outcome %+v, want already_applied", o)
	}
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(502, 201))
	if _, o, err := h.submit(t, context.Background()); err != nil || o.Disposition != Succeeded || o.Attempts != 2 {
		t.Errorf("the next call: outcome %+v, error %v; want succeeded after a retry, the breaker closed", o, err)
	}
}

func TestAppliedAnswerDispositionLine(t *testing.T) {
	h := appliedHarness(t)
	f := &thenNotInProgress{first: http.StatusBadGateway, body: notInProgress(t)}
	h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
	resp, _, err := h.submit(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	lines := h.dispositionLines()
	if len(lines) != 1 {
		t.Fatalf("%d disposition lines, want 1", len(lines))
	}
	m := lines[0].ContextMap()
	if m[FieldDisposition] != string(Succeeded) || m[FieldStopReason] != StopAlreadyApplied ||
		m[FieldAmbiguous] != false || m[FieldStatus] != int64(http.StatusForbidden) {
		t.Errorf("disposition line %v, want succeeded, already_applied, not ambiguous, status 403", m)
	}
	if lines[0].Level.String() != "info" {
		t.Errorf("disposition line at %s, want info, as any success", lines[0].Level)
	}
}

func TestAppliedAnswerToTheRedeliveryOfAnAmbiguousLetter(t *testing.T) {
	for _, c := range []struct {
		name      string
		ambiguous bool
		want      Disposition
		stop      string
	}{
		{"ambiguous letter", true, Succeeded, StopAlreadyApplied},
		{"letter that is not ambiguous", false, FailedTerminal, StopTerminal},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := appliedHarness(t)
			f := &thenNotInProgress{first: http.StatusForbidden, body: notInProgress(t)}
			h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
			l := &Letter{ID: "20261204T000000.000000000Z-0123456789abcdef", Ambiguous: c.ambiguous,
				IdempotencyKey: "letter-key-1", FirstAttempt: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}
			resp, err := h.tr.RoundTrip(keyedPost(t, WithLetter(context.Background(), l), l.IdempotencyKey))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			o := mustOutcome(t, resp)
			if o.Disposition != c.want || o.StopReason != c.stop || o.Attempts != 1 {
				t.Errorf("outcome %+v, want %s (%s) after 1 attempt", o, c.want, c.stop)
			}
			m := h.dispositionLines()[0].ContextMap()
			if m[FieldRedelivers] != l.ID {
				t.Errorf("the disposition line names letter %v, want %s", m[FieldRedelivers], l.ID)
			}
		})
	}
}

func TestWithLetterMarksTheRedelivery(t *testing.T) {
	first := time.Date(2026, 12, 4, 1, 2, 3, 0, time.UTC)
	l := &Letter{ID: "20261204T010203.000000000Z-0123456789abcdef", Ambiguous: true, FirstAttempt: first}
	m := redeliveryOf(WithLetter(context.Background(), l))
	if m == nil || m.letterID != l.ID || !m.firstAttempt.Equal(first) || !m.ambiguous {
		t.Errorf("mark %+v, want the letter's ID, first attempt and ambiguity", m)
	}
	ctx := context.Background()
	if WithLetter(ctx, nil) != ctx {
		t.Error("WithLetter(ctx, nil) changed ctx")
	}
	rf := redeliveryOf(WithReconcileFirst(ctx, l, func(context.Context, ReconcileQuery) (*http.Response, error) { return nil, nil }))
	if rf == nil || !rf.ambiguous {
		t.Error("WithReconcileFirst does not record that the letter is ambiguous")
	}
}

func TestAppliedVerdictIsNeverRetried(t *testing.T) {
	for _, v := range []Classification{
		{Applied: true, Reason: "test:duplicate"},
		{Applied: true, Retryable: true, Reason: "test:duplicate"},
		{Applied: true, Owed: true, Reason: "test:duplicate"},
	} {
		h := newHarness(t, WithClassifier(func(*http.Response, []byte) (Classification, bool) { return v, true }))
		h.mock.RegisterResponder(http.MethodPost, funderURL, seq(409, 201))
		o := callOnce(t, h)
		if o.Disposition != FailedTerminal || o.StopReason != StopTerminal || o.Attempts != 1 || o.Reason != "terminal:409;test:duplicate" {
			t.Errorf("verdict %+v on a first attempt: outcome %+v, want failed_terminal (terminal:409;test:duplicate) after 1 attempt", v, o)
		}
	}
}

// keyedPost is a POST that carries its own Idempotency-Key, as the request
// of deadletter.NewRedeliveryRequest for a keyed letter does.
func keyedPost(t *testing.T, ctx context.Context, key string) *http.Request {
	t.Helper()
	req, _ := newPost(t, ctx, `{"amount":1}`, true)
	req.Header.Set(HeaderIdempotencyKey, key)
	return req
}

func TestAppliedAnswerUnderReconcileFirst(t *testing.T) {
	for _, c := range []struct {
		name      string
		ambiguous bool
		want      Disposition
		stop      string
		asked     int
	}{
		// Asked before the first attempt, then once about the answer.
		{"ambiguous letter", true, Succeeded, StopAlreadyApplied, 2},
		// The reconciler, asked before the first attempt, said the
		// funder does not have it: that question is no ambiguous
		// attempt of the call, and the letter's last attempt was none.
		{"letter that is not ambiguous", false, FailedTerminal, StopTerminal, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &scriptedReconciler{answers: []reconcileAnswer{{}}}
			h := appliedHarness(t)
			f := &thenNotInProgress{first: http.StatusForbidden, body: notInProgress(t)}
			h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
			l := &Letter{ID: "20261204T000000.000000000Z-0123456789abcdef", Ambiguous: c.ambiguous,
				IdempotencyKey: "letter-key-1", Attempts: 1, LastStatus: http.StatusServiceUnavailable}
			if c.ambiguous {
				l.LastStatus = http.StatusGatewayTimeout
			}
			resp, err := h.tr.RoundTrip(keyedPost(t, WithReconcileFirst(context.Background(), l, rec.fn), l.IdempotencyKey))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			o := mustOutcome(t, resp)
			if o.Disposition != c.want || o.StopReason != c.stop || o.Attempts != 1 {
				t.Errorf("outcome %+v, want %s (%s) after 1 attempt", o, c.want, c.stop)
			}
			if n := len(rec.asked()); n != c.asked {
				t.Errorf("the reconciler was asked %d times, want %d", n, c.asked)
			}
		})
	}
}

func TestAppliedAnswerToARequestWhoseKeyIsNotTheLetters(t *testing.T) {
	// The context names an ambiguous letter, but the request is not its
	// redelivery: its key is another. The answer tells nothing of the
	// letter's last attempt, and is a refusal, as on any first attempt.
	l := &Letter{ID: "20261204T000000.000000000Z-0123456789abcdef", Ambiguous: true,
		IdempotencyKey: "letter-key-1", Attempts: 1, LastStatus: http.StatusGatewayTimeout}
	for _, c := range []struct {
		name string
		req  func(t *testing.T) *http.Request
	}{
		{"WithLetter, the key derived", func(t *testing.T) *http.Request {
			req, _ := newPost(t, WithSubmissionID(WithLetter(context.Background(), l), "GRANT-42"), `{"amount":1}`, true)
			return req
		}},
		{"WithLetter, a key of its own", func(t *testing.T) *http.Request {
			return keyedPost(t, WithLetter(context.Background(), l), "another-key")
		}},
		{"WithReconcileFirst", func(t *testing.T) *http.Request {
			rec := &scriptedReconciler{answers: []reconcileAnswer{{}}}
			return keyedPost(t, WithReconcileFirst(context.Background(), l, rec.fn), "another-key")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := appliedHarness(t)
			f := &thenNotInProgress{first: http.StatusForbidden, body: notInProgress(t)}
			h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
			resp, err := h.tr.RoundTrip(c.req(t))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			o := mustOutcome(t, resp)
			if o.Disposition != FailedTerminal || o.StopReason != StopTerminal || o.Attempts != 1 {
				t.Errorf("a request keyed %q under the letter keyed %q: outcome %+v, want failed_terminal (terminal) after 1 attempt",
					o.IdempotencyKey, l.IdempotencyKey, o)
			}
		})
	}
}

func TestAppliedVerdictThatIsAlsoOwedOrRetryableAfterAnAmbiguousAttempt(t *testing.T) {
	for _, v := range []Classification{
		{Applied: true, Owed: true, NotBefore: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), Reason: "test:duplicate"},
		{Applied: true, Retryable: true, Reason: "test:duplicate"},
	} {
		h := newHarness(t, WithClassifier(func(r *http.Response, _ []byte) (Classification, bool) {
			if r.StatusCode == http.StatusConflict {
				return v, true
			}
			return Classification{}, false
		}))
		h.mock.RegisterResponder(http.MethodPost, funderURL, seq(502, 409))
		resp, o, err := h.submit(t, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if o.Disposition != Succeeded || o.StopReason != StopAlreadyApplied || o.Attempts != 2 || !o.NotBefore.IsZero() {
			t.Errorf("verdict %+v after a 502: outcome %+v, want succeeded (already_applied) after 2 attempts, no NotBefore", v, o)
		}
		// Nothing holds the host: the next call is sent at once.
		h.mock.RegisterResponder(http.MethodPost, funderURL, seq(201))
		resp, o, err = h.submit(t, context.Background())
		if err != nil || o.Disposition != Succeeded || o.Attempts != 1 {
			t.Errorf("verdict %+v: the next call: outcome %+v, error %v; want succeeded after 1 attempt", v, o, err)
		} else {
			resp.Body.Close()
		}
	}
}

func TestAppliedAnswerIsClosedWhenTheReconcilerPanics(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var n atomic.Int64
	rec := func(context.Context, ReconcileQuery) (*http.Response, error) {
		if n.Add(1) == 2 { // the question about the answer that says applied
			panic("reconciler failed")
		}
		return nil, nil
	}
	h := appliedHarness(t, WithReconciler(rec))
	f := &thenNotInProgress{first: http.StatusBadGateway, body: notInProgress(t)}
	h.mock.RegisterResponder(http.MethodPost, funderURL, f.responder())
	mustPanic(t, func() { h.submit(t, context.Background()) })
	if len(f.bodies) != 1 || !f.bodies[0].closed.Load() {
		t.Errorf("the 403's body was not closed after the reconciler panicked (%d answers)", len(f.bodies))
	}
}

func TestAnswerIsClosedWhenTheReconcilerAskedBeforeGivingUpPanics(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rec := func(context.Context, ReconcileQuery) (*http.Response, error) { panic("reconciler failed") }
	h := newHarness(t, WithReconciler(rec), WithBudget(0, time.Minute))
	b := &respBody{r: strings.NewReader("bad gateway")}
	h.mock.RegisterResponder(http.MethodPost, funderURL, func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		return &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{}, Body: b}, nil
	})
	mustPanic(t, func() { h.submit(t, context.Background()) })
	if !b.closed.Load() {
		t.Error("the 502's body was not closed after the reconciler asked before giving up panicked")
	}
}

// mustPanic runs f, and fails t unless f panics.
func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Error("no panic: the reconciler's should go on up to the caller")
		}
	}()
	f()
}

func TestAppliedAnswerPastTheDeadlineIsNotAskedAbout(t *testing.T) {
	// The call's deadline passes, by the Clock, while the resend is
	// answered: there is no time left to ask, and the answer is the
	// caller's as it is.
	rec := &scriptedReconciler{answers: []reconcileAnswer{{}, {has: true}}}
	h := appliedHarness(t, WithReconciler(rec.fn), WithBudget(4, time.Minute))
	f := &thenNotInProgress{first: http.StatusBadGateway, body: notInProgress(t)}
	inner := f.responder()
	var n atomic.Int64
	h.mock.RegisterResponder(http.MethodPost, funderURL, func(r *http.Request) (*http.Response, error) {
		if n.Add(1) == 2 {
			h.clock.advance(2 * time.Minute)
		}
		return inner(r)
	})
	resp, o, err := h.submit(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if o.Disposition != Succeeded || o.StopReason != StopAlreadyApplied || resp.StatusCode != http.StatusForbidden {
		t.Errorf("outcome %+v, status %d; want succeeded (already_applied) with the funder's 403", o, resp.StatusCode)
	}
	if got := readAll(t, resp); got != f.body {
		t.Errorf("body %q, want the funder's answer", got)
	}
	if len(rec.asked()) != 1 {
		t.Errorf("the reconciler was asked %d times, want once, before the resend", len(rec.asked()))
	}
}
