package grantretry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName is the name of the meter and the tracer a Transport
// gets from the providers given to WithMeterProvider and
// WithTracerProvider.
const InstrumentationName = "github.com/grantretry/grantretry"

// WithMeterProvider makes the Transport record its metrics (calls,
// attempts, waits, breaker and throttle state, reconciles, dead letters,
// audit records; docs/telemetry.md lists every instrument) through mp,
// typically otel.GetMeterProvider(). Every attribute is bounded: the
// funder's host and port, never a path, a key or a submission id. The
// breaker and throttle gauges are observed through a callback that mp
// keeps for its lifetime, and with it the Transport. Without this option
// nothing is recorded and nothing is paid. A nil mp is an invalid option.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if isNil(mp) {
			c.invalid("WithMeterProvider(nil)")
			return
		}
		c.meterProvider = mp
	})
}

// WithTracerProvider makes the Transport trace every call through tp: one
// span per logical call ("grantretry.call"), a child of the request
// context's span, and under it one span per attempt ("grantretry.attempt"),
// the parent of whatever the inner transport records (an otelhttp client
// span). Every span carries the call's correlation id
// (grantretry.correlation_id), so a trace, an audit line and a funder's log
// can be joined. Without this option no span is started. A nil tp is an
// invalid option.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if isNil(tp) {
			c.invalid("WithTracerProvider(nil)")
			return
		}
		c.tracerProvider = tp
	})
}

// WithRedelivery marks ctx as the context of a dead letter sent again;
// deadletter.NewRedeliveryRequest sets it. A Transport with telemetry
// counts such calls (grantretry.dead_letter.redeliveries) and marks their
// span.
func WithRedelivery(ctx context.Context) context.Context {
	if redeliveryOf(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, redeliveryKey{}, new(redeliveryMark))
}

func isRedelivery(ctx context.Context) bool { return redeliveryOf(ctx) != nil }

// Attribute keys: the semantic conventions' (from the semconv package of
// the OpenTelemetry release in go.mod) where they have one, grantretry's
// own for the rest.
const (
	keyMethod        = semconv.HTTPRequestMethodKey
	keyServerAddress = semconv.ServerAddressKey
	keyServerPort    = semconv.ServerPortKey
	keyScheme        = semconv.URLSchemeKey
	keyStatusCode    = semconv.HTTPResponseStatusCodeKey
	keyErrorType     = semconv.ErrorTypeKey
	keyProtoVersion  = semconv.NetworkProtocolVersionKey
	keyDisposition   = attribute.Key("grantretry.disposition")
	keyStopReason    = attribute.Key("grantretry.stop_reason")
	keyWaitSource    = attribute.Key("grantretry.wait_source")
	keyBreakerState  = attribute.Key("grantretry.breaker.state")
	keyBreakerFrom   = attribute.Key("grantretry.breaker.from")
	keyBreakerTo     = attribute.Key("grantretry.breaker.to")
	keyVerdict       = attribute.Key("grantretry.reconcile.verdict")
	keyAuditMessage  = attribute.Key("grantretry.audit.message")
	keyRecord        = attribute.Key("grantretry.record")
	// Spans only: unbounded, or of one call.
	keyResendCount   = semconv.HTTPRequestResendCountKey
	keyCorrelationID = attribute.Key("grantretry.correlation_id")
	keyAttempts      = attribute.Key("grantretry.attempts")
	keyReason        = attribute.Key("grantretry.reason")
	keyRetryable     = attribute.Key("grantretry.retryable")
	keyWait          = attribute.Key("grantretry.wait")
	keyReconciles    = attribute.Key("grantretry.reconciles")
	keyAmbiguous     = attribute.Key("grantretry.ambiguous")
	keyDeadLetterID  = attribute.Key("grantretry.dead_letter_id")
	keyRedelivery    = attribute.Key("grantretry.redelivery")
	keyLate          = attribute.Key("grantretry.late")
	keyQuotaHeld     = attribute.Key("grantretry.quota.held")
	keyNotBefore     = attribute.Key("grantretry.not_before")
)

// What grantretry.record says on grantretry.record.failures.
const (
	recordAuditTrail = "audit_trail"
	recordDeadLetter = "dead_letter"
)

