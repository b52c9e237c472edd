package grantretry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A host is in quota once a call to it ends owed for later
// ([StopOwedLater]): the funder said it will take no request before a
// time, or will take none for now without saying until when. Its calls
// are then held, each ending at once as [DeadLetter] ([StopOwedLater])
// with nothing sent, as the funder asked:
//
//   - with the funder's NotBefore known, until then (a later NotBefore
//     replaces an earlier one); once it passes, on the Transport's Clock,
//     calls flow again;
//   - with none known, one call at a time probes, once per probe
//     interval (the host's WithBreakerProbe wait), and the others are
//     held. A probe answered owed again holds the host for another
//     interval (or until the NotBefore it gives); a probe answered
//     anything else ends the quota, whatever else the answer says.
//
// A held call is charged to no breaker, throttle or fleet budget, and its
// dead letter keeps the body and the host's NotBefore. With a fleet whose
// host is a [FleetQuota], the hold is shared with every process.

// hostQuota is one host's quota state. A call reads on alone while the
// host is not in quota; the other fields are guarded by mu.
type hostQuota struct {
	// watch has quotaWatchOn while the host is in quota, and quotaWatchFleet when
	// its FleetHost is a FleetQuota (set when the state is made): a call
	// with neither reads nothing else.
	watch atomic.Uint32

	mu      sync.Mutex
	until   time.Time // the funder's NotBefore; zero: not known
	next    time.Time // with until zero: when the next probe may go
	probing bool      // a probe is out
	serial  uint8     // counts the probes granted, modulo 64 (see call.quota)
	// shared says the fleet has been seen holding the host during this
	// hold: once it no longer does, another process's probe ended it.
	shared bool
}

// The bits of hostQuota.watch.
const (
	quotaWatchOn    uint32 = 1
	quotaWatchFleet uint32 = 2
)

// on reports whether the host is in quota.
func (q *hostQuota) on() bool { return q.watch.Load()&quotaWatchOn != 0 }

// setOn puts the host in quota, or takes it out.
func (q *hostQuota) setOn(on bool) {
	if on {
		q.watch.Or(quotaWatchOn)
	} else {
		q.watch.And(^quotaWatchOn)
	}
}

// The bits of call.quota: the attempt in flight is the host's local probe
// (with the probe's serial above quotaSerialShift) or the fleet's.
const (
	quotaProbeLocal  uint8 = 1
	quotaProbeFleet  uint8 = 2
	quotaSerialShift       = 2
	quotaSerialMask  uint8 = 0xff >> quotaSerialShift
)

// quotaHold is asked at the top of each iteration of the call's loop: nil
// when the attempt may go, or the cause of a call the host's quota holds,
// whose outcome it sets. While the host is not in quota it costs a load
// and a nil check.
func (c *call) quotaHold() error {
	if c.host.quota.watch.Load() == 0 {
		return nil
	}
	return c.quotaHoldSlow()
}

func (c *call) quotaHoldSlow() error {
	hs := c.host
	q := &hs.quota
	var now time.Time
	fleetHeld, fleetAnswered := false, false
	var fleetUntil time.Time // the fleet's known NotBefore, while it holds
	if fq := hs.fleetQuota; fq != nil {
		until, known := fq.QuotaUntil()
		fleetAnswered = true
		if !until.IsZero() {
			now = c.t.clock.Now()
			switch {
			case now.Before(until):
				fleetHeld = true
				if known {
					fleetUntil = until
				}
			case !known:
				// The fleet's probe turn has come: one process takes it.
				ctx, cancel := context.WithTimeout(c.ctx, DefaultFleetLimit)
				ok, err := fq.TryQuotaProbe(ctx, hs.cfg.probe)
				cancel()
				switch {
				case err != nil:
					fleetAnswered = false // the local state decides
				case ok:
					c.quota = quotaProbeFleet
					return nil
				default:
					fleetHeld = true
				}
			}
		}
		if !fleetHeld && !q.on() {
			return nil
		}
	}
	if now.IsZero() {
		now = c.t.clock.Now()
	}
	localHeld, localUntil := q.hold(c, now, fleetHeld, fleetAnswered)
	if !fleetHeld && !localHeld {
		return nil
	}
	nb := localUntil
	if fleetUntil.After(nb) {
		nb = fleetUntil
	}
	return c.quotaHeld(nb)
}

// hold decides, at now, whether the host's own state holds the call, and
// until when if the funder said; a call it lets through as the probe has
// it noted in c.quota. fleetHeld says the fleet holds the host, and
// fleetAnswered that the fleet was asked and answered.
func (q *hostQuota) hold(c *call, now time.Time, fleetHeld, fleetAnswered bool) (bool, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.on() {
		return false, time.Time{}
	}
	if !q.until.IsZero() {
		if now.Before(q.until) {
			return true, q.until
		}
		q.clear() // the funder's time has come
		return false, time.Time{}
	}
	switch {
	case fleetHeld:
		// The fleet's probe turns govern: no process probes on its own.
		q.shared = true
		return true, time.Time{}
	case fleetAnswered && q.shared:
		// The fleet held the host and no longer does: a probe answered.
		q.clear()
		return false, time.Time{}
	case q.probing || now.Before(q.next):
		return true, time.Time{}
	}
	q.probing = true
	q.serial = (q.serial + 1) & quotaSerialMask
	c.quota = quotaProbeLocal | q.serial<<quotaSerialShift
	return false, time.Time{}
}

