package grantretry

import (
	"context"
	"log/slog"
	"time"

	"go.uber.org/zap/zapcore"
)

// WithSlog sends the audit lines to l: the same lines as [WithLogger]'s,
// with the same messages ([MsgAttempt], [MsgDisposition], [MsgBreaker],
// [MsgReconcile]), levels ([slog.LevelInfo] where the zap line is INFO,
// [slog.LevelWarn] where it is WARN) and fields (the Field* constants, in
// the same order), each field as the slog value of its zap type: strings
// as [slog.String], integers as [slog.Int64], booleans as [slog.Bool],
// durations as [slog.Duration] and times as [slog.Time]. Errors are
// strings, redacted, as on the zap lines. How a duration is written is the
// handler's choice: [slog.TextHandler] writes "1.5s", [slog.JSONHandler]
// nanoseconds.
//
// WithSlog and WithLogger are independent destinations: given both, each
// logger gets every line. Given twice, the last WithSlog is the one used.
// The audit trail ([WithAuditTrail]) keeps its zap encoding whichever
// loggers are given.
//
// Each line is one [slog.Record] handed to l's [slog.Handler], under the
// call's context (the request's, with the call's span when
// [WithTracerProvider] is given), timed by the Transport's [Clock] as the
// trail's records are. The handler's Handle runs inline, on the request
// path, as a zap core's Write does for WithLogger: a handler that blocks
// (a log shipper whose buffer is full) holds the call, past its deadline
// too. Give WithSlog a handler that does not block, or one that buffers.
//
// Whether a line is made at all is asked of the handler's Enabled with
// [context.Background], before any of the line's fields is built, so that
// a line no logger takes costs nothing; the handler is asked again with
// the call's context before the record is handed to it. A handler whose
// level depends on the request's context (debug lines for one request)
// should therefore not gate INFO on it: when it says no for
// context.Background, the INFO lines it would take for that request may
// never be made.
//
// grantretry samples nothing: every line goes to the handler, but a
// handler that drops records (one that samples or rate-limits) drops
// audit lines with them, where grantretry cannot see it. Give WithSlog a
// handler that keeps every record. A nil l, or a Logger without a handler
// (not made by [slog.New]), is an invalid option.
func WithSlog(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		switch {
		case l == nil:
			c.invalid("WithSlog(nil)")
		case isNil(l.Handler()):
			c.invalid("WithSlog: the logger has no handler; make it with slog.New")
		default:
			c.slog = l
		}
	})
}

