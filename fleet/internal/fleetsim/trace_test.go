package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// plainHost is a FleetHost with none of the optional interfaces.
type plainHost struct{}

func (plainHost) State() grantretry.FleetState                                  { return grantretry.FleetOpen }
func (plainHost) Succeeded()                                                    {}
func (plainHost) Failed(context.Context, grantretry.FleetFailure) (bool, error) { return false, nil }
func (plainHost) TryProbe(context.Context) (bool, error)                        { return false, nil }
func (plainHost) ProbeDone(context.Context, bool) error                         { return nil }

// fullHost is a FleetHost that is a FleetRecall and a FleetChangeLog too,
// as the Coordinator's are.
type fullHost struct{ plainHost }

func (fullHost) LastHeard() (grantretry.FleetState, time.Duration) {
	return grantretry.FleetOpen, 300 * time.Millisecond
}

func (fullHost) TakeChanges() []grantretry.FleetChange {
	return []grantretry.FleetChange{{From: grantretry.FleetBreakerClosed, To: grantretry.FleetBreakerOpen}}
}

type oneHost struct{ h grantretry.FleetHost }

func (f oneHost) Host(string, grantretry.FleetPolicy) grantretry.FleetHost { return f.h }

func TestTracedHostPassesOnTheFleetHostsOptionalInterfaces(t *testing.T) {
	traced := tracedFleet{Fleet: oneHost{fullHost{}}, tr: &tracer{start: time.Now()}}.Host("k", grantretry.FleetPolicy{})
	r, ok := traced.(grantretry.FleetRecall)
	if !ok {
		t.Fatal("the traced host is not a FleetRecall: the Transport would never carry the fleet's probe time")
	}
	if st, wait := r.LastHeard(); st != grantretry.FleetOpen || wait != 300*time.Millisecond {
		t.Fatalf("LastHeard: %v, %v; want the wrapped host's FleetOpen, 300ms", st, wait)
	}
	l, ok := traced.(grantretry.FleetChangeLog)
	if !ok {
		t.Fatal("the traced host is not a FleetChangeLog: the fleet's breaker changes would never be taken")
	}
	if chs := l.TakeChanges(); len(chs) != 1 || chs[0].To != grantretry.FleetBreakerOpen {
		t.Fatalf("TakeChanges: %v; want the wrapped host's one change", chs)
	}
}

func TestTracedHostOfAPlainFleetHostRecallsNothing(t *testing.T) {
	traced := tracedFleet{Fleet: oneHost{plainHost{}}, tr: &tracer{start: time.Now()}}.Host("k", grantretry.FleetPolicy{})
	if r, ok := traced.(grantretry.FleetRecall); ok {
		if st, wait := r.LastHeard(); st != grantretry.FleetUnknown || wait >= 0 {
			t.Fatalf("LastHeard: %v, %v; want FleetUnknown and a negative wait, as from a host that recalls nothing", st, wait)
		}
	}
	if l, ok := traced.(grantretry.FleetChangeLog); ok {
		if chs := l.TakeChanges(); chs != nil {
			t.Fatalf("TakeChanges: %v; want nil", chs)
		}
	}
}
