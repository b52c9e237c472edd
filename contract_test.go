package grantretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Requests net/http would refuse with an untyped error are refused before
// anything is sent: retried, they would drain the throttle and open the
// funder's breaker without ever reaching it.
func TestRequestsNetHTTPRefusesAreRefusedFirst(t *testing.T) {
	cases := map[string]func() *http.Request{
		"ContentLength with nil body": func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, funderURL, nil)
			r.ContentLength = 5
			return r
		},
		"ContentLength longer than the body": func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, funderURL, io.NopCloser(strings.NewReader("abc")))
			r.ContentLength = 10
			return r
		},
		"ContentLength longer than GetBody's": func() *http.Request {
			r, _ := http.NewRequestWithContext(WithSubmissionID(context.Background(), "S"), http.MethodPost, funderURL, strings.NewReader("abc"))
			r.ContentLength = 10
			return r
		},
		"bad trailer name": func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, funderURL, nil)
			r.Trailer = http.Header{"Bad Name": {"x"}}
			return r
		},
		"upper-case scheme": func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, funderURL, nil)
			r.URL.Scheme = "HTTPS"
			return r
		},
	}
	for name, mk := range cases {
		h := newHarness(t, WithBreaker(1, time.Hour))
		h.mock.RegisterNoResponder(seq(200))
		_, err := h.tr.RoundTrip(mk())
		if !errors.Is(err, ErrInvalidRequest) || h.mock.GetTotalCallCount() != 0 {
			t.Errorf("%s: err %v, sent %d; want ErrInvalidRequest and nothing sent", name, err, h.mock.GetTotalCallCount())
		}
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Errorf("%s: the next good call failed: %v", name, err)
			continue
		}
		resp.Body.Close()
	}
}

// A panic in the inner transport propagates, and the caller's body is
// still closed.
func TestPanicInInnerTransportClosesBody(t *testing.T) {
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) { panic("inner transport bug") })
	tr := New(inner, WithClock(newFakeClock()), WithReplayLimit(1))
	req, body := newPost(t, context.Background(), "payload over the limit", false)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic was swallowed")
			}
		}()
		tr.RoundTrip(req)
	}()
	if !body.closed.Load() {
		t.Error("caller's body left open after a panic")
	}
}

// A panic in the inner transport during the half-open probe must give the
// probe's slot back, or the breaker refuses the host for good.
func TestPanicDuringHalfOpenProbe(t *testing.T) {
	mode := "fail"
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch mode {
		case "fail":
			return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		case "panic":
			panic("inner transport bug")
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()), WithBreaker(1, time.Nanosecond), WithBudget(0, time.Minute))
	call := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		return tr.RoundTrip(req)
	}
	if resp, err := call(); err == nil {
		resp.Body.Close() // the 503 opens the breaker
	}
	mode = "panic"
	func() {
		defer func() { recover() }()
		call() // the half-open probe panics
	}()
	mode = "ok"
	resp, err := call()
	if err != nil {
		t.Fatalf("after a panicking probe: %v, want the next probe to go through", err)
	}
	resp.Body.Close()
}

// The Transport's own deadline is not the caller's cancellation.
func TestCallDeadlineIsNotReportedAsCallerCancellation(t *testing.T) {
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(5 * time.Second):
			return nil, errors.New("deadline not applied")
		}
	})
	tr := New(inner, WithClock(newFakeClock()), WithBudget(0, 10*time.Millisecond))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	_, err := tr.RoundTrip(req)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v matches the caller's context errors", err)
	}
	e := mustError(t, err)
	if e.Disposition != DeadLetter || e.StopReason != StopDeadline || !errors.Is(err, ErrDeadLetter) {
		t.Errorf("outcome %+v", e.Outcome)
	}
	if strings.Count(err.Error(), "grantretry:") != 1 {
		t.Errorf("message %q", err)
	}
}

