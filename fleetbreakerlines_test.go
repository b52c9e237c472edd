package grantretry

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// changeFleet's host is an awayHost that reports the changes of the
// fleet's breaker its test gives it (FleetChangeLog).
type changeFleet struct{ host *changeHost }

type changeHost struct {
	*awayHost
	mu      sync.Mutex
	pending []FleetChange
}

func (f *changeFleet) Host(string, FleetPolicy) FleetHost { return f.host }

func (h *changeHost) TakeChanges() []FleetChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.pending
	h.pending = nil
	return out
}

func (h *changeHost) made(chs ...FleetChange) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = append(h.pending, chs...)
}

func TestFleetBreakerChangesAreBreakerLines(t *testing.T) {
	ch := &changeHost{awayHost: newAwayFleet(FleetClosed).host}
	h := newHarness(t, WithFleet(&changeFleet{host: ch}), WithBudget(0, time.Minute))
	h.clock.freeze()
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	ch.made(FleetChange{FleetBreakerClosed, FleetBreakerOpen})
	callAway(t, h)
	ch.made(FleetChange{FleetBreakerOpen, FleetBreakerHalfOpen}, FleetChange{FleetBreakerHalfOpen, FleetBreakerClosed})
	callAway(t, h)
	callAway(t, h) // nothing more to take: no line

	got := fleetBreakerLines(t, h)
	want := []fleetLine{{"closed", "open"}, {"open", "half_open"}, {"half_open", "closed"}}
	if len(got) != len(want) {
		t.Fatalf("fleet breaker lines %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fleet breaker lines %v, want %v", got, want)
		}
	}
}

func TestFleetBreakerLineShowsAStateOutOfRange(t *testing.T) {
	ch := &changeHost{awayHost: newAwayFleet(FleetClosed).host}
	h := newHarness(t, WithFleet(&changeFleet{host: ch}))
	h.clock.freeze()
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(200))
	ch.made(FleetChange{From: FleetBreakerOpen}, FleetChange{From: FleetBreakerState(9), To: FleetBreakerClosed})
	callAway(t, h)
	got := fleetBreakerLines(t, h)
	want := []fleetLine{{"open", "FleetBreakerState(0)"}, {"FleetBreakerState(9)", "closed"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("fleet breaker lines %v, want %v", got, want)
	}
}

type fleetLine struct{ from, to string }

// fleetBreakerLines returns the from and to of the fleet's breaker lines
// h logged, in order.
func fleetBreakerLines(t *testing.T, h *harness) []fleetLine {
	t.Helper()
	var got []fleetLine
	for _, e := range h.logs.FilterMessage(MsgBreaker).AllUntimed() {
		m := e.ContextMap()
		if m[FieldBreakerFleet] != true {
			continue
		}
		if m[FieldBreaker] != fleetKey {
			t.Errorf("a fleet breaker line names %v, want the host key %s", m[FieldBreaker], fleetKey)
		}
		got = append(got, fleetLine{m[FieldBreakerFrom].(string), m[FieldBreakerTo].(string)})
	}
	return got
}
