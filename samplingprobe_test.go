package grantretry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// keepsNamed is a core that keeps only the lines of loggers whose name
// begins with prefix, as an application routes one component's lines.
type keepsNamed struct {
	zapcore.Core
	prefix string
}

func (c keepsNamed) With(f []zapcore.Field) zapcore.Core {
	return keepsNamed{c.Core.With(f), c.prefix}
}

func (c keepsNamed) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !strings.HasPrefix(e.LoggerName, c.prefix) {
		return ce
	}
	return c.Core.Check(e, ce)
}

// A core grantretry cannot see into is probed with lines under the
// logger's own name, as its audit lines will be written: a core that keeps
// only that name's lines is not taken for a sampler, and keeps every line.
func TestSamplingProbeUsesTheLoggersName(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := zap.New(keepsNamed{core, "grantretry"}).Named("grantretry")
	tr := New(roundTripFunc(okResponse), WithClock(newFakeClock()), WithLogger(l))
	if err := tr.Err(); err != nil {
		t.Fatalf("Err() = %v: a core that keeps the logger's named lines was refused", err)
	}
	succeedMany(t, tr, 5)
	if n := logs.Len(); n != 10 {
		t.Errorf("%d audit lines kept, want 10", n)
	}
}

// zap's WithLazy wraps the core as With does, only later: a production
// logger after WithLazy has its sampler passed, not refused, and every
// audit line reaches its output with the lazy fields.
func TestSamplerIsPassedThroughWithLazy(t *testing.T) {
	const calls = 300
	out := filepath.Join(t.TempDir(), "app.log")
	cfg := zap.NewProductionConfig()
	cfg.OutputPaths = []string{out}
	l, err := cfg.Build()
	if err != nil {
		t.Fatal(err)
	}
	tr := New(roundTripFunc(okResponse), WithClock(newFakeClock()), WithLogger(l.WithLazy(zap.String("service", "submit"))))
	if err := tr.Err(); err != nil {
		t.Fatalf("Err() = %v, want nil: the sampler is passed, not refused", err)
	}
	succeedMany(t, tr, calls)
	_ = l.Sync()
	if got := auditCounts(t, out); got[MsgAttempt] != calls || got[MsgDisposition] != calls {
		t.Errorf("%d attempt and %d disposition lines reached the log, want %d of each", got[MsgAttempt], got[MsgDisposition], calls)
	}
	if b, _ := os.ReadFile(out); strings.Count(string(b), `"service":"submit"`) != 2*calls {
		t.Errorf("the lazy field is not on every audit line")
	}
}
