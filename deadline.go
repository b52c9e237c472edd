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

// pick returns the index of the queue for a new call: any will do, so it
// is drawn from the runtime's per-thread generator, which no lock guards.
func (s *deadlineShards) pick() uint8 { return uint8(rand.Uint32N(uint32(len(s)))) }

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

// deadlineEpoch is where deadlineClock counts from: a reading of the
// monotonic clock, so that a call's deadline fits in an int64.
var deadlineEpoch = time.Now()

// deadlineClock is t on the deadlines' clock: nanoseconds since
// deadlineEpoch, never 0 (a call's dlAt of 0 means none).
func deadlineClock(t time.Time) int64 { return max(int64(t.Sub(deadlineEpoch)), 1) }

// deadlineTime is the time of a reading of deadlineClock.
func deadlineTime(at int64) time.Time { return deadlineEpoch.Add(time.Duration(at)) }

// callContext is the context every attempt of a call runs under: the
// caller's (through the call's outcome context), ended also at the call's
// budget deadline and when the call is over. It behaves as
// context.WithCancelCause over the outcome context, and makes that context
// only when something needs it: the first Done, or any look at it once it
// has ended or its deadline has passed. Until then it answers from the
// outcome context, as the cancellable context would: nothing has cancelled
// it but its parent.
//
// The budget deadline enters the Transport's queue when the context is
// made, not before: until something watches the context there is nothing in
// flight that ending it would cut. An Err or a Value past the deadline makes
// it, and the queue then ends it at once, as a timer that fires late would.
//
// So an inner transport that answers without watching the context (a cache,
// an in-memory fake, a proxy in the same process) costs the call no context
// of its own and no place in a queue: two allocations, a heap insert and
// removal under a lock, and a few atomic writes less. net/http's Transport
// watches the context, and gets the same context and deadline as before.
//
// It is the call itself, seen as a context: its state is the call's ctx and
// dl fields, so that it costs no allocation of its own.
type callContext call

// Its states (call.ctxState). Fresh moves to ended without the lock (a
// release, see end), and to making under it; making and ended move to made
// under the lock; made is final.
const (
	ctxFresh  uint32 = iota // nothing has looked at it, nor ended it
	ctxMaking               // real is making it, and holds ctxMu
	ctxEnded                // ended, with ctxCause, and not yet made
	ctxMade                 // ctxReal and ctxCancel are set, and say all
)

func (x *callContext) Deadline() (time.Time, bool) { return x.octx.Deadline() }

// String names the context as the standard library names its own, and
// GoString likewise: printed as a struct, the call would show its
// headers' values, an Authorization among them.
func (x *callContext) String() string   { return "grantretry.callContext" }
func (x *callContext) GoString() string { return x.String() }

func (x *callContext) Done() <-chan struct{} { return x.real().Done() }

func (x *callContext) Err() error {
	if x.ctxState.Load() == ctxFresh && !x.due() {
		return x.octx.Err()
	}
	return x.real().Err()
}

func (x *callContext) Value(key any) any {
	if x.ctxState.Load() == ctxFresh && !x.due() {
		return x.octx.Value(key)
	}
	return x.real().Value(key)
}

// due reports whether the budget deadline has passed.
func (x *callContext) due() bool {
	at := x.dlAt.Load()
	return at != 0 && deadlineClock(time.Now()) >= at
}

// real makes the cancellable context, ended already if the call's context
// has been, queues the budget deadline if there is one still, and returns
// the context.
func (x *callContext) real() context.Context {
	if x.ctxState.Load() == ctxMade {
		return x.ctxReal
	}
	x.ctxMu.Lock()
	defer x.ctxMu.Unlock()
	if x.ctxState.CompareAndSwap(ctxFresh, ctxMaking) {
		x.ctxReal, x.ctxCancel = context.WithCancelCause(&x.octx)
		// Read after the move to making: a stopDeadline that found the
		// context fresh has cleared dlAt by now.
		if at := x.dlAt.Load(); at != 0 {
			i := x.t.dl.pick()
			x.dlShard = i + 1
			x.t.dl[i].add((*call)(x), deadlineTime(at), time.Now())
		}
		x.ctxState.Store(ctxMade) // after the fields: a reader that sees it sees them
		return x.ctxReal
	}
	// Under the lock only a release moves the state, and only from fresh,
	// which it no longer is: ended or made.
	if x.ctxState.Load() == ctxEnded {
		x.ctxReal, x.ctxCancel = context.WithCancelCause(&x.octx)
		x.ctxCancel(x.ctxCause)
		x.ctxCause = nil
		x.ctxState.Store(ctxMade)
	}
	return x.ctxReal
}

// end ends the context with cause (nil: the call is over), as its
// CancelCauseFunc would: the first end's cause is the one that stays. A
// release of a context nothing has made takes no lock.
func (x *callContext) end(cause error) {
	if cause == nil && x.ctxState.CompareAndSwap(ctxFresh, ctxEnded) {
		return
	}
	x.ctxMu.Lock()
	if cause != nil && x.ctxState.Load() == ctxFresh {
		x.ctxCause = cause
		if x.ctxState.CompareAndSwap(ctxFresh, ctxEnded) {
			x.ctxMu.Unlock()
			return
		}
		x.ctxCause = nil // a release came first
	}
	made := x.ctxState.Load() == ctxMade
	x.ctxMu.Unlock()
	if made {
		x.ctxCancel(cause)
	}
}

// stopDeadline takes the budget deadline off the call: its context is not
// ended at the deadline from now on. It requires the call's goroutine.
func (x *callContext) stopDeadline() {
	if x.dlAt.Load() == 0 {
		return
	}
	x.dlAt.Store(0)
	if x.ctxState.Load() == ctxFresh {
		return // a real that starts from now on finds no deadline to queue
	}
	x.ctxMu.Lock() // a real in progress has finished, and queued it or not
	shard := x.dlShard
	x.dlShard = 0
	x.ctxMu.Unlock()
	if shard != 0 {
		x.t.dl[shard-1].remove((*call)(x))
	}
}
