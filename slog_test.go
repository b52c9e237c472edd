package grantretry

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// slogCapture is a slog.Handler that keeps every record it is handed, with
// the context it came with.
type slogCapture struct {
	mu      sync.Mutex
	level   slog.Level
	records []slogRecord
}

type slogRecord struct {
	slog.Record
	ctx context.Context
}

func (h *slogCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *slogCapture) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, slogRecord{r.Clone(), ctx})
	return nil
}

func (h *slogCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *slogCapture) WithGroup(string) slog.Handler      { return h }

func (h *slogCapture) all() []slogRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slogRecord(nil), h.records...)
}

// keys and values of a record's attributes, in order.
func attrsOf(r slog.Record) ([]string, map[string]any) {
	var keys []string
	vals := map[string]any{}
	r.Attrs(func(a slog.Attr) bool {
		keys = append(keys, a.Key)
		vals[a.Key] = a.Value.Any()
		return true
	})
	return keys, vals
}

var zapToSlog = map[zapcore.Level]slog.Level{zapcore.InfoLevel: slog.LevelInfo, zapcore.WarnLevel: slog.LevelWarn}

// sameLines checks that the slog records are the zap lines: one for one,
// in order, with the same message, level and fields, each field of the
// same Go type (int64, bool, string, time.Duration, time.Time).
func sameLines(t *testing.T, zl []observer.LoggedEntry, sl []slogRecord) {
	t.Helper()
	if len(zl) != len(sl) {
		t.Fatalf("%d zap lines but %d slog records", len(zl), len(sl))
	}
	for i, z := range zl {
		s := sl[i]
		if s.Message != z.Message || s.Level != zapToSlog[z.Level] {
			t.Errorf("line %d: slog %s at %v, zap %s at %v", i, s.Message, s.Level, z.Message, z.Level)
		}
		_, got := attrsOf(s.Record)
		if want := z.ContextMap(); !reflect.DeepEqual(got, want) {
			t.Errorf("line %d (%s):\nslog %#v\nzap  %#v", i, z.Message, got, want)
		}
	}
}

type slogCtxKey struct{}

// Every kind of audit line reaches a slog logger as it reaches the zap
// logger beside it: attempt, disposition (INFO and WARN, with a closing
// time and with not_before), breaker and reconcile lines.
func TestSlogGetsTheSameAuditLinesAsZap(t *testing.T) {
	capture := &slogCapture{level: slog.LevelDebug}
	rec := &scriptedReconciler{answers: []reconcileAnswer{{}}}
	h := newHarness(t, WithSlog(slog.New(capture)), WithReconciler(rec.fn), ForHost("down.test", WithBreaker(1, time.Hour)),
		WithRandSource(maxSource{}), WithBackoff(100*time.Millisecond, time.Second))
	h.mock.RegisterResponder(http.MethodPost, funderURL, eofThen(201))
	h.mock.RegisterResponder(http.MethodGet, "https://busy.test/quota", seqWithHeader(http.Header{"Retry-After": {"3600"}}, 503))
	h.mock.RegisterResponder(http.MethodGet, "https://down.test/status", seq(503))

	ctx := context.WithValue(context.Background(), slogCtxKey{}, "the caller's")
	due := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	if o, _ := h.submitOnce(t, WithClosingTime(ctx, due)); o.Disposition != Succeeded || o.Reconciles != 1 {
		t.Fatalf("submission: %s after %d questions", o.Disposition, o.Reconciles)
	}
	if o := h.attemptsTo(t, "https://busy.test/quota"); o.StopReason != StopOwedLater {
		t.Fatalf("quota call: %s, want %s", o.StopReason, StopOwedLater)
	}
	if o := h.attemptsTo(t, "https://down.test/status"); o.Disposition != CircuitOpen {
		t.Fatalf("down call: %s", o.Disposition)
	}

	zl, sl := h.logs.AllUntimed(), capture.all()
	sameLines(t, zl, sl)
	seen := map[string]bool{}
	for _, z := range zl {
		seen[z.Message+"/"+z.Level.String()] = true
	}
	for _, want := range []string{"grantretry.attempt/info", "grantretry.disposition/info", "grantretry.disposition/warn",
		"grantretry.reconcile/info", "grantretry.breaker/warn"} {
		if !seen[want] {
			t.Errorf("no %s line: the scenario does not cover it", want)
		}
	}
	_, first := attrsOf(sl[0].Record)
	if first[FieldSubmissionID] != "GRANT-42" {
		t.Fatalf("first record is not the submission's: %v", first)
	}
	for i, r := range sl {
		if _, v := attrsOf(r.Record); v[FieldSubmissionID] == "GRANT-42" {
			if r.ctx.Value(slogCtxKey{}) != "the caller's" {
				t.Errorf("record %d (%s) came without the request's context", i, r.Message)
			}
		}
		if !r.Time.Equal(h.clock.Now()) && r.Time.After(h.clock.Now()) {
			t.Errorf("record %d at %v, after the Clock's %v", i, r.Time, h.clock.Now())
		}
	}
	var dueLine bool
	for _, r := range sl {
		if _, v := attrsOf(r.Record); v[FieldDueBy] != nil {
			dueLine = v[FieldDueBy] == due && v[FieldLate] == false
		}
	}
	if !dueLine {
		t.Error("no disposition record with due_by as a time.Time and late as a bool")
	}
}

