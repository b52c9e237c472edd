package grantretry

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// FleetState is what a fleet knows of one host's shared breaker.
type FleetState int32

const (
	// FleetUnknown: the fleet's store is away or has not answered yet;
	// the process's local breaker and throttle decide, from what the
	// fleet last said (see [WithFleet]).
	FleetUnknown FleetState = iota
	// FleetClosed: the fleet's breaker is closed; calls go out, whatever
	// the local breaker says.
	FleetClosed
	// FleetOpen: the fleet's breaker is open; every process refuses calls
	// but the one probe the fleet lets through at a time.
	FleetOpen
)

// FieldBreakerFleet is on the breaker lines ([MsgBreaker]) of a fleet's
// shared breaker, true; a process's local breaker's lines have no such
// field. The line has the local breaker's other fields: [FieldBreaker],
// [FieldBreakerFrom] and [FieldBreakerTo].
const FieldBreakerFleet = "fleet"

// FleetBreakerState is a state of a fleet's shared breaker in a
// [FleetChange]. Unlike [FleetState], it has the probe's own state,
// half-open, which [FleetHost.State] never reports (every call but the
// probe is refused meanwhile, as while open).
type FleetBreakerState uint8

// The states of a fleet's shared breaker; the zero value is none of them.
const (
	FleetBreakerClosed FleetBreakerState = iota + 1
	FleetBreakerHalfOpen
	FleetBreakerOpen
)

// String returns the state as breaker lines ([FieldBreakerFrom],
// [FieldBreakerTo]) write it, as they write the local breaker's:
// "closed", "half_open" or "open"; a value that is none of the three is
// written FleetBreakerState(n), so that a [FleetChangeLog] that makes one
// shows in the trail.
func (s FleetBreakerState) String() string {
	switch s {
	case FleetBreakerClosed:
		return "closed"
	case FleetBreakerHalfOpen:
		return "half_open"
	case FleetBreakerOpen:
		return "open"
	}
	return "FleetBreakerState(" + strconv.Itoa(int(s)) + ")"
}

// FleetChange is one change of a fleet's shared breaker, From one state
// To another.
type FleetChange struct{ From, To FleetBreakerState }

// FleetChangeLog is a [FleetHost] that tells the Transport of the changes
// of the fleet's shared breaker that this process made (the report that
// opened it, the probe it took, the probe's result), so that the
// Transport writes a breaker line for each to its audit trail and
// logger, with [FieldBreakerFleet], as it does for its local breaker.
// Each change is made by one process, and is in that process's trail
// only. The Transport asks on every call, as it asks State: TakeChanges
// must be as cheap when there is nothing to take.
type FleetChangeLog interface {
	// TakeChanges returns the changes made since it was last called,
	// oldest first, each once. It must not block, do I/O or allocate
	// when there are none.
	TakeChanges() []FleetChange
}

// FleetRecall is a [FleetHost] that remembers what the fleet said of its
// host before its store went away. The Transport carries that into its
// local breaker when the store goes away (see [WithFleet]); without
// FleetRecall it carries what its own calls last heard.
type FleetRecall interface {
	// LastHeard returns the host's state as last heard from the fleet's
	// store (FleetOpen or FleetClosed; FleetUnknown if never) and, for
	// FleetOpen, how long from now the fleet's next probe is due, or a
	// negative duration if that is not known. It must not block or do
	// I/O.
	LastHeard() (FleetState, time.Duration)
}

// FleetQuota is a [FleetHost] that shares its host's quota with the
// fleet: once a call of one process ends owed for later
// ([StopOwedLater]), every process holds the host's calls, until the
// funder's NotBefore, or for a quota of unknown length until one
// process's probe is answered with anything but owed (see
// [Transport.RoundTrip], "Quota", and docs/policy.md). The Transport finds it by type
// assertion on what [Fleet.Host] returns, as it finds [FleetRecall] and
// [FleetChangeLog]; on an error from any of its methods, the process's
// own quota state decides.
//
// The times QuotaUntil returns are compared with the Transport's [Clock]
// (see [WithClock]): they must be on it. A fleet of processes shares no
// clock but the wall clock, so a Transport whose fleet is a FleetQuota
// shared with other processes keeps the default Clock; the package
// fleet's Coordinator gives wall-clock times (time.Now's), and a
// Transport with another Clock compares them with its own as if they
// were on it.
type FleetQuota interface {
	// QuotaUntil returns, as last heard from the fleet's store, the time
	// until which the fleet holds the host's calls (the funder's
	// NotBefore, or for a quota of unknown length the next probe's
	// turn), and whether that time is the funder's (known=true) or a
	// probe turn (known=false). Zero: not held. It must not block, do I/O
	// or allocate.
	QuotaUntil() (until time.Time, known bool)
	// Owed reports that a call ended owed: until is the funder's
	// NotBefore, zero if it gave none, in which case the fleet holds the
	// host for probe and then lets one process probe.
	Owed(ctx context.Context, until time.Time, probe time.Duration) error
	// TryQuotaProbe asks, once an unknown-length hold has passed, to send
	// the one probe: true means this process sends it (and the fleet
	// holds the others for another probe wait).
	TryQuotaProbe(ctx context.Context, probe time.Duration) (bool, error)
	// GiveBackQuotaProbe reports that the probe TryQuotaProbe granted
	// this process sent nothing (see [ErrNotSent]), or was never tried:
	// the turn is given back, and the next call of any process may take
	// it at once. A hold that changed since the turn was taken stays.
	GiveBackQuotaProbe(ctx context.Context) error
	// QuotaCleared reports an answer that was not owed: the quota is over
	// for every process.
	QuotaCleared(ctx context.Context) error
}

