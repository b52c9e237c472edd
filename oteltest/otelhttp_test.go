package oteltest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/grantretry/grantretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// stackFunder answers 503 to the first request and 200 after, and keeps
// the traceparent header of every request it receives.
type stackFunder struct {
	*httptest.Server
	mu           sync.Mutex
	traceparents []string
}

func newStackFunder(t *testing.T) *stackFunder {
	f := &stackFunder{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.traceparents = append(f.traceparents, r.Header.Get("Traceparent"))
		first := len(f.traceparents) == 1
		f.mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// spansOf splits the ended spans into grantretry's call and attempt spans
// and otelhttp's client spans.
func spansOf(sr *tracetest.SpanRecorder) (calls, attempts, clients []sdktrace.ReadOnlySpan) {
	for _, s := range sr.Ended() {
		switch {
		case s.Name() == "grantretry.call":
			calls = append(calls, s)
		case s.Name() == "grantretry.attempt":
			attempts = append(attempts, s)
		case s.InstrumentationScope().Name == otelhttp.ScopeName:
			clients = append(clients, s)
		}
	}
	return calls, attempts, clients
}

// durationCount is the number of measurements http.client.request.duration
// holds on the meter of one instrumentation scope.
func durationCount(t *testing.T, r *sdkmetric.ManualReader, scope string) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != scope {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name == "http.client.request.duration" {
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					n += p.Count
				}
			}
		}
	}
	return n
}

func spanIDOf(traceparent string) string {
	if parts := strings.Split(traceparent, "-"); len(parts) == 4 {
		return parts[2]
	}
	return ""
}

// otelhttp outside grantretry's Transport sees the logical call: one
// client span, with the final status and no resend count, the parent of
// grantretry's call span; every attempt carries its traceparent. Its
// http.client.request.duration measures the whole call, waits included,
// once; grantretry's measures each attempt.
func TestOtelhttpOutsideTheTransportRecordsOneClientSpanPerCall(t *testing.T) {
	sr, tp := recorder(t)
	r, mp := reader(t)
	f := newStackFunder(t)
	rt := otelhttp.NewTransport(
		grantretry.New(f.Client().Transport, grantretry.WithTracerProvider(tp), grantretry.WithMeterProvider(mp), fast),
		otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp), otelhttp.WithPropagators(propagation.TraceContext{}))
	resp, err := post(t, rt, context.Background(), f.URL+"/v1/applications")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("call: %v, %v; want 200", resp, err)
	}

	calls, attempts, clients := spansOf(sr)
	if len(calls) != 1 || len(attempts) != 2 || len(clients) != 1 {
		t.Fatalf("%d call, %d attempt and %d otelhttp spans; want 1, 2 and 1", len(calls), len(attempts), len(clients))
	}
	client := clients[0]
	if client.SpanKind() != trace.SpanKindClient {
		t.Errorf("otelhttp span kind %v, want client", client.SpanKind())
	}
	if calls[0].Parent().SpanID() != client.SpanContext().SpanID() {
		t.Error("grantretry's call span is not a child of otelhttp's client span")
	}
	if v, _ := attr(client, "http.response.status_code"); v != "200" {
		t.Errorf("otelhttp span's status %q, want the call's final 200", v)
	}
	if v, ok := attr(client, "http.request.resend_count"); ok {
		t.Errorf("otelhttp span has http.request.resend_count %s: it sees one request", v)
	}
	if v, _ := attr(attempts[1], "http.request.resend_count"); v != "1" {
		t.Errorf("second attempt span's resend count %q, want 1", v)
	}
	f.mu.Lock()
	tps := append([]string(nil), f.traceparents...)
	f.mu.Unlock()
	if len(tps) != 2 {
		t.Fatalf("the funder received %d requests, want 2", len(tps))
	}
	for i, h := range tps {
		if spanIDOf(h) != client.SpanContext().SpanID().String() {
			t.Errorf("request %d's traceparent %q, want otelhttp's span %s", i+1, h, client.SpanContext().SpanID())
		}
	}
	if n := durationCount(t, r, otelhttp.ScopeName); n != 1 {
		t.Errorf("otelhttp recorded %d durations, want 1 (the call)", n)
	}
	if n := durationCount(t, r, grantretry.InstrumentationName); n != 2 {
		t.Errorf("grantretry recorded %d durations, want 2 (the attempts)", n)
	}
}

// otelhttp inside grantretry's Transport sees each attempt: one client
// span per attempt, each the child of its grantretry.attempt span and
// named in that attempt's traceparent, with the attempt's own status. Its
// http.client.request.duration counts the attempts again, on its own
// meter: a sum over both meters counts each attempt twice.
func TestOtelhttpInsideTheTransportRecordsOneClientSpanPerAttempt(t *testing.T) {
	sr, tp := recorder(t)
	r, mp := reader(t)
	f := newStackFunder(t)
	inner := otelhttp.NewTransport(f.Client().Transport,
		otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp), otelhttp.WithPropagators(propagation.TraceContext{}))
	rt := grantretry.New(inner, grantretry.WithTracerProvider(tp), grantretry.WithMeterProvider(mp), fast)
	resp, err := post(t, rt, context.Background(), f.URL+"/v1/applications")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("call: %v, %v; want 200", resp, err)
	}

	calls, attempts, clients := spansOf(sr)
	if len(calls) != 1 || len(attempts) != 2 || len(clients) != 2 {
		t.Fatalf("%d call, %d attempt and %d otelhttp spans; want 1, 2 and 2", len(calls), len(attempts), len(clients))
	}
	f.mu.Lock()
	tps := append([]string(nil), f.traceparents...)
	f.mu.Unlock()
	if len(tps) != 2 {
		t.Fatalf("the funder received %d requests, want 2", len(tps))
	}
	for i, want := range []string{"503", "200"} {
		a := attempts[i]
		var c sdktrace.ReadOnlySpan
		for _, s := range clients {
			if s.Parent().SpanID() == a.SpanContext().SpanID() {
				c = s
			}
		}
		if c == nil {
			t.Fatalf("attempt %d has no otelhttp span under it", i+1)
		}
		if v, _ := attr(c, "http.response.status_code"); v != want {
			t.Errorf("attempt %d's otelhttp span: status %q, want %s", i+1, v, want)
		}
		if v, _ := attr(a, "http.response.status_code"); v != want {
			t.Errorf("attempt %d's span: status %q, want %s", i+1, v, want)
		}
		if v, _ := attr(a, "network.protocol.version"); v != "1.1" {
			t.Errorf("attempt %d's span: network.protocol.version %q, want 1.1", i+1, v)
		}
		if spanIDOf(tps[i]) != c.SpanContext().SpanID().String() {
			t.Errorf("request %d's traceparent %q, want its otelhttp span %s", i+1, tps[i], c.SpanContext().SpanID())
		}
	}
	if n := durationCount(t, r, otelhttp.ScopeName); n != 2 {
		t.Errorf("otelhttp recorded %d durations, want 2 (the attempts)", n)
	}
	if n := durationCount(t, r, grantretry.InstrumentationName); n != 2 {
		t.Errorf("grantretry recorded %d durations, want 2 (the attempts)", n)
	}
}
