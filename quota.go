package grantretry

import (
	"context"
	"fmt"
	"net/http"
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
//     every held caller's next call is sent at once, with no probe first:
//     the funder said it takes requests from then;
//   - with none known, one call at a time probes, once per probe
//     interval (the host's WithBreakerProbe wait), and the others are
//     held. A probe answered owed again holds the host for another
//     interval (or until the NotBefore it gives); a probe answered
//     anything else ends the quota, whatever else the answer says.
//
// An owed answer to a request sent before the hold began says nothing of
// it: during a hold a NotBefore only extends it. A Retry-After past the
// deadline of a call that cannot be sent again ([StopNotReplayable],
// [StopNotIdempotent]) holds the host as an owed answer does.
//
// A held call is charged to no breaker, throttle or fleet budget, and its
// dead letter keeps the body and the host's NotBefore. With a fleet whose
// host is a [FleetQuota], the hold is shared with every process.

// hostQuota is one host's quota state. A call reads watch alone while
// the host is not in quota and has no FleetQuota; the other fields are
// guarded by mu.
type hostQuota struct {
	// watch has quotaWatchOn while the host is in quota, and
	// quotaWatchFleet when its FleetHost is a FleetQuota (set when the
	// state is made).
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
// whose outcome it sets. While the host is not in quota and has no
// FleetQuota it costs one atomic load.
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
			case !known && !q.knownHold(now):
				// The fleet's probe turn has come, and no funder's time
				// this process knows holds the call (one whose report to
				// the fleet failed): one process takes the turn.
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

// knownHold reports whether the funder's NotBefore, as this process
// knows it, holds a call at now.
func (q *hostQuota) knownHold(now time.Time) bool {
	if !q.on() {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.on() && now.Before(q.until)
}

// holdsAt reports whether the host is in quota at now. A funder's
// NotBefore that has passed ends the quota, with no call to see it.
func (q *hostQuota) holdsAt(now time.Time) bool {
	if !q.on() {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.until.IsZero() && !now.Before(q.until) {
		q.clear()
	}
	return q.on()
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
// An answer whose Retry-After ends past the call's deadline, to a call
// that could not be sent again ([StopNotReplayable], [StopNotIdempotent]),
// holds the host as an owed answer does: the call keeps its stop reason.
// It costs nothing for an attempt that is neither a probe nor owed.
func (c *call) quotaVerdict(a sentAttempt, stop string) {
	owed, nb := stop == StopOwedLater, c.out.NotBefore
	if (stop == StopNotReplayable || stop == StopNotIdempotent) && a.resp != nil &&
		len(a.resp.Header["Retry-After"]) != 0 {
		nb, owed = c.retryAfterHold(a.resp)
	}
	if c.quota == 0 && !owed {
		return
	}
	c.quotaNote(a, owed, nb)
}

// retryAfterHold returns the end of resp's Retry-After, and whether it
// ends at or after the call's deadline.
func (c *call) retryAfterHold(resp *http.Response) (time.Time, bool) {
	now := c.t.clock.Now()
	after, ok := retryAfter(resp.Header, now)
	if !ok || after < c.budget.deadline.Sub(now) {
		return time.Time{}, false
	}
	return now.Add(after), true
}

// quotaNote moves the host's quota after an attempt: owed says it held
// the host, until nb if the funder said.
func (c *call) quotaNote(a sentAttempt, owed bool, nb time.Time) {
	hs := c.host
	q := &hs.quota
	probe := c.quota
	c.quota = 0
	now := c.t.clock.Now()
	fq := hs.fleetQuota
	switch {
	case owed:
		q.owed(c, probe, nb, now)
		if fq != nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), DefaultFleetLimit)
			fq.Owed(ctx, nb, hs.cfg.probe)
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
	case probe&quotaProbeFleet != 0 && a.sentNothing():
		c.giveBackFleetProbe()
	}
}

// giveBackFleetProbe gives the fleet's probe turn, which this call took
// and used to send nothing, back to the fleet.
func (c *call) giveBackFleetProbe() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), DefaultFleetLimit)
	c.host.fleetQuota.GiveBackQuotaProbe(ctx)
	cancel()
}

// owed puts the host in quota, or keeps it there, after an attempt that
// ended owed at now: until the funder's NotBefore nb, the later one
// winning, or with none known for a probe interval from the first owed
// answer, restarted by a probe's. The answer may be to a request sent
// before the hold began, which says nothing of it: during a hold, a
// NotBefore only extends it, and one that ends before the hold's next
// probe turn, or has come already, is ignored.
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
	case !nb.IsZero() && !q.until.IsZero():
		if nb.After(q.until) {
			q.until = nb
		}
	case nb.After(now) && !nb.Before(q.next):
		q.until = nb
	case q.until.IsZero() && ownProbe:
		q.next = now.Add(c.host.cfg.probe)
	}
}

// quotaGiveBack gives the host's probe back when the call that took it
// ends without its attempt being sent (the breaker refused it, its body
// failed, a panic before the attempt): the next call may probe at once.
func (c *call) quotaGiveBack() {
	if c.quota != 0 {
		c.quotaGiveBackSlow()
	}
}

func (c *call) quotaGiveBackSlow() {
	if c.quota&quotaProbeFleet != 0 {
		c.quota = 0
		c.giveBackFleetProbe()
		return
	}
	q := &c.host.quota
	q.mu.Lock()
	if q.ownsProbe(c.quota) {
		q.probing = false
	}
	q.mu.Unlock()
	c.quota = 0
}

// quotaSpend spends the host's probe when the call that took it panics
// while its attempt may have reached the funder: the next call probes an
// interval later, as after a probe that got no answer. The fleet's turn
// is spent as it was taken.
func (c *call) quotaSpend() {
	probe := c.quota
	c.quota = 0
	if probe&quotaProbeLocal == 0 {
		return
	}
	now := c.t.clock.Now()
	q := &c.host.quota
	q.mu.Lock()
	if q.ownsProbe(probe) {
		q.probing = false
		q.next = now.Add(c.host.cfg.probe)
	}
	q.mu.Unlock()
}
