package grantretry

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An invalid option is found at start-up through Err, and a call through
// such a Transport, which sends nothing, still owes its work: it ends
// dead_letter (invalid_option) with its letter kept, body and all, and its
// error matches ErrInvalidOption.
func TestInvalidOptionIsReportedByErrAndTheCallIsKeptAsALetter(t *testing.T) {
	if err := New(nil).Err(); err != nil {
		t.Fatalf("Err of a Transport with no options: %v, want nil", err)
	}
	const payload = `{"award":"GRANT-42","amount":1}`
	for _, limit := range []int64{DefaultReplayLimit, 8} { // buffered, and too large to replay
		sink := &memLetters{}
		h := newHarness(t, WithBudget(-1, 45*time.Second), WithDeadLetter(sink), WithReplayLimit(limit))
		if err := h.tr.Err(); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "WithBudget(-1, 45s)") {
			t.Fatalf("Err = %v, want the ErrInvalidOption naming WithBudget", err)
		}
		req, body := newPost(t, WithSubmissionID(t.Context(), "GRANT-42"), payload, false)
		resp, err := h.tr.RoundTrip(req)
		if resp != nil {
			t.Fatal("a response from a misconfigured Transport")
		}
		e := mustError(t, err)
		if !errors.Is(err, ErrInvalidOption) || !errors.Is(err, h.tr.Err()) {
			t.Errorf("error %v, want it to match ErrInvalidOption and Err's error", err)
		}
		if e.Disposition != DeadLetter || e.StopReason != StopInvalidOption || e.Attempts != 0 || e.DeadLetterID == "" || e.RecordErr != nil {
			t.Errorf("outcome %+v, want dead_letter (invalid_option) after 0 attempts, its letter kept", e.Outcome)
		}
		if n := h.mock.GetTotalCallCount(); n != 0 {
			t.Errorf("%d requests sent, want none", n)
		}
		if !body.closed.Load() {
			t.Error("the caller's body was not closed")
		}
		ls := sink.all()
		if len(ls) != 1 {
			t.Fatalf("%d letters, want 1", len(ls))
		}
		l := ls[0]
		if l.ID != e.DeadLetterID || l.StopReason != StopInvalidOption || l.Disposition != DeadLetter ||
			string(l.Body) != payload || l.BodyOmitted != "" || l.SubmissionID != "GRANT-42" || l.IdempotencyKey != e.IdempotencyKey {
			t.Errorf("replay limit %d: letter %+v, want the call whole, stop reason invalid_option", limit, l)
		}
	}
}

// Several invalid options come back in one error on one line, which
// matches ErrInvalidOption and names each of them.
func TestSeveralInvalidOptionsMakeOneLine(t *testing.T) {
	tr := New(nil, WithBudget(-1, 45*time.Second), WithLogger(nil), WithBackoff(0, 0))
	err := tr.Err()
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Err = %v, want ErrInvalidOption", err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\n") || !strings.HasPrefix(msg, "grantretry: ") {
		t.Errorf("Err = %q, want one line starting grantretry:", msg)
	}
	for _, name := range []string{"WithBudget(-1, 45s)", "WithLogger(nil)", "WithBackoff(0s, 0s)"} {
		if !strings.Contains(msg, name) {
			t.Errorf("Err = %q, does not name %s", msg, name)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	_, rerr := tr.RoundTrip(req)
	if !errors.Is(rerr, ErrInvalidOption) || !errors.Is(rerr, err) || strings.ContainsAny(rerr.Error(), "\r\n") {
		t.Errorf("RoundTrip error %q, want one line matching ErrInvalidOption", rerr)
	}
	// Each cause stays reachable, as errors.Join kept it.
	var n int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		if errors.Is(e, ErrInvalidOption) {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d causes matching ErrInvalidOption, want 3", n)
	}
}

func TestOptionEdges(t *testing.T) {
	h := newHarness(t, WithStatusSets([]int{600}, nil))
	h.mock.RegisterNoResponder(seq(200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("WithStatusSets(600): err %v, want ErrInvalidOption", err)
	}
	// Zero is WithAttemptTimeout's documented default; a nil Option is skipped.
	for name, o := range map[string]Option{"WithAttemptTimeout(0)": WithAttemptTimeout(0), "nil Option": nil} {
		h := newHarness(t, o)
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		resp.Body.Close()
	}
}
