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

// awayFleet is a Fleet whose store can go away: then State says
// FleetUnknown and every I/O method fails, as the fleet module's
// Coordinator does when its database stops answering. Its breaker is
// open or closed as the test sets it, and refuses every probe.
type awayFleet struct {
	host *awayHost
}

type awayHost struct {
	state atomic.Int32
	away  atomic.Bool
	// stale keeps State at its last value while the store is away: the
	// moment before the Coordinator notices, when TryProbe fails.
	stale atomic.Bool
	// quiet is how many TryProbe calls answer no, with no error, without
	// asking the store, away or not: as the Coordinator answers a call
	// while another call's question is in flight.
	quiet atomic.Int32
	// grant makes TryProbe give this process the fleet's probe.
	grant atomic.Bool

	mu    sync.Mutex
	calls map[string]int
}

func newAwayFleet(st FleetState) *awayFleet {
	h := &awayHost{calls: map[string]int{}}
	h.state.Store(int32(st))
	return &awayFleet{host: h}
}

func (f *awayFleet) Host(string, FleetPolicy) FleetHost { return f.host }

// goAway makes the store unreachable, comeBack reachable again.
func (h *awayHost) goAway()   { h.away.Store(true) }
func (h *awayHost) comeBack() { h.away.Store(false) }

func (h *awayHost) State() FleetState {
	if h.away.Load() && !h.stale.Load() {
		return FleetUnknown
	}
	return FleetState(h.state.Load())
}

func (h *awayHost) Succeeded() {}

var errStoreAway = errors.New("fleet store away")

func (h *awayHost) io(name string) error {
	h.mu.Lock()
	h.calls[name]++
	h.mu.Unlock()
	if h.away.Load() {
		return errStoreAway
	}
	return nil
}

func (h *awayHost) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[name]
}

func (h *awayHost) Failed(context.Context, FleetFailure) (bool, error) {
	if err := h.io("Failed"); err != nil {
		return false, err
	}
	return false, nil
}

func (h *awayHost) TryProbe(context.Context) (bool, error) {
	if h.quiet.Add(-1) >= 0 {
		return false, nil
	}
	h.quiet.Store(0)
	if err := h.io("TryProbe"); err != nil {
		return false, err
	}
	return h.grant.Load(), nil
}

func (h *awayHost) ProbeDone(context.Context, bool) error { return h.io("ProbeDone") }

// recallFleet's host is an awayHost that remembers the fleet's next
// probe (FleetRecall): wait from when the store went away.
type recallFleet struct{ host *recallHost }

type recallHost struct {
	*awayHost
	clock *fakeClock
	due   time.Time
}

func (f *recallFleet) Host(string, FleetPolicy) FleetHost { return f.host }

func (h *recallHost) LastHeard() (FleetState, time.Duration) {
	return FleetState(h.awayHost.state.Load()), h.due.Sub(h.clock.Now())
}

func callAway(t *testing.T, h *harness) Outcome {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fleetURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatal(err)
		}
		return e.Outcome
	}
	resp.Body.Close()
	out, _ := OutcomeOf(resp)
	return out
}

// wantRefused checks that a call is refused as circuit_open with nothing
// sent.
func wantRefused(t *testing.T, h *harness, what string) {
	t.Helper()
	before := h.mock.GetTotalCallCount()
	out := callAway(t, h)
	if out.Disposition != CircuitOpen || out.Attempts != 0 || h.mock.GetTotalCallCount() != before {
		t.Fatalf("%s: the call ended %s after %d attempts, %d sent; want circuit_open with nothing sent",
			what, out.Disposition, out.Attempts, h.mock.GetTotalCallCount()-before)
	}
}

// wantSent checks that a call is sent once: the local breaker's probe,
// to a funder still down.
func wantSent(t *testing.T, h *harness, what string) {
	t.Helper()
	before := h.mock.GetTotalCallCount()
	out := callAway(t, h)
	if n := h.mock.GetTotalCallCount() - before; n != 1 || out.Attempts != 1 {
		t.Fatalf("%s: %d requests sent, %d attempts (%s); want the one probe", what, n, out.Attempts, out.Disposition)
	}
}

