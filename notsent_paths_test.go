package grantretry

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recordThenDropFunder reads each request whole, counts it, and drops the
// connection before answering: every copy reached the funder.
func recordThenDropFunder(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			io.WriteString(w, "ok")
			return
		}
		got.Add(1)
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

// A layer that retries internally: its first try reached the funder (the
// attempt's trace saw GetConn and GotConn), its second failed before
// sending and wraps ErrNotSent. The attempt as a whole sent the request.
func TestErrNotSentDoesNotOverrideTheAttemptsOwnTrace(t *testing.T) {
	srv, got := recordThenDropFunder(t)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	retrying := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		r1 := r.Clone(r.Context())
		r1.Body = io.NopCloser(strings.NewReader(string(body)))
		if resp, err := base.RoundTrip(r1); err == nil {
			return resp, nil
		}
		// Second internal try: the token refresh fails before sending.
		return nil, fmt.Errorf("giving up after 2 attempts: token: %w", ErrNotSent)
	})
	tr := New(retrying, WithClock(newFakeClock()), WithBudget(0, time.Minute))
	_, err := submitTo(t, tr, srv.URL, "GRANT-1")
	e := mustError(t, err)
	if got.Load() != 1 || !e.Ambiguous || e.Reason == reasonNotSent {
		t.Fatalf("funder received %d; reason %s, ambiguous %v; want the funder's, ambiguous", got.Load(), e.Reason, e.Ambiguous)
	}
}

// One Transport, two paths beneath it: reads go through net/http (which
// teaches the Transport that its stack reports GetConn), submissions go
// through a layer that sends on a context of its own (a signer that
// rebuilds the request with http.NewRequest). The funder receives every
// submission and drops the connection: each copy reached it.
func TestEvidenceFromReadsIsNoProofForSubmissions(t *testing.T) {
	srv, got := recordThenDropFunder(t)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	signer := &http.Transport{}
	defer signer.CloseIdleConnections()
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet {
			return base.RoundTrip(r)
		}
		nr, _ := http.NewRequest(r.Method, r.URL.String(), r.Body) // context.Background
		nr.Header = r.Header.Clone()
		nr.ContentLength = r.ContentLength
		return signer.RoundTrip(nr)
	})
	// No retries: the question is how the one lost submission is read.
	tr := New(inner, WithClock(newFakeClock()), WithBudget(0, time.Minute))
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	_, err = submitTo(t, tr, srv.URL, "GRANT-1")
	e := mustError(t, err)
	if n := got.Load(); n != 1 || !e.Ambiguous || e.Reason == reasonNotSent {
		t.Fatalf("the funder received the submission %d times; reason %s, ambiguous %v, %d attempts; want 1, ambiguous",
			n, e.Reason, e.Ambiguous, e.Attempts)
	}
}
