package grantretry

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// An error a caller prints from http.Client.Do names the URL once: the
// *url.Error around grantretry's names it, and grantretry's does not.
func TestClientErrorNamesTheURLOnce(t *testing.T) {
	tr := New(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("connection reset by peer")
	}), WithClock(newFakeClock()), WithBudget(1, time.Hour))
	req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader(`{"a":1}`))
	_, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		t.Fatal("want an error")
	}
	if n := strings.Count(err.Error(), "funder.test/v1/applications"); n != 1 {
		t.Errorf("%q names the URL %d times, want once", err, n)
	}
	if n := strings.Count(strings.ToUpper(err.Error()), "POST"); n != 1 {
		t.Errorf("%q names the method %d times, want once", err, n)
	}
}

// Outcome.Status is the last attempt's: 0 when it got no response.
func TestStatusIsZeroWhenLastAttemptGotNoResponse(t *testing.T) {
	h := newHarness(t, WithBudget(1, time.Minute))
	var n atomic.Int32
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		if n.Add(1) == 1 {
			return httpmock.NewStringResponse(503, "busy"), nil
		}
		return nil, io.ErrUnexpectedEOF
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	_, err := h.tr.RoundTrip(req)
	e := mustError(t, err)
	if e.Status != 0 || e.Reason != "transport:eof" || e.Attempts != 2 {
		t.Errorf("outcome %+v, want status 0, transport:eof, 2 attempts", e.Outcome)
	}
	if d := h.dispositionLines(); len(d) != 1 || d[0].ContextMap()[FieldStatus] != int64(0) {
		t.Errorf("disposition lines %+v, want status 0", d)
	}
}

// Outcome.Elapsed on a returned response covers the waits.
func TestOutcomeElapsedOnResponse(t *testing.T) {
	h := newHarness(t, WithRandSource(maxSource{}), WithBackoff(100*time.Millisecond, time.Second))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Elapsed != 100*time.Millisecond {
		t.Errorf("Elapsed %v, want the 100ms waited", o.Elapsed)
	}
}