// Fleet shares each host's circuit breaker and retry budget across the
// processes of a fleet (WithFleet). The package fleet, a module of its
// own, provides one on PostgreSQL. Host is called once per host key
// ("https://host:port") a Transport meets, again for a key whose state the
// Transport dropped (see MaxHosts and HostIdle), and possibly more than
// once for one key when goroutines race: it must return the same
// FleetHost for the same key while one is held. p is the host's policy as the Transport's options and
// ForHost's give it, for the shared state to follow. Host is not called
// for a host with neither a breaker nor a retry throttle.
// Implementations must be safe for concurrent use.
type Fleet interface {
	Host(key string, p FleetPolicy) FleetHost
}

// FleetPolicy is one host's breaker and retry-throttle settings.
type FleetPolicy struct {
	// Threshold failed calls in a row open the breaker (WithBreaker); 0:
	// the host has no breaker (WithoutBreaker), and the Transport neither
	// asks the fleet's breaker nor reports failed calls to it.
	Threshold uint32
	// Probe is the wait before a probe after the breaker opens
	// (WithBreakerProbe), Cooldown the longest wait (WithBreaker).
	Probe, Cooldown time.Duration
	// MaxTokens and TokenRatio size the retry budget (WithRetryThrottle)
	// and Refill refills it with time (WithThrottleRefill); MaxTokens 0:
	// the host has no throttle (WithoutRetryThrottle), and the Transport
	// takes no token from the fleet's budget.
	MaxTokens, TokenRatio float64
	Refill                time.Duration
}

// FleetFailure is what one failed attempt tells the fleet, in one report.
type FleetFailure struct {
	// CallFailed: the call's first transient failure, which counts against
	// the fleet's breaker (a call counts once, as the local breaker
	// counts it).
	CallFailed bool
	// Retryable: the failure is transient, so it takes a token from the
	// fleet's retry budget, and the answer says whether a retry may follow.
	Retryable bool
}

// FleetHost is the fleet's view of one host. State and Succeeded are on
// every call's path: they must not block, do I/O or allocate. The others
// are called only when an attempt fails or the fleet's breaker is open,
// each with a context that ends at most [DefaultFleetLimit] after the
// attempt's verdict; on an error, the Transport uses its local state.
//
// A FleetHost may also be a [FleetRecall], a [FleetChangeLog] and a
// [FleetQuota], which the Transport finds by type assertion on what
// [Fleet.Host] returns. A FleetHost that wraps another (to trace, count or
// log its calls) must pass them on: a struct that embeds the wrapped
// FleetHost has only FleetHost's methods, and hides them. Without them
// the Transport does not carry the fleet's next probe time when the fleet
// is lost, nor write the fleet's breaker lines, nor share the host's
// quota, and the wrapped host may keep the changes it queued for nobody.
// A wrapper may implement the first two whatever it wraps, and answer for
// a host that is neither as one that never heard the fleet (LastHeard:
// [FleetUnknown], -1) and made no change (TakeChanges: nil): the
// Transport treats those as it treats a host without the interfaces.
type FleetHost interface {
	// State returns the fleet's breaker state as last heard.
	State() FleetState
	// Succeeded counts an attempt answered 1xx-3xx, for the shared
	// budget's deposits, which the implementation batches.
	Succeeded()
	// Failed reports a failed attempt (at least one of f's fields is
	// true): one round trip to the fleet's store, since the failures of an
	// outage's first moments all come at once and each report delays the
	// next. retry is the budget's answer when f.Retryable: whether retries
	// are still allowed.
	Failed(ctx context.Context, f FleetFailure) (retry bool, err error)
	// TryProbe asks, while the fleet's breaker is open, to send the one
	// probe the fleet allows at a time: true means this call sends it, and
	// the Transport reports it with ProbeDone exactly once.
	TryProbe(ctx context.Context) (bool, error)
	// ProbeDone reports the probe's result: ok closes the fleet's breaker
	// in every process; !ok keeps it open and lets the next probe wait. A
	// probe that ended with no verdict on the funder (the caller's
	// cancellation, a panic, a body that could not be built) is reported
	// !ok too.
	ProbeDone(ctx context.Context, ok bool) error
}