func TestFleetLostWhileOpenKeepsRefusingCalls(t *testing.T) {
	for _, stale := range []bool{false, true} {
		name := "state unknown"
		if stale {
			name = "TryProbe fails"
		}
		t.Run(name, func(t *testing.T) {
			f := newAwayFleet(FleetOpen)
			h := newHarness(t, WithFleet(f))
			h.clock.freeze()
			h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
			wantRefused(t, h, "the fleet's breaker open")
			f.host.stale.Store(stale)
			f.host.goAway()
			for range 20 {
				wantRefused(t, h, "the fleet lost while its breaker was open")
			}
			// Then it probes as the local breaker does: one call once
			// the wait drawn from [probe/2, probe] has passed.
			h.clock.advance(DefaultBreakerProbe)
			wantSent(t, h, "the local breaker's probe")
			wantRefused(t, h, "after the failed probe")
		})
	}
}

func TestFleetLostWhileOpenProbesWhenTheFleetsProbeWasDue(t *testing.T) {
	away := newAwayFleet(FleetOpen).host
	rh := &recallHost{awayHost: away}
	h := newHarness(t, WithFleet(&recallFleet{host: rh}), WithBreakerProbe(time.Second), WithBreaker(5, 10*time.Second))
	h.clock.freeze()
	rh.clock = h.clock
	rh.due = h.clock.Now().Add(300 * time.Millisecond)
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	wantRefused(t, h, "the fleet's breaker open")
	away.goAway()
	wantRefused(t, h, "the fleet lost")
	h.clock.advance(299 * time.Millisecond)
	wantRefused(t, h, "just before the fleet's probe was due")
	h.clock.advance(time.Millisecond)
	wantSent(t, h, "when the fleet's probe was due")
	// The next at twice the probe wait after the slot, with no random
	// draw: the processes that lost the fleet together probe together.
	h.clock.advance(2*time.Second - time.Millisecond)
	wantRefused(t, h, "just before the second probe")
	h.clock.advance(time.Millisecond)
	wantSent(t, h, "the second probe")
	h.clock.advance(4 * time.Second)
	wantSent(t, h, "the third probe")
	h.clock.advance(8 * time.Second)
	wantSent(t, h, "the fourth probe")
	h.clock.advance(10*time.Second - time.Millisecond)
	wantRefused(t, h, "the fifth probe waits the cooldown")
	// Back: the probe closes the local breaker and calls go out.
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	h.clock.advance(time.Millisecond)
	wantSent(t, h, "the probe that finds the funder back")
	wantSent(t, h, "a call after it")
}

func TestFleetLostWhileClosedLeavesTheLocalBreakerToCount(t *testing.T) {
	f := newAwayFleet(FleetClosed)
	h := newHarness(t, WithFleet(f), WithBudget(0, time.Minute))
	h.clock.freeze()
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	wantSent(t, h, "the fleet's breaker closed")
	f.host.goAway()
	for range DefaultBreakerThreshold - 1 {
		wantSent(t, h, "the fleet lost while its breaker was closed")
	}
	wantRefused(t, h, "after the local breaker's threshold")
}

func TestFleetLostAgainCarriesTheStateOnce(t *testing.T) {
	f := newAwayFleet(FleetOpen)
	h := newHarness(t, WithFleet(f))
	h.clock.freeze()
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	wantRefused(t, h, "the fleet's breaker open")
	f.host.goAway()
	wantRefused(t, h, "the fleet lost")
	h.clock.advance(DefaultBreakerProbe)
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	wantSent(t, h, "the local probe that finds the funder back")
	// The store still away: the local breaker, closed by its probe,
	// decides; what the fleet last said is not carried over again.
	wantSent(t, h, "a call after the good probe")
	if n := f.host.count("TryProbe"); n != 1 {
		t.Fatalf("TryProbe called %d times, want once (while the store answered)", n)
	}
}

