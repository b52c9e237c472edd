package grantretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// maxDrain bounds how much of a discarded response body is read so its
// connection can be reused; a longer body costs the connection instead.
const maxDrain = 4 << 10

// Transport is an http.RoundTripper that makes calls to funder APIs safe to
// retry. Build it with New; the zero value is not usable. A Transport is safe
// for concurrent use by multiple goroutines and never changes after New,
// except for its per-host circuit breakers and retry throttles, the queue
// of its calls' deadlines, and what its attempts' traces have shown of the
// inner transport (see ErrNotSent).
type Transport struct {
	next  http.RoundTripper
	cfg   config
	err   error // from invalid options; every call returns it
	log   *zap.Logger
	clock Clock
	// sysClock says clock is the system clock, whose readings the call's
	// real-time machinery may share.
	sysClock bool
	hosts    *hosts
	dl       deadlineShards // the calls' budget deadlines, for calls in flight
	ids      corrIDs        // draws the calls' correlation ids

	met    *metrics     // nil without WithMeterProvider
	tracer trace.Tracer // nil without WithTracerProvider
}

// New returns a Transport that sends through next, or through
// cleanhttp.DefaultPooledTransport() if next is nil. New never fails: an
// invalid option makes every call through the Transport fail at once with an
// error matching ErrInvalidOption, before anything is sent; Err reports it
// at once, so that a pipeline can check its Transport at start-up.
func New(next http.RoundTripper, opts ...Option) *Transport {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if next == nil {
		next = cleanhttp.DefaultPooledTransport()
	}
	cfg.checkRules()
	t := &Transport{
		next:  next,
		cfg:   cfg,
		err:   cfg.configError(),
		log:   cfg.log,
		clock: cfg.clock,
		hosts: &hosts{cfg: &cfg},
	}
	_, t.sysClock = cfg.clock.(systemClock)
	if cfg.meterProvider != nil {
		t.met = newMetrics(cfg.meterProvider, t.hosts)
	}
	if cfg.tracerProvider != nil {
		t.tracer = cfg.tracerProvider.Tracer(InstrumentationName)
	}
	return t
}

// Err returns nil when every option given to New was valid, and otherwise
// the error, matching ErrInvalidOption, that every call through the
// Transport fails with (a request that is itself invalid is refused as
// one first): such a call sends nothing, and ends DeadLetter
// (StopInvalidOption), its letter kept if WithDeadLetter was given a
// valid sink, since the work it carried is still owed. Several invalid
// options make one error, on one line, that matches each of their causes.
func (t *Transport) Err() error { return t.err }

// CloseIdleConnections closes the idle connections of the inner transport,
// if it has such a method. The Transport never calls it itself: a failed
// call is no reason to throw a healthy pool away.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if ci, ok := t.next.(closeIdler); ok {
		ci.CloseIdleConnections()
	}
}

// errCallDeadline is the cancellation cause when a call's budget deadline
// ends an attempt in flight or a wait, and then the call's cause: it is the
// Transport's deadline, not the caller's, so it matches neither
// context.Canceled nor context.DeadlineExceeded.
var errCallDeadline = errors.New("call deadline reached")

// errNoResponse stands in for the error of an inner transport that broke
// the RoundTripper contract by returning neither a response nor an error.
var errNoResponse = errors.New("grantretry: inner transport returned neither a response nor an error")

// errAttemptTimeout is the cancellation cause when WithAttemptTimeout ends an
// attempt.
var errAttemptTimeout = errors.New("grantretry: attempt timeout")

// errRequestCanceled is the caller's cancellation by the deprecated
// Request.Cancel channel, when no context deadline explains it.
var errRequestCanceled = fmt.Errorf("grantretry: the request's Cancel channel was closed: %w", context.Canceled)

// attemptTimeoutError marks an attempt ended by WithAttemptTimeout: transient,
// unlike the caller's own deadline.
type attemptTimeoutError struct {
	d   time.Duration
	err error
}

func (e *attemptTimeoutError) Error() string {
	return fmt.Sprintf("grantretry: attempt timed out after %v: %v", e.d, e.err)
}
func (e *attemptTimeoutError) Unwrap() error { return e.err }

// call is the state of one logical call: one RoundTrip. It is never shared
// between goroutines.
type call struct {
	t      *Transport
	req    *http.Request // the caller's, never modified
	ctx    context.Context
	base   *http.Request // the clone every attempt is copied from
	p      payload
	host   *hostState
	pol    *config // the retry policy for the call's host (see ForHost)
	budget callBudget
	start  time.Time // on the Clock

	// The context every attempt runs under (see callContext): made by
	// real, under ctxMu, only when something needs it. ctxMu guards the
	// other fields until ctxState says made; after that they are read
	// without it.
	ctxMu     sync.Mutex
	ctxReal   context.Context
	ctxCancel context.CancelCauseFunc
	ctxCause  error // why it ended, while ended and not made
	// The budget deadline that ends the call's context, on deadlineClock (0:
	// none, the caller's ctx ends first, or the response is handed back),
	// and the call's place in one of t.dl's queues, which it enters only
	// once the context is made: dlShard (1 + the queue's index; 0: in
	// none) is guarded by ctxMu, dlIdx by the queue's mu.
	dlAt     atomic.Int64
	dlIdx    int32
	ctxState atomic.Uint32

	// The call's timers (its deadline, each attempt's timeout) cancel the
	// contexts a response's body is read under. Once a response is held,
	// to be judged and perhaps handed to the caller, they must not: a
	// timer that expires meanwhile only leaves its cancellation pending,
	// to be carried out if the response is discarded. timerMu guards held
	// and the pending fields; a timer's callback holds it while it
	// cancels, so a response is held either before a timer cut it or not
	// at all.
	timerMu        sync.Mutex
	pendingAttempt context.CancelCauseFunc // an attempt's timeout expired while held

	// The call's outcome context and, once a response is returned, its
	// body: parts of the call so that they cost no allocation of their own.
	octx  outcomeCtx
	rbody releaseOnClose
	// hvals backs the values of the attempts' header when they fit: the
	// two stamps and two of the caller's. Its strings are the header's,
	// and live as long as any attempt's request does.
	hvals       [4]string
	stopAttempt func(release bool) // of the attempt whose response is returned
	out         Outcome

	// reqCancel is the caller's deprecated Request.Cancel, nil if none:
	// http.Client still closes it to enforce Client.Timeout.
	reqCancel <-chan struct{}

	lastErr   error              // the last attempt's transport error, nil if it got a response
	askCancel context.CancelFunc // ends the context of a question asked before giving up

	// When the first and the last attempt were sent, on the Clock, as
	// nanoseconds after start plus one (0: none was): read only for a dead
	// letter, through firstSentAt and lastSentAt. Two times would take 32
	// bytes more, and the call out of its size class.
	sent        [2]int64
	trailBroken bool // the trail's failure is already in out.RecordErr
	failedOnce  bool // the breaker has counted one of the call's failures
	fleet       fleetCall
	// Guarded by timerMu (see above); here, among the other small
	// fields, so that no padding takes space: a call of at most 760
	// bytes, with the allocator's 8-byte header, takes the 768-byte size
	// class, and one byte more the 896-byte class.
	held        bool
	pendingCall bool         // the call's deadline expired while held
	dlShard     uint8        // see dlAt
	quota       uint8        // the attempt in flight is a quota's probe (see quota.go)
	anyAmbig    bool         // an attempt of the call was ambiguous (see followsAmbiguous)
	span        trace.Span   // the call's, nil without a tracer
	auditShared *auditShared // made at the call's first audit line
}