// metrics holds a Transport's instruments, made once by New; a nil
// *metrics (no WithMeterProvider) records nothing. The instruments are
// safe for concurrent use.
type metrics struct {
	attemptDuration  metric.Float64Histogram
	calls            metric.Int64Counter
	lateCalls        metric.Int64Counter
	callAttempts     metric.Int64Histogram
	retryWait        metric.Float64Histogram
	breakerChanges   metric.Int64Counter
	throttleRefusals metric.Int64Counter
	reconciles       metric.Int64Counter
	deadLetters      metric.Int64Counter
	redeliveries     metric.Int64Counter
	auditRecords     metric.Int64Counter
	auditSync        metric.Float64Histogram
	recordFailures   metric.Int64Counter
	callsHeld        metric.Int64Counter
}

// The buckets of http.client.request.duration in the semantic conventions.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// newMetrics makes the instruments on mp's meter and registers the
// callback that observes every host's breaker and throttle. An instrument
// that cannot be made is reported to otel.Handle; the SDK then hands back
// one that records nothing.
func newMetrics(mp metric.MeterProvider, h *hosts) *metrics {
	m := mp.Meter(InstrumentationName)
	var errs []error
	f64h := func(name, unit, desc string, bounds []float64) metric.Float64Histogram {
		i, err := m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return i
	}
	i64c := func(name, unit, desc string) metric.Int64Counter {
		i, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	out := &metrics{
		attemptDuration:  f64h("http.client.request.duration", "s", "Duration of each attempt sent to the inner transport.", durationBuckets),
		calls:            i64c("grantretry.calls", "{call}", "Logical calls ended, by disposition and stop reason."),
		lateCalls:        i64c("grantretry.calls.late", "{call}", "Calls ended owed after their closing time, or owed until after it."),
		retryWait:        f64h("grantretry.retry.wait", "s", "Wait before each retry, by its source.", []float64{0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120}),
		breakerChanges:   i64c("grantretry.breaker.transitions", "{transition}", "Circuit breaker state changes."),
		throttleRefusals: i64c("grantretry.throttle.refusals", "{retry}", "Retries refused by the retry throttle."),
		reconciles:       i64c("grantretry.reconcile.checks", "{check}", "Questions asked of the reconciler, by verdict."),
		deadLetters:      i64c("grantretry.dead_letters", "{letter}", "Dead letters kept by the dead-letter sink."),
		redeliveries:     i64c("grantretry.dead_letter.redeliveries", "{call}", "Redelivered dead letters, by disposition."),
		auditRecords:     i64c("grantretry.audit.records", "{record}", "Audit records written, by message."),
		auditSync:        f64h("grantretry.audit.sync.duration", "s", "Duration of the audit trail's sync at each disposition.", durationBuckets),
		recordFailures:   i64c("grantretry.record.failures", "{failure}", "Calls whose audit record or dead letter could not be kept."),
		callsHeld:        i64c("grantretry.calls.held", "{call}", "Calls held, unsent, while their host is in quota."),
	}
	var err error
	out.callAttempts, err = m.Int64Histogram("grantretry.call.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts per logical call."), metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 6, 8, 10))
	errs = append(errs, err)
	breaker, err := m.Int64ObservableGauge("grantretry.breaker.state", metric.WithUnit("{state}"),
		metric.WithDescription("1 for each host's breaker state now, 0 for its other states."))
	errs = append(errs, err)
	tokens, err := m.Float64ObservableGauge("grantretry.throttle.tokens", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens in each host's retry throttle bucket now; retries are refused at half of the maximum or less."))
	errs = append(errs, err)
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		observeHosts(o, breaker, tokens, h.all())
		return nil
	}, breaker, tokens)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		otel.Handle(err)
	}
	return out
}

