package bench

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"go.uber.org/zap"
)

// BenchmarkPieces times, on their own, the standard-library and zap
// operations that grantretry's success path performs once per call (see
// docs/performance.md, "Where the time goes"). They are not grantretry's
// code: they are the floor under it, and what a change to the hot path can
// hope to save.
func BenchmarkPieces(b *testing.B) {
	errCause := errors.New("deadline")
	b.Run("piece=alloc-64B", func(b *testing.B) {
		// One small heap allocation: the unit most of the hot path's
		// cost is counted in on this machine.
		b.ReportAllocs()
		for range b.N {
			byteSink = make([]byte, 64)
		}
	})
	b.Run("piece=afterfunc-stop", func(b *testing.B) {
		// startContexts arms a timer for the budget deadline on every call;
		// stopContexts stops it.
		b.ReportAllocs()
		for range b.N {
			t := time.AfterFunc(45*time.Second, func() {})
			t.Stop()
		}
	})
	b.Run("piece=ctx-value-cancelcause", func(b *testing.B) {
		// startContexts: the outcome holder's WithValue, then
		// WithCancelCause, cancelled when the body is closed.
		ctx := context.Background()
		b.ReportAllocs()
		for range b.N {
			c, cancel := context.WithCancelCause(context.WithValue(ctx, pieceKey{}, b))
			cancel(errCause)
			sink = c
		}
	})
	b.Run("piece=request-clone", func(b *testing.B) {
		req, _ := http.NewRequest(http.MethodGet, "http://funder.example"+applicationsPath, nil)
		ctx := context.Background()
		b.ReportAllocs()
		for range b.N {
			sink = req.Clone(ctx)
		}
	})
	b.Run("piece=header-set/key=X-Correlation-ID", func(b *testing.B) {
		// HeaderCorrelationID is not in canonical form, so every Get and
		// Set canonicalises it anew.
		b.ReportAllocs()
		for range b.N {
			h := http.Header{}
			h.Set(grantretry.HeaderCorrelationID, "0123456789abcdef")
			sink = h
		}
	})
	b.Run("piece=header-set/key=canonical-direct", func(b *testing.B) {
		// The same header written under its canonical key, computed once.
		key := http.CanonicalHeaderKey(grantretry.HeaderCorrelationID)
		b.ReportAllocs()
		for range b.N {
			h := http.Header{}
			h[key] = []string{"0123456789abcdef"}
			sink = h
		}
	})
	b.Run("piece=correlation-id", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			stringSink = grantretry.NewCorrelationID()
		}
	})
	b.Run("piece=zap-json-attempt-line", func(b *testing.B) {
		// One line shaped like grantretry.attempt (15 fields), through the
		// benchmarks' JSON logger to io.Discard.
		log := jsonDiscardLogger()
		b.ReportAllocs()
		for range b.N {
			log.Info(grantretry.MsgAttempt,
				zap.String(grantretry.FieldCorrelationID, "0123456789abcdef"),
				zap.String(grantretry.FieldIdempotencyKey, "grant-0123456789abcdef0123456789abcdef"),
				zap.String(grantretry.FieldSubmissionID, submissionID),
				zap.String(grantretry.FieldMethod, http.MethodPost),
				zap.String(grantretry.FieldHost, "funder.example"),
				zap.String(grantretry.FieldPath, applicationsPath),
				zap.Int(grantretry.FieldAttempt, 1),
				zap.Int(grantretry.FieldStatus, 200),
				zap.String(grantretry.FieldError, ""),
				zap.String(grantretry.FieldReason, "ok:200"),
				zap.Bool(grantretry.FieldRetryable, false),
				zap.Duration(grantretry.FieldWait, 0),
				zap.String(grantretry.FieldWaitSource, ""),
				zap.Duration(grantretry.FieldLatency, 1500*time.Nanosecond),
				zap.Duration(grantretry.FieldElapsed, 1700*time.Nanosecond),
			)
		}
	})
	b.Run("piece=zap-json-disposition-line", func(b *testing.B) {
		// One line shaped like grantretry.disposition (20 fields).
		log := jsonDiscardLogger()
		b.ReportAllocs()
		for range b.N {
			log.Info(grantretry.MsgDisposition, successDispositionFields(sharedFields(14))...)
		}
	})
	b.Run("piece=zap-json-success-lines", func(b *testing.B) {
		// The two lines of a first-attempt success, as zap fields: what
		// zap alone takes to write what grantretry-audit writes per call.
		log := jsonDiscardLogger()
		b.ReportAllocs()
		for range b.N {
			log.Info(grantretry.MsgAttempt, successAttemptFields(sharedFields(9))...)
			log.Info(grantretry.MsgDisposition, successDispositionFields(sharedFields(14))...)
		}
	})
	b.Run("piece=zap-json-success-lines-with", func(b *testing.B) {
		// The same two lines with the shared fields encoded once, by a
		// logger.With per call: the With's clones against one encoding
		// of six fields saved.
		log := jsonDiscardLogger()
		b.ReportAllocs()
		for range b.N {
			l := log.With(sharedFields(0)...)
			l.Info(grantretry.MsgAttempt, successAttemptFields(make([]zap.Field, 0, 9))...)
			l.Info(grantretry.MsgDisposition, successDispositionFields(make([]zap.Field, 0, 14))...)
		}
	})
	b.Run("piece=zap-json-empty-line", func(b *testing.B) {
		// A line with no fields: the per-line cost of zap's entry,
		// timestamp and level, apart from any field.
		log := jsonDiscardLogger()
		b.ReportAllocs()
		for range b.N {
			log.Info(grantretry.MsgDisposition)
		}
	})
}

