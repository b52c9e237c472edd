package oteltest

import (
	"context"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/sim"
)

// TestStormMetricsAddUp runs the simulator's default storm (a funder down
// from 30 s to 120 s of a 240 s run, 24 workers) with the library's
// defaults and checks that the metrics tell the same story as the run.
func TestStormMetricsAddUp(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm takes about 5 s")
	}
	r, mp := reader(t)
	sc := sim.Default()
	sc.Options = []grantretry.Option{grantretry.WithMeterProvider(mp)}
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
	first, _ := hist(t, ms, "http.client.request.duration", map[string]string{"http.request.resend_count": "0"})
	// Every resend follows a wait; a wait may also end in the breaker's
	// refusal, with nothing sent.
	if resends := nAttempts - first; waits < resends {
		t.Errorf("%d waits recorded, fewer than the %d resends", waits, resends)
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
