package grantretry

import (
	"net/http"
	"testing"
	"time"
)

// With the fleet's breaker closed, calls go out whatever the local breaker
// says: retries included. A local breaker that one failed call opens must
// not end the call circuit_open with its retries left, nor give its letter
// that stop reason.
func TestFleetClosedRetryIsNotRefusedByTheLocalBreaker(t *testing.T) {
	f := newMemFleet()
	f.threshold, f.maxTokens = 100, 1000 // the fleet's breaker stays closed, its budget full
	sink := &memLetters{}
	h := newHarness(t, WithFleet(f), WithBreaker(1, time.Hour), WithBudget(4, time.Hour),
		WithRandSource(maxSource{}), WithDeadLetter(sink))

	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503, 200))
	out, err := callFleet(t, h)
	if !h.tr.hosts.get(fleetKey).breaker.isOpen() {
		t.Fatal("the local breaker did not open on the call's failure")
	}
	if err != nil || out.Disposition != Succeeded || out.Attempts != 2 {
		t.Fatalf("outcome %+v, err %v: want succeeded on the retry, the fleet's breaker being closed", out, err)
	}

	// A funder that stays down: the call spends its retries, and its
	// letter says so.
	h.mock.RegisterResponder(http.MethodGet, fleetURL, seq(503))
	out, _ = callFleet(t, h)
	if out.Disposition != DeadLetter || out.StopReason != StopRetriesSpent || out.Attempts != 5 {
		t.Errorf("outcome %+v: want dead_letter (retries_exhausted) after 5 attempts", out)
	}
	for _, l := range sink.all() {
		if l.StopReason == StopCircuitOpen || l.Disposition == CircuitOpen {
			t.Errorf("letter %s says %s (%s), though the fleet's breaker is closed", l.ID, l.Disposition, l.StopReason)
		}
	}
	if f.host(fleetKey).State() != FleetClosed {
		t.Fatal("the fleet's breaker moved: the test no longer tests a closed fleet")
	}
}
