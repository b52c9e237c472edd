package grantretry

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Audit messages: the first field a reader filters on.
const (
	MsgAttempt     = "grantretry.attempt"     // one per attempt, at INFO
	MsgDisposition = "grantretry.disposition" // one per call: INFO if succeeded, WARN otherwise
	MsgBreaker     = "grantretry.breaker"     // one per breaker state change, at WARN
	MsgReconcile   = "grantretry.reconcile"   // one per question to the reconciler: INFO, or WARN when it could not tell
	MsgRetired     = "grantretry.retired"     // one per dead letter retired (deadletter.Retirement.Record), at INFO
)

// Audit field names. They are stable: an audit trail written today must be
// readable by the tools of next year.
const (
	FieldCorrelationID  = "correlation_id"
	FieldIdempotencyKey = "idempotency_key"
	FieldSubmissionID   = "submission_id"
	FieldMethod         = "method"
	FieldHost           = "host"        // host[:port] of the URL, never its user info
	FieldPath           = "path"        // escaped path, never the query
	FieldAttempt        = "attempt"     // 1 for the first attempt
	FieldStatus         = "status"      // 0 when no response was obtained
	FieldError          = "error"       // the transport error, redacted; "" when none
	FieldReason         = "reason"      // Classification.Reason of the attempt
	FieldRetryable      = "retryable"   // Classification.Retryable of the attempt
	FieldWait           = "wait"        // the wait before the next attempt, 0 when none follows
	FieldWaitSource     = "wait_source" // "backoff", "retry_after", or "" when none follows
	FieldLatency        = "latency"     // how long the attempt took, in real time even under WithClock
	FieldElapsed        = "elapsed"     // since the call's first attempt
	FieldDisposition    = "disposition"
	FieldAttempts       = "attempts"
	FieldStopReason     = "stop_reason"
	FieldPayloadSHA256  = "payload_sha256" // hex SHA-256 of the request body; "" when not read
	FieldPayloadBytes   = "payload_bytes"  // body length, -1 when not read
	FieldNotReplayable  = "not_replayable" // why the body could not be replayed; "" when it could
	FieldBreaker        = "breaker"        // on breaker lines: the breaker's host, as scheme://host:port
	FieldBreakerFrom    = "from"
	FieldBreakerTo      = "to"
	FieldDeadLetterID   = "dead_letter_id" // on disposition lines: the Letter kept for the call, "" if none; on retired lines: the Letter retired
	FieldRecordError    = "record_error"   // on disposition lines: why the dead letter could not be kept (or where it was kept instead of its sink), "" if it was or none was due
	FieldReconciles     = "reconciles"     // on disposition lines: questions asked of the reconciler
	FieldAmbiguous      = "ambiguous"      // on disposition lines: the last attempt may have been applied without its answer saying so
	FieldVerdict        = "verdict"        // on reconcile lines: ReconcileApplied, ReconcileNotApplied or ReconcileUnknown
	FieldRedelivers     = "redelivers"     // on every line of a redelivery (WithRedeliveryOf): the ID of the dead letter it sends again; absent on other calls
	FieldDueBy          = "due_by"         // on disposition lines of a call with a closing time (WithClosingTime): that time; absent on other calls
	FieldLate           = "late"           // on disposition lines of a call with a closing time: Outcome.Late; absent on other calls
	FieldNotBefore      = "not_before"     // on disposition lines of calls that ended owed_later only: Outcome.NotBefore, RFC 3339 in UTC, "" when the funder did not say
	FieldRetiredBy      = "retired_by"     // on retired lines: who retired the letter
	FieldRetiredReason  = "retired_reason" // on retired lines: why, in the words of whoever retired it
)

