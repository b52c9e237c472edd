package grantretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A refusal (403) is not sent again because its body stalls while the
// Transport reads it for ClassifyLimits: the peek's wait ends before the
// attempt timeout, the verdict is the status's, and the caller gets the
// response, whose body gives the bytes that arrived.
func TestStalledBodyOfARefusalKeepsTheStatusVerdict(t *testing.T) {
	requests := make(chan struct{}, 16)
	url := rawFunder(t, func(c net.Conn, quit <-chan struct{}) {
		requests <- struct{}{}
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 1000\r\n\r\n{\"error\":\"forbidden\"")
		<-quit
	})
	tr := New(loopbackTransport(t), WithAttemptTimeout(300*time.Millisecond), WithBudget(2, 5*time.Second))
	checkStalledBodyKeepsStatusVerdict(t, tr, url, requests, StopTerminal, "terminal:403", `{"error":"forbidden"`)
}

// The same holds with a classifier of the caller's: a 4xx whose body
// stalls is not made a retry by the wait for it.
func TestStalledBodyUnderAClassifierKeepsTheStatusVerdict(t *testing.T) {
	requests := make(chan struct{}, 16)
	url := rawFunder(t, func(c net.Conn, quit <-chan struct{}) {
		requests <- struct{}{}
		io.WriteString(c, "HTTP/1.1 422 Unprocessable Entity\r\nContent-Length: 1000\r\n\r\n<Client/>")
		<-quit
	})
	m := &markerClassifier{}
	tr := New(loopbackTransport(t), WithClassifier(m.classify), WithAttemptTimeout(300*time.Millisecond), WithBudget(2, 5*time.Second))
	checkStalledBodyKeepsStatusVerdict(t, tr, url, requests, StopTerminal, "terminal:422", "<Client/>")
}

func checkStalledBodyKeepsStatusVerdict(t *testing.T, tr *Transport, url string, requests <-chan struct{}, stop, reason, arrived string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		cancel()
		t.Fatalf("RoundTrip: %v; want the refusal returned", err)
	}
	o := mustOutcome(t, resp)
	if o.Attempts != 1 || len(requests) != 1 || o.StopReason != stop || o.Reason != reason {
		t.Errorf("outcome %+v after %d requests; want 1 attempt, %s, reason %s", o, len(requests), stop, reason)
	}
	// The caller's context bounds the rest of the body: the bytes that
	// arrived, then the cancellation.
	cancel()
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != arrived || !errors.Is(err, context.Canceled) {
		t.Errorf("body %q, %v; want %q, then the caller's cancellation", body, err, arrived)
	}
}
