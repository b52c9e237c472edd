package grantretry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// The default clock really waits, and a cancellation cuts its wait short.
func TestSystemClockWaitsAndHonoursCancel(t *testing.T) {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 200))
	tr := New(mock, WithBackoff(5*time.Millisecond, 5*time.Millisecond), WithRandSource(maxSource{}))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); el < 5*time.Millisecond {
		t.Errorf("call took %v, want at least the 5ms backoff", el)
	}

	mock = httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, funderURL, seqWithHeader(http.Header{"Retry-After": {"30"}}, 503, 200))
	tr = New(mock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, funderURL, nil)
	done := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if e := mustError(t, err); e.Disposition != Canceled || !errors.Is(err, context.Canceled) {
			t.Errorf("outcome %+v err %v, want canceled", e.Outcome, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancellation did not interrupt a 30s Retry-After wait")
	}
}
