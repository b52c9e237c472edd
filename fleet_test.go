package grantretry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memFleet is an in-memory Fleet, shared by the Transports of a test as a
// database is by a fleet's processes.
type memFleet struct {
	mu    sync.Mutex
	hosts map[string]*memHost
	// threshold opens the fleet's breaker; tokens start at maxTokens.
	threshold, maxTokens int
	// fail makes every I/O method fail; block makes it wait for its
	// context.
	fail, block bool
}

type memHost struct {
	f         *memFleet
	state     atomic.Int32
	successes atomic.Int64
	failures  int // consecutive failed calls
	tokens    int
	probing   bool
	calls     map[string]int // I/O method -> times called
	policy    FleetPolicy    // as Host got it
}

func newMemFleet() *memFleet {
	return &memFleet{hosts: map[string]*memHost{}, threshold: 5, maxTokens: 10}
}

func (f *memFleet) Host(key string, p FleetPolicy) FleetHost {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.hosts[key]; ok {
		return h
	}
	h := &memHost{f: f, tokens: f.maxTokens, calls: map[string]int{}, policy: p}
	h.state.Store(int32(FleetClosed))
	f.hosts[key] = h
	return h
}

func (f *memFleet) host(key string) *memHost { return f.Host(key, FleetPolicy{}).(*memHost) }

func (h *memHost) State() FleetState { return FleetState(h.state.Load()) }
func (h *memHost) Succeeded()        { h.successes.Add(1) }

// io is the common start of every I/O method.
func (h *memHost) io(ctx context.Context, name string) error {
	h.f.mu.Lock()
	h.calls[name]++
	fail, block := h.f.fail, h.f.block
	h.f.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	if fail {
		return errors.New("fleet store away")
	}
	return nil
}

