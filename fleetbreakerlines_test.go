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
	ch.made(FleetChange{FleetClosed, FleetOpen})
	callAway(t, h)
	ch.made(FleetChange{FleetOpen, FleetHalfOpen}, FleetChange{FleetHalfOpen, FleetClosed})
	callAway(t, h)
	callAway(t, h) // nothing more to take: no line

	type line struct{ from, to string }
	var got []line
	for _, e := range h.logs.FilterMessage(MsgBreaker).AllUntimed() {
		m := e.ContextMap()
		if m[FieldBreakerFleet] != true {
			continue
		}
		if m[FieldBreaker] != fleetKey {
			t.Errorf("a fleet breaker line names %v, want the host key %s", m[FieldBreaker], fleetKey)
		}
		got = append(got, line{m[FieldBreakerFrom].(string), m[FieldBreakerTo].(string)})
	}
	want := []line{{"closed", "open"}, {"open", "half_open"}, {"half_open", "closed"}}
	if len(got) != len(want) {
		t.Fatalf("fleet breaker lines %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fleet breaker lines %v, want %v", got, want)
		}
	}
}
