package grantretry

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// noRefill keeps the throttle to gRFC A6's rules, for the tests of them: a
// refill so slow that none of these tests' waits adds a thousandth.
func noRefill() Option { return WithThrottleRefill(1000 * time.Hour) }

// Each transient failure takes a token; once the bucket is at half or
// below, the next retry is refused at once, without a wait.
func TestThrottleRefusesRetriesWhenHalfDrained(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(4, 0.5), noRefill(), WithBudget(10, time.Hour))
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
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(4, 0.5), noRefill(), WithBudget(10, time.Hour))
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
	rt := newRetryThrottle(10, 0.1, DefaultThrottleRefill, newFakeClock()) // time stands still
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
	rt := newRetryThrottle(1000, 1, DefaultThrottleRefill, newFakeClock())
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

// drainBucket empties rt: enough failures at the clock's present time.
func drainBucket(rt *retryThrottle) {
	for range int(rt.max/milli) + 2 {
		rt.onFailure()
	}
}

// retryAllowedAfterFailure reports whether a call that fails now would get
// its retry, as the Transport asks: the failure's token is taken first. It
// reads the bucket without moving it.
func retryAllowedAfterFailure(rt *retryThrottle) bool {
	return rt.levelAt(rt.state.Load(), rt.stamp(rt.clock.Now()))-milli > rt.max/2
}

// With no success at all, a drained bucket allows retries again one refill
// period later, and not a millisecond sooner: a call that fails then still
// gets its retry. It is back above half a little before that.
func TestThrottleRefillsWithTime(t *testing.T) {
	for _, tc := range []struct {
		maxTokens, ratio float64
		refill           time.Duration
	}{
		{DefaultThrottleMaxTokens, DefaultThrottleTokenRatio, DefaultThrottleRefill},
		{4, 0.5, time.Second},
		{2.5, 0.1, 10 * time.Second},
		{1000, 1, time.Hour},
		{10, 0.1, time.Millisecond},
		{10, 0.1, 1000 * 24 * time.Hour},
	} {
		clk := newFakeClock()
		rt := newRetryThrottle(tc.maxTokens, tc.ratio, tc.refill, clk)
		clk.advance(7 * time.Minute) // the bucket's age does not matter
		drainBucket(rt)
		if rt.level() != 0 || rt.allowRetry() {
			t.Fatalf("%+v: level %v after draining, want 0 and refused", tc, rt.level())
		}
		half := tc.maxTokens / 2
		clk.advance(tc.refill - time.Millisecond)
		if retryAllowedAfterFailure(rt) {
			t.Errorf("%+v: a call failing 1ms before the refill period gets a retry (level %v)", tc, rt.level())
		}
		if tc.refill > time.Millisecond && rt.level() <= half {
			t.Errorf("%+v: level %v 1ms before the refill period, want above half already", tc, rt.level())
		}
		clk.advance(time.Millisecond)
		if got, want := rt.level(), half+1.001; !closeTo(got, want) {
			t.Errorf("%+v: level %v after one refill period, want %v", tc, got, want)
		}
		// As the Transport does it: the failure, then the question.
		rt.onFailure()
		if !rt.allowRetry() {
			t.Errorf("%+v: a call failing one refill period after the drain is refused its retry (level %v)", tc, rt.level())
		}
	}
}