// AuditSink is where a Transport's audit records go besides its logger
// (WithAuditTrail): a zapcore.WriteSyncer with a sticky error. The
// package trail provides the hash-chained file; a sink of your own must
// keep this contract:
//
//   - Write receives one record per call: a JSON object on one line,
//     ending in "\n", encoded with AuditEncoderConfig. It returns an
//     error if the record is not kept.
//   - Sync makes every record written before it durable before it
//     returns nil. The Transport calls it after each disposition record,
//     before RoundTrip returns, so a disposition the caller has seen is
//     never lost.
//   - Err returns nil while the sink is healthy, and after its first
//     failure returns that failure for good: the sink is broken, and the
//     Transport sends nothing more (fail closed). Err must not wait for a
//     Write or a Sync in progress.
//
// Errors should match ErrAuditTrail; the Transport wraps those that do
// not, so Outcome.RecordErr always does. A sink is shared by every call of
// every Transport given it, and must be safe for concurrent use.
type AuditSink interface {
	Write(p []byte) (int, error)
	Sync() error
	Err() error
}

// ErrAuditTrail matches every error of an audit sink as the Transport
// reports it (Outcome.RecordErr, and the error of a call not sent because
// the sink has failed), and every error of the package trail.
var ErrAuditTrail = errors.New("grantretry: audit trail")

// AuditEncoderConfig is the encoding of every record a Transport writes to
// its AuditSink: "ts" in RFC 3339 with nanoseconds in UTC, so records
// written in any zone sort and compare as text, "level" in lower case,
// "msg", then the fields, durations as text ("1.5s"), one record a line.
func AuditEncoderConfig() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		MessageKey:     "msg",
		LineEnding:     "\n",
		EncodeTime:     encodeAuditTime,
		EncodeLevel:    zapcore.LowercaseLevelEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
	}
}

func encodeAuditTime(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendString(t.UTC().Format(time.RFC3339Nano))
}

// WithAuditTrail makes the Transport write every audit line to sink as
// well, whatever WithLogger says, and sync it at every disposition before
// RoundTrip returns: a disposition the caller has seen is durable. A
// failure to record a call that was made is reported in Outcome.RecordErr.
// Once the sink has failed (its Err is not nil), the Transport fails
// closed: it sends nothing more, and every call ends DeadLetter
// (StopAuditTrail) before its first attempt, so no call goes out that the
// sink cannot show. Several Transports may share one sink. A nil sink, or
// an interface holding a nil pointer, is an invalid option. trail.Open
// opens the hash-chained trail file.
func WithAuditTrail(sink AuditSink) Option {
	if isNil(sink) {
		return optionFunc(func(c *config) { c.invalid("WithAuditTrail(nil)") })
	}
	return optionFunc(func(c *config) {
		c.trail = sink
		c.trailCore = zapcore.NewCore(zapcore.NewJSONEncoder(AuditEncoderConfig()), sink, zapcore.DebugLevel)
	})
}

// samplingProbe is how many times unsampled offers one line to a core it
// cannot see into before it trusts that the core keeps repeated lines: a
// zap sampler drops a line once it has seen more than its Initial (100 in
// zap.NewProductionConfig) of one message and level within its tick.
const samplingProbe = 1000

// unsampled returns l with every zap sampler taken out of its core, so that
// no audit line is dropped for being like the ones before it. The rest of
// the logger stays as it was: its name, fields (With), level, hooks, tees,
// caller and stack options; only the lines written through the returned
// logger pass the samplers, the application's own lines through l are
// sampled as before. zap offers no way to unwrap a core, so samplers are
// found by their type: zap's own sampler, tee and hooks, which hold their
// inner cores in exported fields. A core of another kind may hide a sampler
// that cannot be taken out: each is offered samplingProbe copies of one
// line, and if it turns one down at a level it says it is enabled for,
// unsampled returns an error and the logger is refused.
func unsampled(l *zap.Logger) (*zap.Logger, error) {
	k := zapKinds()
	k.name = l.Name()
	core, changed, err := k.unsample(l.Core())
	if err != nil || !changed {
		return l, err
	}
	return l.WithOptions(zap.WrapCore(func(zapcore.Core) zapcore.Core { return core })), nil
}

