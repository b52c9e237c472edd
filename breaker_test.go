package grantretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// get makes one GET to funderURL and returns its outcome, whether the call
// returned a response or an *Error.
func (h *harness) get(t *testing.T) Outcome {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		return mustError(t, err).Outcome
	}
	resp.Body.Close()
	return mustOutcome(t, resp)
}

// One call, however many of its attempts fail, never trips the breaker: it
// makes every attempt its budget allows, and the breaker opens only after
// threshold such calls in a row (WithBudget(8, ...), an always-503 host,
// the default threshold of 5). The retry throttle is
// off: by itself it would end a call after 6 attempts.
func TestOneCallCannotTripTheBreaker(t *testing.T) {
	h := newHarness(t, WithBudget(8, time.Hour), WithoutRetryThrottle())
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	for i := 1; i < int(DefaultBreakerThreshold); i++ {
		if o := h.get(t); o.Attempts != 9 || o.Disposition != DeadLetter || o.StopReason != StopRetriesSpent {
			t.Fatalf("call %d: %s (%s) after %d attempts, want dead_letter (retries_exhausted) after 9", i, o.Disposition, o.StopReason, o.Attempts)
		}
	}
	if o := h.get(t); o.Disposition != CircuitOpen || o.Attempts != 1 {
		t.Errorf("call %d: %s after %d attempts, want its first failure to open the breaker", DefaultBreakerThreshold, o.Disposition, o.Attempts)
	}
	if o := h.get(t); o.Disposition != CircuitOpen || o.Attempts != 0 {
		t.Errorf("the call after: %s after %d attempts, want refused", o.Disposition, o.Attempts)
	}
}

// A success between failed calls starts the count again.
func TestSuccessResetsTheFailedCallCount(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Hour), WithBreaker(3, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 503, 200, 503, 503))
	for i := 1; i <= 5; i++ {
		if o := h.get(t); o.Disposition == CircuitOpen {
			t.Fatalf("call %d: circuit_open, but no 3 failed calls came in a row", i)
		}
	}
}

// An open breaker probes soon, then less often: the wait doubles with each
// failed probe up to the cooldown, and a breaker that closes and opens again
// starts from the first wait. Each wait is drawn from [d/2, d]; maxSource
// draws d.
func TestBreakerProbesSoonThenBacksOff(t *testing.T) {
	const probe, cooldown = time.Second, 5 * time.Second
	h := newHarness(t, WithBudget(0, time.Hour), WithBreaker(1, cooldown), WithBreakerProbe(probe),
		WithRandSource(maxSource{}))
	status := 503
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}}, nil
	})
	if o := h.get(t); o.Attempts != 1 {
		t.Fatalf("the opening call made %d attempts", o.Attempts)
	}
	// probe, 2*probe, 4*probe, then the cooldown.
	for _, wait := range []time.Duration{probe, 2 * probe, 4 * probe, cooldown, cooldown} {
		h.clock.advance(wait - time.Millisecond)
		if o := h.get(t); o.Attempts != 0 {
			t.Fatalf("a call %v into a %v wait was sent", wait-time.Millisecond, wait)
		}
		h.clock.advance(time.Millisecond)
		if o := h.get(t); o.Attempts != 1 || o.Status != 503 {
			t.Fatalf("after the %v wait: %s after %d attempts, want the probe, failed", wait, o.Disposition, o.Attempts)
		}
	}
	status = 200
	h.clock.advance(cooldown)
	if o := h.get(t); o.Disposition != Succeeded {
		t.Fatalf("the probe after the funder came back: %s", o.Disposition)
	}
	status = 503
	h.get(t) // opens again
	h.clock.advance(probe)
	if o := h.get(t); o.Attempts != 1 {
		t.Errorf("a reopened breaker waited longer than the first wait")
	}
}

// The waits are drawn from [d/2, d], so processes that opened together do
// not probe in step.
func TestBreakerProbeWaitIsJittered(t *testing.T) {
	const probe = 8 * time.Second
	seen := map[time.Duration]bool{}
	for seed := uint64(0); seed < 20; seed++ {
		clock := newFakeClock()
		hb := newHostBreaker("h", &config{clock: clock, rand: &lockedRand{r: rand.New(rand.NewPCG(seed, 1))}, probe: probe, cooldown: time.Minute, threshold: 1})
		done, _, err := hb.allow()
		if err != nil {
			t.Fatal(err)
		}
		done(errBreakerFailure)
		at := time.Duration(hb.settle() - clock.Now().UnixNano())
		if at < probe/2 || at > probe {
			t.Fatalf("seed %d: first probe after %v, want within [%v, %v]", seed, at, probe/2, probe)
		}
		seen[at] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 breakers drew only %d distinct waits", len(seen))
	}
}