// observeHosts observes each host's breaker and throttle. The hosts past
// MaxHostSeries share their series: their breaker gauge counts how many
// of them are in each state, and their tokens gauge is the lowest bucket
// among them, the one nearest to refusing retries.
func observeHosts(o metric.Observer, breaker metric.Int64ObservableGauge, tokens metric.Float64ObservableGauge, hs []*hostState) {
	type others struct {
		states [3]int64
		anyBkr bool
		low    float64
		anyRT  bool
	}
	var other map[*otherSeries]*others // nil until a host is OtherHost's
	states := [3]gobreaker.State{gobreaker.StateClosed, gobreaker.StateHalfOpen, gobreaker.StateOpen}
	for _, s := range hs {
		if s.other != nil {
			if other == nil {
				other = map[*otherSeries]*others{}
			}
			agg := other[s.other]
			if agg == nil {
				agg = &others{}
				other[s.other] = agg
			}
			if hb := s.breaker; hb != nil {
				agg.anyBkr = true
				agg.states[slices.Index(states[:], hb.state())]++
			}
			if rt := s.throttle; rt != nil {
				if l := rt.level(); !agg.anyRT || l < agg.low {
					agg.low = l
				}
				agg.anyRT = true
			}
			continue
		}
		if hb := s.breaker; hb != nil {
			now := hb.state()
			for _, st := range states {
				n := int64(0)
				if st == now {
					n = 1
				}
				o.ObserveInt64(breaker, n, metric.WithAttributes(append(s.attrs[:len(s.attrs):len(s.attrs)], keyBreakerState.String(breakerState(st)))...))
			}
		}
		if rt := s.throttle; rt != nil {
			o.ObserveFloat64(tokens, rt.level(), metric.WithAttributes(s.attrs...))
		}
	}
	for os, agg := range other {
		if agg.anyBkr {
			for i, st := range states {
				o.ObserveInt64(breaker, agg.states[i], metric.WithAttributes(append(os.attrs[:len(os.attrs):len(os.attrs)], keyBreakerState.String(breakerState(st)))...))
			}
		}
		if agg.anyRT {
			o.ObserveFloat64(tokens, agg.low, metric.WithAttributes(os.attrs...))
		}
	}
}

// hostAttrs are the attributes that name a host on every instrument and
// span: server.address, server.port and url.scheme, from its host key.
func hostAttrs(key string) []attribute.KeyValue {
	i := strings.Index(key, "://")
	host, port, _ := net.SplitHostPort(key[i+3:])
	p, _ := strconv.Atoi(port)
	return []attribute.KeyValue{keyServerAddress.String(host), keyServerPort.Int(p), keyScheme.String(key[:i])}
}

// methodAttr is http.request.method as the semantic conventions bound it:
// the known methods, and _OTHER for the rest.
func methodAttr(m string) attribute.KeyValue {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return keyMethod.String(m)
	case "":
		return keyMethod.String("GET")
	}
	return keyMethod.String("_OTHER")
}

// attrs is the call's host and method, then extra: for one measurement.
func (c *call) attrs(extra ...attribute.KeyValue) metric.MeasurementOption {
	var buf [10]attribute.KeyValue
	kv := buf[:0]
	if c.host != nil {
		kv = append(kv, c.host.attrs...)
	}
	kv = append(kv, methodAttr(c.req.Method))
	return metric.WithAttributes(append(kv, extra...)...)
}

// measureKey names one of the attribute sets a host's calls record their
// attempts and ends with: every field is bounded, so the sets are few.
type measureKey struct {
	end        bool // the call's end, not an attempt's
	method     string
	status     int
	proto      string
	errType    string
	disp, stop string
}

// measureSets caches a host's attribute sets, made once each: making a
// set sorts and allocates, looking one up does neither. Safe for
// concurrent use; mu guards sets.
type measureSets struct {
	mu   sync.RWMutex
	sets map[measureKey]metric.MeasurementOption
}

// measure returns the measurement option of k for the call's host,
// making it with mk the first time.
func (c *call) measure(k measureKey, mk func() metric.MeasurementOption) metric.MeasurementOption {
	ms := c.host.sets
	ms.mu.RLock()
	o, ok := ms.sets[k]
	ms.mu.RUnlock()
	if ok {
		return o
	}
	o = mk()
	ms.mu.Lock()
	if ms.sets == nil {
		ms.sets = make(map[measureKey]metric.MeasurementOption)
	}
	ms.sets[k] = o
	ms.mu.Unlock()
	return o
}

