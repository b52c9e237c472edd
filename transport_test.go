package grantretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// Reference check 1: a terminal error never retries and spends no budget.
func TestTerminal422NeverRetries(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(422))
	req, _ := newPost(t, context.Background(), `{"amount":-1}`, true)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("err = %v, want nil with the 422 response", err)
	}
	if got := readAll(t, resp); got != "body of 422 #1" {
		t.Errorf("body = %q, want the funder's 422 body intact", got)
	}
	o := mustOutcome(t, resp)
	if o.Disposition != FailedTerminal || o.Attempts != 1 || o.Reason != "terminal:422" {
		t.Errorf("outcome = %+v, want failed_terminal after 1 attempt, terminal:422", o)
	}
	if n := h.mock.GetTotalCallCount(); n != 1 {
		t.Errorf("inner transport called %d times, want 1", n)
	}
	if w := h.clock.waits(); len(w) != 0 {
		t.Errorf("waited %v, want no wait", w)
	}
}

// The reference's flaky example: two 503s, then a 2xx.
func TestFlakyFunderSucceedsOnThirdAttempt(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 503, 200))
	req, _ := newPost(t, context.Background(), `{"app":1}`, true)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	o := mustOutcome(t, resp)
	if o.Disposition != Succeeded || o.Attempts != 3 || resp.StatusCode != 200 {
		t.Errorf("outcome = %+v status %d, want succeeded after 3 attempts", o, resp.StatusCode)
	}
	if got := readAll(t, resp); got != "body of 200 #3" {
		t.Errorf("body = %q", got)
	}
	if w := h.clock.waits(); len(w) != 2 {
		t.Errorf("waits = %v, want 2", w)
	}
}

// Reference check 3: an always-503 call dead-letters within maxRetries+1
// attempts, returning the last 503 with its body.
func TestAlways503DeadLettersWithLastResponse(t *testing.T) {
	for _, maxRetries := range []int{0, 1, 4, 7} {
		h := newHarness(t, WithBudget(maxRetries, time.Hour), WithBackoff(time.Millisecond, time.Second),
			WithoutBreaker(), WithoutRetryThrottle())
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)

		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("maxRetries %d: err = %v, want the last 503", maxRetries, err)
		}
		o := mustOutcome(t, resp)
		want := maxRetries + 1
		if o.Disposition != DeadLetter || o.Attempts != want || o.StopReason != StopRetriesSpent {
			t.Errorf("maxRetries %d: outcome %+v, want dead_letter after %d attempts", maxRetries, o, want)
		}
		if got := readAll(t, resp); got != "body of 503 #"+strconv.Itoa(want) {
			t.Errorf("maxRetries %d: body %q, want the last 503's", maxRetries, got)
		}
		if n := h.mock.GetTotalCallCount(); n != want {
			t.Errorf("maxRetries %d: %d calls, want %d", maxRetries, n, want)
		}
	}
}

// Reference check 3, second half: the deadline guard ends the loop before
// the retry budget does, and never sleeps a wait that would cross it.
func TestDeadlineGuardStopsBeforeSleepingPastIt(t *testing.T) {
	// Every wait lands on its ceiling: 400ms, then 800ms. After the first
	// wait 600ms of the 1s deadline remain, so the 800ms wait is refused.
	h := newHarness(t, WithBudget(10, time.Second), WithBackoff(400*time.Millisecond, 10*time.Second),
		WithRandSource(maxSource{}))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	if o.Disposition != DeadLetter || o.StopReason != StopDeadline || o.Attempts != 2 {
		t.Errorf("outcome %+v, want dead_letter by deadline after 2 attempts", o)
	}
	if w := h.clock.waits(); !reflect.DeepEqual(w, []time.Duration{400 * time.Millisecond}) {
		t.Errorf("waits = %v, want only the 400ms one", w)
	}
}

