package grantretry

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Defaults of the per-host circuit breaker (see WithBreaker).
const (
	// DefaultBreakerThreshold is how many consecutive transient failures
	// against one host open its breaker: it opens on the 5th.
	DefaultBreakerThreshold uint32 = 5
	// DefaultBreakerCooldown is how long an open breaker refuses calls
	// before it lets one probe through (half-open).
	DefaultBreakerCooldown = 60 * time.Second
)

// What an attempt tells the breaker. Only transient faults are the funder's
// failures; a terminal answer (a 422, a 404) shows the funder is up; the
// caller's cancellation and terminal transport errors (a bad certificate, a
// malformed URL) say nothing about the funder and are left out.
var (
	errBreakerFailure  = errors.New("grantretry: transient failure")
	errBreakerExcluded = errors.New("grantretry: excluded from breaker counts")
)

// hostBreaker is one host's breaker, plus the state changes it reported and
// the Transport has not logged yet.
type hostBreaker struct {
	host string
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]

	// gobreaker calls OnStateChange with its own lock held, so the change
	// is only queued here, and logged by the Transport after Allow or done
	// has returned. hasPending lets the hot path skip mu when nothing is
	// queued. mu guards pending; it is never held while calling out.
	hasPending atomic.Bool
	mu         sync.Mutex
	pending    []stateChange
}

// stateChange is one breaker transition.
type stateChange struct{ from, to gobreaker.State }

// newHostBreaker builds the breaker of one host. It holds no goroutine or
// timer, so one built by a goroutine that loses a race is simply dropped.
func newHostBreaker(host string, threshold uint32, cooldown time.Duration) *hostBreaker {
	hb := &hostBreaker{host: host}
	hb.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        host,
		MaxRequests: 1, // one half-open probe
		Timeout:     cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= threshold
		},
		IsExcluded: func(err error) bool { return err == errBreakerExcluded },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			hb.mu.Lock()
			hb.pending = append(hb.pending, stateChange{from: from, to: to})
			hb.mu.Unlock()
			hb.hasPending.Store(true)
		},
	})
	return hb
}

// allow asks the breaker for one attempt. A nil breaker (WithoutBreaker)
// allows everything.
func (hb *hostBreaker) allow() (done func(error), err error) {
	if hb == nil {
		return func(error) {}, nil
	}
	return hb.cb.Allow()
}

// permit is one attempt's permission from a host's breaker: the done of
// gobreaker's two-step Allow, to be called exactly once.
type permit struct {
	done  func(error)
	given bool
}

// give reports the attempt's result to the breaker, the first time only.
func (p *permit) give(err error) {
	if !p.given {
		p.given = true
		p.done(err)
	}
}

// takeChanges returns and clears the queued state changes.
func (hb *hostBreaker) takeChanges() []stateChange {
	if hb == nil || !hb.hasPending.Load() {
		return nil
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	out := hb.pending
	hb.pending = nil
	hb.hasPending.Store(false)
	return out
}

// isOpen reports whether the breaker would refuse an attempt now.
func (hb *hostBreaker) isOpen() bool {
	return hb != nil && hb.cb.State() == gobreaker.StateOpen
}