// RoundTrip sends one logical call: the request and as many retries as the
// policy allows. It returns the last response with a nil error whenever it
// obtained one (OutcomeOf tells how the call ended), and otherwise a nil
// response and an *Error. It never modifies req, and always closes its body.
//
// The policy, for each call and each of its attempts:
//
//   - Stamping. Every attempt carries the call's X-Correlation-ID (16
//     unguessable hex digits like NewCorrelationID's, unless the caller
//     set one) and, for POST and
//     PATCH, its Idempotency-Key, derived once before the first attempt by
//     IdempotencyKey from the submission id (WithSubmissionID) and the body
//     (a body too large to replay cannot be hashed before it is sent, and
//     gets no derived key; see DefaultReplayLimit).
//     Without a submission id the key is IdempotencyKey(method+" "+url+"\n",
//     body), the URL without user info, fragment or secret query
//     parameters. A key the caller set is kept. GET, HEAD, OPTIONS, TRACE, PUT and
//     DELETE get no key; any other method is retried only if the caller set a
//     key, and POST or PATCH only if it has one.
//   - Replay. The body is sent byte for byte on every attempt: through the
//     request's GetBody, or from a buffer of at most WithReplayLimit bytes.
//     A larger body without GetBody is sent exactly once.
//   - Classification. Classify sorts each response or transport error into
//     transient (429, 5xx in the transient set, timeouts, resets, refused
//     connections, EOF mid-response) and terminal (400, 401, 403, 404, 422,
//     any unknown status, the caller's cancellation, certificate failures,
//     invalid requests), unless WithClassifier's function or ClassifyLimits
//     gives a 4xx or 5xx a verdict of its own. Only transient faults are
//     retried. 1xx-3xx
//     responses are not failures and pass through untouched.
//   - Owed. A verdict that the funder will take the request later
//     ([Classification.Owed]: ClassifyLimits' quotas, a classifier's, or a
//     Retry-After that ends at or after the deadline) is not retried: the
//     call ends DeadLetter ([StopOwedLater]) at once, charged to no breaker
//     or throttle, and [Outcome.NotBefore] says when, if the funder said.
//   - Quota. Once a call to a host ends owed, the host's later calls are
//     held, sending nothing, each ending DeadLetter ([StopOwedLater]) with
//     the host's NotBefore: until that time, or, when the funder gave
//     none, all but one call per WithBreakerProbe interval, whose answer
//     that is not owed ends the quota. [FleetQuota] shares it in a fleet.
//   - Already applied. A verdict that the funder already did the work
//     ([Classification.Applied]) is never retried. After an ambiguous
//     attempt of the same call, or on the redelivery of an ambiguous
//     letter ([WithLetter]), it is the funder's word that the earlier
//     attempt landed: the call ends [Succeeded] ([StopAlreadyApplied]),
//     not ambiguous, and the caller gets the answer with a nil error; with
//     a reconciler ([WithReconciler]) and an Idempotency-Key, the
//     reconciler is asked once first, and a record it returns is what the
//     caller gets instead. Otherwise nothing the call sent could have been
//     applied before: the answer is a refusal, [FailedTerminal]. The
//     breaker and the throttle take it as any refusal.
//   - Backoff. Retry n waits FullJitter(n, base, cap), and never less than a
//     Retry-After the funder sent (ParseRetryAfter).
//   - Budget. At most maxRetries retries and a deadline per call, and the
//     caller's context. [WithCallOptions] sets them, and the backoff,
//     attempt timeout, status sets, classifier and reconciler, for one
//     call; never the host's breaker or throttle, which every call to the
//     host shares. A wait that would end at or after the deadline is not
//     slept: the call ends at once as DeadLetter, so a Retry-After of
//     hours cannot park a worker.
//   - Throttle. One retry token bucket per funder host, shared by every
//     call of the Transport (gRPC's retry throttling, gRFC A6): transient
//     failures drain it, successes and time refill it, and while it is
//     half empty or less no call to that host retries. A funder that is
//     down then sees one attempt per call, not five; a pipeline that makes
//     few calls has its retries back one refill period after a blip.
//   - Breaker. One circuit breaker per funder host (scheme, host, port),
//     counting transient failures only. While it is open, calls to that
//     host end at once as CircuitOpen, without sending or spending budget.
//   - Audit. Each attempt and each disposition is one structured zap line
//     (see the Msg* and Field* constants), and one slog record with
//     [WithSlog]; bodies, credentials, user info
//     and query strings are never logged. WithAuditTrail also writes every
//     record to an AuditSink, synced at every disposition before RoundTrip
//     returns; a Transport whose sink has failed sends nothing more. The
//     package github.com/grantretry/grantretry/trail is such a sink: a
//     write-once file whose records are chained by SHA-256, checked by
//     trail.Verify (or "grantretry audit verify").
//   - Dead letters. With WithDeadLetter, a call that ends DeadLetter or
//     CircuitOpen is handed to a DeadLetterSink as a Letter: the request
//     byte for byte with its key and ids, without its secrets (WithRedact
//     names more). The package github.com/grantretry/grantretry/deadletter
//     keeps letters as files, a crash leaving a whole letter or none, and
//     its Redeliver sends one again under its Idempotency-Key.
//
// This package imports neither of those two: they implement its
// interfaces, so other stores can take their place.
//
// The result: err == nil whenever a response was obtained, whatever its
// status: a 422 with its body, or the last 503 of a dead-lettered call.
// OutcomeOf(resp) tells how the call ended. When no response was obtained it
// returns an *Error, whose Outcome says the same and whose Unwrap gives the
// last cause; errors.Is matches ErrCircuitOpen, ErrDeadLetter,
// ErrInvalidRequest, ErrInvalidOption, context.Canceled and
// context.DeadlineExceeded as they apply. Transport.Err reports an
// invalid option at start-up, before any call.
//
// http.Client replaces the error of a call it timed out (Client.Timeout)
// with its own, which still matches context.DeadlineExceeded but is no
// *Error; prefer a context deadline, which the budget takes into account.
// http.Client also wraps errors in *url.Error, which quotes the URL with
// its query: redact before logging it.
//
// Outcome.Attempts counts every request on the wire, and the attempts an
// inner layer failed before sending anything (transport:not_sent), which
// reached no funder. net/http's Transport
// resends a replayable request on its own when a pooled connection fails
// after the request was written; the inner transport is given no GetBody,
// and a keyed request without a body is watched, so that resend is
// stopped and the retry is this package's own, counted and logged. One
// stays: an unkeyed GET, HEAD, OPTIONS or TRACE, which has no effect, may
// be resent uncounted. docs/exactly-once.md says what this and
// WithReconciler promise against a funder that ignores Idempotency-Key.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := &call{t: t, req: req}
	defer c.releaseHost()
	c.p.size = -1
	if t.tracer != nil && req != nil {
		c.startSpan()
		defer c.endSpanOnPanic()
	}
	if err := c.prepare(); err != nil {
		return nil, c.finishErr(err)
	}
	return c.loop()
}