func TestCallerDeadlineShortensBudget(t *testing.T) {
	h := newHarness(t, WithBackoff(400*time.Millisecond, 10*time.Second), WithRandSource(maxSource{}))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, funderURL, nil)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	if o.Disposition != DeadLetter || o.StopReason != StopDeadline || o.Attempts != 1 {
		t.Errorf("outcome %+v, want dead_letter by the caller's deadline after 1 attempt", o)
	}
	if w := h.clock.waits(); len(w) != 0 {
		t.Errorf("waited %v for an attempt past the caller's deadline", w)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	h := newHarness(t, WithBackoff(time.Millisecond, time.Millisecond))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seqWithHeader(http.Header{"Retry-After": {"7"}}, 429, 200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if w := h.clock.waits(); !reflect.DeepEqual(w, []time.Duration{7 * time.Second}) {
		t.Errorf("waits = %v, want exactly the 7s the funder asked for", w)
	}
	lines := h.attemptLines()
	if got := lines[0].ContextMap()[FieldWaitSource]; got != waitSourceRetryAfter {
		t.Errorf("wait_source = %v, want retry_after", got)
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	h := newHarness(t, WithBackoff(time.Millisecond, time.Millisecond))
	when := h.clock.Now().Add(12 * time.Second).Format(http.TimeFormat)
	h.mock.RegisterResponder(http.MethodGet, funderURL, seqWithHeader(http.Header{"Retry-After": {when}}, 503, 200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if w := h.clock.waits(); !reflect.DeepEqual(w, []time.Duration{12 * time.Second}) {
		t.Errorf("waits = %v, want the 12s to the funder's date", w)
	}
}

func TestRetryAfterBeyondDeadlineEndsAtOnce(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL,
		httpmock.NewStringResponder(503, "back in ten years").HeaderSet(http.Header{"Retry-After": {"315360000"}}))
	req, _ := newPost(t, context.Background(), "x", true)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	if o.Disposition != DeadLetter || o.StopReason != StopOwedLater || o.Attempts != 1 {
		t.Errorf("outcome %+v, want dead_letter (owed_later) after 1 attempt", o)
	}
	if w := h.clock.waits(); len(w) != 0 {
		t.Errorf("waited %v: a funder must not park a worker", w)
	}
}

// The same key, correlation id and body bytes on every attempt, whether the
// body is replayed through GetBody or from the Transport's buffer.
func TestEveryAttemptCarriesSameKeyCorrelationAndBody(t *testing.T) {
	const payload = `{"applicant":"Riverbend Food Bank","amount":125000}`
	for _, withGetBody := range []bool{true, false} {
		h := newHarness(t)
		rec := &recorder{}
		h.mock.RegisterResponder(http.MethodPost, funderURL, rec.wrap(seq(503, 502, 500, 201)))
		ctx := WithSubmissionID(context.Background(), "GRANT-2026-0042")
		req, body := newPost(t, ctx, payload, withGetBody)

		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		calls := rec.all()
		if len(calls) != 4 {
			t.Fatalf("GetBody %v: %d attempts, want 4", withGetBody, len(calls))
		}
		wantKey := IdempotencyKey("GRANT-2026-0042", []byte(payload))
		for i, c := range calls {
			if c.key != wantKey || c.corr != calls[0].corr || string(c.body) != payload {
				t.Errorf("GetBody %v: attempt %d carried key %q corr %q body %q; want key %q, corr %q, the payload",
					withGetBody, i+1, c.key, c.corr, c.body, wantKey, calls[0].corr)
			}
		}
		if len(calls[0].corr) != 16 {
			t.Errorf("correlation id %q, want 16 hex digits", calls[0].corr)
		}
		o := mustOutcome(t, resp)
		if o.IdempotencyKey != wantKey || o.CorrelationID != calls[0].corr || o.SubmissionID != "GRANT-2026-0042" {
			t.Errorf("outcome %+v does not name what was sent", o)
		}
		if !body.closed.Load() {
			t.Errorf("GetBody %v: caller's body not closed", withGetBody)
		}
	}
}

func TestCallerSetKeyAndCorrelationIDAreKept(t *testing.T) {
	h := newHarness(t)
	rec := &recorder{}
	h.mock.RegisterResponder(http.MethodPost, funderURL, rec.wrap(seq(503, 200)))
	req, _ := newPost(t, WithSubmissionID(context.Background(), "S-1"), "p", true)
	req.Header.Set(HeaderIdempotencyKey, "caller-key-1")
	req.Header.Set(HeaderCorrelationID, "trace-abc")

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for i, c := range rec.all() {
		if c.key != "caller-key-1" || c.corr != "trace-abc" {
			t.Errorf("attempt %d: key %q corr %q, want the caller's", i+1, c.key, c.corr)
		}
	}
}

func TestKeyWithoutSubmissionIDDerivesFromMethodURLAndPayload(t *testing.T) {
	h := newHarness(t)
	rec := &recorder{}
	h.mock.RegisterResponder(http.MethodPost, funderURL, rec.wrap(seq(200)))
	req, _ := newPost(t, context.Background(), "payload", true)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := IdempotencyKey("POST "+funderURL+"\n", []byte("payload"))
	if got := rec.all()[0].key; got != want {
		t.Errorf("key %q, want %q", got, want)
	}
}

func TestIdempotentMethodsGetNoKeyButAreRetried(t *testing.T) {
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete} {
		h := newHarness(t)
		rec := &recorder{}
		h.mock.RegisterResponder(m, funderURL, rec.wrap(seq(503, 204)))
		req, _ := http.NewRequest(m, funderURL, strings.NewReader("x"))

		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		resp.Body.Close()
		calls := rec.all()
		if len(calls) != 2 {
			t.Errorf("%s: %d attempts, want 2", m, len(calls))
		}
		for _, c := range calls {
			if c.key != "" {
				t.Errorf("%s carried Idempotency-Key %q, want none", m, c.key)
			}
		}
	}
}

func TestPatchGetsKey(t *testing.T) {
	h := newHarness(t)
	rec := &recorder{}
	h.mock.RegisterResponder(http.MethodPatch, funderURL, rec.wrap(seq(503, 200)))
	req, _ := http.NewRequestWithContext(WithSubmissionID(context.Background(), "S-9"), http.MethodPatch, funderURL, strings.NewReader("amend"))

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := IdempotencyKey("S-9", []byte("amend"))
	for _, c := range rec.all() {
		if c.key != want {
			t.Errorf("PATCH key %q, want %q", c.key, want)
		}
	}
}

// A method that is neither idempotent nor keyed is sent once.
func TestUnkeyedNonIdempotentMethodIsNeverRetried(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder("PURGE", funderURL, seq(503, 200))
	req, _ := http.NewRequest("PURGE", funderURL, nil)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	if o.Attempts != 1 || o.Disposition != DeadLetter || o.StopReason != StopNotIdempotent {
		t.Errorf("outcome %+v, want one attempt, dead_letter (not_idempotent)", o)
	}
}

func TestBodyOverReplayLimitIsSentOnceAndAuditSaysWhy(t *testing.T) {
	h := newHarness(t, WithReplayLimit(8))
	rec := &recorder{}
	h.mock.RegisterResponder(http.MethodPost, funderURL, rec.wrap(seq(503, 200)))
	req, body := newPost(t, context.Background(), "0123456789abcdef", false)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	calls := rec.all()
	if len(calls) != 1 || string(calls[0].body) != "0123456789abcdef" {
		t.Fatalf("attempts %+v, want exactly one carrying the whole body", calls)
	}
	o := mustOutcome(t, resp)
	if o.Disposition != DeadLetter || o.StopReason != StopNotReplayable {
		t.Errorf("outcome %+v, want dead_letter (body_not_replayable)", o)
	}
	if !body.closed.Load() {
		t.Error("caller's body not closed")
	}
	d := h.dispositionLines()
	if len(d) != 1 || !strings.Contains(d[0].ContextMap()[FieldNotReplayable].(string), "replay limit") {
		t.Errorf("disposition line %+v does not say why the body was not replayed", d)
	}
}

func TestBodyReadFailureIsTerminalAndNothingIsSent(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(200))
	req, body := newPost(t, context.Background(), "0123456789", false)
	body.failAt, body.failErr = 4, errors.New("disk went away")

	resp, err := h.tr.RoundTrip(req)
	if resp != nil {
		t.Fatal("got a response for a request whose body failed")
	}
	e := mustError(t, err)
	if e.Disposition != FailedTerminal || e.StopReason != StopBodyReadFailure || e.Attempts != 0 {
		t.Errorf("outcome %+v", e.Outcome)
	}
	if !strings.HasPrefix(err.Error(), "grantretry: ") || !strings.Contains(err.Error(), "disk went away") {
		t.Errorf("error %q", err)
	}
	if h.mock.GetTotalCallCount() != 0 || !body.closed.Load() {
		t.Error("sent a request whose body failed, or left its body open")
	}
}

// Reference check 4: enough consecutive failures open the breaker, and the
// next call returns circuit_open without invoking the inner transport.
func TestBreakerOpensAndShortCircuits(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	for i := 0; i < int(DefaultBreakerThreshold); i++ {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		resp.Body.Close()
	}
	before := h.mock.GetTotalCallCount()
	req, body := newPost(t, context.Background(), "p", true)

	resp, err := h.tr.RoundTrip(req)
	if resp != nil {
		t.Fatal("got a response from an open circuit")
	}
	if !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("err = %v, want ErrCircuitOpen", err)
	}
	e := mustError(t, err)
	if e.Disposition != CircuitOpen || e.Attempts != 0 {
		t.Errorf("outcome %+v, want circuit_open with 0 attempts", e.Outcome)
	}
	if n := h.mock.GetTotalCallCount(); n != before {
		t.Errorf("inner transport called %d more times while open", n-before)
	}
	if !body.closed.Load() {
		t.Error("caller's body not closed on circuit_open")
	}
	var opened bool
	for _, l := range h.logs.FilterMessage(MsgBreaker).AllUntimed() {
		if l.ContextMap()[FieldBreakerTo] == "open" && l.Level.String() == "warn" {
			opened = true
		}
	}
	if !opened {
		t.Error("no WARN audit line for the breaker opening")
	}
}

