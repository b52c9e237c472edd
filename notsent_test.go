package grantretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// innerLayer stands in for a layer a pipeline puts inside the Transport (a
// token source, a signer): while failing is set it fails with fail, before
// anything is sent, or waits for the attempt's end when fail is nil; else
// it passes the request on to next.
type innerLayer struct {
	next    http.RoundTripper
	failing atomic.Bool
	fail    error
}

func (l *innerLayer) RoundTrip(r *http.Request) (*http.Response, error) {
	if !l.failing.Load() {
		return l.next.RoundTrip(r)
	}
	closeBody(r)
	if l.fail != nil {
		return nil, l.fail
	}
	<-r.Context().Done() // a token request that never returns
	return nil, fmt.Errorf("token: %w", context.Cause(r.Context()))
}

// countingFunder is a funder on 127.0.0.1 that answers 200 and counts the
// requests it received.
func countingFunder(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"status":"received"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func submitTo(t *testing.T, tr *Transport, url, id string) (*http.Response, error) {
	t.Helper()
	ctx := WithSubmissionID(context.Background(), id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"applicant":"Example Foundation"}`))
	if err != nil {
		t.Fatal(err)
	}
	return tr.RoundTrip(req)
}

// wantNotSent checks that a call whose every attempt sent nothing spent its
// whole budget on them, charged to no one.
func wantNotSent(t *testing.T, id string, resp *http.Response, err error) *Error {
	t.Helper()
	if err == nil {
		resp.Body.Close()
		t.Fatalf("%s: status %d, want an error", id, resp.StatusCode)
	}
	e := mustError(t, err)
	if e.Disposition != DeadLetter || e.StopReason != StopRetriesSpent || e.Reason != reasonNotSent ||
		e.Ambiguous || e.Attempts != DefaultMaxRetries+1 {
		t.Fatalf("%s: %s (%s), reason %s, ambiguous %v, %d attempts; want dead_letter (%s), %s, not ambiguous, %d attempts",
			id, e.Disposition, e.StopReason, e.Reason, e.Ambiguous, e.Attempts, StopRetriesSpent, reasonNotSent, DefaultMaxRetries+1)
	}
	return e
}

// wantReaches checks that a call succeeded, reaching the funder, which had
// received before requests: it was not refused by a breaker that the
// failures before it opened. It returns what the funder has received.
func wantReaches(t *testing.T, resp *http.Response, err error, got *atomic.Int64, before int64) int64 {
	t.Helper()
	if err != nil {
		t.Fatalf("%v, want a call that reaches the funder", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	n := got.Load()
	if o := mustOutcome(t, resp); o.Disposition != Succeeded || n <= before {
		t.Fatalf("%s (%s), the funder received %d requests, %d before; want succeeded, and more",
			o.Disposition, o.StopReason, n, before)
	}
	return n
}

// An inner layer that wraps ErrNotSent said it sent nothing: its failure
// is not ambiguous, it is retried within the budget, and neither the
// host's breaker, its retry throttle nor the fleet counts it, even on a
// Transport that has never seen a connection asked for.
func TestInnerLayerThatWrapsErrNotSentIsNotChargedToTheFunder(t *testing.T) {
	srv, got := countingFunder(t)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	layer := &innerLayer{next: base, fail: fmt.Errorf("signer: no key loaded: %w", ErrNotSent)}
	layer.failing.Store(true)
	fleet := newMemFleet()
	tr := New(layer, WithClock(newFakeClock()), WithBreaker(2, time.Minute), WithFleet(fleet))

	for i := range 4 {
		id := fmt.Sprintf("GRANT-%d", i)
		resp, err := submitTo(t, tr, srv.URL, id)
		wantNotSent(t, id, resp, err)
		if !errors.Is(err, ErrNotSent) {
			t.Fatalf("%s: %v does not match ErrNotSent", id, err)
		}
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the funder received %d requests, want 0", n)
	}
	for key, h := range fleet.hosts {
		if n := h.calls["Failed"]; n != 0 {
			t.Fatalf("the fleet was told of %d failures at %s, want none", n, key)
		}
	}
	if v := Classify(0, fmt.Errorf("token: %w", ErrNotSent)); v != (Classification{Retryable: true, Reason: reasonNotSent}) {
		t.Fatalf("Classify = %+v, want transient %s", v, reasonNotSent)
	}

	layer.failing.Store(false)
	resp, err := submitTo(t, tr, srv.URL, "GRANT-after")
	wantReaches(t, resp, err, got, 0)
}

// Beneath a wrapper that fails before it passes the request on, a net/http
// Transport asks for no connection. Once the Transport has seen it ask on
// an earlier call, an attempt whose own trace shows no such ask sent
// nothing: whether the wrapper fails at once or hangs until the attempt
// timeout. An attempt whose trace did ask stays the funder's.
func TestNetHTTPBeneathAWrapperThatFailsBeforeGetConnIsNotSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
		opts []Option
	}{
		{"fails at once", errors.New("token: 503 Service Unavailable"), nil},
		// Long enough for the calls that reach the funder, under -race too.
		{"hangs until the attempt timeout", nil, []Option{WithAttemptTimeout(30 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := countingFunder(t)
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			layer := &innerLayer{next: base, fail: tc.fail}
			fleet := newMemFleet()
			opts := append([]Option{WithClock(newFakeClock()), WithBreaker(2, time.Minute), WithFleet(fleet)}, tc.opts...)
			tr := New(layer, opts...)

			resp, err := submitTo(t, tr, srv.URL, "GRANT-first")
			before := wantReaches(t, resp, err, got, 0)

			layer.failing.Store(true)
			for i := range 4 {
				id := fmt.Sprintf("GRANT-%d", i)
				resp, err := submitTo(t, tr, srv.URL, id)
				wantNotSent(t, id, resp, err)
			}
			if n := got.Load(); n != before {
				t.Fatalf("the funder received %d requests in the outage, want 0", n-before)
			}
			for key, h := range fleet.hosts {
				if n := h.calls["Failed"]; n != 0 {
					t.Fatalf("the fleet was told of %d failures at %s, want none", n, key)
				}
			}

			layer.failing.Store(false)
			resp, err = submitTo(t, tr, srv.URL, "GRANT-after")
			wantReaches(t, resp, err, got, before)
		})
	}

	// The control: an attempt that asked for a connection, and lost it
	// after the request was written, is the funder's and ambiguous,
	// however well the Transport knows its stack.
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if got.Add(1) == 1 {
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // dropped with the request read, before any answer
		}
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := New(base, WithClock(newFakeClock()), WithBudget(0, time.Minute))
	resp, err := submitTo(t, tr, srv.URL, "GRANT-first")
	wantReaches(t, resp, err, &got, 0)
	_, err = submitTo(t, tr, srv.URL, "GRANT-dropped")
	if e := mustError(t, err); !e.Ambiguous || e.Reason == reasonNotSent {
		t.Fatalf("dropped after the request was written: reason %s, ambiguous %v; want the funder's, ambiguous", e.Reason, e.Ambiguous)
	}
}

// A caller that traces its own request keeps its hooks: the attempt's
// trace is composed with the caller's, and still tells an attempt that
// sent nothing.
func TestNotSentIsReadBesideTheCallersOwnClientTrace(t *testing.T) {
	srv, got := countingFunder(t)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	layer := &innerLayer{next: base, fail: errors.New("token: 503 Service Unavailable")}
	tr := New(layer, WithClock(newFakeClock()))
	var callerGetConns atomic.Int64
	traced := func(id string) (*http.Response, error) {
		ctx := httptrace.WithClientTrace(WithSubmissionID(context.Background(), id),
			&httptrace.ClientTrace{GetConn: func(string) { callerGetConns.Add(1) }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"applicant":"Example Foundation"}`))
		if err != nil {
			t.Fatal(err)
		}
		return tr.RoundTrip(req)
	}
	resp, err := traced("GRANT-first")
	wantReaches(t, resp, err, got, 0)
	if n := callerGetConns.Load(); n != 1 {
		t.Fatalf("the caller's GetConn ran %d times, want 1", n)
	}
	layer.failing.Store(true)
	resp, err = traced("GRANT-1")
	wantNotSent(t, "GRANT-1", resp, err)
}