// prepare validates the request and builds what every attempt shares. On
// error the caller's body is closed and nothing was sent.
func (c *call) prepare() error {
	t, req := c.t, c.req
	c.out.Disposition = FailedTerminal
	c.out.StopReason = StopInvalidRequest
	if req == nil {
		return fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	id, hasID := submissionID(req.Context())
	if hasID {
		c.out.SubmissionID = id
	}
	callerCorr, callerKey, hc, err := validateRequest(req, id, hasID, c.hvals[:])
	if err != nil {
		closeBody(req)
		return err
	}
	if t.err == nil {
		// A misconfigured Transport makes no host state: it sends nothing.
		c.host = t.hosts.forURL(req.URL)
		c.pol = c.host.cfg
	}
	if c.span == nil {
		c.ctx = req.Context()
	}
	//lint:ignore SA1019 http.Client closes Cancel for Client.Timeout, so it is the caller's cancellation too
	c.reqCancel = req.Cancel

	c.out.CorrelationID = callerCorr
	if c.out.CorrelationID == "" {
		c.out.CorrelationID = t.ids.next()
	}
	keyPrefix := ""
	if callerKey == "" && keyedMethod(req.Method) {
		keyPrefix = id
		if !hasID {
			keyPrefix = implicitKeyPrefix(req, t.cfg.redact)
		}
	}
	p := &c.p
	if err := p.read(req, t.cfg.replayLimit, keyPrefix, t.auditing(zap.WarnLevel)); err != nil {
		c.out.StopReason = StopBodyReadFailure
		return err
	}
	if p.size >= 0 && req.ContentLength > 0 && p.size != req.ContentLength {
		p.close()
		return fmt.Errorf("%w: ContentLength %d but the body has %d bytes", ErrInvalidRequest, req.ContentLength, p.size)
	}
	c.out.IdempotencyKey = callerKey
	if callerKey == "" {
		c.out.IdempotencyKey = p.key
	}
	if err := c.callPolicy(); err != nil {
		// A sound request through a misconfigured Transport, or with
		// invalid call options: nothing is sent, and the work is owed,
		// kept with its body as a letter.
		c.start = t.clock.Now()
		c.out.Disposition, c.out.StopReason = DeadLetter, StopInvalidOption
		c.keepUnsentBody()
		return err
	}
	// The budget's deadline runs from the first attempt, not from reading
	// a large body.
	c.start = t.clock.Now()
	if err := c.callerErr(); err != nil {
		c.out.Disposition, c.out.StopReason = Canceled, StopCanceled
		return err
	}
	if err := t.trailErr(); err != nil {
		c.failClosed()
		return fmt.Errorf("not sent, since the audit trail cannot record it: %w", err)
	}
	c.startContexts()
	c.buildBase(&hc)
	c.budget = newCallBudget(c.ctx, c.start, c.pol.maxRetries, c.pol.deadline)
	return nil
}

// keepUnsentBody reads the rest of a body too large to replay, which no
// attempt has taken, so that the letter of a call that sends nothing
// holds it whole (up to MaxLetterBody, as any letter).
func (c *call) keepUnsentBody() {
	p := &c.p
	if p.first == nil || c.t.cfg.letters == nil {
		return
	}
	rc := p.first
	p.first = nil
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxLetterBody+1))
	switch {
	case err != nil:
		p.whyNotRe = fmt.Sprintf("reading the body for the letter failed: %v", err)
	case len(b) <= MaxLetterBody:
		p.buf, p.size, p.whyNotRe = b, int64(len(b)), ""
	}
}

// buildBase makes the request every attempt is copied from: a shallow copy
// of the caller's with its own headers, the URL and the rest shared and
// never written. ContentLength stays the caller's: a body of unknown length
// goes out chunked, with its trailers, as the caller built it. hc is the
// caller's header as validateRequest copied it, without the stamps.
//
// It carries no GetBody. With one, net/http's Transport sends a request
// again on its own when a kept-alive connection fails after the request
// was written: a second copy on the wire that no attempt counts, and a
// duplicate at a funder that ignores Idempotency-Key. Without it, net/http
// resends only what it never wrote (or a request without a body, which
// guardsResend watches), and the Transport's own loop decides the rest.
func (c *call) buildBase(hc *headerCopy) {
	c.base = c.req.WithContext(c.callCtx())
	c.base.Header = hc.stamp(c.out.CorrelationID, c.out.IdempotencyKey)
	c.base.Body = nil
	c.base.GetBody = nil
}

// Canonical forms of the header names, used as map keys directly so that
// stamping a request canonicalises nothing.
var (
	canonCorrelationID  = http.CanonicalHeaderKey(HeaderCorrelationID)
	canonIdempotencyKey = http.CanonicalHeaderKey(HeaderIdempotencyKey)
)

// headerCopy is the header every attempt is sent with, being built: the
// map, and one slice that backs every value, the call's buffer when the
// values fit in it.
type headerCopy struct {
	h    http.Header
	vals []string
}

// newHeaderCopy starts a copy of a header of keys names holding nvals
// values, with room for the two stamps.
func newHeaderCopy(keys, nvals int, buf []string) headerCopy {
	vals := buf[:0]
	if cap(vals) < nvals+2 {
		vals = make([]string, 0, nvals+2)
	}
	return headerCopy{h: make(http.Header, keys+2), vals: vals}
}