func TestBreakerIsPerHost(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute), WithBreaker(2, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, "https://down.test/x", seq(503))
	h.mock.RegisterResponder(http.MethodGet, "https://up.test/x", seq(200))
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodGet, "https://down.test/x", nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodGet, "https://DOWN.test:443/x", nil)
	if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("same host, other spelling: err = %v, want circuit open", err)
	}
	req, _ = http.NewRequest(http.MethodGet, "https://up.test/x", nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("another host is refused: %v", err)
	}
	resp.Body.Close()
}

func TestBreakerCountsOnlyTransientFailures(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute), WithBreaker(3, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(422))
	for i := 0; i < 10; i++ {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("call %d: %v: terminal answers must not open the breaker", i+1, err)
		}
		resp.Body.Close()
	}
	// Cancelled calls are excluded too.
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		return nil, context.Canceled
	})
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, funderURL, nil)
		h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
			cancel()
			return nil, context.Canceled
		})
		_, err := h.tr.RoundTrip(req)
		if e := mustError(t, err); e.Disposition != Canceled {
			t.Fatalf("call %d: %+v, want canceled", i+1, e.Outcome)
		}
	}
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("breaker opened on terminal or cancelled calls: %v", err)
	}
	resp.Body.Close()
}

// After the cooldown, one probe goes through and its success closes the
// breaker. A 1ns cooldown has always passed by the next call, so nothing
// sleeps.
func TestBreakerHalfOpenProbeCloses(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute), WithBreaker(1, time.Nanosecond))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 200))
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		resp.Body.Close()
	}
	var got []string
	for _, l := range h.logs.FilterMessage(MsgBreaker).AllUntimed() {
		m := l.ContextMap()
		got = append(got, m[FieldBreakerFrom].(string)+">"+m[FieldBreakerTo].(string))
	}
	want := []string{"closed>open", "open>half_open", "half_open>closed"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("breaker transitions %v, want %v", got, want)
	}
}