func closeTo(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// The refill and successes together never take the bucket past its size,
// however long the wait, and a clock that goes back refills nothing.
func TestThrottleRefillNeverExceedsMax(t *testing.T) {
	clk := newFakeClock()
	rt := newRetryThrottle(10, 0.1, DefaultThrottleRefill, clk)
	for range 3 {
		rt.onFailure()
	}
	for _, d := range []time.Duration{10 * time.Second, 20 * time.Second, time.Hour, 200 * 365 * 24 * time.Hour, 200 * 365 * 24 * time.Hour} {
		clk.advance(d)
		if got := rt.level(); got > 10 {
			t.Fatalf("level %v after %v more, want at most 10", got, d)
		}
	}
	if got := rt.level(); got != 10 || rt.stamp(clk.Now()) != maxStamp {
		t.Errorf("level %v after centuries, stamp %d; want the full 10, and the stamp at its ceiling", got, rt.stamp(clk.Now()))
	}

	// Successes on top of a pending refill: still at most full.
	clk = newFakeClock()
	rt = newRetryThrottle(10, 0.1, DefaultThrottleRefill, clk)
	drainBucket(rt)
	clk.advance(50 * time.Second) // refills 5.0008
	for range 100 {
		rt.onSuccess() // 10 tokens' worth
	}
	if got := rt.level(); got != 10 {
		t.Errorf("level %v after a refill and 100 successes, want 10", got)
	}
	clk.advance(time.Minute)
	if got := rt.level(); got != 10 {
		t.Errorf("level %v a minute later, want 10", got)
	}

	// The clock goes back: nothing is added, and no stretch of time is
	// counted twice once it comes forward again.
	clk = newFakeClock()
	rt = newRetryThrottle(10, 0.1, DefaultThrottleRefill, clk)
	drainBucket(rt)
	clk.advance(30 * time.Second)
	rt.onFailure() // 3.0005 - 1
	want := rt.level()
	clk.advance(-20 * time.Second)
	rt.onFailure() // takes a token, refills nothing
	if got := rt.level(); !closeTo(got, want-1) {
		t.Errorf("level %v after a failure with the clock 20s back, want %v", got, want-1)
	}
	clk.advance(20 * time.Second)
	if got := rt.level(); !closeTo(got, want-1) {
		t.Errorf("level %v with the clock back where it was, want %v", got, want-1)
	}
}

// A storm drains the bucket far faster than time refills it: at 20 or at 1
// failure a second, retries stay refused from A6's burst on, and the
// bucket never holds a whole token.
func TestThrottleStormKeepsBucketDrained(t *testing.T) {
	for _, tc := range []struct {
		every, storm time.Duration
	}{
		{50 * time.Millisecond, 10 * time.Minute}, // 20 a second
		{time.Second, time.Hour},
	} {
		clk := newFakeClock()
		rt := newRetryThrottle(DefaultThrottleMaxTokens, DefaultThrottleTokenRatio, DefaultThrottleRefill, clk)
		allowed, top := 0, 0.0
		for n := 0; time.Duration(n)*tc.every < tc.storm; n++ {
			clk.advance(tc.every)
			rt.onFailure()
			if rt.allowRetry() {
				allowed++
			}
			if n >= 10 {
				top = max(top, rt.level())
			}
		}
		// A6 alone allows 4 (9, 8, 7 and 6 tokens left); the refill during
		// the first failures may add a fifth.
		if allowed > 5 {
			t.Errorf("one failure per %v: %d retries allowed, want at most 5", tc.every, allowed)
		}
		if top >= 1 {
			t.Errorf("one failure per %v: the bucket reached %v tokens during the storm, want under 1", tc.every, top)
		}
	}
}

// While a funder stays down, the refill funds at most maxTokens/2 + 1
// retries per refill period beyond A6's burst: a pipeline calling every
// 45 s that retries whenever allowed stays within that.
func TestThrottleRefillBoundsRetriesInALongOutage(t *testing.T) {
	clk := newFakeClock()
	rt := newRetryThrottle(DefaultThrottleMaxTokens, DefaultThrottleTokenRatio, DefaultThrottleRefill, clk)
	const outage = time.Hour
	retries := 0
	for at := time.Duration(0); at < outage; at += 45 * time.Second {
		clk.advance(45 * time.Second)
		rt.onFailure()
		for n := 0; n < DefaultMaxRetries && rt.allowRetry(); n++ {
			retries++
			rt.onFailure()
		}
	}
	bound := 4 + int(outage/DefaultThrottleRefill)*6 + 1
	if retries > bound || retries == 0 {
		t.Errorf("%d retries in an outage of %v, want some and at most %d", retries, outage, bound)
	}
}

// Concurrent failures at one instant lose no token, and concurrent use
// with the clock moving keeps the bucket in bounds (run with -race).
func TestThrottleConcurrentUseWithRefill(t *testing.T) {
	clk := newFakeClock()
	rt := newRetryThrottle(1000, 1, DefaultThrottleRefill, clk)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				rt.onFailure()
			}
		}()
	}
	wg.Wait()
	if got := rt.level(); got != 200 {
		t.Fatalf("level %v after 800 failures at one instant, want 200", got)
	}

	var stop atomic.Bool
	var ticker sync.WaitGroup
	ticker.Add(1)
	go func() {
		defer ticker.Done()
		for !stop.Load() {
			clk.advance(time.Millisecond)
		}
	}()
	var bad atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				switch (g + i) % 3 {
				case 0:
					rt.onFailure()
				case 1:
					rt.onSuccess()
				default:
					rt.allowRetry()
				}
				if l := rt.level(); l < 0 || l > 1000 {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	ticker.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d readings out of [0, 1000]", bad.Load())
	}
	clk.advance(2 * DefaultThrottleRefill)
	if got := rt.level(); got != 1000 {
		t.Errorf("level %v two refill periods later, want the full 1000", got)
	}
}