// gatedClock is a fake clock whose Sleep returns when the test says so.
type gatedClock struct {
	*fakeClock
	sleeping chan struct{}
	wake     chan struct{}
}

func (g *gatedClock) Sleep(ctx context.Context, d time.Duration) error {
	g.sleeping <- struct{}{}
	select {
	case <-g.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A retry that goes through as the half-open probe counts, even though its
// call already failed once: a failed probe must open the breaker again,
// or the host would be left half-open with every call a new probe.
func TestRetryThatIsTheProbeCounts(t *testing.T) {
	clock := &gatedClock{fakeClock: newFakeClock(), sleeping: make(chan struct{}), wake: make(chan struct{})}
	h := newHarness(t, WithClock(clock), WithBreaker(2, time.Minute), WithBreakerProbe(time.Second), WithoutRetryThrottle())
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))

	var wg sync.WaitGroup
	var first Outcome
	wg.Add(1)
	go func() { // call A: fails once (the breaker counts 1), then waits
		defer wg.Done()
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		var e *Error
		switch {
		case errors.As(err, &e):
			first = e.Outcome
		case err == nil:
			resp.Body.Close()
			first, _ = OutcomeOf(resp)
		}
	}()
	<-clock.sleeping
	// Call B fails: the second failed call opens the breaker. It never
	// sleeps, since the breaker is open before its wait.
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Disposition != CircuitOpen {
		t.Fatalf("call B: %s, want circuit_open", o.Disposition)
	}
	clock.advance(time.Minute)
	clock.wake <- struct{}{} // call A's retry goes through as the probe, and fails
	wg.Wait()
	if first.Attempts != 2 {
		t.Fatalf("call A made %d attempts, want 2 (its retry the probe)", first.Attempts)
	}
	if o := h.get(t); o.Attempts != 0 || o.Disposition != CircuitOpen {
		t.Errorf("after the failed probe: %s after %d attempts, want refused: the breaker must be open again", o.Disposition, o.Attempts)
	}
}

func TestWithBreakerProbeMustBePositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		h := newHarness(t, WithBreakerProbe(d))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("WithBreakerProbe(%v): %v, want ErrInvalidOption", d, err)
		}
	}
}

// Terminal transport errors (a bad certificate) and a local GetBody failure
// say nothing about the funder: they must not open its breaker.
func TestBreakerIgnoresLocalAndTerminalTransportFailures(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute), WithBreaker(2, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL,
		httpmock.NewErrorResponder(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}))
	for i := 0; i < 5; i++ {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		_, err := h.tr.RoundTrip(req)
		if e := mustError(t, err); e.Disposition != FailedTerminal {
			t.Fatalf("call %d: %+v, want failed_terminal, not circuit_open", i+1, e.Outcome)
		}
	}

	mock := httpmock.NewMockTransport() // no logger and PUT: GetBody is first called by the attempt
	mock.RegisterResponder(http.MethodPut, funderURL, seq(200))
	tr := New(mock, WithClock(newFakeClock()), WithBreaker(1, time.Hour))
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPut, funderURL, strings.NewReader("x"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("spool file gone") }
		_, err := tr.RoundTrip(req)
		if e := mustError(t, err); e.StopReason != StopBodyReadFailure {
			t.Fatalf("GetBody call %d: %+v, want body_read_failed", i+1, e.Outcome)
		}
	}
}

// When one failure both opens the breaker and drains the throttle, the
// breaker is reported: "the funder is down" says more than "retries are
// throttled".
func TestThrottleAndBreakerTrippingTogether(t *testing.T) {
	h := newHarness(t, WithBreaker(1, time.Hour), WithRetryThrottle(2, 0.5), WithBudget(10, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != 1 || o.StopReason != StopCircuitOpen || o.Disposition != CircuitOpen {
		t.Errorf("outcome %+v, want circuit_open after 1 attempt", o)
	}
}