// The breaker opening while a call waits to retry ends that call without
// the pointless wait.
func TestCallStopsWhenBreakerOpensBetweenAttempts(t *testing.T) {
	h := newHarness(t, WithBreaker(1, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	if o.Disposition != CircuitOpen || o.Attempts != 1 || len(h.clock.waits()) != 0 {
		t.Errorf("outcome %+v waits %v, want circuit_open after 1 attempt and no wait", o, h.clock.waits())
	}
}

func TestCancelDuringWaitReturnsPromptly(t *testing.T) {
	h := newHarness(t)
	h.clock.block = true
	h.clock.started = make(chan time.Duration, 1)
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
	ctx, cancel := context.WithCancel(context.Background())
	req, body := newPost(t, ctx, "p", true)

	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := h.tr.RoundTrip(req)
		done <- result{resp, err}
	}()
	<-h.clock.started
	cancel()
	r := <-done
	if r.resp != nil {
		t.Fatal("got a response after cancellation")
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", r.err)
	}
	e := mustError(t, r.err)
	if e.Disposition != Canceled || e.Attempts != 1 {
		t.Errorf("outcome %+v, want canceled after 1 attempt", e.Outcome)
	}
	if !body.closed.Load() {
		t.Error("caller's body not closed")
	}
}

func TestAlreadyCancelledContextSendsNothing(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(200))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, body := newPost(t, ctx, "p", true)

	_, err := h.tr.RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if e := mustError(t, err); e.Disposition != Canceled || e.Attempts != 0 {
		t.Errorf("outcome %+v", e.Outcome)
	}
	if h.mock.GetTotalCallCount() != 0 || !body.closed.Load() {
		t.Error("sent on a cancelled context, or left the body open")
	}
}

