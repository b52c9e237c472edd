package grantretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	mnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tembedded "go.opentelemetry.io/otel/trace/embedded"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// spanRecorder is a TracerProvider that keeps every span's name and
// attributes, those given at start and those set later.
type spanRecorder struct {
	tembedded.TracerProvider
	mu    sync.Mutex
	spans []*attrSpan
}

type attrTracer struct {
	tembedded.Tracer
	p *spanRecorder
}

type attrSpan struct {
	tnoop.Span
	name  string
	p     *spanRecorder
	attrs map[attribute.Key]attribute.Value
}

func (p *spanRecorder) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return &attrTracer{p: p}
}

func (t *attrTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &attrSpan{name: name, p: t.p, attrs: map[attribute.Key]attribute.Value{}}
	cfg := trace.NewSpanStartConfig(opts...)
	s.SetAttributes(cfg.Attributes()...)
	t.p.mu.Lock()
	t.p.spans = append(t.p.spans, s)
	t.p.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

func (s *attrSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	for _, a := range kv {
		s.attrs[a.Key] = a.Value
	}
}

// named returns the attributes of every span called name, in start order.
func (p *spanRecorder) named(name string) []map[attribute.Key]attribute.Value {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[attribute.Key]attribute.Value
	for _, s := range p.spans {
		if s.name == name {
			out = append(out, s.attrs)
		}
	}
	return out
}

// histRecorder is a MeterProvider whose float64 histograms keep the
// attribute set of every measurement; its other instruments record nothing.
type histRecorder struct {
	embedded.MeterProvider
	mu     sync.Mutex
	points map[string][]attribute.Set
}

type histMeter struct {
	mnoop.Meter
	p *histRecorder
}

type recHist struct {
	mnoop.Float64Histogram
	name string
	p    *histRecorder
}

func (p *histRecorder) Meter(string, ...metric.MeterOption) metric.Meter { return &histMeter{p: p} }

func (m *histMeter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return &recHist{name: name, p: m.p}, nil
}

func (h *recHist) Record(_ context.Context, _ float64, opts ...metric.RecordOption) {
	set := metric.NewRecordConfig(opts).Attributes()
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	if h.p.points == nil {
		h.p.points = map[string][]attribute.Set{}
	}
	h.p.points[h.name] = append(h.p.points[h.name], set)
}

func (p *histRecorder) of(name string) []attribute.Set {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]attribute.Set(nil), p.points[name]...)
}

// unavailableTwice answers 503 to its first two requests and 200 after.
func unavailableTwice() http.Handler {
	var n atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	})
}

// callTraced makes one GET through a Transport over inner with both
// recorders, and returns them.
func callTraced(t *testing.T, inner http.RoundTripper, url string) (*spanRecorder, *histRecorder) {
	t.Helper()
	tp, mp := &spanRecorder{}, &histRecorder{}
	tr := New(inner, WithClock(newFakeClock()), WithTracerProvider(tp), WithMeterProvider(mp))
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 on the third attempt", resp.StatusCode)
	}
	return tp, mp
}

// http.request.resend_count is an attribute of the attempt's span (from
// the second attempt on), as the semantic conventions have it, and never
// of a metric point: on http.client.request.duration it would multiply the
// series by the number of attempts.
func TestResendCountIsOnAttemptSpansNotOnMetricPoints(t *testing.T) {
	srv := httptest.NewServer(unavailableTwice())
	defer srv.Close()
	tp, mp := callTraced(t, srv.Client().Transport, srv.URL)

	attempts := tp.named("grantretry.attempt")
	if len(attempts) != 3 {
		t.Fatalf("%d attempt spans, want 3", len(attempts))
	}
	for i, a := range attempts {
		v, ok := a[keyResendCount]
		switch {
		case i == 0 && ok:
			t.Errorf("first attempt's span has http.request.resend_count %v, want none", v.String())
		case i > 0 && (!ok || v.AsInt64() != int64(i)):
			t.Errorf("attempt %d's span: http.request.resend_count %q (set %v), want %d", i+1, v.String(), ok, i)
		}
	}
	points := mp.of("http.client.request.duration")
	if len(points) != 3 {
		t.Fatalf("%d points on http.client.request.duration, want 3", len(points))
	}
	for i, set := range points {
		if v, ok := set.Value("http.request.resend_count"); ok {
			t.Errorf("point %d carries http.request.resend_count %s: %s", i, v.String(), set.Encoded(attribute.DefaultEncoder()))
		}
	}
	if calls := tp.named("grantretry.call"); len(calls) != 1 {
		t.Fatalf("%d call spans, want 1", len(calls))
	} else if _, ok := calls[0][keyResendCount]; ok {
		t.Error("the call's span carries http.request.resend_count: it is an attempt's")
	}
}

