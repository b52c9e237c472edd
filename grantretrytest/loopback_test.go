package grantretrytest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/grantretry/grantretry"
)

// These tests hold the package documentation's word on real sockets in a
// testing/synctest bubble: a goroutine reading a socket is not durably
// blocked, so the bubble's clock does not move while one waits. They run
// a loopback server outside the bubble, in real time.

// TestKeptAliveLoopbackConnectionStallsTheBubbleUntilItCloses: each
// backoff wait of a call over a loopback server ends only when something
// outside the bubble closes the kept-alive connection; left open, it would
// hang the test until its -timeout.
func TestKeptAliveLoopbackConnectionStallsTheBubbleUntilItCloses(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 5 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"reference":"FND-0001"}`))
	}))
	defer srv.Close()

	const tick = 50 * time.Millisecond
	stop := make(chan struct{})
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				srv.CloseClientConnections()
			}
		}
	}()
	defer func() { close(stop); <-closed }()

	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		client := &http.Client{Transport: grantretry.New(&http.Transport{})}
		_, out, err := submit(context.Background(), client, srv.URL, `{}`)
		if err != nil || out.Attempts != 5 {
			t.Fatalf("got %d attempts, %v; want 5, no error", out.Attempts, err)
		}
	})
	// Four waits, each held until a tick closed the connection of the
	// attempt before it.
	if wall := time.Since(start); wall < 4*tick {
		t.Errorf("the call took %v of wall time; want at least %v, four waits each held until a connection closed", wall, 4*tick)
	}
}

// TestAttemptTimeoutDoesNotCutASocketReadInABubble: an attempt timeout of
// 50 ms does not end a loopback read that takes 200 ms of real time,
// because the bubble's clock stands still while the read waits.
func TestAttemptTimeoutDoesNotCutASocketReadInABubble(t *testing.T) {
	const slow = 200 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(slow)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"reference":"FND-0001"}`))
	}))
	defer srv.Close()

	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		inner := &http.Transport{DisableKeepAlives: true}
		client := &http.Client{Transport: grantretry.New(inner, grantretry.WithAttemptTimeout(50*time.Millisecond))}
		t0 := time.Now()
		ref, out, err := submit(context.Background(), client, srv.URL, `{}`)
		if err != nil || ref != "FND-0001" || out.Attempts != 1 {
			t.Fatalf("got %q, %d attempts, %v; want FND-0001 on the first attempt: its timeout never fired", ref, out.Attempts, err)
		}
		if d := time.Since(t0); d != 0 {
			t.Errorf("the bubble's clock moved %v during the read, want 0", d)
		}
	})
	if wall := time.Since(start); wall < slow {
		t.Errorf("the call took %v of wall time, want at least the server's %v", wall, slow)
	}
}