// Failed counts its report as "Failed", and as "CallFailed" and
// "Withdraw" for what it carries.
func (h *memHost) Failed(ctx context.Context, f FleetFailure) (bool, error) {
	if !f.CallFailed && !f.Retryable {
		panic("Failed with nothing to report")
	}
	h.f.mu.Lock()
	if f.CallFailed {
		h.calls["CallFailed"]++
	}
	if f.Retryable {
		h.calls["Withdraw"]++
	}
	h.f.mu.Unlock()
	if err := h.io(ctx, "Failed"); err != nil {
		return false, err
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if f.CallFailed {
		if h.failures++; h.failures >= h.f.threshold {
			h.state.Store(int32(FleetOpen))
		}
	}
	if !f.Retryable {
		return false, nil
	}
	h.tokens = max(h.tokens-1, 0)
	return h.tokens*2 > h.f.maxTokens, nil
}

func (h *memHost) TryProbe(ctx context.Context) (bool, error) {
	if err := h.io(ctx, "TryProbe"); err != nil {
		return false, err
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if h.probing {
		return false, nil
	}
	h.probing = true
	return true, nil
}

func (h *memHost) ProbeDone(ctx context.Context, ok bool) error {
	if err := h.io(ctx, "ProbeDone"); err != nil {
		return err
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.probing = false
	if ok {
		h.failures = 0
		h.state.Store(int32(FleetClosed))
	}
	return nil
}

func (h *memHost) count(name string) int {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.calls[name]
}

const fleetURL = "https://funder.test/v1/applications"
const fleetKey = "https://funder.test:443"

func callFleet(t *testing.T, h *harness) (Outcome, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fleetURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatal(err)
		}
		return e.Outcome, err
	}
	resp.Body.Close()
	out, _ := OutcomeOf(resp)
	return out, nil
}

func TestFleetSuccessPathDoesNoFleetIO(t *testing.T) {
	f := newMemFleet()
	h := newHarness(t, WithFleet(f))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	for range 3 {
		callFleet(t, h)
	}
	fh := f.host(fleetKey)
	if fh.successes.Load() != 3 {
		t.Fatalf("%d successes counted, want 3", fh.successes.Load())
	}
	for _, m := range []string{"Failed", "TryProbe", "ProbeDone"} {
		if n := fh.count(m); n != 0 {
			t.Errorf("%s called %d times on the success path", m, n)
		}
	}
}

func TestFleetCountsACallsFailuresOnce(t *testing.T) {
	f := newMemFleet()
	f.threshold, f.maxTokens = 100, 100
	h := newHarness(t, WithFleet(f))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	out, _ := callFleet(t, h)
	if out.Attempts != DefaultMaxRetries+1 {
		t.Fatalf("%d attempts", out.Attempts)
	}
	fh := f.host(fleetKey)
	if n := fh.count("CallFailed"); n != 1 {
		t.Fatalf("CallFailed %d times for one call, want 1", n)
	}
	if n := fh.count("Withdraw"); n != out.Attempts {
		t.Fatalf("Withdraw %d times, want one per failed attempt (%d)", n, out.Attempts)
	}
	if n := fh.count("Failed"); n != out.Attempts {
		t.Fatalf("%d reports, want one round trip per failed attempt (%d)", n, out.Attempts)
	}
}

func TestFleetGetsEachHostsPolicy(t *testing.T) {
	f := newMemFleet()
	h := newHarness(t, WithFleet(f), WithBreaker(3, 20*time.Second), WithBreakerProbe(time.Second),
		WithRetryThrottle(20, 0.5), WithThrottleRefill(time.Minute),
		ForHost("other.test", WithBreaker(7, 5*time.Second), WithoutRetryThrottle()),
		ForHost("none.test", WithoutBreaker(), WithoutRetryThrottle()))
	for _, u := range []string{fleetURL, "https://other.test/x", "https://none.test/x"} {
		h.mock.RegisterResponder(http.MethodGet, u, seq(200))
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := map[string]FleetPolicy{
		fleetKey:                 {Threshold: 3, Probe: time.Second, Cooldown: 20 * time.Second, MaxTokens: 20, TokenRatio: 0.5, Refill: time.Minute},
		"https://other.test:443": {Threshold: 7, Probe: time.Second, Cooldown: 5 * time.Second},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, p := range want {
		if h, ok := f.hosts[key]; !ok || h.policy != p {
			t.Errorf("%s: policy %+v, want %+v", key, h, p)
		}
	}
	if _, ok := f.hosts["https://none.test:443"]; ok {
		t.Error("a host with neither breaker nor throttle was given to the fleet")
	}
}

func TestFleetLeavesOutWhatAHostTurnedOff(t *testing.T) {
	f := newMemFleet()
	f.threshold = 1
	h := newHarness(t, WithFleet(f), WithoutBreaker(), WithBudget(1, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	callFleet(t, h)
	fh := f.host(fleetKey)
	if n := fh.count("CallFailed"); n != 0 {
		t.Fatalf("without a breaker, %d failed calls were reported", n)
	}
	if fh.count("Withdraw") != 2 {
		t.Fatalf("the throttle is on: want 2 withdrawals, got %d", fh.count("Withdraw"))
	}
	fh.state.Store(int32(FleetOpen)) // other processes' breakers opened it
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	if out, err := callFleet(t, h); err != nil || out.Disposition != Succeeded {
		t.Fatalf("a host without a breaker refused by the fleet's: %+v, %v", out, err)
	}

	g := newMemFleet()
	g.maxTokens = 2 // any withdrawal would refuse the retry
	h = newHarness(t, WithFleet(g), WithoutRetryThrottle(), WithBudget(2, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	out, _ := callFleet(t, h)
	if gh := g.host(fleetKey); gh.count("Withdraw") != 0 || gh.count("CallFailed") != 1 || out.Attempts != 3 {
		t.Fatalf("without a throttle: %d withdrawals, %d failed calls, %d attempts; want 0, 1, 3",
			gh.count("Withdraw"), gh.count("CallFailed"), out.Attempts)
	}
}

func TestFleetOpenRefusesLocallyAndLetsOneProbeThrough(t *testing.T) {
	f := newMemFleet()
	a := newHarness(t, WithFleet(f))
	b := newHarness(t, WithFleet(f))
	a.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	b.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	fh := f.host(fleetKey)
	fh.state.Store(int32(FleetOpen))
	fh.probing = true // another process holds the probe
	for _, h := range []*harness{a, b} {
		out, err := callFleet(t, h)
		if !errors.Is(err, ErrCircuitOpen) || out.Attempts != 0 {
			t.Fatalf("while the fleet is open: %+v, %v", out, err)
		}
	}
	f.mu.Lock()
	fh.probing = false // its lease ended
	f.mu.Unlock()
	out, err := callFleet(t, a)
	if err != nil || out.Disposition != Succeeded {
		t.Fatalf("the probe: %+v, %v", out, err)
	}
	if fh.State() != FleetClosed {
		t.Fatal("a successful probe did not close the fleet's breaker")
	}
	if out, err := callFleet(t, b); err != nil || out.Attempts != 1 {
		t.Fatalf("the other process after the probe: %+v, %v", out, err)
	}
}

func TestFleetOpensAfterThresholdCallsAcrossProcesses(t *testing.T) {
	f := newMemFleet()
	var hs []*harness
	for range 5 {
		h := newHarness(t, WithFleet(f), WithBudget(0, time.Minute))
		h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
		hs = append(hs, h)
	}
	for _, h := range hs { // one failed call in each of 5 processes
		callFleet(t, h)
	}
	if f.host(fleetKey).State() != FleetOpen {
		t.Fatal("5 failed calls across the fleet did not open its breaker")
	}
	h := newHarness(t, WithFleet(f))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	f.host(fleetKey).probing = true
	if out, err := callFleet(t, h); !errors.Is(err, ErrCircuitOpen) || out.Attempts != 0 {
		t.Fatalf("a process that never failed: %+v, %v", out, err)
	}
}

func TestFleetBudgetRefusalStopsRetries(t *testing.T) {
	f := newMemFleet()
	f.threshold = 100
	f.maxTokens = 4 // the second failure leaves 2 of 4: no more retries
	h := newHarness(t, WithFleet(f))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	out, _ := callFleet(t, h)
	if out.StopReason != StopThrottled || out.Attempts != 2 {
		t.Fatalf("%+v, want retry_throttled after 2 attempts", out)
	}
}

func TestFleetAwayFallsBackToLocalState(t *testing.T) {
	f := newMemFleet()
	f.fail = true
	h := newHarness(t, WithFleet(f))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	out, _ := callFleet(t, h)
	if out.Attempts != DefaultMaxRetries+1 {
		t.Fatalf("%+v: want the local policy's %d attempts", out, DefaultMaxRetries+1)
	}
	// The fleet's open breaker, heard before its store went away,
	// carries over into the local breaker (fleetlost_test.go).
	f.host(fleetKey).state.Store(int32(FleetOpen))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	if out, err := callFleet(t, h); !errors.Is(err, ErrCircuitOpen) || out.Attempts != 0 {
		t.Fatalf("fleet open but away: the local breaker, opened by what the fleet said, refuses: %+v, %v", out, err)
	}
}

func TestFleetIOIsBoundedByTheLimit(t *testing.T) {
	f := newMemFleet()
	f.threshold = 100
	f.block = true // every I/O waits for its context
	h := newHarness(t, WithFleet(f), WithBudget(2, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	start := time.Now()
	out, _ := callFleet(t, h)
	// 3 failed attempts, each one report cut at the limit, and the waits
	// are the fake clock's.
	if el := time.Since(start); el > 3*DefaultFleetLimit+200*time.Millisecond {
		t.Fatalf("the call took %v with a frozen fleet", el)
	}
	if out.Attempts != 3 {
		t.Fatalf("%+v", out)
	}
}

func TestFleetClosedOverridesAnOpenLocalBreaker(t *testing.T) {
	f := newMemFleet()
	f.threshold = 100
	h := newHarness(t, WithFleet(f), WithBudget(0, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503, 503, 503, 503, 503, 200))
	for range 5 {
		callFleet(t, h)
	}
	if !h.tr.hosts.get(fleetKey).breaker.isOpen() {
		t.Fatal("the local breaker did not open")
	}
	if out, err := callFleet(t, h); err != nil || out.Disposition != Succeeded {
		t.Fatalf("the fleet says closed: %+v, %v", out, err)
	}
}

func TestWithFleetRefusesNil(t *testing.T) {
	var f *memFleet
	for _, opt := range []Option{WithFleet(nil), WithFleet(f)} {
		h := newHarness(t, opt)
		if _, err := callFleet(t, h); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "WithFleet") {
			t.Fatalf("%v", err)
		}
	}
}