// Where no GetConn tells, a failure keeps the cautious reading: ambiguous,
// and charged to the funder, whose breaker opens. So it is for an inner
// transport that reports no httptrace events at all (an HTTP/3 client, a
// custom transport); for a net/http Transport beneath a wrapper that
// failed from the Transport's first call, before any attempt saw it ask
// for a connection; and for a stack that once asked and once answered
// without asking (a cache in front of net/http), where an absent GetConn
// proves nothing.
func TestInnerStackWithoutConnectionEventsStaysAmbiguous(t *testing.T) {
	srv, _ := countingFunder(t)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	dropped := errors.New("h3: stream reset by peer")

	silent := &innerLayer{next: watchless{}, fail: dropped}
	coldWrapper := &innerLayer{next: base, fail: dropped}
	coldWrapper.failing.Store(true)
	var cached atomic.Bool
	mixed := &innerLayer{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if cached.Load() {
			closeBody(r)
			return answerOK(r), nil
		}
		return base.RoundTrip(r)
	}), fail: dropped}

	for _, tc := range []struct {
		name string
		tr   http.RoundTripper
		warm func(t *testing.T, tr *Transport)
		fail func()
	}{
		{"reports no events", silent, func(t *testing.T, tr *Transport) {
			resp, err := submitTo(t, tr, srv.URL, "GRANT-warm")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}, func() { silent.failing.Store(true) }},
		{"never seen asking", coldWrapper, func(*testing.T, *Transport) {}, func() {}},
		{"answered once without asking", mixed, func(t *testing.T, tr *Transport) {
			for _, c := range []bool{false, true} {
				cached.Store(c)
				resp, err := submitTo(t, tr, srv.URL, "GRANT-warm")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
		}, func() { mixed.failing.Store(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(tc.tr, WithClock(newFakeClock()), WithBreaker(2, time.Minute))
			tc.warm(t, tr)
			tc.fail()
			for i := range 2 {
				_, err := submitTo(t, tr, srv.URL, fmt.Sprintf("GRANT-%d", i))
				if e := mustError(t, err); !e.Ambiguous || e.Reason == reasonNotSent {
					t.Fatalf("call %d: reason %s, ambiguous %v; want the cautious reading: ambiguous", i, e.Reason, e.Ambiguous)
				}
			}
			_, err := submitTo(t, tr, srv.URL, "GRANT-refused")
			if e := mustError(t, err); e.Disposition != CircuitOpen {
				t.Fatalf("after threshold failed calls: %s (%s), want circuit_open", e.Disposition, e.StopReason)
			}
		})
	}
}

// The call takes the 768-byte size class: at most 760 bytes with the
// allocator's 8-byte header. One byte more takes the 896-byte class, on
// every call.
func TestCallFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(call{}); n > 760 {
		t.Fatalf("a call is %d bytes, beyond the 760 of the 768-byte size class", n)
	}
}

// BenchmarkAttemptTrace is what watching one attempt beneath net/http
// costs on its own: the trace with its context, the lookup net/http makes,
// its GetConn, and the verdict on what it saw. The attempt's request copy
// comes on top.
func BenchmarkAttemptTrace(b *testing.B) {
	var ev traceEvidence
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		tctx, tr := withAttemptTrace(ctx, nil, false, false, false)
		httptrace.ContextClientTrace(tctx).GetConn("funder.test:443")
		a := sentAttempt{trace: tr, resp: &http.Response{}}
		ev.observe(&a)
	}
}
