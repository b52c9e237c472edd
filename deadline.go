package grantretry

import (
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
// q, armed, timer, and the queue fields of every call in q (dlWhen, dlIdx).
// The calls' callbacks run with mu released.
type deadlines struct {
	mu    sync.Mutex
	q     []*call     // a min-heap on dlWhen
	timer *time.Timer // runs fire; nil until the first deadline
	armed time.Time   // when timer fires; zero if it is not armed
}

// add queues c to be ended at when (now is the time read for it). It
// requires that c is not queued.
func (d *deadlines) add(c *call, when, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.dlWhen = when
	c.dlIdx = len(d.q)
	d.q = append(d.q, c)
	d.up(c.dlIdx)
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
	i := c.dlIdx
	if i < 0 {
		return // taken out by fire
	}
	last := len(d.q) - 1
	if i != last {
		d.swap(i, last)
	}
	d.q[last] = nil // keep no finished call alive
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
	for len(d.q) > 0 && !d.q[0].dlWhen.After(now) {
		c := d.q[0]
		last := len(d.q) - 1
		d.swap(0, last)
		d.q[last] = nil
		d.q = d.q[:last]
		c.dlIdx = -1
		d.down(0)
		due = append(due, c)
	}
	if len(d.q) > 0 {
		d.arm(d.q[0].dlWhen, now)
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
	d.q[i].dlIdx = i
	d.q[j].dlIdx = j
}

func (d *deadlines) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !d.q[j].dlWhen.Before(d.q[i].dlWhen) {
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
		if r := j + 1; r < n && d.q[r].dlWhen.Before(d.q[j].dlWhen) {
			j = r
		}
		if !d.q[j].dlWhen.Before(d.q[i].dlWhen) {
			break
		}
		d.swap(i, j)
		i = j
	}
	return i > i0
}
