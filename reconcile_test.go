package grantretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// scriptedReconciler answers with its answers in turn, repeating the last,
// and keeps every query it was asked.
type scriptedReconciler struct {
	mu      sync.Mutex
	answers []reconcileAnswer
	queries []ReconcileQuery
}

type reconcileAnswer struct {
	has bool // answer with a 200 receipt
	err error
}

func (s *scriptedReconciler) fn(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = append(s.queries, q)
	a := s.answers[min(len(s.queries), len(s.answers))-1]
	if a.err != nil {
		return nil, a.err
	}
	if a.has {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("receipt GRANT0001"))}, nil
	}
	return nil, nil
}

func (s *scriptedReconciler) asked() []ReconcileQuery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ReconcileQuery(nil), s.queries...)
}

// eofThen answers the first attempt with an EOF after the request was
// written (an ambiguous failure), and later ones with status.
func eofThen(status int) httpmock.Responder {
	var n atomic.Int64
	return func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
		}
		if n.Add(1) == 1 {
			return nil, io.ErrUnexpectedEOF
		}
		return httpmock.NewStringResponse(status, "receipt"), nil
	}
}

// submitOnce POSTs one keyed submission through h and returns the outcome
// and the body the caller got, if any.
func (h *harness) submitOnce(t *testing.T, ctx context.Context) (Outcome, string) {
	t.Helper()
	req, _ := newPost(t, WithSubmissionID(ctx, "GRANT-42"), `{"amount":1}`, true)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		return mustError(t, err).Outcome, ""
	}
	defer resp.Body.Close()
	return mustOutcome(t, resp), readAll(t, resp)
}

// Every verdict of a reconciler, after an ambiguous first attempt.
func TestReconcileVerdicts(t *testing.T) {
	unknown := errors.New("GetApplicationList timed out")
	for _, tc := range []struct {
		name           string
		answers        []reconcileAnswer
		wantDisp       Disposition
		wantStop       string
		wantAttempts   int
		wantReconciles int
		wantBody       string
	}{
		{"the funder has it", []reconcileAnswer{{has: true}}, Succeeded, StopReconciled, 1, 1, "receipt GRANT0001"},
		{"the funder has it not", []reconcileAnswer{{}}, Succeeded, StopSuccess, 2, 1, "receipt"},
		{"cannot tell, then has it", []reconcileAnswer{{err: unknown}, {err: unknown}, {has: true}}, Succeeded, StopReconciled, 1, 3, "receipt GRANT0001"},
		{"cannot tell, then has it not", []reconcileAnswer{{err: unknown}, {}}, Succeeded, StopSuccess, 2, 2, "receipt"},
		// Four retries: the first spent on the wait before the first
		// question, one more before each question after it.
		{"never tells", []reconcileAnswer{{err: unknown}}, DeadLetter, StopUnreconciled, 1, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &scriptedReconciler{answers: tc.answers}
			letters := &memLetters{}
			h := newHarness(t, WithReconciler(rec.fn), WithDeadLetter(letters))
			h.mock.RegisterResponder(http.MethodPost, funderURL, eofThen(200))
			o, body := h.submitOnce(t, context.Background())
			if o.Disposition != tc.wantDisp || o.StopReason != tc.wantStop || o.Attempts != tc.wantAttempts || o.Reconciles != tc.wantReconciles {
				t.Errorf("%s (%s) after %d attempts and %d questions; want %s (%s) after %d and %d",
					o.Disposition, o.StopReason, o.Attempts, o.Reconciles, tc.wantDisp, tc.wantStop, tc.wantAttempts, tc.wantReconciles)
			}
			if body != tc.wantBody {
				t.Errorf("body %q, want %q", body, tc.wantBody)
			}
			if got := h.mock.GetTotalCallCount(); got != tc.wantAttempts {
				t.Errorf("the funder got %d requests, want %d: nothing is resent before the reconciler answers", got, tc.wantAttempts)
			}
			qs := rec.asked()
			if len(qs) == 0 {
				t.Fatal("the reconciler was never asked")
			}
			q := qs[0]
			if q.SubmissionID != "GRANT-42" || q.IdempotencyKey != o.IdempotencyKey || q.CorrelationID != o.CorrelationID || q.Attempt != 1 || !errors.Is(q.Err, io.ErrUnexpectedEOF) {
				t.Errorf("query %+v does not describe the ambiguous attempt", q)
			}
			if b, _ := io.ReadAll(q.Request.Body); string(b) != `{"amount":1}` || q.Request.Header.Get(HeaderIdempotencyKey) != o.IdempotencyKey {
				t.Errorf("query's request: body %q, key %q", b, q.Request.Header.Get(HeaderIdempotencyKey))
			}
			lines := h.logs.FilterMessage(MsgReconcile).AllUntimed()
			if len(lines) != tc.wantReconciles {
				t.Errorf("%d reconcile lines, want %d", len(lines), tc.wantReconciles)
			}
			disp := h.dispositionLines()
			if got := disp[len(disp)-1].ContextMap()[FieldReconciles]; got != int64(tc.wantReconciles) {
				t.Errorf("disposition line says %v questions", got)
			}
			if tc.wantDisp == DeadLetter {
				if l := letters.only(t); !l.Ambiguous || l.StopReason != StopUnreconciled {
					t.Errorf("letter %+v: want it to say the question was never answered", l)
				}
			}
		})
	}
}