// network.protocol.version is the version the response came back on, on
// the attempt's span and its http.client.request.duration point: "1.1"
// over HTTP/1.1, "2" over HTTP/2 (TLS with ALPN).
func TestProtocolVersionIsTheResponses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		http2 bool
		want  string
	}{
		{"http/1.1", false, "1.1"},
		{"http/2 over tls", true, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(unavailableTwice())
			srv.EnableHTTP2 = tc.http2
			srv.StartTLS()
			defer srv.Close()
			tp, mp := callTraced(t, srv.Client().Transport, srv.URL)

			attempts := tp.named("grantretry.attempt")
			if len(attempts) != 3 {
				t.Fatalf("%d attempt spans, want 3", len(attempts))
			}
			for i, a := range attempts {
				if got := a[keyProtoVersion].String(); got != tc.want {
					t.Errorf("attempt %d's span: network.protocol.version %q, want %q", i+1, got, tc.want)
				}
			}
			points := mp.of("http.client.request.duration")
			if len(points) != 3 {
				t.Fatalf("%d points on http.client.request.duration, want 3", len(points))
			}
			for i, set := range points {
				if v, _ := set.Value(keyProtoVersion); v.String() != tc.want {
					t.Errorf("point %d: network.protocol.version %q, want %q (%s)", i, v.String(), tc.want, set.Encoded(attribute.DefaultEncoder()))
				}
			}
		})
	}
}

// A response that does not say its protocol (one an in-memory transport
// made) gets no network.protocol.version: the conventions say to leave it
// out when it is not known.
func TestProtocolVersionLeftOutWhenUnknown(t *testing.T) {
	inner := rtFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
	tp, mp := &spanRecorder{}, &histRecorder{}
	tr := New(inner, WithClock(newFakeClock()), WithTracerProvider(tp), WithMeterProvider(mp))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := len(tp.named("grantretry.attempt")); n != 1 {
		t.Fatalf("%d attempt spans, want 1", n)
	}
	for _, a := range tp.named("grantretry.attempt") {
		if v, ok := a[keyProtoVersion]; ok {
			t.Errorf("attempt span has network.protocol.version %q for a response without a protocol", v.String())
		}
	}
	for _, set := range mp.of("http.client.request.duration") {
		if v, ok := set.Value(keyProtoVersion); ok {
			t.Errorf("point has network.protocol.version %q for a response without a protocol", v.String())
		}
	}
}

// The conventions spell the version "1.0", "1.1", "2", "3" (Go's
// resp.Proto says "HTTP/2.0"); any other is left out, so that the metric's
// series stay few.
func TestProtocolVersionSpelling(t *testing.T) {
	for _, tc := range []struct {
		major, minor int
		want         string
	}{
		{1, 0, "1.0"},
		{1, 1, "1.1"},
		{2, 0, "2"},
		{3, 0, "3"},
		{0, 0, ""},
		{1, 42, ""},
		{-1, 0, ""},
		{10, 0, ""},
		{4, 0, ""},
		{2, 1, ""},
	} {
		if got := protocolVersion(&http.Response{ProtoMajor: tc.major, ProtoMinor: tc.minor}); got != tc.want {
			t.Errorf("HTTP/%d.%d: %q, want %q", tc.major, tc.minor, got, tc.want)
		}
	}
}