func TestFleetLostWhileOpenMovesAnOpenLocalBreakerToTheFleetsProbe(t *testing.T) {
	away := newAwayFleet(FleetClosed).host
	rh := &recallHost{awayHost: away}
	h := newHarness(t, WithFleet(&recallFleet{host: rh}), WithBudget(0, time.Minute))
	h.clock.freeze()
	rh.clock = h.clock
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	// The local breaker opens on the process's own failures while the
	// fleet's is still closed; then the fleet's opens.
	for range DefaultBreakerThreshold {
		wantSent(t, h, "a failed call while the fleet's breaker is closed")
	}
	away.state.Store(int32(FleetOpen))
	wantRefused(t, h, "the fleet's breaker open")
	h.clock.advance(time.Minute) // long past the local breaker's own probe time
	rh.due = h.clock.Now().Add(300 * time.Millisecond)
	away.goAway()
	wantRefused(t, h, "the fleet lost before its probe was due")
	h.clock.advance(300 * time.Millisecond)
	wantSent(t, h, "when the fleet's probe was due")
	h.clock.advance(2*DefaultBreakerProbe - time.Millisecond)
	wantRefused(t, h, "before the next probe, twice the probe wait on")
	h.clock.advance(time.Millisecond)
	wantSent(t, h, "the next probe")
}

func TestFleetLostWhileClosedLetsAnOpenLocalBreakerProbeAtOnce(t *testing.T) {
	f := newAwayFleet(FleetClosed)
	h := newHarness(t, WithFleet(f), WithBudget(0, time.Minute))
	h.clock.freeze()
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	// The process's own failures open its local breaker; the fleet's,
	// closed, lets its calls out over it.
	for range DefaultBreakerThreshold + 2 {
		wantSent(t, h, "a failed call while the fleet's breaker is closed")
	}
	f.host.goAway()
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	// The fleet last said closed: the local breaker probes at once
	// rather than refusing until its own probe time.
	wantSent(t, h, "the first call after the fleet is lost")
	wantSent(t, h, "a call after the good probe")
}

func TestFleetLostIsCarriedOnceWhileStateStillReportsIt(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		name := "every TryProbe fails"
		if quiet {
			name = "a TryProbe answers no between failures"
		}
		t.Run(name, func(t *testing.T) {
			f := newAwayFleet(FleetOpen)
			h := newHarness(t, WithFleet(f))
			h.clock.freeze()
			h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
			wantRefused(t, h, "the fleet's breaker open")
			f.host.stale.Store(true) // State says FleetOpen; TryProbe fails
			f.host.goAway()
			wantRefused(t, h, "the fleet lost")
			h.clock.advance(DefaultBreakerProbe)
			h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
			wantSent(t, h, "the local probe that finds the funder back")
			if quiet {
				f.host.quiet.Store(1)
				wantRefused(t, h, "the fleet's no, as far as the FleetHost knows")
			}
			// The store still away: the local breaker, closed by its
			// probe, decides; the fleet's open breaker is not carried
			// into it again.
			for range 5 {
				wantSent(t, h, "a call after the good probe")
			}
		})
	}
}

func TestFleetHeardAgainIsCarriedAgainWhenLostAgain(t *testing.T) {
	for _, granted := range []bool{false, true} {
		name := "a new state heard"
		if granted {
			name = "a probe granted"
		}
		t.Run(name, func(t *testing.T) {
			f := newAwayFleet(FleetOpen)
			h := newHarness(t, WithFleet(f))
			h.clock.freeze()
			h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
			wantRefused(t, h, "the fleet's breaker open")
			f.host.stale.Store(true)
			f.host.goAway()
			wantRefused(t, h, "the fleet lost")
			h.clock.advance(DefaultBreakerProbe)
			h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
			wantSent(t, h, "the local probe that finds the funder back")
			f.host.comeBack()
			if granted {
				// The fleet back, its breaker still open: this process
				// gets its probe, which fails.
				h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
				f.host.grant.Store(true)
				wantSent(t, h, "the fleet's probe")
				f.host.grant.Store(false)
				h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
			} else {
				// The fleet back, its breaker closed, then open again
				// (another process's failures).
				f.host.state.Store(int32(FleetClosed))
				wantSent(t, h, "the fleet's breaker closed")
				f.host.state.Store(int32(FleetOpen))
			}
			wantRefused(t, h, "the fleet's breaker open")
			f.host.goAway()
			// Lost again: what it said this time is carried, once.
			for range 5 {
				wantRefused(t, h, "the fleet lost again while its breaker was open")
			}
			h.clock.advance(DefaultBreakerProbe)
			wantSent(t, h, "the local probe that finds the funder back again")
			wantSent(t, h, "a call after it")
		})
	}
}
