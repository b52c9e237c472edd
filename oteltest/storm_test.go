package oteltest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/sim"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// resendCounter is a span processor that counts the attempt spans, and
// those of resends, keeping none of them.
type resendCounter struct{ attempts, resends atomic.Int64 }

func (c *resendCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *resendCounter) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() != "grantretry.attempt" {
		return
	}
	c.attempts.Add(1)
	for _, kv := range s.Attributes() {
		if kv.Key == "http.request.resend_count" && kv.Value.AsInt64() > 0 {
			c.resends.Add(1)
		}
	}
}

func (c *resendCounter) Shutdown(context.Context) error   { return nil }
func (c *resendCounter) ForceFlush(context.Context) error { return nil }

// TestStormMetricsAddUp runs the simulator's default storm (a funder down
// from 30 s to 120 s of a 240 s run, 24 workers) with the library's
// defaults and checks that the metrics tell the same story as the run.
func TestStormMetricsAddUp(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm takes about 5 s")
	}
	r, mp := reader(t)
	resends := &resendCounter{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(resends))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	sc := sim.Default()
	sc.Options = []grantretry.Option{grantretry.WithMeterProvider(mp), grantretry.WithTracerProvider(tp)}
	ps, err := sim.Lookup([]string{"default"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), sc, ps, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res[0]
	ms := collect(t, r)

	calls := sum(t, ms, "grantretry.calls", nil)
	if int(calls) != got.Calls {
		t.Errorf("grantretry.calls = %v, the run made %d calls", calls, got.Calls)
	}
	for disp, n := range got.Dispositions {
		if m := sum(t, ms, "grantretry.calls", map[string]string{"grantretry.disposition": string(disp)}); int(m) != n {
			t.Errorf("calls{%s} = %v, the run ended %d so", disp, m, n)
		}
	}
	nCalls, attempts := hist(t, ms, "grantretry.call.attempts", nil)
	nAttempts, _ := hist(t, ms, "http.client.request.duration", nil)
	if int(nCalls) != got.Calls || uint64(attempts) != nAttempts {
		t.Errorf("attempts per call: %d calls, %v attempts; the duration histogram has %d attempts", nCalls, attempts, nAttempts)
	}
	if int64(nAttempts) != got.Requests {
		t.Errorf("%d attempts recorded, the funder received %d requests", nAttempts, got.Requests)
	}
	waits, _ := hist(t, ms, "grantretry.retry.wait", nil)
	// Every resend (an attempt span with http.request.resend_count above
	// 0) follows a wait; a wait may also end in the breaker's refusal,
	// with nothing sent.
	if n := uint64(resends.attempts.Load()); n != nAttempts {
		t.Errorf("%d attempt spans, the duration histogram has %d attempts", n, nAttempts)
	}
	if n := uint64(resends.resends.Load()); waits < n {
		t.Errorf("%d waits recorded, fewer than the %d resends", waits, n)
	}
	open := sum(t, ms, "grantretry.breaker.transitions", map[string]string{"grantretry.breaker.to": "open"})
	closed := sum(t, ms, "grantretry.breaker.transitions", map[string]string{"grantretry.breaker.to": "closed"})
	if open == 0 || closed == 0 {
		t.Errorf("breaker opened %v times and closed %v times during an outage; want both", open, closed)
	}
	if s := sum(t, ms, "grantretry.breaker.state", map[string]string{"grantretry.breaker.state": "closed"}); s != 1 {
		t.Errorf("breaker.state{closed} = %v after the funder came back, want 1", s)
	}
	refusals := sum(t, ms, "grantretry.throttle.refusals", nil)
	throttled := sum(t, ms, "grantretry.calls", map[string]string{"grantretry.stop_reason": grantretry.StopThrottled})
	if refusals != throttled {
		t.Errorf("throttle refusals %v, calls stopped retry_throttled %v", refusals, throttled)
	}
	t.Logf("calls %d %v, attempts %v, waits %d, breaker opened %v closed %v, throttle refusals %v",
		got.Calls, got.Dispositions, attempts, waits, open, closed, refusals)
}
