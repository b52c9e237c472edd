package grantretry

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// deadlineShards spreads a Transport's calls over several deadline queues,
// each with its own lock and timer, so that calls on different processors
// seldom wait for one another's lock and each heap stays shallow. The zero
// value is ready; it is safe for concurrent use.
type deadlineShards [8]deadlines

// pick returns the queue for a new call: any will do, so it is drawn from
// the runtime's per-thread generator, which no lock guards.
func (s *deadlineShards) pick() *deadlines { return &s[rand.Uint32N(uint32(len(s)))] }

// deadlines ends the calls of one Transport whose budget deadline passes
// while they are still running: one timer for the Transport, armed for the
// earliest deadline, in place of a timer per call. A call that finishes
// first takes itself out of the queue, which is all most calls ever do.
//
// The deadlines are real time, like the timer they replace: an attempt in
// flight runs on real sockets (see Clock).
//
// A deadlines is safe for concurrent use; its zero value is empty. mu guards
// q, armed, timer, and the place of every call in q (its dlIdx). The calls'
// callbacks run with mu released.
type deadlines struct {
	mu    sync.Mutex
	q     []queued    // a min-heap on when
	timer *time.Timer // runs fire; nil until the first deadline
	armed time.Time   // when timer fires; zero if it is not armed
}

// queued is a call in the queue and its deadline. The deadline lives in the
// heap rather than in the call: the heap's moves compare neighbours without
// reaching into each call, and the call is smaller by a time.Time.
type queued struct {
	when time.Time
	c    *call
}

// add queues c to be ended at when (now is the time read for it). It
// requires that c is not queued.
func (d *deadlines) add(c *call, when, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.dlIdx = int32(len(d.q))
	d.q = append(d.q, queued{when, c})
	d.up(len(d.q) - 1)
	if d.armed.IsZero() || when.Before(d.armed) {
		d.arm(when, now)
	}
}

// remove takes c out of the queue. Once it returns, the queue will not end
// c, unless fire already took c out to end it: as with time.Timer.Stop, the
// callback may then run, and the call's timerMu settles what it does.
func (d *deadlines) remove(c *call) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := int(c.dlIdx)
	if i < 0 {
		return // taken out by fire
	}
	last := len(d.q) - 1
	if i != last {
		d.swap(i, last)
	}
	d.q[last] = queued{} // keep no finished call alive
	d.q = d.q[:last]
	c.dlIdx = -1
	if i != last {
		if !d.down(i) {
			d.up(i)
		}
	}
	// The timer stays armed even if c was the earliest: when it fires it
	// finds nothing due and is armed again for what is.
}

// fire ends the calls whose deadline has passed and arms the timer for the
// next one.
func (d *deadlines) fire() {
	var due []*call
	d.mu.Lock()
	d.armed = time.Time{}
	now := time.Now()
	for len(d.q) > 0 && !d.q[0].when.After(now) {
		c := d.q[0].c
		last := len(d.q) - 1
		d.swap(0, last)
		d.q[last] = queued{}
		d.q = d.q[:last]
		c.dlIdx = -1
		d.down(0)
		due = append(due, c)
	}
	if len(d.q) > 0 {
		d.arm(d.q[0].when, now)
	}
	d.mu.Unlock()
	for _, c := range due {
		c.deadlineExpired()
	}
}

// arm sets the timer to fire at when. It requires that d.mu is held.
func (d *deadlines) arm(when, now time.Time) {
	d.armed = when
	if d.timer == nil {
		d.timer = time.AfterFunc(when.Sub(now), d.fire)
		return
	}
	d.timer.Reset(when.Sub(now))
}

// The heap's moves. They require that d.mu is held.

func (d *deadlines) swap(i, j int) {
	d.q[i], d.q[j] = d.q[j], d.q[i]
	d.q[i].c.dlIdx = int32(i)
	d.q[j].c.dlIdx = int32(j)
}

func (d *deadlines) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !d.q[j].when.Before(d.q[i].when) {
			break
		}
		d.swap(i, j)
		j = i
	}
}

// down moves the element at i0 down to its place and reports whether it
// moved.
func (d *deadlines) down(i0 int) bool {
	i, n := i0, len(d.q)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && d.q[r].when.Before(d.q[j].when) {
			j = r
		}
		if !d.q[j].when.Before(d.q[i].when) {
			break
		}
		d.swap(i, j)
		i = j
	}
	return i > i0
}

// callContext is the context every attempt of a call runs under: the
// caller's (through the call's outcome context), ended also at the call's
// budget deadline and when the call is over. It behaves as
// context.WithCancelCause over the outcome context, and makes that context
// only when something needs it: the first Done, or any look at it once it
// has ended. Until then it answers from the outcome context, as the
// cancellable context would: nothing has cancelled it but its parent.
//
// So an inner transport that answers without watching the context (a cache,
// an in-memory fake, a proxy in the same process) costs the call no context
// of its own: two allocations and a handful of atomic writes less.
// net/http's Transport watches it, and gets the same context as before.
//
// It is the call itself, seen as a context: its state is the call's ctx
// fields, so that it costs no allocation of its own.
type callContext call

// Its states (call.ctxState). Ended is final unless made; made is final.
const (
	ctxFresh uint32 = iota // nothing has looked at it, nor ended it
	ctxEnded               // ended, with ctxCause, and not yet made
	ctxMade                // ctxReal and ctxCancel are set, and say all
)

func (x *callContext) Deadline() (time.Time, bool) { return x.octx.Deadline() }

func (x *callContext) Done() <-chan struct{} { return x.real().Done() }

func (x *callContext) Err() error {
	if x.ctxState.Load() == ctxFresh {
		return x.octx.Err()
	}
	return x.real().Err()
}

func (x *callContext) Value(key any) any {
	if x.ctxState.Load() == ctxFresh {
		return x.octx.Value(key)
	}
	return x.real().Value(key)
}

// real makes the cancellable context, ended already if the call's context
// has been, and returns it.
func (x *callContext) real() context.Context {
	if x.ctxState.Load() == ctxMade {
		return x.ctxReal
	}
	x.ctxMu.Lock()
	defer x.ctxMu.Unlock()
	switch x.ctxState.Load() {
	case ctxMade:
		return x.ctxReal
	case ctxEnded:
		x.ctxReal, x.ctxCancel = context.WithCancelCause(&x.octx)
		x.ctxCancel(x.ctxCause)
		x.ctxCause = nil
	default:
		x.ctxReal, x.ctxCancel = context.WithCancelCause(&x.octx)
	}
	x.ctxState.Store(ctxMade) // after the fields: a reader that sees it sees them
	return x.ctxReal
}

// end ends the context with cause (nil: the call is over), as its
// CancelCauseFunc would: the first end's cause is the one that stays.
func (x *callContext) end(cause error) {
	x.ctxMu.Lock()
	switch x.ctxState.Load() {
	case ctxMade:
		x.ctxMu.Unlock()
		x.ctxCancel(cause)
		return
	case ctxFresh:
		x.ctxCause = cause
		x.ctxState.Store(ctxEnded)
	}
	x.ctxMu.Unlock()
}