func TestRedirectsAndInformationalPassThrough(t *testing.T) {
	for _, status := range []int{101, 200, 204, 302, 304} {
		h := newHarness(t)
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(status))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o := mustOutcome(t, resp)
		if resp.StatusCode != status || o.Disposition != Succeeded || o.Attempts != 1 {
			t.Errorf("%d: outcome %+v", status, o)
		}
	}
}

func TestUnknownStatusFailsLoud(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(418))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Disposition != FailedTerminal || o.Reason != "unclassified:418" || o.Attempts != 1 {
		t.Errorf("outcome %+v", o)
	}
}

func TestStatusSetsAreConfigurable(t *testing.T) {
	h := newHarness(t, WithStatusSets([]int{408, 503}, []int{500}))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(408, 500))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != 2 || o.Reason != "terminal:500" {
		t.Errorf("outcome %+v, want 408 retried and 500 terminal", o)
	}
}

func TestTransportErrorsAreRetriedAndReturnedAsError(t *testing.T) {
	h := newHarness(t, WithBudget(2, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, funderURL, httpmock.NewErrorResponder(io.ErrUnexpectedEOF))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)

	resp, err := h.tr.RoundTrip(req)
	if resp != nil {
		t.Fatal("response with a transport error")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrDeadLetter) {
		t.Fatalf("err = %v, want to unwrap to the cause and match ErrDeadLetter", err)
	}
	e := mustError(t, err)
	if e.Attempts != 3 || e.Reason != "transport:eof" {
		t.Errorf("outcome %+v", e.Outcome)
	}
}

// Discarded responses are drained (bounded) and closed before the wait.
func TestDiscardedResponsesAreDrainedAndClosed(t *testing.T) {
	h := newHarness(t, WithBudget(2, time.Minute))
	var bodies []*respBody
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		b := &respBody{r: strings.NewReader(strings.Repeat("x", 1<<20))}
		bodies = append(bodies, b)
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: b, Request: r}, nil
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	last := bodies[len(bodies)-1]
	if last.closed.Load() {
		t.Error("the returned response's body was closed before the caller read it")
	}
	resp.Body.Close()
	for i, b := range bodies[:len(bodies)-1] {
		if !b.closed.Load() || b.read.Load() > maxDrain {
			t.Errorf("discarded body %d: closed %v, read %d bytes (bound %d)", i+1, b.closed.Load(), b.read.Load(), maxDrain)
		}
	}
}