// clear ends the quota. q.mu is held.
func (q *hostQuota) clear() {
	q.setOn(false)
	q.until, q.next = time.Time{}, time.Time{}
	q.probing, q.shared = false, false
}

// ownsProbe reports whether probe (a call's quota bits) is the host's
// local probe out now. q.mu is held.
func (q *hostQuota) ownsProbe(probe uint8) bool {
	return probe&quotaProbeLocal != 0 && q.probing && probe>>quotaSerialShift == q.serial
}

// quotaHeld ends a call the quota holds: nothing more is sent, and the work is
// owed until nb (zero: not known).
func (c *call) quotaHeld(nb time.Time) error {
	c.out.Disposition, c.out.StopReason = DeadLetter, StopOwedLater
	c.out.NotBefore = nb
	if c.out.Attempts == 0 {
		c.keepUnsentBody()
	}
	if m := c.t.met; m != nil {
		m.callsHeld.Add(context.Background(), 1, c.attrs())
	}
	if c.span != nil {
		c.span.SetAttributes(keyQuotaHeld.Bool(true))
	}
	what := "nothing was sent"
	if c.out.Attempts > 0 {
		what = "the retry was not sent"
	}
	if nb.IsZero() {
		return fmt.Errorf("grantretry: host %s is owed for a time it did not say (a quota): one call probes every %v; %s",
			c.host.key, c.host.cfg.probe, what)
	}
	return fmt.Errorf("grantretry: host %s is owed until %s (a quota); %s",
		c.host.key, nb.UTC().Format(time.RFC3339Nano), what)
}

// quotaVerdict moves the host's quota after an attempt that stop ended
// ("" if the call goes on): an owed ending puts the host in quota (or
// keeps it there), and a probe's answer that is not owed ends the quota.
// It costs nothing for an attempt that is neither a probe nor owed.
func (c *call) quotaVerdict(a sentAttempt, stop string) {
	if c.quota == 0 && stop != StopOwedLater {
		return
	}
	c.quotaNote(a, stop == StopOwedLater)
}

func (c *call) quotaNote(a sentAttempt, owed bool) {
	hs := c.host
	q := &hs.quota
	probe := c.quota
	c.quota = 0
	now := c.t.clock.Now()
	fq := hs.fleetQuota
	switch {
	case owed:
		q.owed(c, probe, c.out.NotBefore, now)
		if fq != nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), DefaultFleetLimit)
			fq.Owed(ctx, c.out.NotBefore, hs.cfg.probe)
			cancel()
		}
	case a.resp != nil:
		// An answer that is not owed: the quota is over.
		q.mu.Lock()
		cleared := probe&quotaProbeFleet != 0 || q.ownsProbe(probe)
		if cleared {
			q.clear()
		}
		q.mu.Unlock()
		if cleared && fq != nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), DefaultFleetLimit)
			fq.QuotaCleared(ctx)
			cancel()
		}
	case probe&quotaProbeLocal != 0:
		// No answer. One that sent nothing gives its turn back; one that
		// may have reached the funder spent it.
		q.mu.Lock()
		if q.ownsProbe(probe) {
			q.probing = false
			if !a.sentNothing() {
				q.next = now.Add(hs.cfg.probe)
			}
		}
		q.mu.Unlock()
	}
}

// owed puts the host in quota, or keeps it there, after an attempt that
// ended owed at now: until the funder's NotBefore nb, the later one
// winning, or with none known for a probe interval from the first owed
// answer, restarted by a probe's.
func (q *hostQuota) owed(c *call, probe uint8, nb, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ownProbe := q.ownsProbe(probe) || probe&quotaProbeFleet != 0
	if ownProbe {
		q.probing = false
	}
	if !q.on() {
		q.clear()
		q.until = nb
		q.next = now.Add(c.host.cfg.probe)
		q.setOn(true)
		return
	}
	switch {
	case !nb.IsZero():
		if q.until.IsZero() || nb.After(q.until) {
			q.until = nb
		}
	case q.until.IsZero() && ownProbe:
		q.next = now.Add(c.host.cfg.probe)
	}
}

// quotaGiveBack gives the host's probe back when the call that took it
// ends without its attempt being judged (the breaker refused it, its body
// failed, a panic): the next call may probe at once.
func (c *call) quotaGiveBack() {
	if c.quota&quotaProbeLocal != 0 {
		c.quotaGiveBackSlow()
	}
}

func (c *call) quotaGiveBackSlow() {
	q := &c.host.quota
	q.mu.Lock()
	if q.ownsProbe(c.quota) {
		q.probing = false
	}
	q.mu.Unlock()
	c.quota = 0
}
