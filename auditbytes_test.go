package grantretry

import (
	"bytes"
	"context"
	"fmt"
	"github.com/jarcoal/httpmock"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// bytesSink is an AuditSink that keeps every record's bytes.
type bytesSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *bytesSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *bytesSink) Sync() error { return nil }
func (s *bytesSink) Err() error  { return nil }

func (s *bytesSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

type fixedZapClock struct{ t time.Time }

func (c fixedZapClock) Now() time.Time                         { return c.t }
func (c fixedZapClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// latencyValue matches the one field of a line that is measured in real
// time, whatever the encoder writes for it.
var latencyValue = regexp.MustCompile(`"latency":("[^"]*"|[0-9.e+-]+)`)

// The exact bytes of the attempt and disposition lines, as a production
// JSON logger and the audit trail write them: every documented field, in
// the documented order. Tools and the trail's readers depend on both.
func TestAuditLineBytes(t *testing.T) {
	clk := newFakeClock()
	var logged bytes.Buffer
	log := zap.New(zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.AddSync(&logged), zap.InfoLevel,
	), zap.WithClock(fixedZapClock{clk.now}))
	sink := &bytesSink{}
	h := newHarness(t, WithClock(clk), WithLogger(log), WithAuditTrail(sink),
		WithRandSource(maxSource{}), WithBackoff(100*time.Millisecond, time.Second))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 201))
	var gets atomic.Int64
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		switch gets.Add(1) {
		case 1:
			return httpmock.NewStringResponse(200, "ok"), nil
		case 2:
			return nil, fmt.Errorf("dial %s: connection refused", r.URL)
		}
		return httpmock.NewStringResponse(422, "no"), nil
	})

	const payload = `{"applicant":"Harbor Arts Council"}`
	req, _ := newPost(t, WithSubmissionID(context.Background(), "GRANT-7"), payload, true)
	req.Header.Set(HeaderCorrelationID, "corr-post")
	for _, req := range []*http.Request{
		req,
		correlatedGet(t, funderURL, "corr-get"),
		correlatedGet(t, funderURL+"?token=secret-1234", "corr-fail"),
	} {
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cancelled := correlatedGet(t, funderURL+"?token=secret-1234", "corr-cancel").WithContext(ctx)
	if _, err := h.tr.RoundTrip(cancelled); err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	for _, c := range []struct{ name, got, want string }{
		{"logger", logged.String(), wantLoggerLines},
		{"trail", sink.String(), wantTrailLines},
	} {
		got := latencyValue.ReplaceAllString(c.got, `"latency":L`)
		if got != c.want {
			t.Errorf("%s lines:\n%s\nwant:\n%s", c.name, got, c.want)
		}
	}
}

func correlatedGet(t *testing.T, url, corr string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(HeaderCorrelationID, corr)
	return req
}