// slogLevel is the slog level of an audit line's zap level.
func slogLevel(l zapcore.Level) slog.Level {
	switch l {
	case zapcore.DebugLevel:
		return slog.LevelDebug
	case zapcore.InfoLevel:
		return slog.LevelInfo
	case zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// slogEnabled reports whether the slog logger, if any, takes lines at
// level.
func (t *Transport) slogEnabled(level zapcore.Level) bool {
	l := t.cfg.slog
	return l != nil && l.Handler().Enabled(context.Background(), slogLevel(level))
}

// writeSlog hands one audit line to the slog logger, if it takes lines at
// level in ctx, and reports whether it did. The handler's error is its own,
// as the zap logger's are zap's.
func (t *Transport) writeSlog(ctx context.Context, level zapcore.Level, msg string, fields []zapcore.Field) bool {
	l := t.cfg.slog
	if l == nil {
		return false
	}
	if ctx == nil {
		ctx = context.Background()
	}
	h, sl := l.Handler(), slogLevel(level)
	if !h.Enabled(ctx, sl) {
		return false
	}
	var enc slogFields
	for i := range fields {
		fields[i].AddTo(&enc)
	}
	r := slog.NewRecord(t.clock.Now(), sl, msg, 0)
	r.AddAttrs(enc.done()...)
	_ = h.Handle(ctx, r)
	return true
}

// slogFields is a zapcore.ObjectEncoder that makes slog attributes of the
// fields of an audit line, in their order: a zap.Inline field adds its
// fields one by one, as it does to any encoder. The types zap has and
// slog lacks are carried as slog.Any of what zap's map encoder makes of
// them.
type slogFields struct {
	attrs []slog.Attr
	ns    []namespace // open namespaces, outermost first
}

// namespace is an OpenNamespace: the fields added after it, from start on,
// are its.
type namespace struct {
	key   string
	start int
}

func (e *slogFields) add(a slog.Attr) { e.attrs = append(e.attrs, a) }

// done closes the open namespaces, innermost first, as groups, and
// returns the attributes.
func (e *slogFields) done() []slog.Attr {
	for i := len(e.ns) - 1; i >= 0; i-- {
		n := e.ns[i]
		inner := append([]slog.Attr(nil), e.attrs[n.start:]...)
		e.attrs = append(e.attrs[:n.start], slog.Attr{Key: n.key, Value: slog.GroupValue(inner...)})
	}
	e.ns = nil
	return e.attrs
}

// viaMap adds key as zap's map encoder sees it after add.
func (e *slogFields) viaMap(key string, add func(zapcore.ObjectEncoder) error) error {
	m := zapcore.NewMapObjectEncoder()
	err := add(m)
	e.add(slog.Any(key, m.Fields[key]))
	return err
}

func (e *slogFields) AddArray(key string, v zapcore.ArrayMarshaler) error {
	return e.viaMap(key, func(m zapcore.ObjectEncoder) error { return m.AddArray(key, v) })
}

func (e *slogFields) AddObject(key string, v zapcore.ObjectMarshaler) error {
	var inner slogFields
	err := v.MarshalLogObject(&inner)
	e.add(slog.Attr{Key: key, Value: slog.GroupValue(inner.done()...)})
	return err
}

func (e *slogFields) AddBinary(key string, v []byte) {
	e.add(slog.Any(key, append([]byte(nil), v...)))
}
func (e *slogFields) AddByteString(key string, v []byte)     { e.add(slog.String(key, string(v))) }
func (e *slogFields) AddBool(key string, v bool)             { e.add(slog.Bool(key, v)) }
func (e *slogFields) AddComplex128(key string, v complex128) { e.add(slog.Any(key, v)) }
func (e *slogFields) AddComplex64(key string, v complex64)   { e.add(slog.Any(key, v)) }
func (e *slogFields) AddDuration(key string, v time.Duration) {
	e.add(slog.Duration(key, v))
}
func (e *slogFields) AddFloat64(key string, v float64) { e.add(slog.Float64(key, v)) }
func (e *slogFields) AddFloat32(key string, v float32) { e.add(slog.Float64(key, float64(v))) }
func (e *slogFields) AddInt(key string, v int)         { e.add(slog.Int64(key, int64(v))) }
func (e *slogFields) AddInt64(key string, v int64)     { e.add(slog.Int64(key, v)) }
func (e *slogFields) AddInt32(key string, v int32)     { e.add(slog.Int64(key, int64(v))) }
func (e *slogFields) AddInt16(key string, v int16)     { e.add(slog.Int64(key, int64(v))) }
func (e *slogFields) AddInt8(key string, v int8)       { e.add(slog.Int64(key, int64(v))) }
func (e *slogFields) AddString(key, v string)          { e.add(slog.String(key, v)) }
func (e *slogFields) AddTime(key string, v time.Time)  { e.add(slog.Time(key, v)) }
func (e *slogFields) AddUint(key string, v uint)       { e.add(slog.Uint64(key, uint64(v))) }
func (e *slogFields) AddUint64(key string, v uint64)   { e.add(slog.Uint64(key, v)) }
func (e *slogFields) AddUint32(key string, v uint32)   { e.add(slog.Uint64(key, uint64(v))) }
func (e *slogFields) AddUint16(key string, v uint16)   { e.add(slog.Uint64(key, uint64(v))) }
func (e *slogFields) AddUint8(key string, v uint8)     { e.add(slog.Uint64(key, uint64(v))) }
func (e *slogFields) AddUintptr(key string, v uintptr) { e.add(slog.Uint64(key, uint64(v))) }
func (e *slogFields) AddReflected(key string, v any) error {
	e.add(slog.Any(key, v))
	return nil
}
func (e *slogFields) OpenNamespace(key string) {
	e.ns = append(e.ns, namespace{key: key, start: len(e.attrs)})
}

var _ zapcore.ObjectEncoder = (*slogFields)(nil)
