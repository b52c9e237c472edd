package grantretry

// Regression tests for the defects a review of issues 9, 11 and 12 found,
// each a repro that failed before its fix.

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