// The lines TestAuditLineBytes expects, "latency" masked as L: through a
// production JSON logger (seconds as numbers) and in the trail (RFC 3339
// time, durations as text).
const (
	wantLoggerLines = `{"level":"info","ts":1796029200,"msg":"grantretry.attempt","correlation_id":"corr-post","idempotency_key":"grant-28503cab40b85be9010e30d941d10f97","submission_id":"GRANT-7","method":"POST","host":"funder.test","path":"/v1/applications","attempt":1,"status":503,"error":"","reason":"transient:503","retryable":true,"wait":0.1,"wait_source":"backoff","latency":L,"elapsed":0}
{"level":"info","ts":1796029200,"msg":"grantretry.attempt","correlation_id":"corr-post","idempotency_key":"grant-28503cab40b85be9010e30d941d10f97","submission_id":"GRANT-7","method":"POST","host":"funder.test","path":"/v1/applications","attempt":2,"status":201,"error":"","reason":"ok:201","retryable":false,"wait":0,"wait_source":"","latency":L,"elapsed":0.1}
{"level":"info","ts":1796029200,"msg":"grantretry.disposition","correlation_id":"corr-post","idempotency_key":"grant-28503cab40b85be9010e30d941d10f97","submission_id":"GRANT-7","method":"POST","host":"funder.test","path":"/v1/applications","disposition":"succeeded","attempts":2,"stop_reason":"success","status":201,"reason":"ok:201","error":"","payload_sha256":"c90b0f2e0fcec1bb3662db66a42d2614de9fe6782060d2f4927e44e9cf551723","payload_bytes":35,"not_replayable":"","elapsed":0.1,"dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":false}
{"level":"info","ts":1796029200,"msg":"grantretry.attempt","correlation_id":"corr-get","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","attempt":1,"status":200,"error":"","reason":"ok:200","retryable":false,"wait":0,"wait_source":"","latency":L,"elapsed":0}
{"level":"info","ts":1796029200,"msg":"grantretry.disposition","correlation_id":"corr-get","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","disposition":"succeeded","attempts":1,"stop_reason":"success","status":200,"reason":"ok:200","error":"","payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","payload_bytes":0,"not_replayable":"","elapsed":0,"dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":false}
{"level":"info","ts":1796029200,"msg":"grantretry.attempt","correlation_id":"corr-fail","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","attempt":1,"status":0,"error":"dial https://funder.test/v1/applications?REDACTED: connection refused","reason":"transport:network","retryable":true,"wait":0.1,"wait_source":"backoff","latency":L,"elapsed":0}
{"level":"info","ts":1796029200,"msg":"grantretry.attempt","correlation_id":"corr-fail","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","attempt":2,"status":422,"error":"","reason":"terminal:422","retryable":false,"wait":0,"wait_source":"","latency":L,"elapsed":0.1}
{"level":"warn","ts":1796029200,"msg":"grantretry.disposition","correlation_id":"corr-fail","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","disposition":"failed_terminal","attempts":2,"stop_reason":"terminal","status":422,"reason":"terminal:422","error":"","payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","payload_bytes":0,"not_replayable":"","elapsed":0.1,"dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":true}
{"level":"warn","ts":1796029200,"msg":"grantretry.disposition","correlation_id":"corr-cancel","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","disposition":"canceled","attempts":0,"stop_reason":"canceled","status":0,"reason":"","error":"context canceled","payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","payload_bytes":0,"not_replayable":"","elapsed":0,"dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":false}
`
	wantTrailLines = `{"level":"info","ts":"2026-11-30T09:00:00Z","msg":"grantretry.attempt","correlation_id":"corr-post","idempotency_key":"grant-28503cab40b85be9010e30d941d10f97","submission_id":"GRANT-7","method":"POST","host":"funder.test","path":"/v1/applications","attempt":1,"status":503,"error":"","reason":"transient:503","retryable":true,"wait":"100ms","wait_source":"backoff","latency":L,"elapsed":"0s"}
{"level":"info","ts":"2026-11-30T09:00:00.1Z","msg":"grantretry.attempt","correlation_id":"corr-post","idempotency_key":"grant-28503cab40b85be9010e30d941d10f97","submission_id":"GRANT-7","method":"POST","host":"funder.test","path":"/v1/applications","attempt":2,"status":201,"error":"","reason":"ok:201","retryable":false,"wait":"0s","wait_source":"","latency":L,"elapsed":"100ms"}
{"level":"info","ts":"2026-11-30T09:00:00.1Z","msg":"grantretry.disposition","correlation_id":"corr-post","idempotency_key":"grant-28503cab40b85be9010e30d941d10f97","submission_id":"GRANT-7","method":"POST","host":"funder.test","path":"/v1/applications","disposition":"succeeded","attempts":2,"stop_reason":"success","status":201,"reason":"ok:201","error":"","payload_sha256":"c90b0f2e0fcec1bb3662db66a42d2614de9fe6782060d2f4927e44e9cf551723","payload_bytes":35,"not_replayable":"","elapsed":"100ms","dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":false}
{"level":"info","ts":"2026-11-30T09:00:00.1Z","msg":"grantretry.attempt","correlation_id":"corr-get","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","attempt":1,"status":200,"error":"","reason":"ok:200","retryable":false,"wait":"0s","wait_source":"","latency":L,"elapsed":"0s"}
{"level":"info","ts":"2026-11-30T09:00:00.1Z","msg":"grantretry.disposition","correlation_id":"corr-get","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","disposition":"succeeded","attempts":1,"stop_reason":"success","status":200,"reason":"ok:200","error":"","payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","payload_bytes":0,"not_replayable":"","elapsed":"0s","dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":false}
{"level":"info","ts":"2026-11-30T09:00:00.1Z","msg":"grantretry.attempt","correlation_id":"corr-fail","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","attempt":1,"status":0,"error":"dial https://funder.test/v1/applications?REDACTED: connection refused","reason":"transport:network","retryable":true,"wait":"100ms","wait_source":"backoff","latency":L,"elapsed":"0s"}
{"level":"info","ts":"2026-11-30T09:00:00.2Z","msg":"grantretry.attempt","correlation_id":"corr-fail","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","attempt":2,"status":422,"error":"","reason":"terminal:422","retryable":false,"wait":"0s","wait_source":"","latency":L,"elapsed":"100ms"}
{"level":"warn","ts":"2026-11-30T09:00:00.2Z","msg":"grantretry.disposition","correlation_id":"corr-fail","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","disposition":"failed_terminal","attempts":2,"stop_reason":"terminal","status":422,"reason":"terminal:422","error":"","payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","payload_bytes":0,"not_replayable":"","elapsed":"100ms","dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":true}
{"level":"warn","ts":"2026-11-30T09:00:00.2Z","msg":"grantretry.disposition","correlation_id":"corr-cancel","idempotency_key":"","submission_id":"","method":"GET","host":"funder.test","path":"/v1/applications","disposition":"canceled","attempts":0,"stop_reason":"canceled","status":0,"reason":"","error":"context canceled","payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","payload_bytes":0,"not_replayable":"","elapsed":"0s","dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":false}
`
)
