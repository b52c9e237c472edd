package oteltest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func recorder(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return sr, tp
}

func attr(s sdktrace.ReadOnlySpan, key string) (string, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

func TestACallSpanParentsOneSpanPerAttemptUnderTheCallersSpan(t *testing.T) {
	sr, tp := recorder(t)
	rt := grantretry.New(&script{statuses: []int{503, 200}}, grantretry.WithTracerProvider(tp), fast)
	ctx, parent := tp.Tracer("pipeline").Start(context.Background(), "submit")
	resp, err := post(t, rt, ctx, funderURL)
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := grantretry.OutcomeOf(resp)
	var call sdktrace.ReadOnlySpan
	var attempts []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.Name() {
		case "grantretry.call":
			call = s
		case "grantretry.attempt":
			attempts = append(attempts, s)
		}
	}
	if call == nil || len(attempts) != 2 {
		t.Fatalf("call span %v, %d attempt spans; want one and 2", call != nil, len(attempts))
	}
	if call.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Error("the call span is not a child of the caller's span")
	}
	for i, a := range attempts {
		if a.Parent().SpanID() != call.SpanContext().SpanID() {
			t.Errorf("attempt %d is not a child of the call span", i+1)
		}
		if v, _ := attr(a, "grantretry.correlation_id"); v != out.CorrelationID {
			t.Errorf("attempt %d: correlation id %q, want %q", i+1, v, out.CorrelationID)
		}
	}
	if v, _ := attr(attempts[1], "http.request.resend_count"); v != "1" {
		t.Errorf("second attempt's resend count %q, want 1", v)
	}
	if v, _ := attr(attempts[0], "grantretry.wait_source"); v != "backoff" {
		t.Errorf("first attempt's wait source %q, want backoff", v)
	}
	for key, want := range map[string]string{
		"grantretry.correlation_id": out.CorrelationID,
		"grantretry.disposition":    "succeeded",
		"grantretry.stop_reason":    "success",
		"grantretry.attempts":       "2",
		"server.address":            "apply.funder.test",
	} {
		if v, _ := attr(call, key); v != want {
			t.Errorf("call span %s = %q, want %q", key, v, want)
		}
	}
}

func TestAFailedCallsSpanHasAnErrorStatusAndItsDisposition(t *testing.T) {
	sr, tp := recorder(t)
	rt := grantretry.New(&script{statuses: []int{503}}, grantretry.WithTracerProvider(tp), fast, grantretry.WithBudget(0, time.Minute))
	post(t, rt, context.Background(), funderURL)
	for _, s := range sr.Ended() {
		if s.Name() != "grantretry.call" {
			continue
		}
		if s.Status().Code != codes.Error {
			t.Errorf("status %v, want Error", s.Status())
		}
		if v, _ := attr(s, "error.type"); v != "dead_letter" {
			t.Errorf("error.type %q, want dead_letter", v)
		}
		return
	}
	t.Fatal("no call span")
}

func TestOtelhttpClientSpansNestUnderTheAttemptSpans(t *testing.T) {
	sr, tp := recorder(t)
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n++; n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	inner := otelhttp.NewTransport(srv.Client().Transport, otelhttp.WithTracerProvider(tp))
	rt := grantretry.New(inner, grantretry.WithTracerProvider(tp), fast)
	resp, err := post(t, rt, context.Background(), srv.URL+"/v1/applications")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := grantretry.OutcomeOf(resp)
	attempts := make(map[trace.SpanID]bool)
	var clients []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.Name() {
		case "grantretry.attempt":
			attempts[s.SpanContext().SpanID()] = true
		case "grantretry.call":
		default:
			clients = append(clients, s)
		}
	}
	if len(attempts) != 2 || len(clients) != 2 {
		t.Fatalf("%d attempt spans and %d otelhttp spans, want 2 and 2", len(attempts), len(clients))
	}
	for _, c := range clients {
		if !attempts[c.Parent().SpanID()] {
			t.Errorf("otelhttp span %q is not a child of an attempt span", c.Name())
		}
	}
	if out.CorrelationID == "" {
		t.Error("no correlation id")
	}
}
