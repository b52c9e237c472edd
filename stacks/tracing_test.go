package stacks

import (
	"context"
	"net/http"
	"testing"

	"github.com/grantretry/grantretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// newTracedFunderClient puts otelhttp outside grantretry: one client span
// per call, whose traceparent goes out on every attempt.
func newTracedFunderClient(tp trace.TracerProvider, base http.RoundTripper, opts ...grantretry.Option) *http.Client {
	return &http.Client{Transport: otelhttp.NewTransport(grantretry.New(base, opts...),
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))}
}

// newAttemptTracedFunderClient puts otelhttp inside grantretry: a client
// span per attempt. WithTracerProvider gives grantretry's own call and
// attempt spans, which hold the attempts' spans in one trace.
func newAttemptTracedFunderClient(tp trace.TracerProvider, base http.RoundTripper, opts ...grantretry.Option) *http.Client {
	inner := otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
	return &http.Client{Transport: grantretry.New(inner, append(opts, grantretry.WithTracerProvider(tp))...)}
}

// newTracer returns a tracer provider whose spans stay in memory.
func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, exp
}

// clientSpans returns otelhttp's spans: the client spans.
func clientSpans(exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			out = append(out, s)
		}
	}
	return out
}

// traces returns how many traces the spans are spread over.
func traces(spans tracetest.SpanStubs) int {
	ids := map[trace.TraceID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.TraceID()] = true
	}
	return len(ids)
}

// With otelhttp outside grantretry, a call to a funder that answers 503,
// 503, 201 is one client span, and its three attempts carry one
// traceparent: the span's. OutcomeOf still reads the call's outcome.
func TestTracingOutsideOneSpanPerCall(t *testing.T) {
	tp, exp := newTracer(t)
	f := newFunder(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusCreated)
	client := newTracedFunderClient(tp, nil, grantretry.WithClock(&stepClock{now: testClock}))
	defer client.CloseIdleConnections()

	resp, err := post(t, client, grantretry.WithSubmissionID(context.Background(), "GRANT-42"), f.url())
	if err != nil {
		t.Fatal(err)
	}
	if out, ok := grantretry.OutcomeOf(resp); !ok || out.Attempts != 3 || out.Disposition != grantretry.Succeeded {
		t.Fatalf("outcome %+v (%v), want succeeded after 3 attempts", out, ok)
	}
	spans := clientSpans(exp)
	if len(spans) != 1 {
		t.Fatalf("%d client spans, want 1", len(spans))
	}
	reqs := f.requests()
	n, all := distinct(reqs, "Traceparent")
	want := "00-" + spans[0].SpanContext.TraceID().String() + "-" + spans[0].SpanContext.SpanID().String() + "-01"
	if len(reqs) != 3 || n != 1 || !all || reqs[0].Get("Traceparent") != want {
		t.Fatalf("%d requests with %d distinct traceparents (all set: %v), first %q; want 3 with one, %q",
			len(reqs), n, all, reqs[0].Get("Traceparent"), want)
	}
}

// With otelhttp inside grantretry, each attempt is a client span with a
// traceparent of its own. With grantretry's WithTracerProvider they are
// the children of its attempt spans in one trace. Without it, they are in
// the trace of the request context's span if there is one; with neither,
// each attempt is a root span and one call is split over three traces.
func TestTracingInsideOneSpanPerAttempt(t *testing.T) {
	for _, c := range []struct {
		name       string
		grantSpans bool // grantretry.WithTracerProvider
		parent     bool // a span in the request's context
		traces     int
	}{
		{"with WithTracerProvider", true, false, 1},
		{"with a parent span", false, true, 1},
		{"with neither", false, false, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp, exp := newTracer(t)
			f := newFunder(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusCreated)
			clk := grantretry.WithClock(&stepClock{now: testClock})
			var client *http.Client
			if c.grantSpans {
				client = newAttemptTracedFunderClient(tp, nil, clk)
			} else {
				inner := otelhttp.NewTransport(nil, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
				client = &http.Client{Transport: grantretry.New(inner, clk)}
			}
			ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-42")
			if c.parent {
				var span trace.Span
				ctx, span = tp.Tracer("pipeline").Start(ctx, "submit")
				defer span.End()
			}
			if _, err := post(t, client, ctx, f.url()); err != nil {
				t.Fatal(err)
			}
			spans := clientSpans(exp)
			if len(spans) != 3 || traces(spans) != c.traces {
				t.Fatalf("%d client spans in %d traces, want 3 in %d", len(spans), traces(spans), c.traces)
			}
			if n, all := distinct(f.requests(), "Traceparent"); n != 3 || !all {
				t.Fatalf("%d distinct traceparents (all set: %v), want one per attempt", n, all)
			}
			if c.grantSpans {
				attempts := map[trace.SpanID]bool{}
				for _, s := range exp.GetSpans() {
					if s.Name == "grantretry.attempt" {
						attempts[s.SpanContext.SpanID()] = true
					}
				}
				for _, s := range spans {
					if !attempts[s.Parent.SpanID()] {
						t.Errorf("client span %s is not a child of a grantretry.attempt span", s.Name)
					}
				}
			}
		})
	}
}