// add copies the caller's entry k, which is not a stamped one. Each value
// slice is capped, so that appending to one cannot overwrite the next.
func (hc *headerCopy) add(k string, vs []string) {
	if vs == nil {
		hc.h[k] = nil
		return
	}
	start := len(hc.vals)
	hc.vals = append(hc.vals, vs...)
	hc.h[k] = hc.vals[start:len(hc.vals):len(hc.vals)]
}

// stamp sets the correlation id and the key, if any, and returns the
// header.
func (hc *headerCopy) stamp(corr, key string) http.Header {
	hc.vals = append(hc.vals, corr)
	n := len(hc.vals)
	hc.h[canonCorrelationID] = hc.vals[n-1 : n : n]
	if key != "" {
		hc.vals = append(hc.vals, key)
		n = len(hc.vals)
		hc.h[canonIdempotencyKey] = hc.vals[n-1 : n : n]
	}
	return hc.h
}

// isStamped reports whether k, in any spelling, is a header the Transport
// stamps on every attempt.
func isStamped(k string) bool {
	return strings.EqualFold(k, canonCorrelationID) || strings.EqualFold(k, canonIdempotencyKey)
}

// foldEq is strings.EqualFold for a valid header name k (ASCII only, see
// validHeaderName): names of other lengths are not compared at all.
func foldEq(k, canon string) bool {
	return len(k) == len(canon) && strings.EqualFold(k, canon)
}

// callCtx is the context every attempt runs under: the caller's, ended also
// at the budget deadline, and carrying the outcome that OutcomeOf reads from
// the response (see callContext).
func (c *call) callCtx() context.Context { return (*callContext)(c) }

// callCtxEnd ends the call's context with cause, nil once the call is over.
func (c *call) callCtxEnd(cause error) { (*callContext)(c).end(cause) }

// startContexts starts the call's context, and sets the budget deadline
// that ends it, unless the caller's ends it first. The deadline enters a
// queue only when the context is made (see callContext.real): a context
// that nothing watches has nothing in flight to cut.
func (c *call) startContexts() {
	c.octx.Context = c.ctx
	limit := c.pol.deadline
	// The deadline is real time. With the system clock the budget's
	// start is that reading already: one clock read where two were.
	now := c.start
	if !c.t.sysClock {
		now = time.Now()
	}
	if d, ok := c.ctx.Deadline(); !ok || d.Sub(now) > limit {
		c.dlAt.Store(deadlineClock(now.Add(limit)))
	}
}

// deadlineExpired is the deadline queue's callback.
func (c *call) deadlineExpired() { c.expire(c.callCtxEnd, errCallDeadline, nil) }

// expire carries out a timer of the call: it cancels with cause, unless a
// response is held, in which case the cancellation is left pending. An
// attempt's timer passes its stopped flag (guarded by timerMu): a callback
// that runs after its attempt ended does nothing, so it cannot take the
// place of the next attempt's pending cancellation.
func (c *call) expire(cancel context.CancelCauseFunc, cause error, stopped *bool) {
	c.timerMu.Lock()
	defer c.timerMu.Unlock()
	switch {
	case stopped != nil && *stopped:
	case !c.held:
		cancel(cause)
	case stopped != nil:
		c.pendingAttempt = cancel
	default:
		c.pendingCall = true
	}
}

// hold keeps the call's timers off the contexts a response obtained under
// ctx is read under. It fails if one of them has already cut ctx, and the
// response with it.
func (c *call) hold(ctx context.Context) bool {
	c.timerMu.Lock()
	defer c.timerMu.Unlock()
	// The call's own context, if nothing has made it, has no timer that
	// could have cut it (see callContext): an answer that comes after the
	// deadline from a transport that never watched it is still an answer.
	own := ctx == c.callCtx() && c.ctxState.Load() == ctxFresh
	if !own {
		if cause := context.Cause(ctx); cause == errAttemptTimeout || cause == errCallDeadline {
			return false
		}
	}
	c.held = true
	return true
}

// unhold lets the timers act again, once a held response is discarded, and
// carries out what expired meanwhile: an attempt timeout bounds the drain,
// and the call's deadline ends the wait.
func (c *call) unhold() {
	c.timerMu.Lock()
	defer c.timerMu.Unlock()
	c.held = false
	if c.pendingAttempt != nil {
		c.pendingAttempt(errAttemptTimeout)
		c.pendingAttempt = nil
	}
	if c.pendingCall {
		c.callCtxEnd(errCallDeadline)
		c.pendingCall = false
	}
}

// stopContexts disarms the budget deadline; with release set it also cancels
// the call's context.
func (c *call) stopContexts(release bool) {
	(*callContext)(c).stopDeadline()
	if release {
		c.callCtxEnd(nil)
	}
	if release && c.askCancel != nil {
		c.askCancel()
	}
}

// decision is what the loop does after one attempt.
type decision struct {
	retry      bool
	reconcile  bool // ask the reconciler before the retry
	wait       time.Duration
	waitSource string
	stop       string      // why not, when !retry
	disp       Disposition // the disposition, when !retry
}

func (c *call) loop() (*http.Response, error) {
	if done, resp, err := c.reconcileFirst(); done {
		return resp, err
	}
	for {
		if err := c.t.trailErr(); err != nil && c.out.Attempts > 0 {
			// The trail broke during the wait, maybe on another call's
			// record: no retry goes out that it cannot show.
			c.failClosed()
			return nil, c.finishErr(fmt.Errorf("not retried, since the audit trail cannot record it: %w", err))
		}
		if err := c.quotaHold(); err != nil {
			return nil, c.finishErr(err)
		}
		done, probe, err := c.allow()
		if err != nil {
			c.logBreakerChanges()
			c.out.Disposition, c.out.StopReason = CircuitOpen, StopCircuitOpen
			return nil, c.finishErr(err)
		}
		a, d, disp, err := c.send(&permit{done: done, probe: probe})
		if err != nil {
			return nil, c.finishErr(err)
		}

		if !d.retry {
			c.out.Disposition, c.out.StopReason = d.disp, d.stop
			if resp := c.askBeforeGivingUp(a); resp != nil {
				c.out.NotBefore = time.Time{}
				return c.finishReconciled(resp)
			}
			if resp := c.askAlreadyApplied(a); resp != nil {
				return c.finishRecord(resp)
			}
			if a.resp != nil {
				return c.finishResp(a)
			}
			a.stop(true)
			return nil, c.finishErr(c.attemptCause(a.err, disp))
		}

		if a.resp != nil {
			c.unhold()
			drain(a.resp.Body)
		}
		a.stop(true)
		c.budget.spend()
		if werr := c.wait(d.wait); werr != nil {
			return nil, c.finishErr(c.interrupted(werr))
		}
		if d.reconcile {
			resp, err := c.settle()
			switch {
			case err != nil:
				return nil, c.finishErr(err)
			case resp != nil:
				return c.finishReconciled(resp)
			}
		}
	}
}

