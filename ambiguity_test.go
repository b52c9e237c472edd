package grantretry

// Regression tests for the defects a review of issues 9, 11 and 12 found,
// each a repro that failed before its fix.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rtFunc is an inner transport in a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeRecorder) Close() error { b.closed.Store(true); return nil }

func postReq(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`<submit/>`))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// R1: a panicking ClassifyFunc leaves the attempt's response body open.
func TestClassifierPanicClosesTheResponseBody(t *testing.T) {
	body := &closeRecorder{Reader: strings.NewReader("<fault/>")}
	inner := rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 500, Body: body, Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()), WithClassifier(func(*http.Response, []byte) (Classification, bool) {
		panic("classifier bug")
	}))
	func() {
		defer func() {
			if v := recover(); v == nil {
				t.Fatal("no panic")
			}
		}()
		tr.RoundTrip(postReq(t, "https://funder.test/x"))
	}()
	if !body.closed.Load() {
		t.Fatal("the response body the inner transport returned was never closed after the classifier panicked")
	}
}

// capture keeps the letters it is handed.
type capture struct {
	mu      sync.Mutex
	letters []*Letter
}

func (c *capture) PutDeadLetter(_ context.Context, l *Letter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.letters = append(c.letters, l)
	return nil
}

// R2: an ambiguous attempt followed by a non-ambiguous one leaves a letter
// that says nothing may have been applied.
func TestAmbiguityOutlivesALaterAttempt(t *testing.T) {
	statuses := []int{500, 503} // 500: may have been applied; 503: was not
	var n atomic.Int32
	inner := rtFunc(func(r *http.Request) (*http.Response, error) {
		s := statuses[n.Add(1)-1]
		return &http.Response{StatusCode: s, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	sink := &capture{}
	tr := New(inner, WithClock(newFakeClock()), WithBudget(1, time.Minute), WithDeadLetter(sink))
	resp, err := tr.RoundTrip(postReq(t, "https://funder.test/x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := OutcomeOf(resp)
	t.Logf("attempts=%d disposition=%s stop=%s ambiguous=%v", o.Attempts, o.Disposition, o.StopReason, o.Ambiguous)
	if len(sink.letters) != 1 {
		t.Fatalf("letters: %d", len(sink.letters))
	}
	if !sink.letters[0].Ambiguous || !o.Ambiguous {
		t.Fatalf("attempt 1 was answered 500 and may have been applied, yet Outcome.Ambiguous=%v and Letter.Ambiguous=%v: the CLI redelivers this letter without -trust-key",
			o.Ambiguous, sink.letters[0].Ambiguous)
	}
}

// R3: a TLS handshake that times out sent nothing, yet it is taken as
// ambiguous: the reconciler is asked, and when it cannot tell, the call
// ends "may have been applied" instead of retrying.
func TestTLSHandshakeTimeoutIsNotAmbiguous(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			c, err := ln.Accept() // accepts, never speaks TLS
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	}()
	inner := &http.Transport{TLSHandshakeTimeout: 50 * time.Millisecond, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer inner.CloseIdleConnections()
	var asked atomic.Int32
	tr := New(inner, WithClock(newFakeClock()), WithBudget(2, time.Minute), WithoutBreaker(),
		WithReconciler(func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
			asked.Add(1)
			t.Logf("reconciler asked after attempt %d: err=%v (%T)", q.Attempt, q.Err, q.Err)
			return nil, errors.New("GetApplicationList is down too")
		}))
	_, err = tr.RoundTrip(postReq(t, "https://"+ln.Addr().String()+"/submit"))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v", err)
	}
	t.Logf("attempts=%d stop=%s reason=%s ambiguous=%v reconciles=%d", e.Attempts, e.StopReason, e.Reason, e.Ambiguous, e.Reconciles)
	if asked.Load() > 0 || e.Ambiguous || e.StopReason == StopUnreconciled {
		t.Fatalf("a TLS handshake timeout (nothing sent) was taken as ambiguous: reconciler asked %d times, stop %q", asked.Load(), e.StopReason)
	}
}

// R7: askBeforeGivingUp asks while the last attempt's response is held, so
// the call's deadline only goes pending and never ends the reconciler's
// context: a reconciler that waits on ctx (as it should) holds RoundTrip
// far past the call deadline (here: forever).
func TestQuestionBeforeGivingUpEndsAtTheDeadline(t *testing.T) {
	inner := rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 502, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	release := make(chan struct{})
	defer close(release)
	tr := New(inner, WithClock(newFakeClock()), WithBudget(0, 200*time.Millisecond),
		WithReconciler(func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
			select { // a well-behaved reconciler: bounded by ctx
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return nil, context.Canceled
			}
		}))
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		resp, err := tr.RoundTrip(postReq(t, "https://funder.test/x"))
		if err == nil {
			resp.Body.Close()
		}
		done <- time.Since(start)
	}()
	select {
	case d := <-done:
		t.Logf("RoundTrip returned after %v", d)
	case <-time.After(3 * time.Second):
		t.Fatal("RoundTrip still blocked 3s into a call with a 200ms deadline: the reconciler's ctx never ended")
	}
}

// challengeAuth is a challenge-response auth transport (Digest, NTLM): it
// sends the request, and on a 401 sends it again with credentials, on the
// same context, as such transports do.
type challengeAuth struct{ next http.RoundTripper }

func (c challengeAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Digest response=\"ok\"")
	return c.next.RoundTrip(r2)
}

