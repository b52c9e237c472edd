package oteltest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

var funderHost = map[string]string{"server.address": "apply.funder.test", "server.port": "443", "url.scheme": "https"}

func with(base map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// One point per attempt, with its status, error.type and protocol, and
// no http.request.resend_count: the resend count is an attribute of the
// attempt's span, and on the metric it would multiply the series.
func TestAttemptDurationHasOnePointPerAttemptWithStatusAndProtocolNotResendCount(t *testing.T) {
	r, mp := reader(t)
	rt := grantretry.New(&script{statuses: []int{503, 0, 200}}, grantretry.WithMeterProvider(mp), fast)
	if _, err := post(t, rt, context.Background(), funderURL); err != nil {
		t.Fatal(err)
	}
	ms := collect(t, r)
	for _, tc := range []struct {
		want map[string]string
	}{
		{with(funderHost, "http.request.method", "POST", "http.response.status_code", "503", "error.type", "503", "network.protocol.version", "1.1")},
		{with(funderHost, "http.request.method", "POST", "error.type", "transport:eof")},
		{with(funderHost, "http.request.method", "POST", "http.response.status_code", "200", "network.protocol.version", "1.1")},
	} {
		if n, _ := hist(t, ms, "http.client.request.duration", tc.want); n != 1 {
			t.Errorf("%v: %d points, want 1", tc.want, n)
		}
	}
	if n, _ := hist(t, ms, "http.client.request.duration", nil); n != 3 {
		t.Errorf("%d attempts recorded, want 3", n)
	}
	for _, p := range ms["http.client.request.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		if v, ok := p.Attributes.Value("http.request.resend_count"); ok {
			t.Errorf("a point carries http.request.resend_count %s: %s", v.String(), p.Attributes.Encoded(attribute.DefaultEncoder()))
		}
		if v, _ := p.Attributes.Value("error.type"); v.AsString() == "transport:eof" {
			if _, ok := p.Attributes.Value("network.protocol.version"); ok {
				t.Errorf("the attempt without a response has network.protocol.version: %s", p.Attributes.Encoded(attribute.DefaultEncoder()))
			}
		}
	}
}

func TestCallsAreCountedByDispositionAndStopReasonWithTheirAttempts(t *testing.T) {
	r, mp := reader(t)
	rt := grantretry.New(&script{statuses: []int{503, 503, 200, 422}}, grantretry.WithMeterProvider(mp), fast)
	post(t, rt, context.Background(), funderURL) // 503, 503, 200
	post(t, rt, context.Background(), funderURL) // 422
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.calls", with(funderHost, "grantretry.disposition", "succeeded", "grantretry.stop_reason", "success")); n != 1 {
		t.Errorf("succeeded calls = %v, want 1", n)
	}
	if n := sum(t, ms, "grantretry.calls", with(funderHost, "grantretry.disposition", "failed_terminal", "grantretry.stop_reason", "terminal")); n != 1 {
		t.Errorf("failed_terminal calls = %v, want 1", n)
	}
	if n, s := hist(t, ms, "grantretry.call.attempts", nil); n != 2 || s != 4 {
		t.Errorf("attempts per call: %d calls, %v attempts; want 2 and 4", n, s)
	}
}

func TestRetryWaitIsRecordedWithItsSource(t *testing.T) {
	r, mp := reader(t)
	inner := &script{statuses: []int{429, 200}, header: http.Header{"Retry-After": {"1"}}}
	rt := grantretry.New(inner, grantretry.WithMeterProvider(mp), fast)
	post(t, rt, context.Background(), funderURL)
	rt2 := grantretry.New(&script{statuses: []int{503, 200}}, grantretry.WithMeterProvider(mp), fast)
	post(t, rt2, context.Background(), funderURL)
	ms := collect(t, r)
	for _, src := range []string{"retry_after", "backoff"} {
		if n, _ := hist(t, ms, "grantretry.retry.wait", with(funderHost, "grantretry.wait_source", src)); n != 1 {
			t.Errorf("waits from %s: %d, want 1", src, n)
		}
	}
}