type pieceKey struct{}

// sharedFields are the six fields every line of a call starts with, in a
// slice with room for extra more.
func sharedFields(extra int) []zap.Field {
	return append(make([]zap.Field, 0, 6+extra),
		zap.String(grantretry.FieldCorrelationID, "0123456789abcdef"),
		zap.String(grantretry.FieldIdempotencyKey, ""),
		zap.String(grantretry.FieldSubmissionID, ""),
		zap.String(grantretry.FieldMethod, http.MethodGet),
		zap.String(grantretry.FieldHost, "funder.example"),
		zap.String(grantretry.FieldPath, applicationsPath),
	)
}

// successAttemptFields appends the fields of a successful first attempt line.
func successAttemptFields(fs []zap.Field) []zap.Field {
	return append(fs,
		zap.Int(grantretry.FieldAttempt, 1),
		zap.Int(grantretry.FieldStatus, 200),
		zap.String(grantretry.FieldError, ""),
		zap.String(grantretry.FieldReason, "ok:200"),
		zap.Bool(grantretry.FieldRetryable, false),
		zap.Duration(grantretry.FieldWait, 0),
		zap.String(grantretry.FieldWaitSource, ""),
		zap.Duration(grantretry.FieldLatency, 1500*time.Nanosecond),
		zap.Duration(grantretry.FieldElapsed, 1700*time.Nanosecond),
	)
}

// successDispositionFields appends the fields of a GET's succeeded disposition.
func successDispositionFields(fs []zap.Field) []zap.Field {
	return append(fs,
		zap.String(grantretry.FieldDisposition, string(grantretry.Succeeded)),
		zap.Int(grantretry.FieldAttempts, 1),
		zap.String(grantretry.FieldStopReason, grantretry.StopSuccess),
		zap.Int(grantretry.FieldStatus, 200),
		zap.String(grantretry.FieldReason, "ok:200"),
		zap.String(grantretry.FieldError, ""),
		zap.String(grantretry.FieldPayloadSHA256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
		zap.Int64(grantretry.FieldPayloadBytes, 0),
		zap.String(grantretry.FieldNotReplayable, ""),
		zap.Duration(grantretry.FieldElapsed, 1700*time.Nanosecond),
		zap.String(grantretry.FieldDeadLetterID, ""),
		zap.String(grantretry.FieldRecordError, ""),
		zap.Int(grantretry.FieldReconciles, 0),
		zap.Bool(grantretry.FieldAmbiguous, false),
	)
}
