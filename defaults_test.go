package grantretry

import (
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// Every default terminal status ends the call through the Transport, not
// only through Classify.
func TestDefaultTerminalStatusesEndTheCall(t *testing.T) {
	for _, s := range defaultTerminal {
		h := newHarness(t)
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(s, 200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o := mustOutcome(t, resp)
		if o.Disposition != FailedTerminal || o.StopReason != StopTerminal || o.Attempts != 1 || resp.StatusCode != s {
			t.Errorf("%d: outcome %+v, want failed_terminal after 1 attempt", s, o)
		}
	}
}

// The documented defaults are the ones in force.
func TestDocumentedDefaults(t *testing.T) {
	// DefaultMaxRetries retries, waits on ceilings of DefaultBackoffBase*2^n.
	h := newHarness(t, WithRandSource(maxSource{}))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != DefaultMaxRetries+1 || o.StopReason != StopRetriesSpent {
		t.Errorf("outcome %+v, want %d attempts, retries_exhausted", o, DefaultMaxRetries+1)
	}
	b := DefaultBackoffBase
	if w, want := h.clock.waits(), []time.Duration{b, 2 * b, 4 * b, 8 * b}; !reflect.DeepEqual(w, want) {
		t.Errorf("waits %v, want %v", w, want)
	}

	// The ceiling stops at DefaultBackoffCap.
	h = newHarness(t, WithRandSource(maxSource{}), WithBudget(7, time.Hour), WithoutBreaker(), WithoutRetryThrottle())
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ = http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err = h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if w := h.clock.waits(); len(w) != 7 || w[6] != DefaultBackoffCap {
		t.Errorf("waits %v, want 7 ending at the %v cap", w, DefaultBackoffCap)
	}

	// DefaultDeadline: a Retry-After just inside it is honoured, one
	// reaching it is not.
	for _, c := range []struct {
		after    time.Duration
		attempts int
	}{{DefaultDeadline - time.Second, 2}, {DefaultDeadline, 1}} {
		h := newHarness(t)
		secs := fmt.Sprint(int(c.after / time.Second))
		h.mock.RegisterResponder(http.MethodGet, funderURL, seqWithHeader(http.Header{"Retry-After": {secs}}, 503, 200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if o := mustOutcome(t, resp); o.Attempts != c.attempts {
			t.Errorf("Retry-After %s: %d attempts, want %d", secs, o.Attempts, c.attempts)
		}
	}

	// What cannot be observed quickly: the breaker cooldown and replay limit.
	tr := New(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, io.EOF }))
	if c := tr.cfg; c.threshold != DefaultBreakerThreshold || c.cooldown != DefaultBreakerCooldown ||
		c.replayLimit != DefaultReplayLimit {
		t.Errorf("breaker %d/%v, replay limit %d: not the documented defaults", c.threshold, c.cooldown, c.replayLimit)
	}
}
