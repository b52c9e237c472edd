package grantretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/zap"
)

// callWith makes one GET to url through h under ctx and returns its
// outcome.
func (h *harness) callWith(t *testing.T, ctx context.Context, url string) (Outcome, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		return mustError(t, err).Outcome, err
	}
	resp.Body.Close()
	return mustOutcome(t, resp), nil
}

// A status poll makes one attempt while the Transport's other calls retry.
func TestCallOptionsBudgetIsTheCallsOwn(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(503, "busy"))
	poll := WithCallOptions(context.Background(), WithBudget(0, time.Minute))
	if o, _ := h.callWith(t, poll, "https://funder.test/status"); o.Attempts != 1 {
		t.Errorf("the poll made %d attempts, want 1", o.Attempts)
	}
	if o, _ := h.callWith(t, context.Background(), "https://funder.test/status"); o.Attempts != DefaultMaxRetries+1 {
		t.Errorf("a call without options made %d attempts, want the default %d", o.Attempts, DefaultMaxRetries+1)
	}
	if got := h.mock.GetTotalCallCount(); got != DefaultMaxRetries+2 {
		t.Errorf("the funder got %d requests, want %d", got, DefaultMaxRetries+2)
	}
}

// A call's options take precedence over ForHost's, which take precedence
// over the Transport's; and they shape the waits and the deadline too.
func TestCallOptionsOverForHostOverTransport(t *testing.T) {
	h := newHarness(t, WithoutRetryThrottle(), WithBudget(1, time.Hour), ForHost("host.test", WithBudget(2, time.Hour)),
		WithRandSource(maxSource{}), WithBackoff(time.Second, time.Second))
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(503, "busy"))
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		url      string
		attempts int
	}{
		{"transport", context.Background(), "https://other.test/x", 2},
		{"forhost", context.Background(), "https://host.test/x", 3},
		{"call over transport", WithCallOptions(context.Background(), WithBudget(3, time.Hour)), "https://other.test/x", 4},
		{"call over forhost", WithCallOptions(context.Background(), WithBudget(0, time.Hour)), "https://host.test/x", 1},
		{"later call options win", WithCallOptions(WithCallOptions(context.Background(), WithBudget(0, time.Hour)), WithBudget(2, time.Hour)), "https://other.test/x", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if o, _ := h.callWith(t, tc.ctx, tc.url); o.Attempts != tc.attempts {
				t.Errorf("%d attempts, want %d", o.Attempts, tc.attempts)
			}
		})
	}

	h = newHarness(t, WithRandSource(maxSource{}))
	clock := h.clock
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(503, "busy"))
	ctx := WithCallOptions(context.Background(), WithBackoff(10*time.Millisecond, 20*time.Millisecond), WithBudget(10, 55*time.Millisecond))
	o, _ := h.callWith(t, ctx, "https://funder.test/x")
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond}
	if got := clock.waits(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("waits %v, want the call's backoff %v", got, want)
	}
	if o.StopReason != StopDeadline || o.Attempts != 4 {
		t.Errorf("stop %s after %d attempts, want the call's 55ms deadline", o.StopReason, o.Attempts)
	}
}

// An option that is not the call's to set, or an invalid one, fails the
// call before anything is sent, naming the option.
func TestCallOptionsRefusedBeforeSending(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"logger", WithLogger(zap.NewNop()), "option 1 (WithLogger) is not part of the retry policy"},
		{"clock", WithClock(newFakeClock()), "option 1 (WithClock) is not part of the retry policy"},
		{"forhost", ForHost("funder.test", WithBudget(0, time.Minute)), "option 1 (ForHost) is not part of the retry policy"},
		{"breaker", WithBreaker(3, time.Minute), "option 1 (WithBreaker) sets or turns off the host's circuit breaker or retry throttle"},
		{"probe", WithBreakerProbe(time.Second), "option 1 (WithBreakerProbe) sets or turns off the host's"},
		{"throttle", WithRetryThrottle(10, 1), "option 1 (WithRetryThrottle) sets or turns off the host's"},
		{"refill", WithThrottleRefill(time.Minute), "option 1 (WithThrottleRefill) sets or turns off the host's"},
		{"without breaker", WithoutBreaker(), "option 1 (WithoutBreaker) sets or turns off the host's"},
		{"without throttle", WithoutRetryThrottle(), "option 1 (WithoutRetryThrottle) sets or turns off the host's"},
		{"invalid budget", WithBudget(-1, time.Minute), "WithCallOptions: WithBudget(-1, 1m0s): want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			letters := &memLetters{}
			h := newHarness(t, WithDeadLetter(letters))
			h.mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
			o, err := h.callWith(t, WithCallOptions(context.Background(), tc.opt), "https://funder.test/x")
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("err = %v, want ErrInvalidOption", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "grantretry: ") || !strings.Contains(msg, tc.want) {
				t.Errorf("err = %q, want it to say %q", msg, tc.want)
			}
			if n := h.mock.GetTotalCallCount(); n != 0 || o.Attempts != 0 {
				t.Errorf("%d requests sent, %d attempts: want none", n, o.Attempts)
			}
			if o.Disposition != DeadLetter || o.StopReason != StopInvalidOption {
				t.Errorf("%s (%s), want dead_letter (invalid_option)", o.Disposition, o.StopReason)
			}
			letters.only(t)
			if h.tr.Err() != nil {
				t.Errorf("the Transport itself is invalid: %v", h.tr.Err())
			}
		})
	}
}