// Only 100-399 is success; a status outside HTTP's range is terminal.
func TestOutOfRangeStatusIsNotSuccess(t *testing.T) {
	for _, status := range []int{0, -1, 99, 600, 1000} {
		inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		})
		tr := New(inner, WithClock(newFakeClock()))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if o := mustOutcome(t, resp); o.Disposition != FailedTerminal || o.Attempts != 1 {
			t.Errorf("status %d: outcome %+v, want failed_terminal after 1 attempt", status, o)
		}
	}
}

// An inner transport that returns neither a response nor an error is not a
// funder fault: terminal, not retried, not counted by the breaker.
func TestInnerReturningNothingIsTerminal(t *testing.T) {
	tr := New(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }),
		WithClock(newFakeClock()), WithBreaker(1, time.Hour))
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		_, err := tr.RoundTrip(req)
		if e := mustError(t, err); e.Disposition != FailedTerminal || e.Attempts != 1 || e.Reason != "transport:no_response" {
			t.Fatalf("call %d: %+v, want failed_terminal after 1 attempt (the breaker must stay closed)", i+1, e.Outcome)
		}
	}
}

// A caller's key or correlation id set under a non-canonical spelling is
// kept, and sent once.
func TestCallerHeadersInAnySpellingAreKeptAndSentOnce(t *testing.T) {
	var got http.Header
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Clone()
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()))
	req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader("x"))
	req.Header["idempotency-key"] = []string{"caller-key"}
	req.Header["x-correlation-id"] = []string{"caller-corr"}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 2 || got.Get(HeaderIdempotencyKey) != "caller-key" || got.Get(HeaderCorrelationID) != "caller-corr" {
		t.Errorf("sent headers %v, want the caller's key and id once each", got)
	}
	if o := mustOutcome(t, resp); o.IdempotencyKey != "caller-key" || o.CorrelationID != "caller-corr" {
		t.Errorf("outcome %+v", o)
	}
}

// GetBody failing for a retry, after an attempt was sent, leaves the work
// owed: dead_letter, not an invalid request.
func TestGetBodyFailingOnRetryIsDeadLetter(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPut, funderURL, seq(503, 200))
	req, _ := http.NewRequest(http.MethodPut, funderURL, strings.NewReader("x"))
	calls := 0
	req.GetBody = func() (io.ReadCloser, error) {
		calls++
		if calls > 2 { // the audit hash and the first attempt
			return nil, errors.New("spool gone")
		}
		return io.NopCloser(strings.NewReader("x")), nil
	}
	_, err := h.tr.RoundTrip(req)
	e := mustError(t, err)
	if e.Disposition != DeadLetter || e.StopReason != StopBodyReadFailure || e.Attempts != 1 || errors.Is(err, ErrInvalidRequest) {
		t.Errorf("outcome %+v err %v, want dead_letter (body_read_failed) after 1 attempt, not ErrInvalidRequest", e.Outcome, err)
	}
}

// A query value is redacted even when an error quotes it re-encoded.
func TestReencodedQueryValueIsRedacted(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute))
	h.mock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("Get %q: refused", "https://funder.test/p?"+r.URL.Query().Encode())
	})
	req, _ := http.NewRequest(http.MethodGet, "https://funder.test/p?sig=ab/cd+ef&a=1", nil)
	_, err := h.tr.RoundTrip(req)
	if err == nil {
		t.Fatal("want an error")
	}
	texts := []string{err.Error()}
	for _, l := range h.logs.AllUntimed() {
		for _, v := range l.ContextMap() {
			texts = append(texts, fmt.Sprint(v))
		}
	}
	all := strings.Join(texts, "\n")
	for _, leak := range []string{"ab/cd", "ab%2Fcd", "cd+ef", "cd%2Bef"} {
		if strings.Contains(all, leak) {
			t.Errorf("query value leaked as %q:\n%s", leak, all)
		}
	}
}