// coreKinds are the types of zap's own cores, and the name of the logger
// whose core is looked into: its lines carry it, and a core may keep or
// drop a line by it.
type coreKinds struct {
	sampler, tee, hooked, lazy, io, nop reflect.Type
	name                                string
}

func zapKinds() coreKinds {
	nop := zapcore.NewNopCore()
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{})
	return coreKinds{
		sampler: reflect.TypeOf(zapcore.NewSamplerWithOptions(nop, time.Second, 1, 1)),
		tee:     reflect.TypeOf(zapcore.NewTee(nop, nop)),
		hooked:  reflect.TypeOf(zapcore.RegisterHooks(nop)),
		lazy:    reflect.TypeOf(zapcore.NewLazyWith(nop, nil)),
		io:      reflect.TypeOf(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zapcore.DebugLevel)),
		nop:     reflect.TypeOf(nop),
	}
}

// unsample returns core without its samplers, and whether that changed it.
func (k coreKinds) unsample(core zapcore.Core) (zapcore.Core, bool, error) {
	if core == nil {
		return core, false, nil
	}
	v := reflect.ValueOf(core)
	switch v.Type() {
	case k.io, k.nop:
		return core, false, nil
	case k.sampler:
		if inner := embeddedCore(v); inner != nil {
			u, _, err := k.unsample(inner)
			return u, true, err
		}
	case k.tee:
		cores := make([]zapcore.Core, v.Len())
		changed := false
		for i := range cores {
			c, _ := v.Index(i).Interface().(zapcore.Core)
			u, ch, err := k.unsample(c)
			if err != nil {
				return core, false, err
			}
			cores[i], changed = u, changed || ch
		}
		if changed {
			return zapcore.NewTee(cores...), true, nil
		}
		return core, false, nil
	case k.lazy:
		// Logger.WithLazy's core holds its inner core and fields in
		// unexported fields; its With(nil) is that core with the fields
		// added, as With would have made it at once, and the lines it
		// writes are the same.
		u, changed, err := k.unsample(core.With(nil))
		if err != nil || !changed {
			return core, false, err
		}
		return u, true, nil
	case k.hooked:
		if inner := embeddedCore(v); inner != nil {
			u, changed, err := k.unsample(inner)
			if err != nil || !changed {
				return core, false, err
			}
			// The hooks run as they did: a hooked core's Write runs its
			// hooks and nothing else, its inner core having written the
			// line itself.
			return zapcore.RegisterHooks(u, func(e zapcore.Entry) error { return core.Write(e, nil) }), true, nil
		}
	}
	if dropsRepeats(core, k.name) {
		return core, false, fmt.Errorf("WithLogger: the logger's core (%T) drops repeated lines it is enabled for, "+
			"as a zap sampler does, and grantretry cannot reach past it: audit lines are never sampled; "+
			"give WithLogger a logger built without sampling (zap.Config's Sampling set to nil)", core)
	}
	return core, false, nil
}

// embeddedCore is the zapcore.Core embedded in the struct v points to, nil
// if there is none.
func embeddedCore(v reflect.Value) zapcore.Core {
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("Core")
	if !f.IsValid() || !f.CanInterface() {
		return nil
	}
	c, _ := f.Interface().(zapcore.Core)
	return c
}

// dropsRepeats reports whether core turns down one of samplingProbe copies
// of a line at a level it is enabled for, under the logger's name, as the
// audit lines will come. The copies are checked, never written.
func dropsRepeats(core zapcore.Core, name string) bool {
	now := time.Now()
	for _, level := range []zapcore.Level{zapcore.InfoLevel, zapcore.WarnLevel} {
		if !core.Enabled(level) {
			continue
		}
		ent := zapcore.Entry{Level: level, Time: now, LoggerName: name, Message: "grantretry.sampling_probe"}
		for range samplingProbe {
			if core.Check(ent, nil) == nil {
				return true
			}
		}
	}
	return false
}

// auditing reports whether an audit line at level goes anywhere: to the
// trail, or to a logger that is enabled at level.
func (t *Transport) auditing(level zapcore.Level) bool {
	return t.cfg.trailCore != nil || t.log.Core().Enabled(level) || t.slogEnabled(level)
}

