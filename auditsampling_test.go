package grantretry

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// auditCounts counts the audit lines of each message in a file of JSON
// lines.
func auditCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		counts[line.Msg]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return counts
}

// succeedMany makes n calls that each succeed at once, so every line of
// every call has the same message and level, as zap's sampler counts them.
func succeedMany(t *testing.T, tr *Transport, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
}

// zap.NewProductionConfig() samples: past the first 100 lines of one
// message and level in a second, it keeps one in 100. Audit lines are never
// sampled: every attempt and disposition line reaches the logger's output,
// through the logger as built, after With and Named, under zap.Hooks, and
// teed beside another core.
func TestAuditLinesAreNeverSampled(t *testing.T) {
	const calls = 300
	var hooked atomic.Int64
	for _, tc := range []struct {
		name string
		wrap func(*zap.Logger) *zap.Logger
	}{
		{"as built", func(l *zap.Logger) *zap.Logger { return l }},
		{"With and Named", func(l *zap.Logger) *zap.Logger { return l.With(zap.String("service", "submit")).Named("grants") }},
		{"Hooks", func(l *zap.Logger) *zap.Logger {
			return l.WithOptions(zap.Hooks(func(zapcore.Entry) error { hooked.Add(1); return nil }))
		}},
		{"teed", func(l *zap.Logger) *zap.Logger {
			return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
				return zapcore.NewTee(c, zapcore.NewNopCore())
			}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "app.log")
			cfg := zap.NewProductionConfig()
			cfg.OutputPaths = []string{out}
			l, err := cfg.Build()
			if err != nil {
				t.Fatal(err)
			}
			tr := New(roundTripFunc(okResponse), WithClock(newFakeClock()), WithLogger(tc.wrap(l)))
			if err := tr.Err(); err != nil {
				t.Fatalf("Err() = %v, want nil: the sampler is passed, not refused", err)
			}
			succeedMany(t, tr, calls)
			_ = l.Sync()
			got := auditCounts(t, out)
			if got[MsgAttempt] != calls || got[MsgDisposition] != calls {
				t.Errorf("%d attempt and %d disposition lines reached the log, want %d of each", got[MsgAttempt], got[MsgDisposition], calls)
			}
			if n := hooked.Swap(0); tc.name == "Hooks" && n != 2*calls {
				t.Errorf("the hooks ran for %d lines, want %d", n, 2*calls)
			}
		})
	}
}

// The logger's own lines keep its sampling: only grantretry's pass it.
func TestAuditLinesPassTheSamplerButTheLoggersOwnLinesDoNot(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := zap.New(zapcore.NewSamplerWithOptions(core, time.Hour, 10, 0))
	tr := New(roundTripFunc(okResponse), WithClock(newFakeClock()), WithLogger(l))
	succeedMany(t, tr, 50)
	for i := 0; i < 50; i++ {
		l.Info("app line")
	}
	if n := logs.FilterMessage(MsgDisposition).Len(); n != 50 {
		t.Errorf("%d disposition lines, want 50", n)
	}
	if n := logs.FilterMessage("app line").Len(); n != 10 {
		t.Errorf("%d of the application's own lines, want the 10 its sampler keeps", n)
	}
}

// hiddenCore is a core of a type grantretry cannot see into.
type hiddenCore struct{ inner zapcore.Core }

func (h hiddenCore) Enabled(l zapcore.Level) bool { return h.inner.Enabled(l) }
func (h hiddenCore) With(f []zapcore.Field) zapcore.Core {
	return hiddenCore{h.inner.With(f)}
}
func (h hiddenCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return h.inner.Check(e, ce)
}
func (h hiddenCore) Write(e zapcore.Entry, f []zapcore.Field) error { return h.inner.Write(e, f) }
func (h hiddenCore) Sync() error                                    { return h.inner.Sync() }

// A sampler inside a core grantretry cannot see into cannot be passed: the
// logger is refused at New, with an error that says why and what to do, and
// nothing is sent. A core of that kind that does not sample is accepted.
func TestLoggerThatSamplesOutOfReachIsRefused(t *testing.T) {
	core, _ := observer.New(zapcore.InfoLevel)
	for _, tc := range []struct {
		name   string
		core   zapcore.Core
		refuse bool
	}{
		{"sampler in a core of its own", hiddenCore{zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)}, true},
		{"sampler under IncreaseLevel", zap.New(zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)).
			WithOptions(zap.IncreaseLevel(zapcore.WarnLevel)).Core(), true},
		{"no sampler in a core of its own", hiddenCore{core}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := 0
			tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent++
				return okResponse(r)
			}), WithClock(newFakeClock()), WithLogger(zap.New(tc.core)))
			err := tr.Err()
			if !tc.refuse {
				if err != nil {
					t.Fatalf("Err() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOption) || !strings.HasPrefix(err.Error(), "grantretry: ") || !strings.Contains(err.Error(), "sampl") {
				t.Fatalf("Err() = %v, want ErrInvalidOption saying the logger samples", err)
			}
			req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
			if _, err := tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) || sent != 0 {
				t.Errorf("RoundTrip = %v after %d sent, want ErrInvalidOption and nothing sent", err, sent)
			}
		})
	}
}

func okResponse(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}