func TestBreakerTransitionsAreCountedAndItsStateObserved(t *testing.T) {
	r, mp := reader(t)
	rt := grantretry.New(&script{statuses: []int{503}}, grantretry.WithMeterProvider(mp),
		grantretry.WithBudget(0, time.Minute), grantretry.WithBreaker(2, time.Hour), grantretry.WithBreakerProbe(time.Hour))
	for range 3 {
		post(t, rt, context.Background(), funderURL)
	}
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.breaker.transitions", with(funderHost, "grantretry.breaker.from", "closed", "grantretry.breaker.to", "open")); n != 1 {
		t.Errorf("closed->open transitions = %v, want 1", n)
	}
	for state, want := range map[string]float64{"open": 1, "closed": 0, "half_open": 0} {
		if n := sum(t, ms, "grantretry.breaker.state", with(funderHost, "grantretry.breaker.state", state)); n != want {
			t.Errorf("breaker.state{%s} = %v, want %v", state, n, want)
		}
	}
	if n := sum(t, ms, "grantretry.calls", map[string]string{"grantretry.disposition": "circuit_open"}); n != 1 {
		t.Errorf("circuit_open calls = %v, want 1", n)
	}
}

func TestThrottleRefusalsAreCountedAndItsTokensObserved(t *testing.T) {
	r, mp := reader(t)
	rt := grantretry.New(&script{statuses: []int{503}}, grantretry.WithMeterProvider(mp), fast,
		grantretry.WithoutBreaker(), grantretry.WithRetryThrottle(2, 0.1), grantretry.WithThrottleRefill(time.Hour))
	post(t, rt, context.Background(), funderURL)
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.throttle.refusals", funderHost); n != 1 {
		t.Errorf("refusals = %v, want 1", n)
	}
	if n := sum(t, ms, "grantretry.throttle.tokens", funderHost); n != 1 {
		t.Errorf("tokens = %v, want 1 (2 less one failure)", n)
	}
	if n := sum(t, ms, "grantretry.calls", map[string]string{"grantretry.stop_reason": "retry_throttled"}); n != 1 {
		t.Errorf("retry_throttled calls = %v, want 1", n)
	}
}

func TestReconcileChecksAreCountedByVerdict(t *testing.T) {
	r, mp := reader(t)
	notApplied := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) { return nil, nil }
	rt := grantretry.New(&script{statuses: []int{502, 200}}, grantretry.WithMeterProvider(mp), fast, grantretry.WithReconciler(notApplied))
	post(t, rt, context.Background(), funderURL)
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.reconcile.checks", with(funderHost, "grantretry.reconcile.verdict", "not_applied")); n != 1 {
		t.Errorf("not_applied checks = %v, want 1", n)
	}
}

// letters is an in-memory DeadLetterSink; fail makes it refuse them.
type letters struct {
	mu   sync.Mutex
	kept []*grantretry.Letter
	fail bool
}

func (l *letters) PutDeadLetter(_ context.Context, lt *grantretry.Letter) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return errors.New("disk full")
	}
	l.kept = append(l.kept, lt)
	return nil
}

func TestDeadLettersKeptAreCounted(t *testing.T) {
	r, mp := reader(t)
	sink := &letters{}
	rt := grantretry.New(&script{statuses: []int{503}}, grantretry.WithMeterProvider(mp), fast,
		grantretry.WithBudget(1, time.Minute), grantretry.WithDeadLetter(sink))
	post(t, rt, context.Background(), funderURL)
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.dead_letters", with(funderHost, "grantretry.disposition", "dead_letter")); n != 1 {
		t.Errorf("dead letters = %v, want 1", n)
	}
}

func TestDeadLettersNotKeptAreRecordFailures(t *testing.T) {
	r, mp := reader(t)
	rt := grantretry.New(&script{statuses: []int{503}}, grantretry.WithMeterProvider(mp), fast,
		grantretry.WithBudget(0, time.Minute), grantretry.WithDeadLetter(&letters{fail: true}))
	post(t, rt, context.Background(), funderURL)
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.record.failures", with(funderHost, "grantretry.record", "dead_letter")); n != 1 {
		t.Errorf("record failures = %v, want 1", n)
	}
	if _, ok := ms["grantretry.dead_letters"]; ok && sum(t, ms, "grantretry.dead_letters", nil) != 0 {
		t.Error("a letter that was not kept was counted as kept")
	}
}

func TestRedeliveriesAreCountedByDisposition(t *testing.T) {
	r, mp := reader(t)
	sink := &letters{}
	failing := grantretry.New(&script{statuses: []int{503}}, fast, grantretry.WithBudget(0, time.Minute), grantretry.WithDeadLetter(sink))
	post(t, failing, context.Background(), funderURL)
	if len(sink.kept) != 1 {
		t.Fatalf("%d letters kept, want 1", len(sink.kept))
	}
	client := &http.Client{Transport: grantretry.New(&script{statuses: []int{201}}, grantretry.WithMeterProvider(mp))}
	resp, err := deadletter.Redeliver(context.Background(), client, sink.kept[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.dead_letter.redeliveries", with(funderHost, "grantretry.disposition", "succeeded")); n != 1 {
		t.Errorf("redeliveries = %v, want 1", n)
	}
}

// memTrail is an in-memory AuditSink; fail makes every Write fail.
type memTrail struct {
	mu    sync.Mutex
	lines int
	syncs int
	fail  bool
	err   error
}

func (m *memTrail) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		m.err = grantretry.ErrAuditTrail
		return 0, m.err
	}
	m.lines++
	return len(p), nil
}