// Only an ambiguous attempt of a keyed request is reconciled: a 503, a 429
// or a refused connection says the request was not carried out, and an
// unkeyed idempotent request is safe to send again.
func TestReconcileOnlyAfterAnAmbiguousAttemptOfAKeyedRequest(t *testing.T) {
	refused := &httpmockErr{err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name      string
		method    string
		first     httpmock.Responder
		reconcile bool
	}{
		{"500", http.MethodPost, seq(500, 200), true},
		{"502", http.MethodPost, seq(502, 200), true},
		{"504", http.MethodPost, seq(504, 200), true},
		{"EOF", http.MethodPost, eofThen(200), true},
		{"503", http.MethodPost, seq(503, 200), false},
		{"429", http.MethodPost, seq(429, 200), false},
		{"refused", http.MethodPost, refused.then(200), false},
		{"GET with EOF", http.MethodGet, eofThen(200), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &scriptedReconciler{answers: []reconcileAnswer{{}}}
			h := newHarness(t, WithReconciler(rec.fn))
			h.mock.RegisterResponder(tc.method, funderURL, tc.first)
			var req *http.Request
			if tc.method == http.MethodGet {
				req, _ = http.NewRequest(http.MethodGet, funderURL, nil)
			} else {
				req, _ = newPost(t, context.Background(), "p", true)
			}
			resp, err := h.tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			o := mustOutcome(t, resp)
			if asked := len(rec.asked()) > 0; asked != tc.reconcile || o.Attempts != 2 {
				t.Errorf("asked %v after %d attempts, want asked %v after 2", asked, o.Attempts, tc.reconcile)
			}
		})
	}
}

// httpmockErr fails the first call with err, then answers with a status.
type httpmockErr struct{ err error }

func (m *httpmockErr) then(status int) httpmock.Responder {
	var n atomic.Int64
	return func(*http.Request) (*http.Response, error) {
		if n.Add(1) == 1 {
			return nil, m.err
		}
		return httpmock.NewStringResponse(status, "ok"), nil
	}
}

// A reconciler that breaks its contract: it panics (the panic goes on up,
// as one in the inner transport does), it answers a response and an error
// at once (taken as "cannot tell", the response closed), or it blocks past
// the deadline (abandoned: the call ends at its deadline, never resent).
func TestReconcilerThatBreaksItsContract(t *testing.T) {
	t.Run("panics", func(t *testing.T) {
		h := newHarness(t, WithReconciler(func(context.Context, ReconcileQuery) (*http.Response, error) {
			panic("reconciler exploded")
		}))
		h.mock.RegisterResponder(http.MethodPost, funderURL, eofThen(200))
		defer func() {
			if v := recover(); v != "reconciler exploded" {
				t.Errorf("recovered %v, want the reconciler's panic", v)
			}
			if n := h.mock.GetTotalCallCount(); n != 1 {
				t.Errorf("%d requests reached the funder, want 1", n)
			}
		}()
		req, _ := newPost(t, context.Background(), "p", true)
		h.tr.RoundTrip(req)
	})
	t.Run("response and error", func(t *testing.T) {
		var closed atomic.Int64
		answers := 0
		h := newHarness(t, WithReconciler(func(context.Context, ReconcileQuery) (*http.Response, error) {
			answers++
			if answers > 1 {
				return nil, nil
			}
			return &http.Response{StatusCode: 200, Body: &countingCloser{n: &closed}}, errors.New("half an answer")
		}))
		h.mock.RegisterResponder(http.MethodPost, funderURL, eofThen(200))
		o, _ := h.submitOnce(t, context.Background())
		if o.Disposition != Succeeded || o.Attempts != 2 || o.Reconciles != 2 || closed.Load() != 1 {
			t.Errorf("%s after %d attempts, %d questions, %d bodies closed; want succeeded after 2, 2, 1", o.Disposition, o.Attempts, o.Reconciles, closed.Load())
		}
	})
	t.Run("blocks past the deadline", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		h := newHarness(t, WithBudget(4, 30*time.Millisecond), WithBackoff(time.Microsecond, time.Microsecond), WithReconciler(func(context.Context, ReconcileQuery) (*http.Response, error) {
			<-release // ignores its context
			return nil, nil
		}))
		h.mock.RegisterResponder(http.MethodPost, funderURL, eofThen(200))
		start := time.Now()
		o, _ := h.submitOnce(t, context.Background())
		if o.Disposition != DeadLetter || o.StopReason != StopUnreconciled || o.Attempts != 1 {
			t.Errorf("%s (%s) after %d attempts, want dead_letter (%s) after 1", o.Disposition, o.StopReason, o.Attempts, StopUnreconciled)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("the call took %v, want it to end at its deadline", took)
		}
	})
	t.Run("caller cancels while it is asked", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		h := newHarness(t, WithReconciler(func(ctx context.Context, _ ReconcileQuery) (*http.Response, error) {
			cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		}))
		h.mock.RegisterResponder(http.MethodPost, funderURL, eofThen(200))
		o, _ := h.submitOnce(t, ctx)
		if o.Disposition != Canceled || o.Attempts != 1 {
			t.Errorf("%s after %d attempts, want canceled after 1", o.Disposition, o.Attempts)
		}
	})
}