// attemptCause is the cause of a call that an attempt's error ended.
func (c *call) attemptCause(err error, disp Disposition) error {
	var ended error
	switch disp {
	case DeadLetter:
		// verdict says so only when the call's deadline cut the attempt
		// short, whose own error is then the context's "canceled".
		ended = errCallDeadline
	case Canceled:
		ended = c.callerErr()
	}
	if ended == nil || errors.Is(err, ended) {
		return err
	}
	// Say whose deadline or cancellation it was: the inner transport's
	// error may not (net/http's "request canceled" for Request.Cancel).
	return fmt.Errorf("%w; the attempt in flight ended with: %v", ended, err)
}

// send makes one attempt under the breaker's permission and judges it. A
// non-nil error means no attempt could be built (the body failed), and the
// outcome says how the call ends.
//
// Every path gives the permission back exactly once, a panic included
// (from the caller's GetBody or Clock, the logger, the inner transport): a
// half-open breaker whose probe is never reported refuses its host for
// good. On a panic the call's body, response and contexts are released
// too, and the panic goes on up, as gobreaker's own Execute does.
func (c *call) send(p *permit) (a sentAttempt, d decision, disp Disposition, err error) {
	var body io.ReadCloser
	ok, sending := false, false
	defer func() {
		if ok {
			return
		}
		if sending {
			c.quotaSpend() // the panicking attempt may have reached the funder
		}
		p.give(errBreakerExcluded)
		if body != nil {
			body.Close() // the inner transport may not have got to it
		}
		if a.resp != nil {
			closeResp(a.resp)
		}
		if a.stop != nil {
			a.stop(true)
		}
		if a.span != nil {
			a.span.End()
		}
		c.abandonFleetProbe()
		c.p.close()
		c.stopContexts(true)
	}()
	// The breaker may have moved to half-open to allow this attempt.
	c.logBreakerChanges()

	body, err = c.p.body()
	if err != nil {
		p.give(errBreakerExcluded)
		c.abandonFleetProbe()
		c.out.StopReason = StopBodyReadFailure
		ok = true
		if c.out.Attempts == 0 {
			return a, d, "", fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		// A retry could not be built: the work is still owed.
		c.out.Disposition = DeadLetter
		return a, d, "", err
	}
	// Reading the time costs more than the rest of a success path's
	// bookkeeping on some machines: only the audit trail needs it.
	logging := c.t.auditing(zap.InfoLevel)
	var sent time.Time
	if logging || c.t.met != nil {
		sent = time.Now()
	}
	if c.t.cfg.letters != nil {
		c.noteSent()
	}
	sending = true
	c.attempt(&a, body)
	c.out.Attempts++
	d, disp = c.judge(a, p, logging, sent)
	ok = true
	return a, d, disp, nil
}

// judge settles what one attempt means: the verdict, what the breaker and
// the throttle learn from it, whether the call goes on, and the attempt's
// audit line. It returns the decision and the verdict's own disposition
// ("" unless the attempt alone ends the call). A response it returns is
// held (see hold) before the line is written, which may take a while.
func (c *call) judge(a sentAttempt, p *permit, logging bool, sent time.Time) (decision, Disposition) {
	// One reading of the Clock judges a failed attempt, so that whether a
	// Retry-After ends past the deadline, when an owed call may be sent,
	// and whether a wait fits the budget all agree. A success needs none.
	var now time.Time
	if a.err != nil || a.resp.StatusCode >= 400 {
		now = c.t.clock.Now()
	}
	v, disp, stop := c.verdict(a, now)
	brk := c.breakerVerdict(a.err, v, disp, p.probe || c.fleet.probe)
	p.give(brk)
	c.throttleVerdict(a.resp, v, disp)
	c.fleetVerdict(a.resp, v, brk)

	d := decision{disp: disp, stop: stop}
	// An owed call's alone (see Outcome.NotBefore); decide sets it for a
	// Retry-After past the deadline.
	c.out.NotBefore = time.Time{}
	if stop == StopOwedLater {
		c.out.NotBefore = v.NotBefore
	}
	if disp == "" {
		d = c.decide(a.resp, now)
	}
	c.quotaVerdict(a, d.stop)
	c.out.Reason = v.Reason
	c.out.Status = 0
	if a.resp != nil {
		c.out.Status = a.resp.StatusCode
	}
	c.lastErr = a.err
	// Sticky until a reconciler answers: a later attempt that was not
	// applied says nothing of an earlier one that may have been. An
	// answer that the earlier one was applied is the funder's word.
	ambiguous := a.ambiguous(v)
	c.anyAmbig = c.anyAmbig || ambiguous
	c.out.Ambiguous = (c.out.Ambiguous || ambiguous) && stop != StopAlreadyApplied
	d.reconcile = d.retry && c.out.Ambiguous && c.pol.reconciler != nil && c.out.IdempotencyKey != ""
	if logging {
		c.logAttempt(attemptRecord{
			n: c.out.Attempts, status: c.out.Status, err: a.err, verdict: v,
			wait: d.wait, waitSource: d.waitSource,
			latency: time.Since(sent), elapsed: c.elapsed(),
		})
	}
	// After the attempt's line: the attempt is why the breaker moved.
	c.logBreakerChanges()
	if d.retry && c.trailBroken {
		// Fail closed mid-call too, without waiting first.
		d = decision{stop: StopAuditTrail, disp: DeadLetter}
	}
	if c.t.met != nil || a.span != nil {
		c.observeAttempt(&a, v, d, sent)
	}
	return d, disp
}

// sentAttempt is one attempt as sent: the request, what came back, and how
// to end its context (with true at once; with false only when the returned
// response's body is closed).
type sentAttempt struct {
	req  *http.Request
	resp *http.Response
	err  error
	stop func(release bool)
	// The ClassifyFunc's verdict on resp, when it gave one.
	class      Classification
	classified bool
	ends       time.Time     // when the attempt timeout cuts it; zero: none
	trace      *attemptTrace // what net/http did on the wire, when watched
	span       trace.Span    // the attempt's, nil without a tracer
}

// attempt sends one attempt with the given body, filling in a as it goes,
// so that on a panic send's cleanup finds what was obtained. A response it
// leaves in a is held: no timer of the call cuts it until it is discarded
// (unhold).
func (c *call) attempt(a *sentAttempt, body io.ReadCloser) {
	ctx := c.callCtx()
	a.stop = func(bool) {}
	var cancel context.CancelCauseFunc
	if d := c.pol.attemptTimeout; d > 0 {
		actx, acancel := context.WithCancelCause(ctx)
		stopped := false // guarded by timerMu: a late callback of this attempt's timer does nothing
		timer := time.AfterFunc(d, func() { c.expire(acancel, errAttemptTimeout, &stopped) })
		a.ends = time.Now().Add(d)
		ctx, cancel = actx, acancel
		a.stop = func(release bool) {
			if !timer.Stop() {
				// It fired, or is firing: keep its callback off the
				// next attempt's pending cancellation.
				c.timerMu.Lock()
				stopped = true
				c.timerMu.Unlock()
			}
			if release {
				acancel(nil)
			}
		}
		defer func() {
			// The attempt's own error says "context canceled"; say why,
			// so it is classified as the transient timeout it is.
			if a.err != nil && c.callCtx().Err() == nil && context.Cause(actx) == errAttemptTimeout {
				a.err = &attemptTimeoutError{d: d, err: a.err}
			}
		}()
	}
	if guard, rec := c.guardsResend(), c.pol.reconciler != nil; guard || rec || c.evidence().watching() {
		if cancel == nil && guard {
			actx, acancel := context.WithCancelCause(ctx)
			ctx, cancel = actx, acancel
			a.stop = func(release bool) {
				if release {
					acancel(nil)
				}
			}
		}
		ctx, a.trace = withAttemptTrace(ctx, cancel, guard, rec, guard && c.stopsH2C())
	}
	if c.span != nil {
		ctx, a.span = c.startAttemptSpan(ctx)
	}
	// The first attempt may use the clone itself; later ones get a shallow
	// copy, since the inner transport may still hold the previous request.
	a.req = c.base
	if ctx != c.base.Context() || c.out.Attempts > 0 {
		a.req = c.base.WithContext(ctx)
	}
	a.req.Body = body
	a.resp, a.err = c.t.next.RoundTrip(a.req)
	if a.err != nil && a.resp != nil {
		// A broken inner transport: the contract says this never happens.
		closeResp(a.resp)
		a.resp = nil
	}
	if a.err == nil && a.resp == nil {
		a.err = errNoResponse
	}
	if a.trace != nil {
		c.evidence().observe(a)
	}
	if a.trace != nil && a.trace.stoppedResend() {
		if a.resp != nil {
			closeResp(a.resp)
		}
		a.resp, a.err = nil, fmt.Errorf("%w (%v)", errResendStopped, a.err)
	}
	if a.resp != nil && !c.hold(ctx) {
		// A timer cut the attempt as its answer arrived, and the body
		// with it: the attempt is what the timer says it is.
		closeResp(a.resp)
		a.resp, a.err = nil, ctx.Err()
	}
	if a.resp != nil && a.resp.StatusCode >= 400 {
		// After the hold: the answer came within the attempt, and no
		// timer may cut it while its body is read. The read's own wait
		// ends before the attempt's time and the call's do.
		received := c.t.clock.Now()
		a.class, a.classified = classifyResponse(c.pol.classifier, a.resp, c.peekWait(ctx, a.ends), received, c.scrubText)
	}
}

// peekWait is how long the body of a held response may be waited for: at
// most maxPeekWait, and never past the attempt's end (zero: none), the
// call's deadline or the caller's.
func (c *call) peekWait(ctx context.Context, attemptEnds time.Time) time.Duration {
	now := time.Now()
	wait := maxPeekWait
	if !attemptEnds.IsZero() {
		wait = min(wait, attemptEnds.Sub(now))
	}
	if at := c.dlAt.Load(); at != 0 {
		wait = min(wait, deadlineTime(at).Sub(now))
	}
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, d.Sub(now))
	}
	return wait
}