// The fields come in the documented order, the shared six first.
func TestSlogFieldsInTheirOrder(t *testing.T) {
	capture := &slogCapture{level: slog.LevelInfo}
	h := newHarness(t, WithSlog(slog.New(capture)))
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	h.attemptsTo(t, "https://funder.test/v1/status")
	sl := capture.all()
	if len(sl) != 2 {
		t.Fatalf("%d records, want an attempt and a disposition", len(sl))
	}
	shared := []string{FieldCorrelationID, FieldIdempotencyKey, FieldSubmissionID, FieldMethod, FieldHost, FieldPath}
	for _, tc := range []struct {
		r    slogRecord
		want []string
	}{
		{sl[0], append(append([]string(nil), shared...), FieldAttempt, FieldStatus, FieldError, FieldReason, FieldRetryable,
			FieldWait, FieldWaitSource, FieldLatency, FieldElapsed)},
		{sl[1], append(append([]string(nil), shared...), FieldDisposition, FieldAttempts, FieldStopReason, FieldStatus, FieldReason,
			FieldError, FieldPayloadSHA256, FieldPayloadBytes, FieldNotReplayable, FieldElapsed, FieldDeadLetterID,
			FieldRecordError, FieldReconciles, FieldAmbiguous)},
	} {
		if keys, _ := attrsOf(tc.r.Record); !reflect.DeepEqual(keys, tc.want) {
			t.Errorf("%s keys\n%v\nwant\n%v", tc.r.Message, keys, tc.want)
		}
	}
	if sl[0].Time != h.clock.Now() {
		t.Errorf("record time %v, want the Transport's Clock, %v", sl[0].Time, h.clock.Now())
	}
}

// A handler's level decides which lines it gets: at WARN, the failed
// call's disposition, not the attempts.
func TestSlogKeepsItsHandlersLevel(t *testing.T) {
	capture := &slogCapture{level: slog.LevelWarn}
	tr := New(httpmock.NewMockTransport(), WithClock(newFakeClock()), WithSlog(slog.New(capture)), WithBudget(0, time.Minute))
	req, _ := http.NewRequest(http.MethodGet, "https://funder.test/x", nil)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a call to a mock with no responder succeeded")
	}
	sl := capture.all()
	if len(sl) != 1 || sl[0].Message != MsgDisposition || sl[0].Level != slog.LevelWarn {
		t.Fatalf("records %v, want one WARN disposition", sl)
	}
}

// WithSlog and WithLogger both get every line (the harness's zap logger
// and the slog handler); WithSlog given twice uses the last.
func TestSlogAndZapBothGetLinesAndTheLastSlogWins(t *testing.T) {
	first, last := &slogCapture{}, &slogCapture{}
	h := newHarness(t, WithSlog(slog.New(first)), WithSlog(slog.New(last)))
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	h.attemptsTo(t, "https://funder.test/v1/status")
	if n := len(first.all()); n != 0 {
		t.Errorf("the first WithSlog's handler got %d records, want none", n)
	}
	if z, s := len(h.logs.All()), len(last.all()); z != 2 || s != 2 {
		t.Errorf("zap got %d lines and slog %d, want 2 each", z, s)
	}
}

func TestSlogNilOrWithoutHandlerIsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    *slog.Logger
	}{
		{"nil", nil},
		{"no handler", &slog.Logger{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(httpmock.NewMockTransport(), WithSlog(tc.l))
			if !errors.Is(tr.Err(), ErrInvalidOption) {
				t.Fatalf("Err() = %v, want ErrInvalidOption", tr.Err())
			}
		})
	}
}

// The zap-only path gains nothing: with neither logger nor slog, a line
// is made for nothing.
func TestSlogOffAuditsNothing(t *testing.T) {
	tr := New(httpmock.NewMockTransport())
	if tr.auditing(zapcore.InfoLevel) || tr.auditing(zapcore.WarnLevel) {
		t.Fatal("a Transport with no logger, no slog and no trail says it audits")
	}
	tr = New(httpmock.NewMockTransport(), WithSlog(slog.New(&slogCapture{level: slog.LevelWarn})))
	if tr.auditing(zapcore.InfoLevel) || !tr.auditing(zapcore.WarnLevel) {
		t.Fatal("a WARN slog handler: want WARN lines only")
	}
}

// Fields zap has and the audit lines do not use yet still reach slog, as
// the slog value nearest their type.
func TestSlogFieldsOfEveryZapType(t *testing.T) {
	var e slogFields
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fields := []zapcore.Field{
		{Key: "s", Type: zapcore.StringType, String: "x"},
		{Key: "i", Type: zapcore.Int32Type, Integer: -3},
		{Key: "u", Type: zapcore.Uint16Type, Integer: 7},
		{Key: "d", Type: zapcore.DurationType, Integer: int64(time.Second)},
		{Key: "t", Type: zapcore.TimeType, Integer: at.UnixNano(), Interface: time.UTC},
		{Key: "b", Type: zapcore.BoolType, Integer: 1},
		{Key: "f", Type: zapcore.Float64Type, Integer: 0},
		{Key: "ns", Type: zapcore.NamespaceType},
		{Key: "inner", Type: zapcore.StringType, String: "y"},
	}
	for _, f := range fields {
		f.AddTo(&e)
	}
	r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
	r.AddAttrs(e.done()...)
	keys, vals := attrsOf(r)
	if want := []string{"s", "i", "u", "d", "t", "b", "f", "ns"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	want := map[string]any{"s": "x", "i": int64(-3), "u": uint64(7), "d": time.Second, "t": at, "b": true, "f": 0.0}
	for k, w := range want {
		if got := vals[k]; !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", k, got, w)
		}
	}
	if g, ok := vals["ns"].([]slog.Attr); !ok || len(g) != 1 || g[0].Key != "inner" || g[0].Value.String() != "y" {
		t.Errorf("namespace = %#v, want a group holding inner", vals["ns"])
	}
}