// countingCloser counts its closes.
type countingCloser struct{ n *atomic.Int64 }

func (c *countingCloser) Read([]byte) (int, error) { return 0, io.EOF }
func (c *countingCloser) Close() error             { c.n.Add(1); return nil }

// WithReconciler can be a host's own, and must not be nil.
func TestWithReconcilerPerHostAndNil(t *testing.T) {
	rec := &scriptedReconciler{answers: []reconcileAnswer{{has: true}}}
	h := newHarness(t, ForHost("funder.test", WithReconciler(rec.fn)))
	h.mock.RegisterResponder(http.MethodPost, funderURL, eofThen(200))
	h.mock.RegisterResponder(http.MethodPost, "https://other.test/x", eofThen(200))
	if o, _ := h.submitOnce(t, context.Background()); o.StopReason != StopReconciled {
		t.Errorf("funder.test: %s, want reconciled", o.StopReason)
	}
	req, _ := newPost(t, context.Background(), "p", true)
	req.URL = mustURL(t, "https://other.test/x")
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Reconciles != 0 || o.Attempts != 2 {
		t.Errorf("other.test: %d questions after %d attempts, want none after 2", o.Reconciles, o.Attempts)
	}

	tr := New(httpmock.NewMockTransport(), WithReconciler(nil))
	if _, err := tr.RoundTrip(newGet(t)); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("WithReconciler(nil): %v, want ErrInvalidOption", err)
	}
}

// A call the throttle, the breaker or the budget stops after an ambiguous
// attempt still asks once, without waiting, before it ends owed: a funder
// that has the submission makes it a success, one that has it not makes
// its letter safe to send as it is.
func TestReconcileBeforeGivingUp(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          []Option
		answer        reconcileAnswer
		wantDisp      Disposition
		wantStop      string
		wantAmbiguous bool
	}{
		{"out of retries, has it", []Option{WithBudget(0, time.Hour)}, reconcileAnswer{has: true}, Succeeded, StopReconciled, false},
		{"out of retries, has it not", []Option{WithBudget(0, time.Hour)}, reconcileAnswer{}, DeadLetter, StopRetriesSpent, false},
		{"out of retries, cannot tell", []Option{WithBudget(0, time.Hour)}, reconcileAnswer{err: errors.New("query failed")}, DeadLetter, StopRetriesSpent, true},
		{"throttled, has it", []Option{WithRetryThrottle(1, 0.1)}, reconcileAnswer{has: true}, Succeeded, StopReconciled, false},
		{"breaker opened, has it", []Option{WithBreaker(1, time.Hour)}, reconcileAnswer{has: true}, Succeeded, StopReconciled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &scriptedReconciler{answers: []reconcileAnswer{tc.answer}}
			letters := &memLetters{}
			h := newHarness(t, append(tc.opts, WithReconciler(rec.fn), WithDeadLetter(letters))...)
			h.mock.RegisterResponder(http.MethodPost, funderURL, eofThen(200))
			o, _ := h.submitOnce(t, context.Background())
			if o.Disposition != tc.wantDisp || o.StopReason != tc.wantStop || o.Attempts != 1 || o.Reconciles != 1 || o.Ambiguous != tc.wantAmbiguous {
				t.Errorf("%s (%s) after %d attempts, %d questions, ambiguous %v; want %s (%s) after 1, 1, %v",
					o.Disposition, o.StopReason, o.Attempts, o.Reconciles, o.Ambiguous, tc.wantDisp, tc.wantStop, tc.wantAmbiguous)
			}
			if tc.wantDisp == DeadLetter {
				if l := letters.only(t); l.Ambiguous != tc.wantAmbiguous {
					t.Errorf("letter ambiguous %v, want %v", l.Ambiguous, tc.wantAmbiguous)
				}
			}
		})
	}
}

// R5: a reconciler that exits its goroutine (runtime.Goexit, as t.FailNow
// or log.Fatal-style helpers do) is taken as "the funder does not have
// it", and the request is sent again.
func TestReconcilerGoexitIsNotAnAnswer(t *testing.T) {
	var sent atomic.Int32
	inner := rtFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: 502, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()), WithBudget(1, time.Minute),
		WithReconciler(func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
			runtime.Goexit()
			return nil, nil
		}))
	resp, err := tr.RoundTrip(postReq(t, "https://funder.test/x"))
	if err == nil {
		resp.Body.Close()
	}
	if n := sent.Load(); n > 1 {
		t.Fatalf("the reconciler never answered, yet the request was sent again: %d attempts", n)
	}
}
