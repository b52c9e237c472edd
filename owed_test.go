package grantretry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// owedClassifier answers a 403 or a 429 Owed, until the given time when it
// is not zero, and leaves every other status to the status sets.
func owedClassifier(until time.Time) ClassifyFunc {
	return func(resp *http.Response, _ []byte) (Classification, bool) {
		if resp.StatusCode != 403 && resp.StatusCode != 429 {
			return Classification{}, false
		}
		return Classification{Owed: true, Retryable: true, NotBefore: until, Reason: "test:quota"}, true
	}
}

// callOnce sends one POST through h and returns its outcome.
func callOnce(t *testing.T, h *harness) Outcome {
	t.Helper()
	req, _ := newPost(t, context.Background(), "x", true)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return mustOutcome(t, resp)
}

func TestOwedVerdictEndsTheCallAtOnceUntilItsNotBefore(t *testing.T) {
	until := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	h := newHarness(t, WithClassifier(owedClassifier(until)))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(403))

	o := callOnce(t, h)
	if o.Disposition != DeadLetter || o.StopReason != StopOwedLater || o.Attempts != 1 {
		t.Errorf("outcome %+v, want dead_letter (owed_later) after 1 attempt", o)
	}
	if !o.NotBefore.Equal(until) {
		t.Errorf("NotBefore = %v, want %v", o.NotBefore, until)
	}
	if o.Reason != "owed:403;test:quota" {
		t.Errorf("Reason = %q, want owed:403;test:quota", o.Reason)
	}
	if w := h.clock.waits(); len(w) != 0 {
		t.Errorf("waited %v: an owed request is not retried within the call", w)
	}
	lines := h.attemptLines()
	if len(lines) != 1 || lines[0].ContextMap()[FieldRetryable] != false {
		t.Errorf("attempt lines %v, want one, not retryable", lines)
	}
}

func TestOwedVerdictIsChargedToNoBreakerOrThrottle(t *testing.T) {
	for _, opt := range []Option{WithBreaker(2, time.Minute), WithRetryThrottle(4, 0.1)} {
		h := newHarness(t, WithClassifier(owedClassifier(time.Time{})), opt)
		h.mock.RegisterResponder(http.MethodPost, funderURL, seq(403))
		for i := 0; i < 5; i++ {
			if o := callOnce(t, h); o.StopReason != StopOwedLater || o.Attempts != 1 {
				t.Fatalf("call %d: outcome %+v, want owed_later after 1 attempt: a quota must not open the breaker", i, o)
			}
			h.clock.advance(DefaultBreakerProbe) // the host's next probe of its quota
		}
		// A transient failure after the quotas is still retried: the
		// owed answers neither opened the breaker nor drained the throttle.
		h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 201))
		if o := callOnce(t, h); o.Disposition != Succeeded || o.Attempts != 2 {
			t.Errorf("outcome %+v, want succeeded after a retry", o)
		}
	}
}

func TestOwedVerdictWithoutNotBeforeReadsRetryAfter(t *testing.T) {
	h := newHarness(t, WithClassifier(owedClassifier(time.Time{})))
	h.mock.RegisterResponder(http.MethodPost, funderURL,
		seqWithHeader(http.Header{"Retry-After": {"7200"}}, 403))
	o := callOnce(t, h)
	if want := h.clock.Now().Add(2 * time.Hour); o.StopReason != StopOwedLater || !o.NotBefore.Equal(want) {
		t.Errorf("outcome %+v, want owed_later until %v", o, want)
	}
}

func TestOwedVerdictWithoutAnyTimeHasZeroNotBefore(t *testing.T) {
	h := newHarness(t, WithClassifier(owedClassifier(time.Time{})))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(429))
	if o := callOnce(t, h); o.StopReason != StopOwedLater || !o.NotBefore.IsZero() {
		t.Errorf("outcome %+v, want owed_later with a zero NotBefore", o)
	}
}

func TestRetryAfterPastDeadlineIsOwedUntilThen(t *testing.T) {
	h := newHarness(t, WithBreaker(1, time.Minute))
	h.mock.RegisterResponder(http.MethodPost, funderURL,
		httpmock.NewStringResponder(429, "quota").HeaderSet(http.Header{"Retry-After": {"36000"}}))
	for i := 0; i < 3; i++ {
		o := callOnce(t, h)
		if o.Disposition != DeadLetter || o.StopReason != StopOwedLater || o.Attempts != 1 {
			t.Fatalf("call %d: outcome %+v, want dead_letter (owed_later) after 1 attempt, the breaker closed", i, o)
		}
		if want := h.clock.Now().Add(10 * time.Hour); !o.NotBefore.Equal(want) {
			t.Errorf("NotBefore = %v, want %v", o.NotBefore, want)
		}
		if o.Reason != "owed:429;retry_after" {
			t.Errorf("Reason = %q, want owed:429;retry_after", o.Reason)
		}
		h.clock.advance(10 * time.Hour) // the host is held until then
	}
	if w := h.clock.waits(); len(w) != 0 {
		t.Errorf("waited %v", w)
	}
}

func TestRetryAfterWithinDeadlineIsWaitedOut(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL,
		seqWithHeader(http.Header{"Retry-After": {"20"}}, 429, 201))
	o := callOnce(t, h)
	if o.Disposition != Succeeded || !o.NotBefore.IsZero() {
		t.Errorf("outcome %+v, want succeeded with no NotBefore", o)
	}
}

func TestRetryAfterPastDeadlineOfUnrepeatableRequestSaysWhy(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL,
		httpmock.NewStringResponder(503, "down").HeaderSet(http.Header{"Retry-After": {"36000"}}))
	req, _ := http.NewRequest(http.MethodPatch, funderURL, nil)
	req.Method = "PROPPATCH" // no key, not idempotent
	h.mock.RegisterResponder("PROPPATCH", funderURL,
		httpmock.NewStringResponder(503, "down").HeaderSet(http.Header{"Retry-After": {"36000"}}))
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.StopReason != StopNotIdempotent || !o.NotBefore.IsZero() {
		t.Errorf("outcome %+v, want not_idempotent: a request that cannot be repeated says so", o)
	}
}
