package grantretry

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// Each transient failure takes a token; once the bucket is at half or
// below, the next retry is refused at once, without a wait.
func TestThrottleRefusesRetriesWhenHalfDrained(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(4, 0.5), WithBudget(10, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	// 4 tokens: the first failure leaves 3 (> 2, retry), the second 2 (refused).
	if o.Disposition != DeadLetter || o.StopReason != StopThrottled || o.Attempts != 2 {
		t.Errorf("outcome %+v, want dead_letter (retry_throttled) after 2 attempts", o)
	}
	if w := h.clock.waits(); len(w) != 1 {
		t.Errorf("waits %v, want only the one before the second attempt", w)
	}
	d := h.dispositionLines()
	if len(d) != 1 || d[0].ContextMap()[FieldStopReason] != StopThrottled {
		t.Errorf("disposition line does not say the throttle stopped the call: %+v", d)
	}
}

// The bucket is shared by every call to a host, and refills on successes.
func TestThrottleIsSharedPerHostAndRefillsOnSuccess(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(4, 0.5), WithBudget(10, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, "https://down.test/x", seq(503))
	h.mock.RegisterResponder(http.MethodGet, "https://up.test/x", seq(503, 200))
	get := func(url string) Outcome {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return mustOutcome(t, resp)
	}
	get("https://down.test/x") // drains down.test to 2 tokens
	if o := get("https://down.test/x"); o.Attempts != 1 || o.StopReason != StopThrottled {
		t.Errorf("second call to a drained host: %+v, want 1 attempt, throttled", o)
	}
	if o := get("https://up.test/x"); o.Attempts != 2 || o.Disposition != Succeeded {
		t.Errorf("another host's bucket was drained too: %+v", o)
	}
	down := h.tr.hosts.get("https://down.test:443")
	before := down.throttle.level()
	for i := 0; i < 3; i++ {
		down.throttle.onSuccess()
	}
	if got := down.throttle.level(); got != before+1.5 {
		t.Errorf("level after 3 successes = %v, want %v", got, before+1.5)
	}
}

func TestThrottleBucketStaysInBounds(t *testing.T) {
	rt := newRetryThrottle(10, 0.1)
	for i := 0; i < 100; i++ {
		rt.onSuccess()
	}
	if rt.level() != 10 {
		t.Errorf("level %v after successes on a full bucket, want 10", rt.level())
	}
	for i := 0; i < 100; i++ {
		rt.onFailure()
	}
	if rt.level() != 0 || rt.allowRetry() {
		t.Errorf("level %v allow %v after 100 failures, want 0 and refused", rt.level(), rt.allowRetry())
	}
	// Back above half takes 51 successes at 0.1: 5.1 > 5.
	for i := 0; i < 50; i++ {
		rt.onSuccess()
	}
	if rt.allowRetry() {
		t.Errorf("retries allowed at %v tokens, want refused at half", rt.level())
	}
	rt.onSuccess()
	if !rt.allowRetry() {
		t.Errorf("retries refused at %v tokens", rt.level())
	}
	var off *retryThrottle
	off.onFailure()
	if !off.allowRetry() {
		t.Error("a disabled throttle refused a retry")
	}
}

// Terminal answers and successes never take tokens.
func TestThrottleIgnoresTerminalAnswers(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(2, 0.1))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(422))
	for i := 0; i < 20; i++ {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := h.tr.hosts.get(hostKey(mustURL(t, funderURL))).throttle.level(); got != 2 {
		t.Errorf("level %v after terminal answers, want the full 2", got)
	}
}

// Under contention the lock-free bucket loses no update.
func TestThrottleConcurrentUpdates(t *testing.T) {
	rt := newRetryThrottle(1000, 1)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				rt.onFailure()
				rt.onSuccess()
			}
		}()
	}
	wg.Wait()
	// Every failure from a full bucket is undone by the success after it,
	// unless the bucket was full when the success came: the level stays
	// at the top.
	if rt.level() != 1000 {
		t.Errorf("level %v, want 1000", rt.level())
	}
}