// verdict classifies one attempt. A non-empty disposition means the call
// ends here whatever the budget says: the caller cancelled, or the call's
// deadline cut the attempt short.
func (c *call) verdict(a sentAttempt, now time.Time) (Classification, Disposition, string) {
	resp, err := a.resp, a.err
	if err == nil {
		v := c.pol.sets.classify(resp.StatusCode, nil)
		if a.classified {
			v = a.class
		}
		switch {
		case resp.StatusCode >= 100 && resp.StatusCode < 400:
			return v, Succeeded, StopSuccess
		case v.Applied:
			v.Retryable, v.Owed = false, false
			if c.followsAmbiguous() {
				return v, Succeeded, StopAlreadyApplied
			}
			return v, FailedTerminal, StopTerminal
		case v.Owed:
			return owed(resp, v, now), DeadLetter, StopOwedLater
		case !v.Retryable:
			return v, FailedTerminal, StopTerminal
		}
		if until, ok := c.retryAfterPastDeadline(resp, now); ok {
			reason := "owed:" + strconv.Itoa(resp.StatusCode) + ";retry_after"
			return Classification{Owed: true, NotBefore: until, Reason: reason}, DeadLetter, StopOwedLater
		}
		return v, "", ""
	}
	if cerr := c.callerErr(); cerr != nil {
		return classifyError(cerr), Canceled, StopCanceled
	}
	if errors.Is(context.Cause(c.callCtx()), errCallDeadline) {
		if a.sentNothing() {
			return notSentClass, DeadLetter, StopDeadline
		}
		return Classification{Retryable: true, Reason: "transport:timeout"}, DeadLetter, StopDeadline
	}
	v := classifyError(err)
	if !v.Retryable {
		return v, FailedTerminal, StopTerminal
	}
	switch sent := !a.sentNothing(); {
	case !sent:
		// Whatever the inner layer's error says, it is that layer's:
		// nothing reached the funder.
		v = notSentClass
	case !v.charged():
		// An ErrNotSent that the attempt's own trace contradicts: the
		// request was on its way to the funder.
		v = Classification{Retryable: true, Reason: "transport:network"}
	}
	return v, "", ""
}

// owed completes an Owed verdict: it is not retried, its NotBefore is the
// end of the response's Retry-After when that is later (the funder said
// not before then), and a NotBefore already past is now.
func owed(resp *http.Response, v Classification, now time.Time) Classification {
	v.Retryable = false
	if after, ok := retryAfter(resp.Header, now); ok && now.Add(after).After(v.NotBefore) {
		v.NotBefore = now.Add(after)
	}
	if !v.NotBefore.IsZero() && v.NotBefore.Before(now) {
		v.NotBefore = now
	}
	return v
}

// retryAfterPastDeadline reports whether resp's Retry-After asks for a wait
// that ends at or after the call's deadline, and when it ends, for a call
// that could otherwise retry: the funder will take the request then, and a
// worker must not wait for it. A request that cannot be sent again is left
// to decide, whose stop reason says why.
func (c *call) retryAfterPastDeadline(resp *http.Response, now time.Time) (time.Time, bool) {
	if len(resp.Header["Retry-After"]) == 0 || !c.p.replayable() ||
		(!idempotentMethod(c.req.Method) && c.out.IdempotencyKey == "") {
		return time.Time{}, false
	}
	after, ok := retryAfter(resp.Header, now)
	if !ok || after < c.budget.deadline.Sub(now) {
		return time.Time{}, false
	}
	return now.Add(after), true
}