// Through the Transport, on its Clock: with the bucket drained and no
// success since, a call that fails 1ms short of the refill period is
// refused its retry, and one that fails at the refill period gets it.
func TestThrottleRefillReturnsRetriesThroughTransport(t *testing.T) {
	h := newHarness(t, WithoutBreaker())
	h.clock.freeze() // waits take no time: only advance moves the clock
	const a, b = "https://a.test/x", "https://b.test/x"
	h.mock.RegisterResponder(http.MethodGet, a, seq(503))
	statuses := make([]int, 11, 12) // 10 to drain, then the call that fails once
	for i := range statuses {
		statuses[i] = 503
	}
	h.mock.RegisterResponder(http.MethodGet, b, seq(append(statuses, 200)...))
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
	for _, url := range []string{a, b} {
		// 5 attempts leave 5 tokens; 5 calls refused at once leave none.
		if o := get(url); o.Attempts != 5 || o.StopReason != StopRetriesSpent {
			t.Fatalf("%s: first call %+v, want 5 attempts and retries_exhausted", url, o)
		}
		for range 5 {
			if o := get(url); o.Attempts != 1 || o.StopReason != StopThrottled {
				t.Fatalf("%s: call on a draining bucket %+v, want 1 attempt, retry_throttled", url, o)
			}
		}
	}
	h.clock.advance(DefaultThrottleRefill - time.Millisecond)
	if o := get(a); o.Attempts != 1 || o.StopReason != StopThrottled {
		t.Errorf("1ms before the refill period: %+v, want the retry refused", o)
	}
	h.clock.advance(time.Millisecond)
	if o := get(b); o.Attempts != 2 || o.Disposition != Succeeded {
		t.Errorf("at the refill period: %+v, want a retry that succeeds", o)
	}
}

func TestThrottleRefillOption(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, time.Millisecond - 1} {
		h := newHarness(t, WithThrottleRefill(d))
		h.mock.RegisterNoResponder(seq(200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("WithThrottleRefill(%v): err %v, want ErrInvalidOption", d, err)
		}
	}
	h := newHarness(t, WithThrottleRefill(time.Millisecond))
	if rt := h.tr.hosts.get("https://x.test:443").throttle; rt == nil || rt.period != 1 {
		t.Errorf("WithThrottleRefill(1ms): throttle %+v, want a period of 1ms", rt)
	}
	// The refill sets the throttle's pace; it does not turn it back on.
	h = newHarness(t, WithoutRetryThrottle(), WithThrottleRefill(time.Second))
	if rt := h.tr.hosts.get("https://x.test:443").throttle; rt != nil {
		t.Error("WithThrottleRefill turned on a throttle WithoutRetryThrottle had turned off")
	}
}

// Cancellations leave the retry throttle as it is (documented).
func TestThrottleIgnoresCancellations(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(2, 0.1))
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		h.mock.RegisterResponder(http.MethodGet, funderURL, func(*http.Request) (*http.Response, error) {
			cancel()
			return nil, context.Canceled
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, funderURL, nil)
		_, err := h.tr.RoundTrip(req)
		if e := mustError(t, err); e.Disposition != Canceled {
			t.Fatalf("call %d: %+v, want canceled", i+1, e.Outcome)
		}
	}
	if got := h.tr.hosts.get(hostKey(mustURL(t, funderURL))).throttle.level(); got != 2 {
		t.Errorf("level %v after cancelled calls, want the full 2", got)
	}
}

func TestRetryThrottleOptionEdges(t *testing.T) {
	for _, c := range [][2]float64{{0, 0.1}, {1001, 1}, {10, 0.0005}, {1, 2}} {
		h := newHarness(t, WithRetryThrottle(c[0], c[1]))
		h.mock.RegisterNoResponder(seq(200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("WithRetryThrottle(%v, %v): err %v, want ErrInvalidOption", c[0], c[1], err)
		}
	}
	// tokenRatio is kept to the thousandth: 1.001*1000 is 1000.999... in
	// floating point, and must not be truncated to 1.
	rt := newRetryThrottle(10, 1.001, DefaultThrottleRefill, newFakeClock())
	rt.onFailure()
	rt.onFailure()
	rt.onSuccess()
	if rt.level() != 9.001 {
		t.Errorf("level %v, want 9.001", rt.level())
	}
}