// A refused option names its place among several, and every refusal is
// in the one error.
func TestCallOptionsNameEachRefusal(t *testing.T) {
	h := newHarness(t)
	ctx := WithCallOptions(context.Background(), WithBudget(0, time.Minute), nil, WithReplayLimit(1), WithoutBreaker(), WithLogger(zap.NewNop()))
	_, err := h.callWith(t, ctx, "https://funder.test/x")
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("err = %v, want ErrInvalidOption", err)
	}
	for _, want := range []string{"option 3 (WithReplayLimit)", "option 4 (WithoutBreaker)", "option 5 (WithLogger)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to name %s", err, want)
		}
	}
	if h.mock.GetTotalCallCount() != 0 {
		t.Error("a request was sent")
	}
}

// Two calls at once with different options keep their own.
func TestCallOptionsDoNotLeakBetweenConcurrentCalls(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithoutRetryThrottle())
	h.clock.freeze()
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(503, "busy"))
	budgets := []int{0, 3}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for _, n := range budgets {
		ctx := WithCallOptions(context.Background(), WithBudget(n, time.Hour))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://funder.test/x", nil)
				resp, err := h.tr.RoundTrip(req)
				var o Outcome
				if err != nil {
					var e *Error
					if !errors.As(err, &e) {
						errs <- err.Error()
						return
					}
					o = e.Outcome
				} else {
					resp.Body.Close()
					o, _ = OutcomeOf(resp)
				}
				if o.Attempts != n+1 {
					errs <- fmt.Sprintf("a call with WithBudget(%d) made %d attempts", n, o.Attempts)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A nil context is context.Background, and no options leave a context as
// it was: the Transport's policy.
func TestCallOptionsNilContextAndNoOptions(t *testing.T) {
	ctx := context.WithValue(context.Background(), slogCtxKey{}, 1)
	if got := WithCallOptions(ctx); got != ctx {
		t.Error("WithCallOptions with no options made a new context")
	}
	if got := WithCallOptions(ctx, nil, nil); got != ctx {
		t.Error("WithCallOptions with nil options made a new context")
	}
	//lint:ignore SA1012 a nil context is what is tested
	nilCtx := WithCallOptions(nil, WithBudget(0, time.Minute))
	if nilCtx == nil {
		t.Fatal("WithCallOptions(nil, ...) returned nil")
	}
	h := newHarness(t)
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(503, "busy"))
	if o, _ := h.callWith(t, nilCtx, "https://funder.test/x"); o.Attempts != 1 {
		t.Errorf("under WithCallOptions(nil, WithBudget(0, ...)): %d attempts, want 1", o.Attempts)
	}
	//lint:ignore SA1012 a nil context is what is tested
	if got := WithCallOptions(nil); got != context.Background() {
		t.Errorf("WithCallOptions(nil) = %v, want context.Background()", got)
	}
}

// No call can leave its host's circuit breaker or retry throttle: they
// hold back every call to a host that is down, and a retry storm must not
// be one context away. A context that asks for it fails each call before
// anything is sent, whether the host's own breaker is open or the fleet's.
func TestCallOptionsCannotLeaveTheHostsBreakerOrThrottle(t *testing.T) {
	storm := []Option{WithoutBreaker(), WithoutRetryThrottle(), WithBudget(50, time.Hour), WithBackoff(time.Millisecond, time.Millisecond)}
	for _, tc := range []struct {
		name string
		opts []Option
		want []string
	}{
		{"without breaker", []Option{WithoutBreaker()}, []string{"option 1 (WithoutBreaker) sets or turns off the host's circuit breaker or retry throttle"}},
		{"without throttle", []Option{WithoutRetryThrottle()}, []string{"option 1 (WithoutRetryThrottle) sets or turns off the host's circuit breaker or retry throttle"}},
		{"storm", storm, []string{"option 1 (WithoutBreaker)", "option 2 (WithoutRetryThrottle)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, WithBreaker(1, time.Hour))
			h.clock.freeze()
			h.mock.RegisterNoResponder(httpmock.NewStringResponder(503, "busy"))
			url := "https://funder.test/x"
			h.callWith(t, context.Background(), url)
			if o, _ := h.callWith(t, context.Background(), url); o.Disposition != CircuitOpen {
				t.Fatalf("the host's breaker did not open: %s", o.Disposition)
			}
			before := h.mock.GetTotalCallCount()
			ctx := WithCallOptions(context.Background(), tc.opts...)
			for range 3 {
				o, err := h.callWith(t, ctx, url)
				if !errors.Is(err, ErrInvalidOption) || o.StopReason != StopInvalidOption {
					t.Fatalf("%s (%s), err %v: want the call refused as an invalid option", o.Disposition, o.StopReason, err)
				}
				for _, want := range append(tc.want, "every call to the host shares", "set it with New or ForHost") {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("err = %q, want it to say %q", err, want)
					}
				}
			}
			if sent := h.mock.GetTotalCallCount() - before; sent != 0 {
				t.Errorf("with the host's breaker open, a call's context sent %d requests to it", sent)
			}
		})
	}

	t.Run("fleet open", func(t *testing.T) {
		f := newMemFleet()
		h := newHarness(t, WithFleet(f))
		h.mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
		fh := f.host(fleetKey)
		fh.state.Store(int32(FleetOpen))
		fh.probing = true // another process holds the probe
		o, err := h.callWith(t, WithCallOptions(context.Background(), WithoutBreaker()), fleetURL)
		if !errors.Is(err, ErrInvalidOption) || o.Attempts != 0 {
			t.Errorf("%s after %d attempts, err %v: want the call refused before anything is sent", o.Disposition, o.Attempts, err)
		}
		if n := h.mock.GetTotalCallCount(); n != 0 {
			t.Errorf("with the fleet's breaker open, a call's context sent %d requests", n)
		}
	})
}
