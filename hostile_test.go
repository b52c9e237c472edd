package grantretry

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawFunder is a loopback TCP server that answers every request with the
// bytes respond writes, for funders net/http's own server would not play.
// respond must return once quit is closed; the test waits for it.
func rawFunder(t *testing.T, respond func(c net.Conn, quit <-chan struct{})) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() {
		ln.Close()
		close(quit)
		wg.Wait()
	})
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				respond(c, quit)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/apply"
}

// loopbackTransport is a fresh net/http transport, closed at the end of
// the test so no connection outlives it.
func loopbackTransport(t *testing.T) *http.Transport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// A funder sending an endless body with a 503: the discarded body is read
// up to the drain bound only, and the call ends by its budget.
func TestHostileEndlessBodyOnRetryableStatus(t *testing.T) {
	var sent atomic.Int64
	url := rawFunder(t, func(c net.Conn, _ <-chan struct{}) {
		io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4294967296\r\n\r\n")
		chunk := make([]byte, 64<<10)
		for {
			n, err := c.Write(chunk)
			sent.Add(int64(n))
			if err != nil || sent.Load() > 64<<20 {
				return
			}
		}
	})
	tr := New(loopbackTransport(t), WithClock(newFakeClock()), WithBudget(2, 10*time.Second), WithoutBreaker())
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != 3 || o.Disposition != DeadLetter {
		t.Errorf("outcome %+v, want dead_letter after 3 attempts", o)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v: the drain did not stop at its bound", el)
	}
}

// A funder that sends headers and then never ends its body, on a status
// the caller gets back: the call returns at once, and the caller's reading
// is bounded by its own context, ending within deadlineSlack of that
// context's deadline (grantretry's own timers, disarmed, cannot cut it
// sooner; a body that waited on them would end later).
func TestHostileNeverEndingBodyIsTheCallersToBound(t *testing.T) {
	url := rawFunder(t, func(c net.Conn, quit <-chan struct{}) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
		<-quit // hold the connection open
	})
	const deadline = 200 * time.Millisecond
	checkEndsOnTime(t, deadline, 0, func(int) time.Duration {
		tr := New(loopbackTransport(t), WithClock(newFakeClock()))
		start := time.Now() // before the context, so its deadline is at least start+deadline
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if rt := time.Since(start); rt >= deadline {
			t.Errorf("RoundTrip returned after %v, not at once", rt)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("read error %v, want the caller's deadline", err)
		}
		checkTook(t, took, deadline)
		return took
	})
}

// Status codes outside HTTP's range, from a real socket. Those net/http
// parses (three digits) are terminal at once. A four-digit one never
// reaches grantretry as a status: net/http reports a malformed response,
// an untyped error the Transport treats as a network fault, so the call
// ends within its budget, without a panic.
func TestHostileStatusCodes(t *testing.T) {
	cases := []struct {
		line        string
		maxAttempts int
	}{
		{"HTTP/1.1 999 Odd", 1},
		{"HTTP/1.1 099 Low", 1},
		{"HTTP/1.1 1000 Huge", DefaultMaxRetries + 1},
	}
	for _, c := range cases {
		url := rawFunder(t, func(conn net.Conn, _ <-chan struct{}) {
			io.WriteString(conn, c.line+"\r\nContent-Length: 0\r\n\r\n")
		})
		tr := New(loopbackTransport(t), WithClock(newFakeClock()))
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		resp, err := tr.RoundTrip(req)
		var o Outcome
		if err == nil {
			resp.Body.Close()
			o = mustOutcome(t, resp)
			if o.Disposition != FailedTerminal {
				t.Errorf("%q: outcome %+v, want failed_terminal", c.line, o)
			}
		} else {
			o = mustError(t, err).Outcome
		}
		if o.Attempts < 1 || o.Attempts > c.maxAttempts {
			t.Errorf("%q: %d attempts, want 1 to %d", c.line, o.Attempts, c.maxAttempts)
		}
	}
}

// A flood of 1xx informational responses before the real one: net/http
// bounds it, and the call ends either way, once.
func TestHostileInformationalFlood(t *testing.T) {
	url := rawFunder(t, func(c net.Conn, _ <-chan struct{}) {
		var b strings.Builder
		for i := 0; i < 10000; i++ {
			b.WriteString("HTTP/1.1 102 Processing\r\n\r\n")
		}
		b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		io.WriteString(c, b.String())
	})
	tr := New(loopbackTransport(t), WithClock(newFakeClock()), WithBudget(0, 5*time.Second))
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		if o := mustOutcome(t, resp); o.Attempts != 1 {
			t.Errorf("outcome %+v", o)
		}
		return
	}
	if e := mustError(t, err); e.Attempts != 1 {
		t.Errorf("outcome %+v", e.Outcome)
	}
}

// Hostile Retry-After values over a real socket: ten years and a repeated
// header end the call at once, within deadlineSlack of its start and on
// the real clock, so that a wait towards the deadline would show; negative,
// garbage and past dates fall back to the backoff (on a fake clock: no real
// sleeping).
func TestHostileRetryAfterValues(t *testing.T) {
	cases := []struct {
		name     string
		values   []string
		attempts int
		stop     string
	}{
		{"ten_years", []string{"315360000"}, 1, StopOwedLater},
		{"repeated", []string{"1", "315360000"}, 1, StopOwedLater},
		{"negative", []string{"-30"}, 3, StopRetriesSpent},
		{"garbage", []string{"garbage"}, 3, StopRetriesSpent},
		{"past_date", []string{"Mon, 01 Jan 2001 00:00:00 GMT"}, 3, StopRetriesSpent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, v := range c.values {
					w.Header().Add("Retry-After", v)
				}
				w.WriteHeader(503)
			}))
			defer srv.Close()
			call := func(opts ...Option) time.Duration {
				tr := New(loopbackTransport(t), append(opts, WithoutBreaker())...)
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if o := mustOutcome(t, resp); o.Attempts != c.attempts || o.StopReason != c.stop {
					t.Errorf("Retry-After %v: outcome %+v, want %d attempts, %s", c.values, o, c.attempts, c.stop)
				}
				return took
			}
			if c.stop != StopOwedLater {
				call(WithClock(newFakeClock()), WithBudget(2, time.Minute))
				return
			}
			const deadline = 2 * time.Second
			checkEndsOnTime(t, 0, 0, func(int) time.Duration {
				took := call(WithBudget(2, deadline))
				checkTook(t, took, deadline)
				return took
			})
		})
	}
}

// A funder that accepts and never answers: the call ends by its deadline,
// within deadlineSlack of it and not before it.
func TestHostileSilentFunderEndsByDeadline(t *testing.T) {
	url := rawFunder(t, func(_ net.Conn, quit <-chan struct{}) { <-quit })
	const deadline = 100 * time.Millisecond
	checkEndsOnTime(t, deadline, 0, func(int) time.Duration {
		tr := New(loopbackTransport(t), WithBudget(3, deadline))
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		start := time.Now()
		_, err := tr.RoundTrip(req)
		took := time.Since(start)
		e := mustError(t, err)
		if e.Disposition != DeadLetter || e.StopReason != StopDeadline {
			t.Errorf("outcome %+v, want dead_letter by deadline", e.Outcome)
		}
		if took > deadline+500*time.Millisecond {
			t.Errorf("ended after %v, want close to the %v deadline", took, deadline)
		}
		return took
	})
}