// WithFleet makes the Transport share its per-host breaker and retry
// budget with the other processes of a fleet through f. The local breaker
// and throttle keep running, and decide alone while the fleet cannot tell
// (FleetUnknown, or a [FleetHost.TryProbe] that fails). What the fleet
// last said carries over: a host whose fleet breaker was open when the
// fleet was lost has its local breaker opened, refusing calls until the
// fleet's next probe was due ([FleetRecall]) and then probing as the
// local breaker does, at times every process that lost the fleet with it
// shares, so that the funder sees probes, not the calls the fleet was
// refusing, and every process finds it back at once; a host whose fleet
// breaker was closed has an open local breaker probe at once. This is
// done once each time the fleet is lost, until the fleet says something
// new (another state, or its probe granted to this process): a local
// probe that finds the funder back closes the local breaker, and what the
// fleet said before it was lost does not open it again. A nil f, or an
// interface holding a nil pointer, is an invalid option.
func WithFleet(f Fleet) Option {
	if isNil(f) {
		return optionFunc(func(c *config) { c.invalid("WithFleet(nil)") })
	}
	return optionFunc(func(c *config) { c.fleet = f })
}

// fleetCall is a call's dealings with its host's fleet.
type fleetCall struct {
	probe    bool // the attempt in flight is the fleet's probe
	answered bool // the fleet's budget answered for the last failure
	allowed  bool // and its answer
}

func noDone(error) {}

// allow asks the fleet, then the local breaker, for one attempt.
func (c *call) allow() (done func(error), probe bool, err error) {
	if !c.pol.breakerOn {
		// The host has no breaker (WithoutBreaker).
		return noDone, false, nil
	}
	fh := c.host.fleet
	if fh == nil {
		return c.host.breaker.allow()
	}
	switch st := fh.State(); st {
	case FleetOpen:
		c.host.heardFleet(st)
		ctx, cancel := context.WithTimeout(c.ctx, DefaultFleetLimit)
		ok, err := fh.TryProbe(ctx)
		cancel()
		c.logFleetChanges()
		switch {
		case err != nil:
			c.carryFleet()
			return c.host.breaker.allow()
		case !ok:
			return nil, false, gobreaker.ErrOpenState
		}
		c.host.fleetGranted()
		c.fleet.probe = true
		return noDone, false, nil
	case FleetClosed:
		c.host.heardFleet(st)
		// A change a statement made after its caller stopped waiting
		// (a probe's success, late) is logged by the next call.
		c.logFleetChanges()
		if done, probe, err := c.host.breaker.allow(); err == nil {
			return done, probe, nil
		}
		return noDone, false, nil
	}
	c.logFleetChanges()
	c.carryFleet()
	return c.host.breaker.allow()
}

// heardCarried is a bit of hostState.heard, beside the state: what the
// fleet last said has been carried into the local breaker since the
// fleet last said something new (see call.carryFleet).
const heardCarried = 1 << 8

// heardFleet notes the fleet's state of the host, FleetOpen or
// FleetClosed, as this call heard it. A state other than the one heard
// before is news, which a later loss of the fleet carries.
func (hs *hostState) heardFleet(st FleetState) {
	for {
		h := hs.heard.Load()
		if FleetState(h&^heardCarried) == st || hs.heard.CompareAndSwap(h, int32(st)) {
			return
		}
	}
}

// fleetGranted notes that the fleet gave this process its probe: the
// fleet answers again, and a later loss of it carries what it says then.
func (hs *hostState) fleetGranted() {
	for {
		h := hs.heard.Load()
		if h&heardCarried == 0 || hs.heard.CompareAndSwap(h, h&^heardCarried) {
			return
		}
	}
}

// carryFleet carries the fleet's last known state of the host into its
// local breaker, once each time the fleet is lost: an open fleet breaker
// opens the local one (see hostBreaker.carryOpen), a closed one lets an
// open local one probe at once (carryClosed). While the fleet's
// breaker is open no local breaker counts a failure, since the fleet
// refuses the calls, so without this every process would find its local
// breaker closed and send the calls the fleet had been refusing.
//
// Once carried, it is not carried again until the fleet says something
// new: a state other than the one last heard, or its probe granted to
// this process. Every call of a lost fleet comes here (a TryProbe that fails
// while State still says FleetOpen, as it does before the Coordinator
// notices the database is gone, or while its reads work and its
// statements fail), and carrying on each would trip the local breaker
// again after its own probe found the funder back. A TryProbe that
// answers no, or a report with no error, is not enough: a FleetHost may
// answer those from what it knew, without its store (the Coordinator
// does, for a call while another's question is in flight).
func (c *call) carryFleet() {
	hs := c.host
	h := hs.heard.Load()
	if h&heardCarried != 0 {
		return
	}
	st, wait := FleetState(h), time.Duration(-1)
	if r, ok := hs.fleet.(FleetRecall); ok {
		if rst, rwait := r.LastHeard(); rst != FleetUnknown {
			st, wait = rst, rwait
		}
	}
	// Before the mark, so that a call that finds the mark finds the
	// local breaker as the fleet left it.
	switch st {
	case FleetOpen:
		hs.breaker.carryOpen(wait)
	case FleetClosed:
		hs.breaker.carryClosed()
	}
	hs.heard.CompareAndSwap(h, h|heardCarried)
}