// The caller's request is never modified, and its body is closed, on every
// path.
func TestCallerRequestUntouchedOnEveryPath(t *testing.T) {
	cases := []struct {
		name string
		opts []Option
		resp httpmock.Responder
		ctx  func() context.Context
	}{
		{"succeeded", nil, seq(503, 200), context.Background},
		{"terminal", nil, seq(422), context.Background},
		{"dead letter", []Option{WithBudget(1, time.Minute)}, seq(503), context.Background},
		{"transport error", []Option{WithBudget(1, time.Minute)}, httpmock.NewErrorResponder(io.EOF), context.Background},
		{"invalid option", []Option{WithBudget(-1, 0)}, seq(200), context.Background},
		{"cancelled", nil, seq(200), func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
		{"bad submission id", nil, seq(200), func() context.Context {
			return WithSubmissionID(context.Background(), "")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts...)
			h.mock.RegisterResponder(http.MethodPost, funderURL+"?token=s3cret", tc.resp)
			for _, withGetBody := range []bool{true, false} {
				req, body := newPost(t, tc.ctx(), "payload", withGetBody)
				req.URL.RawQuery = "token=s3cret"
				req.Header.Set("Authorization", "Bearer t0ken")
				wantHeader := req.Header.Clone()
				wantURL := req.URL.String()
				wantBody, wantGetBody := req.Body, req.GetBody != nil

				resp, err := h.tr.RoundTrip(req)
				if resp != nil {
					if err != nil {
						t.Error("both a response and an error")
					}
					resp.Body.Close()
				}
				if !reflect.DeepEqual(req.Header, wantHeader) || req.URL.String() != wantURL ||
					req.Body != wantBody || (req.GetBody != nil) != wantGetBody {
					t.Errorf("GetBody %v: caller's request modified: header %v url %s", withGetBody, req.Header, req.URL)
				}
				if !body.closed.Load() {
					t.Errorf("GetBody %v: body not closed", withGetBody)
				}
			}
		})
	}
}

func TestInvalidRequestsGetClearErrors(t *testing.T) {
	mk := func(mut func(r *http.Request) *http.Request) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader("x"))
		return mut(r)
	}
	cases := map[string]*http.Request{
		"nil URL":        mk(func(r *http.Request) *http.Request { r.URL = nil; return r }),
		"ftp scheme":     mk(func(r *http.Request) *http.Request { r.URL.Scheme = "ftp"; return r }),
		"no host":        mk(func(r *http.Request) *http.Request { r.URL.Host = ""; return r }),
		"CRLF in header": mk(func(r *http.Request) *http.Request { r.Header.Set("X-Note", "a\r\nInjected: yes"); return r }),
		"bad header name": mk(func(r *http.Request) *http.Request {
			r.Header["Bad Name"] = []string{"v"}
			return r
		}),
		"CRLF in submission id": mk(func(r *http.Request) *http.Request {
			return r.WithContext(WithSubmissionID(r.Context(), "S-1\r\nX: y"))
		}),
		"empty submission id": mk(func(r *http.Request) *http.Request {
			return r.WithContext(WithSubmissionID(r.Context(), ""))
		}),
		"enormous submission id": mk(func(r *http.Request) *http.Request {
			return r.WithContext(WithSubmissionID(r.Context(), strings.Repeat("x", MaxSubmissionIDLen+1)))
		}),
	}
	for name, req := range cases {
		h := newHarness(t)
		h.mock.RegisterNoResponder(seq(200))
		resp, err := h.tr.RoundTrip(req)
		if resp != nil || !errors.Is(err, ErrInvalidRequest) || !strings.HasPrefix(err.Error(), "grantretry: ") {
			t.Errorf("%s: resp %v err %v, want a grantretry ErrInvalidRequest", name, resp, err)
			continue
		}
		if e := mustError(t, err); e.Disposition != FailedTerminal || e.Attempts != 0 {
			t.Errorf("%s: outcome %+v", name, e.Outcome)
		}
		if h.mock.GetTotalCallCount() != 0 {
			t.Errorf("%s: sent anyway", name)
		}
	}
	if _, err := New(nil).RoundTrip(nil); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("nil request: %v", err)
	}
}

