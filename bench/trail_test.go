package bench

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// attemptFields are the fields of a realistic attempt record: a reset
// connection on the second attempt of a submission, with a backoff wait.
func attemptFields() []zapcore.Field {
	return []zapcore.Field{
		zap.String(grantretry.FieldCorrelationID, "0123456789abcdef"),
		zap.String(grantretry.FieldIdempotencyKey, "grant-0123456789abcdef0123456789abcdef"),
		zap.String(grantretry.FieldSubmissionID, submissionID),
		zap.String(grantretry.FieldMethod, http.MethodPost),
		zap.String(grantretry.FieldHost, "apply.grants.example.gov:443"),
		zap.String(grantretry.FieldPath, applicationsPath),
		zap.Int(grantretry.FieldAttempt, 2),
		zap.Int(grantretry.FieldStatus, 0),
		zap.String(grantretry.FieldError, `Post "https://apply.grants.example.gov:443/v1/applications": read tcp 10.0.0.12:53124->203.0.113.7:443: read: connection reset by peer`),
		zap.String(grantretry.FieldReason, "transport:reset"),
		zap.Bool(grantretry.FieldRetryable, true),
		zap.Duration(grantretry.FieldWait, 1234567*time.Microsecond),
		zap.String(grantretry.FieldWaitSource, "backoff"),
		zap.Duration(grantretry.FieldLatency, 81234*time.Microsecond),
		zap.Duration(grantretry.FieldElapsed, 1345678*time.Microsecond),
	}
}

// attemptLine is one attempt record as the Transport hands it to the
// trail, before the chain fields.
func attemptLine(b *testing.B) []byte {
	enc := zapcore.NewJSONEncoder(grantretry.AuditEncoderConfig())
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Date(2026, 11, 30, 9, 0, 0, 123456789, time.UTC), Message: grantretry.MsgAttempt}
	buf, err := enc.EncodeEntry(ent, attemptFields())
	if err != nil {
		b.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func openBenchTrail(b *testing.B) *trail.Trail {
	sink, err := trail.Open(filepath.Join(b.TempDir(), "trail.jsonl"), trail.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sink.Close() })
	return sink
}

// BenchmarkAuditTrail times trail.Trail, the hash-chained audit
// sink (see docs/audit-trail.md): a record appended without a sync, as
// every attempt is; a record and a sync, as every disposition is; and a
// realistic attempt record encoded by zap and written to the trail against
// the same to io.Discard, so the sink's own cost per record is the
// difference.
func BenchmarkAuditTrail(b *testing.B) {
	b.Run("op=write", func(b *testing.B) {
		sink, line := openBenchTrail(b), attemptLine(b)
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for range b.N {
			if _, err := sink.Write(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=write+sync", func(b *testing.B) {
		sink, line := openBenchTrail(b), attemptLine(b)
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for range b.N {
			if _, err := sink.Write(line); err != nil {
				b.Fatal(err)
			}
			if err := sink.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=write+sync/parallel=8", func(b *testing.B) {
		// Eight goroutines per core each append a record and sync, as
		// concurrent calls end: one fsync may cover several of them.
		sink, line := openBenchTrail(b), attemptLine(b)
		b.SetBytes(int64(len(line)))
		b.SetParallelism(8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := sink.Write(line); err != nil {
					b.Error(err)
					return
				}
				if err := sink.Sync(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("op=transport-get", func(b *testing.B) {
		// A whole call through the Transport with its trail: an attempt
		// record, a disposition record and the sync that makes the
		// disposition durable before the caller has it.
		sink := openBenchTrail(b)
		client := &http.Client{Transport: grantretry.New(cannedTransport{}, grantretry.WithAuditTrail(sink))}
		ctx := contextFor(http.MethodGet)
		b.ReportAllocs()
		for range b.N {
			if code, err := do(client, ctx, http.MethodGet, "http://funder.example"+applicationsPath); err != nil || code != http.StatusOK {
				b.Fatalf("status %d, err %v", code, err)
			}
		}
		if err := sink.Err(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("op=zap-attempt/sink=discard", func(b *testing.B) {
		benchZapAttempt(b, zapcore.AddSync(io.Discard))
	})
	b.Run("op=zap-attempt/sink=trail", func(b *testing.B) {
		sink := openBenchTrail(b)
		benchZapAttempt(b, sink)
		if err := sink.Err(); err != nil {
			b.Fatal(err)
		}
	})
}

// benchZapAttempt logs one attempt record per op to ws, encoded as the
// Transport encodes its trail records.
func benchZapAttempt(b *testing.B, ws zapcore.WriteSyncer) {
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(grantretry.AuditEncoderConfig()), ws, zap.DebugLevel))
	fields := attemptFields()
	b.ReportAllocs()
	for range b.N {
		log.Info(grantretry.MsgAttempt, fields...)
	}
}