// trailErr is the audit sink's failure, nil if it has none or there is no
// sink.
func (t *Transport) trailErr() error {
	if t.cfg.trail == nil {
		return nil
	}
	return sinkErr(t.cfg.trail.Err())
}

// sinkErr makes an error of the audit sink match ErrAuditTrail, as
// Outcome.RecordErr promises, whatever sink it came from.
func sinkErr(err error) error {
	if err == nil || errors.Is(err, ErrAuditTrail) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrAuditTrail, err)
}

// audit writes one audit line of the call to the loggers and to the
// trail (see Transport.audit).
func (c *call) audit(level zapcore.Level, msg string, fields []zapcore.Field) error {
	ctx := c.ctx
	if ctx == nil && c.req != nil {
		ctx = c.req.Context()
	}
	return c.t.audit(ctx, level, msg, fields)
}

// audit writes one audit line to the loggers and to the trail, and returns
// the trail's error: the loggers' are theirs to handle, the trail's are
// the caller's to know. ctx, the call's, goes to the slog handler.
func (t *Transport) audit(ctx context.Context, level zapcore.Level, msg string, fields []zapcore.Field) error {
	ce := t.log.Check(level, msg)
	if ce != nil {
		ce.Write(fields...)
	}
	slogged := t.writeSlog(ctx, level, msg, fields)
	if t.met != nil && (ce != nil || slogged || t.cfg.trailCore != nil) {
		t.met.auditRecords.Add(context.Background(), 1, metric.WithAttributes(keyAuditMessage.String(msg)))
	}
	if t.cfg.trailCore == nil {
		return nil
	}
	return t.cfg.trailCore.Write(zapcore.Entry{Level: level, Time: t.clock.Now(), Message: msg}, fields)
}

// trailFailed notes the audit trail's failure in the outcome, once: a
// broken trail fails every later write with the same cause.
func (c *call) trailFailed(err error) {
	if !c.trailBroken {
		c.trailBroken = true
		c.recordFailed(sinkErr(c.scrubbed(err)))
		c.observeRecordFailure(recordAuditTrail)
	}
}

// attemptRecord is what one attempt line says.
type attemptRecord struct {
	n          int
	status     int
	err        error
	verdict    Classification
	wait       time.Duration
	waitSource string
	latency    time.Duration
	elapsed    time.Duration
}

// auditShared holds the fields every line of one call shares, capped once
// for all of them. A line carries them as its first fields, in the
// documented order.
//
// Lines are zap.Inline fields over values that never change once the line
// is written: a core may encode a line's fields after Write has returned
// (zaptest/observer does, when ContextMap is called), and must then see
// that line's values, not the call's later ones.
type auditShared struct {
	corr, key, sub, method, host, path string
	redelivers                         string // the letter a redelivery sends again, "" if the call is not one
	// scrubs is the call's scrubCache, made at its first scrub: kept
	// here, with what the call makes once it writes anything down, so
	// that a call costs no more memory for it.
	scrubs *scrubCache
}

// shared returns the call's shared fields, made at its first line. They
// are final by then: prepare sets them before any attempt, and a call that
// fails in prepare writes only its disposition. store, if not nil, is where
// to make them: the first attempt line's own, so that they cost no
// allocation of their own.
func (c *call) shared(store *auditShared) *auditShared {
	if c.auditShared == nil {
		if store == nil {
			store = new(auditShared)
		}
		u := c.req.URL
		*store = auditShared{
			corr:   capText(c.out.CorrelationID),
			key:    capText(c.out.IdempotencyKey),
			sub:    c.out.SubmissionID,
			method: capText(c.req.Method),
			host:   capText(hostOf(u)),
			path:   capText(pathOf(u)),
		}
		if m := redeliveryOf(c.req.Context()); m != nil {
			store.redelivers = capText(m.letterID)
		}
		c.auditShared = store
	}
	return c.auditShared
}