func (m *memTrail) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncs++
	return m.err
}

func (m *memTrail) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func TestAuditRecordsAreCountedByMessageAndTheirSyncsTimed(t *testing.T) {
	r, mp := reader(t)
	sink := &memTrail{}
	rt := grantretry.New(&script{statuses: []int{503, 200}}, grantretry.WithMeterProvider(mp), fast, grantretry.WithAuditTrail(sink))
	post(t, rt, context.Background(), funderURL)
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.audit.records", map[string]string{"grantretry.audit.message": grantretry.MsgAttempt}); n != 2 {
		t.Errorf("attempt records = %v, want 2", n)
	}
	if n := sum(t, ms, "grantretry.audit.records", map[string]string{"grantretry.audit.message": grantretry.MsgDisposition}); n != 1 {
		t.Errorf("disposition records = %v, want 1", n)
	}
	if n := sum(t, ms, "grantretry.audit.records", nil); int(n) != sink.lines {
		t.Errorf("records counted = %v, the sink has %d", n, sink.lines)
	}
	if n, _ := hist(t, ms, "grantretry.audit.sync.duration", nil); int(n) != sink.syncs || n != 1 {
		t.Errorf("syncs timed = %d, the sink had %d, want 1", n, sink.syncs)
	}
}

func TestAFailedAuditTrailIsARecordFailure(t *testing.T) {
	r, mp := reader(t)
	rt := grantretry.New(&script{statuses: []int{200}}, grantretry.WithMeterProvider(mp), grantretry.WithAuditTrail(&memTrail{fail: true}))
	post(t, rt, context.Background(), funderURL)
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.record.failures", with(funderHost, "grantretry.record", "audit_trail")); n != 1 {
		t.Errorf("record failures = %v, want 1", n)
	}
}

func TestNoMetricAttributeCarriesThePathOrASubmissionID(t *testing.T) {
	r, mp := reader(t)
	sink := &letters{}
	rt := grantretry.New(&script{statuses: []int{502, 503}}, grantretry.WithMeterProvider(mp), fast,
		grantretry.WithDeadLetter(sink), grantretry.WithAuditTrail(&memTrail{}), grantretry.WithBreaker(1, time.Hour))
	post(t, rt, context.Background(), funderURL)
	post(t, rt, context.Background(), funderURL)
	for name, m := range collect(t, r) {
		for _, set := range attributeSets(m.Data) {
			for _, kv := range set.ToSlice() {
				if v := kv.Value.String(); strings.Contains(v, "GRANT-2026-0042") || strings.Contains(v, "/v1/") {
					t.Errorf("%s has %s=%s", name, kv.Key, v)
				}
				if kv.Key == "grantretry.correlation_id" {
					t.Errorf("%s has a correlation id", name)
				}
			}
		}
	}
}

func attributeSets(d metricdata.Aggregation) []attribute.Set {
	var out []attribute.Set
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	}
	return out
}

func TestAnAlreadyAppliedCallIsCountedAndTracedAsASuccess(t *testing.T) {
	r, mp := reader(t)
	sr, tp := recorder(t)
	applied := grantretry.ClassifyRules(grantretry.Rule{Status: 403,
		Verdict: grantretry.Classification{Applied: true, Reason: "applied:duplicate"}})
	rt := grantretry.New(&script{statuses: []int{502, 403}}, grantretry.WithMeterProvider(mp),
		grantretry.WithTracerProvider(tp), grantretry.WithClassifier(applied), fast)
	if _, err := post(t, rt, context.Background(), funderURL); err != nil {
		t.Fatal(err)
	}
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.calls", with(funderHost, "grantretry.disposition", "succeeded", "grantretry.stop_reason", "already_applied")); n != 1 {
		t.Errorf("succeeded (already_applied) calls = %v, want 1", n)
	}
	for _, s := range sr.Ended() {
		if s.Name() != "grantretry.call" {
			continue
		}
		if v, _ := attr(s, "grantretry.stop_reason"); v != "already_applied" {
			t.Errorf("call span stop reason %q, want already_applied", v)
		}
		if s.Status().Code == codes.Error {
			t.Errorf("call span status %v: a call the funder already had is no error", s.Status())
		}
		return
	}
	t.Fatal("no call span")
}
