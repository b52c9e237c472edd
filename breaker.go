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

	// slot is, for a breaker opened by carryOpen with the fleet's next
	// probe known, the Clock time in Unix ns of its latest probe slot (0
	// otherwise): its gate then follows slots a fixed schedule apart
	// instead of a random draw (see settle). tripping makes ReadyToTrip
	// trip on the failure carryOpen reports; it is written under fmu.
	slot     atomic.Int64
	tripping atomic.Bool

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
			return c.ConsecutiveFailures >= threshold || hb.tripping.Load()
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
		hb.slot.Store(0)
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
// opened, and returns the gate: for a breaker carried over from the fleet
// with a known first slot, the next slot instead (see nextSlot). Only the
// first of concurrent callers sets it; the others use what it set.
func (hb *hostBreaker) settle() int64 {
	d := min(hb.maxGap, hb.probe<<min(hb.failedProbes.Load(), 30))
	if d <= 0 { // the shift overflowed
		d = hb.maxGap
	}
	now := hb.clock.Now().UnixNano()
	var at int64
	if prev := hb.slot.Load(); prev != 0 {
		at = nextSlot(prev, hb.failedProbes.Load(), d, now)
	} else {
		at = now + int64(d/2) + hb.rand.Int64N(int64(d/2)+1)
	}
	if hb.gate.CompareAndSwap(gateUnset, at) {
		if hb.slot.Load() != 0 {
			hb.slot.Store(at)
		}
		return at
	}
	return hb.gate.Load()
}

// nextSlot is the probe time of a carried breaker (see carryOpen) after
// the slot prev: prev itself for its first probe, then d after the last
// slot, on a grid of d from it if that time has passed (a probe that took
// longer than d). Processes that lost the fleet together carry the same
// first slot, the fleet's next probe, and draw nothing at random, so
// they keep probing together: once the funder answers, each process's
// probe finds it within the same moment, and none waits a cooldown more
// than the first one to succeed.
func nextSlot(prev int64, failed int32, d time.Duration, now int64) int64 {
	if failed == 0 {
		return prev
	}
	at := prev + int64(d)
	if at <= now {
		at += ((now-at)/int64(d) + 1) * int64(d)
	}
	return at
}

// carryOpen opens the breaker because the fleet's breaker was open when
// the process lost the fleet (see call.carryFleet): its next probe comes
// wait from now, the fleet's own next probe, then as the breaker's own
// probes would, doubling up to the cooldown, at fixed times (see
// nextSlot); with wait < 0 (not known), at the breaker's usual random
// draws. A breaker already open (it counted its own failures before the
// fleet opened) moves to the same schedule when wait is known, and one
// whose probe is out keeps it. Opening is queued and logged like any
// other change.
func (hb *hostBreaker) carryOpen(wait time.Duration) {
	if hb == nil {
		return
	}
	at := hb.clock.Now().Add(wait).UnixNano()
	hb.fmu.Lock()
	defer hb.fmu.Unlock()
	if hb.spell.Load() == nil {
		// Open or half-open: only a report under fmu could close it.
		if wait >= 0 && !hb.halfOpen.Load() {
			hb.failedProbes.Store(0)
			hb.slot.Store(at)
			hb.gate.Store(at)
		}
		return
	}
	if wait >= 0 {
		hb.slot.Store(at)
	}
	hb.tripping.Store(true)
	if done, err := hb.cb.Allow(); err == nil {
		done(errBreakerFailure)
	} else {
		hb.slot.Store(0) // cannot happen while the spell is current
	}
	hb.tripping.Store(false)
}

// carryClosed lets an open breaker probe at once because the fleet's
// breaker was closed when the process lost the fleet (see
// call.carryFleet): the fleet heard the funder answer, and let this
// process's calls out over its open local breaker, whose own probe time
// would otherwise refuse them now. One whose probe is out keeps it.
func (hb *hostBreaker) carryClosed() {
	if hb == nil {
		return
	}
	now := hb.clock.Now().UnixNano()
	for {
		g := hb.gate.Load()
		if g == 0 || g <= now || hb.halfOpen.Load() || hb.gate.CompareAndSwap(g, now) {
			return
		}
	}
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