// hostOnly is the call's host alone, for the instruments of host state.
func (c *call) hostOnly(extra ...attribute.KeyValue) metric.MeasurementOption {
	var buf [6]attribute.KeyValue
	kv := buf[:0]
	if c.host != nil {
		kv = append(kv, c.host.attrs...)
	}
	return metric.WithAttributes(append(kv, extra...)...)
}

// startSpan starts the call's span under the request's context, which the
// call then runs under.
func (c *call) startSpan() {
	c.ctx, c.span = c.t.tracer.Start(c.req.Context(), "grantretry.call",
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(methodAttr(c.req.Method)))
}

// startAttemptSpan starts the span of the attempt about to be sent, as a
// child of the call's span and the parent of the inner transport's.
func (c *call) startAttemptSpan(ctx context.Context) (context.Context, trace.Span) {
	kv := make([]attribute.KeyValue, 0, 6)
	kv = append(kv, methodAttr(c.req.Method), keyCorrelationID.String(c.out.CorrelationID))
	kv = append(kv, c.host.spanAttrs...)
	if n := c.out.Attempts; n > 0 {
		kv = append(kv, keyResendCount.Int(n))
	}
	return c.t.tracer.Start(ctx, "grantretry.attempt", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(kv...))
}

// observeAttempt records the end of one attempt, once judged: its
// duration, the wait before the retry it leads to, and its span.
func (c *call) observeAttempt(a *sentAttempt, v Classification, d decision, sent time.Time) {
	status, proto := 0, ""
	if a.resp != nil {
		status, proto = a.resp.StatusCode, protocolVersion(a.resp)
	}
	if m := c.t.met; m != nil {
		k := measureKey{method: c.req.Method, status: status, proto: proto, errType: errorType(status, v)}
		o := c.measure(k, func() metric.MeasurementOption {
			var buf [3]attribute.KeyValue
			kv := buf[:0]
			if status != 0 {
				kv = append(kv, keyStatusCode.Int(status))
			}
			if proto != "" {
				kv = append(kv, keyProtoVersion.String(proto))
			}
			if k.errType != "" {
				kv = append(kv, keyErrorType.String(k.errType))
			}
			return c.attrs(kv...)
		})
		m.attemptDuration.Record(context.Background(), time.Since(sent).Seconds(), o)
		if d.retry {
			m.retryWait.Record(context.Background(), d.wait.Seconds(), c.hostOnly(keyWaitSource.String(d.waitSource)))
		}
	}
	if a.span == nil {
		return
	}
	if status != 0 {
		a.span.SetAttributes(keyStatusCode.Int(status))
	}
	if proto != "" {
		a.span.SetAttributes(keyProtoVersion.String(proto))
	}
	a.span.SetAttributes(keyReason.String(v.Reason), keyRetryable.Bool(v.Retryable))
	if d.retry {
		a.span.SetAttributes(keyWait.Float64(d.wait.Seconds()), keyWaitSource.String(d.waitSource))
	}
	if et := errorType(status, v); et != "" {
		a.span.SetAttributes(keyErrorType.String(et))
		a.span.SetStatus(codes.Error, v.Reason)
	}
	a.span.End()
	a.span = nil
}

// protocolVersion is network.protocol.version as the semantic conventions
// spell it, from the response's protocol: "1.0", "1.1", "2" or "3"; ""
// when the response says none of them (one made by a fake transport).
func protocolVersion(resp *http.Response) string {
	switch major, minor := resp.ProtoMajor, resp.ProtoMinor; {
	case major == 1 && minor == 0:
		return "1.0"
	case major == 1 && minor == 1:
		return "1.1"
	case major == 2 && minor == 0:
		return "2"
	case major == 3 && minor == 0:
		return "3"
	}
	return ""
}

// errorType is error.type for an attempt: the status code of a response
// of 400 or more, as the semantic conventions have it, or the verdict's
// reason for a transport error ("transport:reset"); "" for a success.
func errorType(status int, v Classification) string {
	switch {
	case status >= 400:
		return strconv.Itoa(status)
	case status == 0 && v.Reason != "":
		return v.Reason
	}
	return ""
}