// breakerVerdict is what the attempt tells the host's breaker. A call's
// failures count once: its first transient failure is a failure, and so is
// a failed probe, which must reopen the breaker; its other retries are left
// out, so that no single call, however many attempts it makes, trips the
// breaker. The breaker opens after threshold failed calls in a row. An
// attempt that sent nothing tells it nothing, a probe included: it says
// nothing of the funder, and neither does an Owed verdict: a quota is not
// an outage.
func (c *call) breakerVerdict(err error, v Classification, disp Disposition, probe bool) error {
	switch {
	case disp == Canceled, !v.charged(), v.Owed:
		return errBreakerExcluded
	case v.Retryable:
		if c.failedOnce && !probe {
			return errBreakerExcluded
		}
		c.failedOnce = true
		return errBreakerFailure
	case err != nil:
		return errBreakerExcluded // terminal transport errors say nothing of the funder
	}
	return nil
}

// throttleVerdict moves the host's retry throttle: a transient failure
// takes a token, a 1xx-3xx response gives some back, and anything else
// (terminal answers, the caller's cancellation, an attempt that sent
// nothing, a call left out of the throttle) leaves it be.
func (c *call) throttleVerdict(resp *http.Response, v Classification, disp Disposition) {
	switch {
	case disp == Canceled, !c.pol.throttleOn:
	case v.Retryable && v.charged():
		c.host.throttle.onFailure()
	case resp != nil && resp.StatusCode >= 100 && resp.StatusCode < 400:
		c.host.throttle.onSuccess()
	}
}

// decide settles whether a transient failure is retried, and after how
// long, at now.
func (c *call) decide(resp *http.Response, now time.Time) decision {
	if !c.p.replayable() {
		return decision{stop: StopNotReplayable, disp: DeadLetter}
	}
	if !idempotentMethod(c.req.Method) && c.out.IdempotencyKey == "" {
		return decision{stop: StopNotIdempotent, disp: DeadLetter}
	}
	jitter := fullJitter(c.pol.rand, c.budget.spent, c.pol.base, c.pol.cap)
	var after time.Duration
	hasAfter := false
	if resp != nil {
		after, hasAfter = retryAfter(resp.Header, now)
	}
	wait, src := chooseWait(jitter, after, hasAfter)
	if ok, stop := c.budget.check(now, wait, src == waitSourceRetryAfter); !ok {
		if stop == StopOwedLater {
			c.out.NotBefore = now.Add(after)
		}
		return decision{stop: stop, disp: DeadLetter}
	}
	if c.breakerRefuses() {
		// The breaker opened, on this failure or another call's: do not
		// wait for an attempt it will refuse. It is checked before the
		// throttle because when both trip at once, "the funder is down"
		// is the more useful thing to tell the caller.
		return decision{stop: StopCircuitOpen, disp: CircuitOpen}
	}
	if stop, disp := c.fleetStop(!c.pol.throttleOn || c.host.throttle.allowRetry()); stop != "" {
		if stop == StopThrottled && c.t.met != nil {
			c.t.met.throttleRefusals.Add(context.Background(), 1, c.hostOnly())
		}
		return decision{stop: stop, disp: disp}
	}
	return decision{retry: true, wait: wait, waitSource: src}
}

// interrupted turns an error from the wait into the call's ending.
func (c *call) interrupted(werr error) error {
	if cerr := c.callerErr(); cerr != nil {
		c.out.Disposition, c.out.StopReason = Canceled, StopCanceled
		return cerr
	}
	c.out.Disposition, c.out.StopReason = DeadLetter, StopDeadline
	if cause := context.Cause(c.callCtx()); cause != nil {
		return cause
	}
	return werr
}

// callerErr is the caller's cancellation, nil while there is none: its
// context's error, or, once the deprecated Request.Cancel is closed,
// context.DeadlineExceeded if the context's deadline has passed and
// errRequestCanceled if not. http.Client enforces Timeout on a RoundTripper
// it does not know by a context deadline and by closing Request.Cancel at
// the same instant; when the channel wins, the inner transport fails with
// "request canceled" before the context reports why, and that must not be
// taken for the funder's failure.
func (c *call) callerErr() error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	if c.reqCancel == nil {
		return nil
	}
	select {
	case <-c.reqCancel:
	default:
		return nil
	}
	if d, ok := c.ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return errRequestCanceled
}

// wait sleeps d on the Clock before the next attempt, until the call's
// context ends. A Request.Cancel closed meanwhile ends it too; watching the
// channel takes a goroutine, which only requests that carry one pay for.
func (c *call) wait(d time.Duration) error {
	if c.reqCancel == nil {
		return c.t.clock.Sleep(c.callCtx(), d)
	}
	ctx, stop := context.WithCancel(c.callCtx())
	defer stop()
	go func() {
		select {
		case <-c.reqCancel:
			stop()
		case <-ctx.Done():
		}
	}()
	return c.t.clock.Sleep(ctx, d)
}

// elapsed is the time since the budget's start, on the Clock. With the
// system clock that is time.Since, which reads only the monotonic clock
// (32 ns against time.Now's 57 on this project's VM).
func (c *call) elapsed() time.Duration {
	if c.t.sysClock {
		return time.Since(c.start)
	}
	return c.t.clock.Now().Sub(c.start)
}

// finishResp hands a response to the caller: the outcome is recorded where
// OutcomeOf finds it, and the attempt's contexts end when its body is closed.
func (c *call) finishResp(a sentAttempt) (*http.Response, error) {
	resp := a.resp
	c.out.Elapsed = c.elapsed()
	c.octx.o = &c.out
	resp.Request = a.req
	a.stop(false)
	c.stopContexts(false)
	c.stopAttempt = a.stop
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil {
		// An upgraded connection's body is also its writer: leave it
		// unwrapped, and its lifetime to the caller's context.
		c.release()
	} else {
		c.rbody.ReadCloser, c.rbody.c = resp.Body, c
		resp.Body = &c.rbody
	}
	c.judgeLate()
	c.keepLetter(nil)
	c.logDisposition(nil)
	if c.t.met != nil || c.span != nil {
		c.observeEnd(nil)
	}
	return resp, nil
}

// release ends the contexts of a call whose response was returned.
func (c *call) release() {
	c.stopAttempt(true)
	c.stopContexts(true)
}

