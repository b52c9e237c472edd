package grantretry

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// What an attempt tells the breaker. Only transient faults are the funder's
// failures; a terminal answer (a 422, a 404) shows the funder is up; the
// caller's cancellation and terminal transport errors (a bad certificate, a
// malformed URL) say nothing about the funder and are left out, and so are
// a call's own retries after its first failure (see countFailure).
var (
	errBreakerFailure  = errors.New("grantretry: transient failure")
	errBreakerExcluded = errors.New("grantretry: excluded from breaker counts")
)

// gateUnset marks a breaker that has just opened and whose first probe
// time is not yet drawn.
const gateUnset = math.MaxInt64

// hostBreaker is one host's breaker: a gobreaker two-step breaker that
// counts and changes state, behind a gate that decides when an open breaker
// lets its probe through.
//
// gobreaker waits a fixed Timeout before every probe. To probe soon after
// opening and then less and less often during a long outage, gobreaker's
// Timeout is set to nothing and the gate holds the wait instead: the n-th
// wait of an outage is drawn from [d/2, d], d = min(cooldown, probe*2^n),
// on the Transport's Clock, so tests and simulations drive it too.
type hostBreaker struct {
	host          string
	cb            *gobreaker.TwoStepCircuitBreaker[struct{}]
	clock         Clock
	rand          randSource
	probe, maxGap time.Duration

	// gate is 0 while the breaker is closed, and otherwise the Clock time
	// in Unix nanoseconds before which it refuses every call (gateUnset
	// until drawn). failedProbes counts the failed probes of this outage.
	// halfOpen says a probe is allowed or in flight. gobreaker writes all
	// three from OnStateChange, under its own lock; the gate's time is
	// drawn after that lock is released (settle), since the Clock and the
	// random source are the caller's code.
	gate         atomic.Int64
	failedProbes atomic.Int32
	halfOpen     atomic.Bool

	// gobreaker calls OnStateChange with its own lock held, so the change
	// is only queued here, and logged by the Transport after Allow or done
	// has returned. hasPending lets the hot path skip mu when nothing is
	// queued. mu guards pending; it is never held while calling out.
	hasPending atomic.Bool
	mu         sync.Mutex
	pending    []stateChange

	// spell is the breaker's closed spell while it is closed, nil
	// otherwise; changed replaces it under gobreaker's lock. An attempt
	// allowed while closed asks gobreaker nothing (see closedSpell).
	spell atomic.Pointer[closedSpell]
	// fmu serialises what closed spells tell gobreaker, so that a spell
	// that is still current under fmu is gobreaker's closed state too:
	// only a report under fmu can end a closed state. Lock order: fmu,
	// then gobreaker's lock, then mu.
	fmu sync.Mutex
}

// closedSpell is one stretch of a breaker's closed state. gobreaker's
// ReadyToTrip reads only ConsecutiveFailures, and every state change clears
// the counts, so while the breaker is closed a success tells gobreaker
// something only when a failure is counted, and an excluded attempt tells
// it nothing. An attempt allowed while closed therefore takes no permit
// from gobreaker (its Allow reads the time twice, takes its lock twice and
// allocates its done): it gets the spell's report, which goes to gobreaker
// only for a failure, or a success after one, under fmu, and is dropped if
// the spell has ended meanwhile, as gobreaker drops a report from another
// generation.
type closedSpell struct {
	hb      *hostBreaker
	report  func(error) // the spell's own method value, made once
	failing atomic.Bool // gobreaker counts a failure of this spell; written under fmu
}

func newClosedSpell(hb *hostBreaker) *closedSpell {
	s := &closedSpell{hb: hb}
	s.report = s.give
	return s
}

// give is the report of an attempt allowed during the spell.
func (s *closedSpell) give(err error) {
	switch {
	case err == errBreakerExcluded:
		return
	case err == nil && !s.failing.Load():
		return // no failure to reset: a success changes nothing ReadyToTrip reads
	}
	hb := s.hb
	hb.fmu.Lock()
	defer hb.fmu.Unlock()
	if hb.spell.Load() != s {
		return // the breaker has moved since the attempt was allowed
	}
	done, aerr := hb.cb.Allow()
	if aerr != nil {
		return // cannot happen while the spell is current; nothing to count in
	}
	done(err)
	s.failing.Store(err != nil)
}

// stateChange is one breaker transition.
type stateChange struct{ from, to gobreaker.State }

