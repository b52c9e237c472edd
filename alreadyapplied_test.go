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
				FirstAttempt: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}
			resp, o, err := h.submit(t, WithLetter(context.Background(), l))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
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
