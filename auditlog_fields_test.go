package grantretry

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// The disposition line of a call ended by a transport error names the error.
func TestDispositionLineNamesTheError(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, funderURL, httpmock.NewErrorResponder(io.ErrUnexpectedEOF))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	if _, err := h.tr.RoundTrip(req); err == nil {
		t.Fatal("want an error")
	}
	d := h.dispositionLines()
	if len(d) != 1 || !strings.Contains(fmt.Sprint(d[0].ContextMap()[FieldError]), "unexpected EOF") {
		t.Errorf("disposition lines %+v, want error = unexpected EOF", d)
	}
}

func TestAttemptLatencyIsMeasured(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		time.Sleep(10 * time.Millisecond)
		return httpmock.NewStringResponse(200, "ok"), nil
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if lat, _ := h.attemptLines()[0].ContextMap()[FieldLatency].(time.Duration); lat < 10*time.Millisecond {
		t.Errorf("latency %v, want at least the 10ms the attempt took", lat)
	}
}