// MarshalLogObject writes the shared fields, as zap.String fields would.
func (s *auditShared) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString(FieldCorrelationID, s.corr)
	enc.AddString(FieldIdempotencyKey, s.key)
	enc.AddString(FieldSubmissionID, s.sub)
	enc.AddString(FieldMethod, s.method)
	enc.AddString(FieldHost, s.host)
	enc.AddString(FieldPath, s.path)
	if s.redelivers != "" {
		enc.AddString(FieldRedelivers, s.redelivers)
	}
	return nil
}

// attemptLine is one attempt line: one allocation for the line, its values
// and the field zap is given, in place of a []zapcore.Field of 15.
type attemptLine struct {
	shared     *auditShared
	n, status  int
	errText    string
	reason     string
	retryable  bool
	wait       time.Duration
	waitSource string
	latency    time.Duration
	elapsed    time.Duration
	field      [1]zapcore.Field
	store      auditShared // the call's shared fields, if this is its first line
}

// MarshalLogObject writes the line's fields, each as the zap.Field of its
// type would (zap.Int writes an int64).
func (l *attemptLine) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	_ = l.shared.MarshalLogObject(enc)
	enc.AddInt64(FieldAttempt, int64(l.n))
	enc.AddInt64(FieldStatus, int64(l.status))
	enc.AddString(FieldError, l.errText)
	enc.AddString(FieldReason, l.reason)
	enc.AddBool(FieldRetryable, l.retryable)
	enc.AddDuration(FieldWait, l.wait)
	enc.AddString(FieldWaitSource, l.waitSource)
	enc.AddDuration(FieldLatency, l.latency)
	enc.AddDuration(FieldElapsed, l.elapsed)
	return nil
}

// dispositionLine is the call's disposition line, made as attemptLine is.
type dispositionLine struct {
	shared      *auditShared
	disposition Disposition
	attempts    int
	stopReason  string
	status      int
	reason      string
	errText     string
	sum         string
	size        int64
	whyNot      string
	elapsed     time.Duration
	deadLetter  string
	recordErr   string
	reconciles  int
	ambiguous   bool
	dueBy       time.Time // zero without a closing time
	late        bool
	notBefore   *time.Time // the outcome's NotBefore, written for owed_later only: a pointer keeps the line in its size class
	field       [1]zapcore.Field
}

// MarshalLogObject writes the line's fields, each as the zap.Field of its
// type would.
func (l *dispositionLine) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	_ = l.shared.MarshalLogObject(enc)
	enc.AddString(FieldDisposition, string(l.disposition))
	enc.AddInt64(FieldAttempts, int64(l.attempts))
	enc.AddString(FieldStopReason, l.stopReason)
	enc.AddInt64(FieldStatus, int64(l.status))
	enc.AddString(FieldReason, l.reason)
	enc.AddString(FieldError, l.errText)
	enc.AddString(FieldPayloadSHA256, l.sum)
	enc.AddInt64(FieldPayloadBytes, l.size)
	enc.AddString(FieldNotReplayable, l.whyNot)
	enc.AddDuration(FieldElapsed, l.elapsed)
	enc.AddString(FieldDeadLetterID, l.deadLetter)
	enc.AddString(FieldRecordError, l.recordErr)
	enc.AddInt64(FieldReconciles, int64(l.reconciles))
	enc.AddBool(FieldAmbiguous, l.ambiguous)
	if !l.dueBy.IsZero() {
		enc.AddTime(FieldDueBy, l.dueBy)
		enc.AddBool(FieldLate, l.late)
	}
	if l.stopReason == StopOwedLater {
		nb := ""
		if l.notBefore != nil && !l.notBefore.IsZero() {
			nb = l.notBefore.UTC().Format(time.RFC3339Nano)
		}
		enc.AddString(FieldNotBefore, nb)
	}
	return nil
}

// maxFieldText bounds a text field of an audit line that a caller or a
// funder controls: an error that quotes a funder's answer, a path, a
// caller's own correlation id or key. The trail refuses a record over
// 1 MiB, and a refused record breaks it for every call that shares it.
const maxFieldText = 4 << 10