// logFleetChanges writes a breaker line for each change of the fleet's
// shared breaker that this process made (see FleetChangeLog).
func (c *call) logFleetChanges() {
	l := c.host.fleetLog
	if l == nil {
		return
	}
	for _, ch := range l.TakeChanges() {
		if !c.t.auditing(zap.WarnLevel) {
			continue
		}
		err := c.audit(zap.WarnLevel, MsgBreaker, []zapcore.Field{
			zap.String(FieldBreaker, c.host.key),
			zap.String(FieldBreakerFrom, ch.From.String()),
			zap.String(FieldBreakerTo, ch.To.String()),
			zap.Bool(FieldBreakerFleet, true),
		})
		if err != nil {
			c.trailFailed(err)
		}
	}
}

// breakerRefuses reports whether the breaker that decides the call's next
// attempt refuses it: the local one, unless the fleet's breaker is closed,
// in which case allow lets the attempt through whatever the local one
// says, and a retry must not be refused for it. A fleet's open breaker is
// fleetStop's to report.
func (c *call) breakerRefuses() bool {
	if !c.pol.breakerOn {
		return false
	}
	if fh := c.host.fleet; fh != nil && fh.State() == FleetClosed {
		return false
	}
	return c.host.breaker.isOpen()
}

// fleetVerdict tells the fleet what an attempt showed; brk is what the
// local breaker was told.
func (c *call) fleetVerdict(resp *http.Response, v Classification, brk error) {
	fh := c.host.fleet
	if fh == nil {
		return
	}
	c.fleet.answered = false
	ok := brk == nil && resp != nil && resp.StatusCode < 400
	if c.fleet.probe {
		if brk == errBreakerExcluded {
			c.abandonFleetProbe() // no verdict on the funder
			return
		}
		c.fleet.probe = false
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), DefaultFleetLimit)
		defer cancel()
		fh.ProbeDone(ctx, brk == nil)
		c.logFleetChanges()
		if ok {
			fh.Succeeded()
		}
		return
	}
	f := FleetFailure{
		CallFailed: brk == errBreakerFailure && c.pol.breakerOn,
		Retryable:  v.Retryable && v.charged() && c.pol.throttleOn,
	}
	if !f.CallFailed && !f.Retryable {
		if ok {
			fh.Succeeded()
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), DefaultFleetLimit)
	defer cancel()
	retry, err := fh.Failed(ctx, f)
	c.logFleetChanges()
	if f.Retryable {
		c.fleet.answered, c.fleet.allowed = err == nil, retry
	}
}

// abandonFleetProbe reports the fleet's probe, if this call holds it and
// has not reported it, as failed: the attempt ended with no verdict on the
// funder (the caller's cancellation, a panic, a body that could not be
// built), so the fleet's breaker stays open and the next probe waits.
func (c *call) abandonFleetProbe() {
	if !c.fleet.probe {
		return
	}
	c.fleet.probe = false
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), DefaultFleetLimit)
	defer cancel()
	c.host.fleet.ProbeDone(ctx, false)
	c.logFleetChanges()
}

// fleetStop is the fleet's reason to stop retrying, "" if none; local
// says whether the local throttle allows a retry.
func (c *call) fleetStop(local bool) (stop string, disp Disposition) {
	fh := c.host.fleet
	switch {
	case fh != nil && c.pol.breakerOn && fh.State() == FleetOpen:
		return StopCircuitOpen, CircuitOpen
	case fh != nil && c.fleet.answered:
		local = c.fleet.allowed
	}
	if !local {
		return StopThrottled, DeadLetter
	}
	return "", ""
}

// fleetPolicy is the host's policy as Fleet.Host gets it.
func (c *config) fleetPolicy() FleetPolicy {
	var p FleetPolicy
	if c.breakerOn {
		p.Threshold, p.Probe, p.Cooldown = c.threshold, c.probe, c.cooldown
	}
	if c.throttleOn {
		p.MaxTokens, p.TokenRatio, p.Refill = c.maxTokens, c.tokenRatio, c.refill
	}
	return p
}