// observeEnd records the end of the call: the calls and attempts it adds
// up to, and its span's outcome.
func (c *call) observeEnd(cause error) {
	redelivery := (c.t.met != nil || c.span != nil) && isRedelivery(c.req.Context())
	if m := c.t.met; m != nil {
		disp := keyDisposition.String(string(c.out.Disposition))
		ctx := context.Background()
		if c.host == nil { // refused before its host was known
			m.calls.Add(ctx, 1, c.attrs(disp, keyStopReason.String(c.out.StopReason)))
			m.callAttempts.Record(ctx, int64(c.out.Attempts), c.attrs(disp, keyStopReason.String(c.out.StopReason)))
		} else {
			k := measureKey{end: true, method: c.req.Method, disp: string(c.out.Disposition), stop: c.out.StopReason}
			o := c.measure(k, func() metric.MeasurementOption { return c.attrs(disp, keyStopReason.String(k.stop)) })
			m.calls.Add(ctx, 1, o)
			m.callAttempts.Record(ctx, int64(c.out.Attempts), o)
		}
		if redelivery {
			m.redeliveries.Add(ctx, 1, c.attrs(disp))
		}
		if c.out.Late {
			m.lateCalls.Add(ctx, 1, c.attrs(disp))
		}
	}
	if c.span == nil {
		return
	}
	s := c.span
	c.span = nil
	if c.host != nil {
		s.SetAttributes(c.host.spanAttrs...)
	}
	s.SetAttributes(
		keyCorrelationID.String(c.out.CorrelationID),
		keyDisposition.String(string(c.out.Disposition)),
		keyStopReason.String(c.out.StopReason),
		keyAttempts.Int(c.out.Attempts),
		keyReconciles.Int(c.out.Reconciles),
		keyAmbiguous.Bool(c.out.Ambiguous),
	)
	if c.out.Status != 0 {
		s.SetAttributes(keyStatusCode.Int(c.out.Status))
	}
	if c.out.DeadLetterID != "" {
		s.SetAttributes(keyDeadLetterID.String(c.out.DeadLetterID))
	}
	if c.out.StopReason == StopOwedLater && !c.out.NotBefore.IsZero() {
		s.SetAttributes(keyNotBefore.String(c.out.NotBefore.UTC().Format(time.RFC3339Nano)))
	}
	if redelivery {
		s.SetAttributes(keyRedelivery.Bool(true))
	}
	if c.out.Late {
		s.SetAttributes(keyLate.Bool(true))
	}
	if c.out.Disposition != Succeeded {
		s.SetAttributes(keyErrorType.String(string(c.out.Disposition)))
		msg := string(c.out.Disposition)
		if cause != nil {
			msg = capText(c.scrub(cause))
		}
		s.SetStatus(codes.Error, msg)
	}
	s.End()
}

// observeBreaker counts one breaker transition of the call's host.
func (c *call) observeBreaker(ch stateChange) {
	c.t.met.breakerChanges.Add(context.Background(), 1, c.hostOnly(
		keyBreakerFrom.String(breakerState(ch.from)), keyBreakerTo.String(breakerState(ch.to))))
}

// observeReconcile counts one question to the reconciler, and notes it on
// the call's span.
func (c *call) observeReconcile(verdict string) {
	if m := c.t.met; m != nil {
		m.reconciles.Add(context.Background(), 1, c.hostOnly(keyVerdict.String(verdict)))
	}
	if c.span != nil {
		c.span.AddEvent("grantretry.reconcile", trace.WithAttributes(keyVerdict.String(verdict)))
	}
}

// observeRecordFailure counts a call whose audit record or dead letter
// could not be kept.
func (c *call) observeRecordFailure(what string) {
	if m := c.t.met; m != nil {
		m.recordFailures.Add(context.Background(), 1, c.hostOnly(keyRecord.String(what)))
	}
}

// endSpanOnPanic ends the call's span when RoundTrip panics: observeEnd,
// which ends it (and clears it) on every other path, never runs then. It
// does not recover: the panic goes on up.
func (c *call) endSpanOnPanic() {
	if c.span != nil {
		c.span.SetStatus(codes.Error, "panic")
		c.span.End()
		c.span = nil
	}
}