// newHostBreaker builds the breaker of one host. It holds no goroutine or
// timer, so one built by a goroutine that loses a race is simply dropped.
func newHostBreaker(host string, cfg *config) *hostBreaker {
	hb := &hostBreaker{host: host, clock: cfg.clock, rand: cfg.rand, probe: cfg.probe, maxGap: cfg.cooldown}
	hb.spell.Store(newClosedSpell(hb))
	threshold := cfg.threshold
	hb.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        host,
		MaxRequests: 1,               // one half-open probe
		Timeout:     time.Nanosecond, // the gate waits instead
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= threshold
		},
		IsExcluded:    func(err error) bool { return err == errBreakerExcluded },
		OnStateChange: hb.changed,
	})
	return hb
}

// changed is gobreaker's OnStateChange, called with its lock held: it
// moves the gate and queues the change, and calls out to nothing.
func (hb *hostBreaker) changed(_ string, from, to gobreaker.State) {
	switch to {
	case gobreaker.StateOpen:
		if from == gobreaker.StateHalfOpen {
			hb.failedProbes.Add(1)
		} else {
			hb.failedProbes.Store(0)
		}
		hb.gate.Store(gateUnset)
	case gobreaker.StateClosed:
		// The spell first: whoever sees the gate open finds it.
		hb.spell.Store(newClosedSpell(hb))
		hb.gate.Store(0)
	}
	if to != gobreaker.StateClosed {
		hb.spell.Store(nil)
	}
	hb.halfOpen.Store(to == gobreaker.StateHalfOpen)
	hb.mu.Lock()
	hb.pending = append(hb.pending, stateChange{from: from, to: to})
	hb.mu.Unlock()
	hb.hasPending.Store(true)
}

// allow asks the breaker for one attempt; probe says the attempt is the
// half-open probe. A nil breaker (WithoutBreaker) allows everything.
func (hb *hostBreaker) allow() (done func(error), probe bool, err error) {
	if hb == nil {
		return func(error) {}, false, nil
	}
	if hb.gate.Load() == 0 {
		if s := hb.spell.Load(); s != nil {
			return s.report, false, nil // closed: no probe, and nothing refuses
		}
	}
	if hb.refusing() {
		return nil, false, gobreaker.ErrOpenState
	}
	done, err = hb.cb.Allow()
	if err != nil || hb.halfOpen.Load() {
		return done, err == nil, err
	}
	if s := hb.spell.Load(); s != nil {
		// The breaker closed while this caller waited on gobreaker (a
		// probe succeeded): a permit of the closed state goes through its
		// spell, or its report would count outside fmu.
		done(errBreakerExcluded)
		return s.report, false, nil
	}
	return done, false, nil
}

// refusing reports whether the gate refuses calls now. It draws the gate's
// time if the breaker has just opened.
func (hb *hostBreaker) refusing() bool {
	g := hb.gate.Load()
	if g == 0 {
		return false
	}
	if g == gateUnset {
		g = hb.settle()
	}
	return hb.clock.Now().UnixNano() < g
}

// settleIfUnset draws the gate's time if the breaker has just opened.
func (hb *hostBreaker) settleIfUnset() {
	if hb != nil && hb.gate.Load() == gateUnset {
		hb.settle()
	}
}

// settle draws the time of the next probe of a breaker that has just
// opened, and returns the gate. Only the first of concurrent callers sets
// it; the others use what it set.
func (hb *hostBreaker) settle() int64 {
	d := min(hb.maxGap, hb.probe<<min(hb.failedProbes.Load(), 30))
	if d <= 0 { // the shift overflowed
		d = hb.maxGap
	}
	wait := d/2 + time.Duration(hb.rand.Int64N(int64(d/2)+1))
	at := hb.clock.Now().Add(wait).UnixNano()
	if hb.gate.CompareAndSwap(gateUnset, at) {
		return at
	}
	return hb.gate.Load()
}

// permit is one attempt's permission from a host's breaker: the done of
// gobreaker's two-step Allow, to be called exactly once.
type permit struct {
	done  func(error)
	probe bool // the attempt is the half-open probe
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

// state is the breaker's state as the gate sees it, read without asking
// gobreaker (whose State moves an expired open breaker to half-open).
func (hb *hostBreaker) state() gobreaker.State {
	switch {
	case hb.halfOpen.Load():
		return gobreaker.StateHalfOpen
	case hb.gate.Load() != 0:
		return gobreaker.StateOpen
	}
	return gobreaker.StateClosed
}

// isOpen reports whether the breaker would refuse an attempt now.
func (hb *hostBreaker) isOpen() bool {
	return hb != nil && hb.refusing()
}