// R6: the resend guard takes the auth transport's second request (a new
// request, not a resend of a written one) for net/http's resend, closes
// its connection and fails the attempt: a keyed body-less POST through a
// Digest or NTLM transport can never succeed.
func TestResendGuardLetsChallengeResponseAuthThrough(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Digest realm="funder"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	// Without grantretry: works.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/applications/42/withdraw", nil)
	resp, err := challengeAuth{base}.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain: %v %v", resp, err)
	}
	resp.Body.Close()

	tr := New(challengeAuth{base}, WithClock(newFakeClock()), WithBudget(2, 5*time.Second), WithoutBreaker())
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/applications/42/withdraw", nil)
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("through grantretry: %v (server saw %d requests)", err, served.Load())
	}
	resp.Body.Close()
}

// h2cServer speaks just enough HTTP/2 over cleartext: it holds the first
// stream open (another caller's request in flight), refuses the second with
// REFUSED_STREAM ("not processed": HTTP/2 says it is safe to resend), and
// answers every later one 200. It answers the held stream when release is
// closed.
func h2cServer(t *testing.T, ln net.Listener, sawSecond chan<- struct{}, release <-chan struct{}) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	var wmu sync.Mutex
	write := func(typ, flags byte, stream uint32, payload []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		h := make([]byte, 9)
		h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
		h[3], h[4] = typ, flags
		binary.BigEndian.PutUint32(h[5:], stream)
		c.Write(append(h, payload...))
	}
	preface := make([]byte, 24)
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	write(0x4, 0, 0, nil) // SETTINGS
	headers := 0
	var held uint32
	go func() {
		<-release
		if held != 0 {
			write(0x1, 0x5, held, []byte{0x88}) // :status 200, END_HEADERS|END_STREAM
		}
	}()
	for {
		h := make([]byte, 9)
		if _, err := io.ReadFull(c, h); err != nil {
			t.Logf("server: connection ended: %v", err)
			return
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags, stream := h[3], h[4], binary.BigEndian.Uint32(h[5:])&0x7fffffff
		if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
			return
		}
		switch {
		case typ == 0x4 && flags&1 == 0:
			write(0x4, 1, 0, nil) // SETTINGS ACK
		case typ == 0x6 && flags&1 == 0: // PING
			write(0x6, 1, 0, make([]byte, 8))
		case typ == 0x1:
			headers++
			switch headers {
			case 1:
				held = stream
			case 2:
				write(0x3, 0, stream, []byte{0, 0, 0, 7}) // RST_STREAM REFUSED_STREAM
				close(sawSecond)
			default:
				write(0x1, 0x5, stream, []byte{0x88})
			}
		}
	}
}

// R4: the resend guard closes an h2c connection, shared with another
// caller's request in flight, to stop HTTP/2's resend of a stream the
// server refused (and so did not process).
func TestResendGuardLeavesASharedH2CConnectionOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sawSecond, release := make(chan struct{}), make(chan struct{})
	srvDone := make(chan struct{})
	go func() { defer close(srvDone); h2cServer(t, ln, sawSecond, release) }()

	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	inner := &http.Transport{Protocols: &p}
	defer inner.CloseIdleConnections()
	url := "http://" + ln.Addr().String()

	// Another caller's request, on the same pooled h2c connection.
	other := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url+"/status", nil)
		resp, err := inner.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		other <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it open the connection and its stream

	tr := New(inner, WithClock(newFakeClock()), WithBudget(0, 5*time.Second))
	req, _ := http.NewRequest(http.MethodPost, url+"/withdraw", nil) // keyed, no body: guarded
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	t.Logf("guarded call: err=%v", err)
	<-sawSecond
	close(release)
	select {
	case oerr := <-other:
		if oerr != nil {
			t.Fatalf("another caller's request on the shared h2c connection failed: %v", oerr)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("other request hung")
	}
	ln.Close()
	inner.CloseIdleConnections() // the server reads until the connection ends
	select {
	case <-srvDone:
	case <-time.After(10 * time.Second):
		// Seen once in CI (2026-12-01), not reproduced: fail with what is
		// known instead of waiting out the suite's timeout.
		t.Fatal("the h2c connection was still open 10 s after CloseIdleConnections: a stream or a reservation left on it")
	}
}