// finishErr ends a call that has no response to return.
func (c *call) finishErr(cause error) error {
	c.p.close()
	c.stopContexts(true)
	if !c.start.IsZero() {
		c.out.Elapsed = c.elapsed()
	}
	if c.req != nil {
		c.judgeLate()
		c.keepLetter(cause)
		c.logDisposition(cause)
		if c.t.met != nil || c.span != nil {
			c.observeEnd(cause)
		}
	}
	return newError(c.out, cause, c.scrub)
}

// failClosed ends a call the audit trail can no longer record: nothing more
// is sent, and the work is still owed.
func (c *call) failClosed() {
	c.out.Disposition, c.out.StopReason = DeadLetter, StopAuditTrail
}

// noteSent notes the time an attempt is sent, for the dead letter.
func (c *call) noteSent() {
	at := int64(max(c.t.clock.Now().Sub(c.start), 0)) + 1
	if c.out.Attempts == 0 {
		c.sent[0] = at
	}
	c.sent[1] = at
}

// firstSentAt and lastSentAt are when the first and the last attempt were
// sent, on the Clock; zero if none was.
func (c *call) firstSentAt() time.Time { return c.sentAt(0) }
func (c *call) lastSentAt() time.Time  { return c.sentAt(1) }

func (c *call) sentAt(i int) time.Time {
	if c.sent[i] == 0 {
		return time.Time{}
	}
	return c.start.Add(time.Duration(c.sent[i] - 1))
}

// recordFailed notes that the call could not be recorded as promised: the
// caller finds it in Outcome.RecordErr.
func (c *call) recordFailed(err error) {
	c.out.RecordErr = errors.Join(c.out.RecordErr, err)
}

// releaseOnClose ends an attempt's contexts when the caller closes the body,
// not before: cancelling earlier would cut off the body mid-read.
type releaseOnClose struct {
	io.ReadCloser
	c    *call
	done atomic.Bool
}

func (b *releaseOnClose) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.c.release()
	}
	return err
}

// drain reads a little of a discarded body so its connection can be reused,
// then closes it.
func drain(body io.ReadCloser) {
	if body == nil {
		return
	}
	io.CopyN(io.Discard, body, maxDrain)
	body.Close()
}

func closeResp(resp *http.Response) {
	if resp.Body != nil {
		resp.Body.Close()
	}
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		r.Body.Close()
	}
}

// validateRequest refuses, before anything is sent, what net/http would
// refuse with an untyped error, and what would let a caller smuggle a header.
// In the same pass over the headers it returns the caller's own correlation
// id and idempotency key, if set, in whatever spelling http.Header was given
// them (the canonical one wins), and copies the others for the attempts
// (buf backs their values when they fit: see headerCopy).
func validateRequest(r *http.Request, id string, hasID bool, buf []string) (corr, key string, hc headerCopy, err error) {
	if err := validateTarget(r); err != nil {
		return "", "", hc, err
	}
	// One value per name is the common case; a name with more grows the
	// values' slice.
	hc = newHeaderCopy(len(r.Header), len(r.Header), buf)
	var corrCanon, keyCanon bool
	for k, vs := range r.Header {
		if !validHeaderName(k) {
			return "", "", hc, fmt.Errorf("%w: invalid header name %q", ErrInvalidRequest, k)
		}
		for _, v := range vs {
			if hasControl(v) {
				return "", "", hc, fmt.Errorf("%w: header %s has a control character (CR or LF?)", ErrInvalidRequest, k)
			}
		}
		isCorr := foldEq(k, canonCorrelationID)
		isKey := !isCorr && foldEq(k, canonIdempotencyKey)
		switch {
		case !isCorr && !isKey:
			hc.add(k, vs)
		case len(vs) == 0:
		case k == canonCorrelationID:
			corr, corrCanon = vs[0], true
		case k == canonIdempotencyKey:
			key, keyCanon = vs[0], true
		case isCorr && !corrCanon:
			corr = vs[0]
		case isKey && !keyCanon:
			key = vs[0]
		}
	}
	if hasID {
		if err := validateSubmissionID(id); err != nil {
			return "", "", hc, err
		}
	}
	return corr, key, hc, nil
}

// validateTarget checks what the request is sent to and with: URL, method,
// body length, trailers.
func validateTarget(r *http.Request) error {
	if r.URL == nil {
		return fmt.Errorf("%w: nil URL", ErrInvalidRequest)
	}
	switch r.URL.Scheme { // net/http takes these two spellings only
	case "http", "https":
	default:
		return fmt.Errorf("%w: unsupported protocol scheme %q", ErrInvalidRequest, r.URL.Scheme)
	}
	if r.URL.Host == "" {
		return fmt.Errorf("%w: no host in URL", ErrInvalidRequest)
	}
	// net/http takes a method that is an RFC 9110 token, as a header
	// name is, and refuses any other before it dials.
	if !commonMethod(r.Method) && !validHeaderName(r.Method) {
		return fmt.Errorf("%w: invalid method %q (not an RFC 9110 token)", ErrInvalidRequest, r.Method)
	}
	if (r.Body == nil || r.Body == http.NoBody) && r.ContentLength > 0 {
		return fmt.Errorf("%w: ContentLength %d with no body", ErrInvalidRequest, r.ContentLength)
	}
	for k, vs := range r.Trailer {
		if err := validateTrailer(k, vs); err != nil {
			return err
		}
	}
	return nil
}

// validateTrailer checks one trailer as net/http does: its name a token
// that is not one of the three net/http refuses to announce (it fails on
// those only once the request is being written), and its values, as far
// as they are set when the call starts, header values.
func validateTrailer(k string, vs []string) error {
	if !validHeaderName(k) {
		return fmt.Errorf("%w: invalid trailer name %q", ErrInvalidRequest, k)
	}
	for _, forbidden := range [...]string{"Transfer-Encoding", "Trailer", "Content-Length"} {
		if foldEq(k, forbidden) {
			return fmt.Errorf("%w: %s cannot be a trailer", ErrInvalidRequest, forbidden)
		}
	}
	for _, v := range vs {
		if hasControl(v) {
			return fmt.Errorf("%w: trailer %s has a control character (CR or LF?)", ErrInvalidRequest, k)
		}
	}
	return nil
}

// validHeaderName reports whether k is an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !tokenChar[k[i]] {
			return false
		}
	}
	return true
}

// tokenChar says which bytes a header name may hold (RFC 9110's tchar):
// visible ASCII but the separators.
var tokenChar = func() (t [256]bool) {
	for c := '!'; c < 0x7f; c++ {
		t[c] = !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c)
	}
	return t
}()

// commonMethod reports whether m is one of the methods a grant pipeline
// sends, which validateTarget then need not scan.
func commonMethod(m string) bool {
	switch m {
	case "", http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}