func TestInvalidOptionsFailEveryCall(t *testing.T) {
	opts := map[string]Option{
		"backoff base 0":  WithBackoff(0, time.Second),
		"cap below base":  WithBackoff(time.Second, time.Millisecond),
		"negative budget": WithBudget(-1, time.Second),
		"zero deadline":   WithBudget(1, 0),
		"breaker 0":       WithBreaker(0, time.Second),
		"cooldown 0":      WithBreaker(1, 0),
		"attempt timeout": WithAttemptTimeout(-time.Second),
		"nil logger":      WithLogger(nil),
		"status 200":      WithStatusSets([]int{200}, nil),
		"status twice":    WithStatusSets([]int{503}, []int{503}),
		"nil clock":       WithClock(nil),
		"nil rand":        WithRandSource(nil),
		"replay limit 0":  WithReplayLimit(0),
	}
	for name, o := range opts {
		h := newHarness(t, o)
		h.mock.RegisterNoResponder(seq(200))
		req, body := newPost(t, context.Background(), "p", false)
		_, err := h.tr.RoundTrip(req)
		if !errors.Is(err, ErrInvalidOption) || !strings.HasPrefix(err.Error(), "grantretry: ") {
			t.Errorf("%s: err = %v, want ErrInvalidOption", name, err)
		}
		if h.mock.GetTotalCallCount() != 0 || !body.closed.Load() {
			t.Errorf("%s: sent, or body left open", name)
		}
	}
}

// An attempt that outlives WithAttemptTimeout is a transient timeout. The
// timeout is real time, so it is kept tiny.
func TestAttemptTimeoutIsTransient(t *testing.T) {
	h := newHarness(t, WithAttemptTimeout(5*time.Millisecond), WithBudget(1, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	_, err := h.tr.RoundTrip(req)
	e := mustError(t, err)
	if e.Attempts != 2 || e.Reason != "transport:timeout" || e.Disposition != DeadLetter {
		t.Errorf("outcome %+v, want 2 timed-out attempts, dead_letter", e.Outcome)
	}
}

// The call's deadline bounds an attempt in flight, not only the waits.
func TestCallDeadlineEndsHungAttempt(t *testing.T) {
	h := newHarness(t, WithBudget(3, 10*time.Millisecond))
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(5 * time.Second): // fail, don't hang, if the deadline is not applied
			return nil, errors.New("the call's deadline never ended the attempt")
		}
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	_, err := h.tr.RoundTrip(req)
	e := mustError(t, err)
	if e.Disposition != DeadLetter || e.StopReason != StopDeadline || e.Attempts != 1 {
		t.Errorf("outcome %+v, want dead_letter by deadline after 1 attempt", e.Outcome)
	}
}

// The attempt's context lives until the caller closes the body (failsafe-go
// #123 cancelled it before the body was read).
func TestResponseContextEndsWhenBodyIsClosed(t *testing.T) {
	h := newHarness(t, WithAttemptTimeout(time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx := resp.Request.Context()
	if ctx.Err() != nil {
		t.Fatal("attempt context ended before the body was read")
	}
	readAll(t, resp)
	if ctx.Err() == nil {
		t.Error("attempt context still live after the body was closed")
	}
}

func TestOutcomeOfThroughHTTPClientWithTimeout(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 200))
	client := &http.Client{Transport: h.tr, Timeout: time.Minute}
	resp, err := client.Get(funderURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != 2 || o.Disposition != Succeeded {
		t.Errorf("outcome %+v", o)
	}
	if _, ok := OutcomeOf(&http.Response{}); ok {
		t.Error("OutcomeOf found an outcome on a foreign response")
	}
	if _, ok := OutcomeOf(nil); ok {
		t.Error("OutcomeOf(nil)")
	}
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A broken inner transport that returns both a response and an error must
// not make RoundTrip do the same (go-retryablehttp #179), nor leak the body.
func TestNeverBothResponseAndError(t *testing.T) {
	var bodies []*respBody
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b := &respBody{r: strings.NewReader("x")}
		bodies = append(bodies, b)
		return &http.Response{StatusCode: 502, Body: b, Header: http.Header{}}, io.ErrUnexpectedEOF
	})
	tr := New(inner, WithBudget(1, time.Minute), WithClock(newFakeClock()))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := tr.RoundTrip(req)
	if resp != nil || err == nil {
		t.Fatalf("resp %v err %v, want only an error", resp, err)
	}
	for i, b := range bodies {
		if !b.closed.Load() {
			t.Errorf("body %d of the broken response left open", i+1)
		}
	}
}