// R3b: an attempt timeout that fires while the connection is still being
// dialled (nothing sent) is taken as ambiguous too.
func TestAttemptTimeoutDuringDialIsNotAmbiguous(t *testing.T) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	inner := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		select { // a SYN into a black hole, until the test ends
		case <-ctx.Done():
		case <-stop:
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}
	}}
	var asked atomic.Int32
	tr := New(inner, WithClock(newFakeClock()), WithBudget(1, time.Minute), WithoutBreaker(),
		WithAttemptTimeout(30*time.Millisecond),
		WithReconciler(func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
			asked.Add(1)
			t.Logf("reconciler asked: err=%v (%T)", q.Err, q.Err)
			return nil, errors.New("cannot tell")
		}))
	_, err := tr.RoundTrip(postReq(t, "https://funder.test/submit"))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v", err)
	}
	t.Logf("attempts=%d stop=%s reason=%s ambiguous=%v reconciles=%d", e.Attempts, e.StopReason, e.Reason, e.Ambiguous, e.Reconciles)
	if e.Ambiguous || asked.Load() > 0 {
		t.Fatalf("nothing was sent (still dialling), yet ambiguous=%v and the reconciler was asked %d times", e.Ambiguous, asked.Load())
	}
}

// R3c: a proxy that refuses the CONNECT (the funder was never reached).
func TestRefusedProxyConnectIsNotAmbiguous(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway) // upstream unreachable
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	inner := &http.Transport{Proxy: http.ProxyURL(pu)}
	defer inner.CloseIdleConnections()
	var asked atomic.Int32
	tr := New(inner, WithClock(newFakeClock()), WithBudget(1, time.Minute), WithoutBreaker(),
		WithReconciler(func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
			asked.Add(1)
			t.Logf("reconciler asked: err=%v (%T)", q.Err, q.Err)
			return nil, errors.New("cannot tell")
		}))
	_, err := tr.RoundTrip(postReq(t, "https://funder.test/submit"))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v", err)
	}
	t.Logf("stop=%s reason=%s ambiguous=%v", e.StopReason, e.Reason, e.Ambiguous)
	if e.Ambiguous || asked.Load() > 0 {
		t.Fatalf("the CONNECT was refused, nothing reached the funder, yet ambiguous=%v, reconciler asked %d times", e.Ambiguous, asked.Load())
	}
}

// R5: a reconciler that exits its goroutine (runtime.Goexit, as t.FailNow
// or log.Fatal-style helpers do) is taken as "the funder does not have
// it", and the request is sent again.
func TestReconcilerGoexitIsNotAnAnswer(t *testing.T) {
	var sent atomic.Int32
	inner := rtFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: 502, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()), WithBudget(1, time.Minute),
		WithReconciler(func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
			runtime.Goexit()
			return nil, nil
		}))
	resp, err := tr.RoundTrip(postReq(t, "https://funder.test/x"))
	if err == nil {
		resp.Body.Close()
	}
	if n := sent.Load(); n > 1 {
		t.Fatalf("the reconciler never answered, yet the request was sent again: %d attempts", n)
	}
}

func TestSOAPClientFaultIsNotAmbiguous(t *testing.T) {
	const fault = `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><s:Fault><faultcode>s:Client</faultcode><faultstring>bad form</faultstring></s:Fault></s:Body></s:Envelope>`
	inner := rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 500, Body: io.NopCloser(strings.NewReader(fault)), Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()), WithClassifier(ClassifySOAPFault))
	resp, err := tr.RoundTrip(postReq(t, "https://funder.test/x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := OutcomeOf(resp)
	t.Logf("disposition=%s reason=%s ambiguous=%v", o.Disposition, o.Reason, o.Ambiguous)
	if o.Ambiguous {
		t.Fatal("a SOAP Client fault says the request was refused, yet Outcome.Ambiguous is true")
	}
}
