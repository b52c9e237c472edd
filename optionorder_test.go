package grantretry

import (
	"net/http"
	"testing"
	"time"
)

// Options apply in order: a later WithBreaker/WithRetryThrottle turns back
// on what an earlier Without... turned off.
func TestLaterOptionReenablesBreakerAndThrottle(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(4, 0.5), WithoutRetryThrottle(),
		WithRetryThrottle(4, 0.5), WithBudget(10, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.StopReason != StopThrottled {
		t.Errorf("throttle: outcome %+v, want retry_throttled", o)
	}

	h = newHarness(t, WithoutRetryThrottle(), WithoutBreaker(), WithBreaker(1, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ = http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err = h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Disposition != CircuitOpen || o.Attempts != 1 {
		t.Errorf("breaker: outcome %+v, want circuit_open after 1 attempt", o)
	}
}