// capText is s, or its first maxFieldText bytes followed by how many more
// there were and the SHA-256 of the whole, so the line still identifies it.
func capText(s string) string {
	if len(s) <= maxFieldText {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%s...[%d more bytes; sha256 of all %d: %x]", s[:maxFieldText], len(s)-maxFieldText, len(s), sum)
}

func (c *call) logAttempt(a attemptRecord) {
	l := &attemptLine{
		n: a.n, status: a.status,
		reason: a.verdict.Reason, retryable: a.verdict.Retryable,
		wait: a.wait, waitSource: a.waitSource, latency: a.latency, elapsed: a.elapsed,
	}
	l.shared = c.shared(&l.store)
	if a.err != nil {
		l.errText = capText(c.scrub(a.err))
	}
	l.field[0] = zap.Inline(l)
	if err := c.audit(zap.InfoLevel, MsgAttempt, l.field[:]); err != nil {
		c.trailFailed(err)
	}
}

func (c *call) logDisposition(cause error) {
	level := zap.WarnLevel
	if c.out.Disposition == Succeeded {
		level = zap.InfoLevel
	}
	if !c.t.auditing(level) {
		return
	}
	o := &c.out
	l := &dispositionLine{
		shared: c.shared(nil), disposition: o.Disposition, attempts: o.Attempts,
		stopReason: o.StopReason, status: o.Status, reason: o.Reason,
		sum: c.p.sum, size: c.p.size, whyNot: c.p.whyNotRe,
		elapsed: o.Elapsed, deadLetter: o.DeadLetterID,
		reconciles: o.Reconciles, ambiguous: o.Ambiguous, late: o.Late,
	}
	l.dueBy, _ = closingTime(c.req.Context())
	if cause != nil {
		l.errText = capText(c.scrub(cause))
	}
	if o.StopReason == StopOwedLater {
		l.notBefore = &o.NotBefore
	}
	if o.RecordErr != nil {
		l.recordErr = capText(o.RecordErr.Error()) // scrubbed as it was recorded
	}
	l.field[0] = zap.Inline(l)
	err := c.audit(level, MsgDisposition, l.field[:])
	if err == nil && c.t.cfg.trail != nil {
		// The caller learns the disposition only once it is on disk.
		err = c.syncTrail()
	}
	if err != nil {
		c.trailFailed(err)
	}
}

// syncTrail syncs the audit trail, timed when there are metrics.
func (c *call) syncTrail() error {
	m := c.t.met
	if m == nil {
		return c.t.cfg.trail.Sync()
	}
	start := time.Now()
	err := c.t.cfg.trail.Sync()
	m.auditSync.Record(context.Background(), time.Since(start).Seconds())
	return err
}

// logBreakerChanges writes the state changes the call's host's breaker
// queued. It runs with no lock held.
func (c *call) logBreakerChanges() {
	hb := c.host.breaker
	// A breaker that has just opened draws its first probe time now, on
	// the goroutine whose attempt opened it, not when it is next asked.
	hb.settleIfUnset()
	for _, ch := range hb.takeChanges() {
		if c.t.met != nil {
			c.observeBreaker(ch)
		}
		if !c.t.auditing(zap.WarnLevel) {
			continue
		}
		err := c.audit(zap.WarnLevel, MsgBreaker, []zapcore.Field{
			zap.String(FieldBreaker, hb.host),
			zap.String(FieldBreakerFrom, breakerState(ch.from)),
			zap.String(FieldBreakerTo, breakerState(ch.to)),
		})
		if err != nil {
			c.trailFailed(err)
		}
	}
}

func breakerState(s gobreaker.State) string {
	switch s {
	case gobreaker.StateClosed:
		return "closed"
	case gobreaker.StateHalfOpen:
		return "half_open"
	case gobreaker.StateOpen:
		return "open"
	}
	return s.String()
}

func hostOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Host
}

func pathOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.EscapedPath()
}
