package grantretry

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
)

// What a dropping funder does with the second request on its first
// connection, once the first has put that connection in the client's idle
// pool.
type dropPoint int

const (
	dropAfterBody    dropPoint = iota // read the whole request, record it, close: no answer
	dropAfterHeaders                  // read the head only, close
	dropWhenIdle                      // close the kept-alive connection before the request comes
)

// droppingFunder is a raw loopback HTTP/1.1 server that counts every
// request head it receives, per Idempotency-Key (or path, for an unkeyed
// request), and drops its first connection at the given point.
type droppingFunder struct {
	ln    net.Listener
	point dropPoint
	wg    sync.WaitGroup

	mu    sync.Mutex
	heads map[string]int
	conns int
}

func newDroppingFunder(t *testing.T, point dropPoint) *droppingFunder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &droppingFunder{ln: ln, point: point, heads: map[string]int{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(func() { ln.Close(); f.wg.Wait() })
	return f
}

func (f *droppingFunder) url() string { return "http://" + f.ln.Addr().String() + "/v1/applications" }

func (f *droppingFunder) serve() {
	defer f.wg.Done()
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns++
		first := f.conns == 1
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.handle(conn, first)
		}()
	}
}

func (f *droppingFunder) handle(conn net.Conn, first bool) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for n := 1; ; n++ {
		if first && n == 2 && f.point == dropWhenIdle {
			return
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		id := req.Header.Get(HeaderIdempotencyKey)
		if id == "" {
			id = req.URL.Path
		}
		f.mu.Lock()
		f.heads[id]++
		f.mu.Unlock()
		if first && n == 2 && f.point == dropAfterHeaders {
			return
		}
		io.Copy(io.Discard, req.Body)
		if first && n == 2 {
			return // dropAfterBody: recorded, never answered
		}
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

func (f *droppingFunder) headsFor(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heads[id]
}

// warm puts a connection to f in client's idle pool.
func warm(t *testing.T, client *http.Client, f *droppingFunder) {
	t.Helper()
	resp, err := client.Get(strings.TrimSuffix(f.url(), "/v1/applications") + "/warm")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// Every request on the wire is an attempt: whatever point a funder drops
// a kept-alive connection at, it receives the call's request exactly as
// many times as Outcome.Attempts says, for a keyed POST with a body and for
// one without. net/http's own resend of a request it
// never wrote may stay; one of a written request is stopped, and the
// Transport's loop sends the retry it counts.
func TestEveryRequestOnTheWireIsAnAttempt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		point dropPoint
		body  string
	}{
		{"body, recorded then dropped", dropAfterBody, `{"amount":1}`},
		{"body, dropped after the head", dropAfterHeaders, `{"amount":1}`},
		{"body, idle connection closed", dropWhenIdle, `{"amount":1}`},
		{"no body, recorded then dropped", dropAfterBody, ""},
		{"no body, idle connection closed", dropWhenIdle, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDroppingFunder(t, tc.point)
			inner := cleanhttp.DefaultPooledTransport()
			defer inner.CloseIdleConnections()
			tr := New(inner, WithClock(newFakeClock()))
			client := &http.Client{Transport: tr}
			warm(t, client, f)
			if tc.point == dropWhenIdle {
				time.Sleep(20 * time.Millisecond) // let the close reach the pool
			}
			ctx := WithSubmissionID(context.Background(), "GRANT-42")
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url(), body)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			o := mustOutcome(t, resp)
			if got := f.headsFor(o.IdempotencyKey); got != o.Attempts {
				t.Errorf("the funder received the request %d times; the outcome counts %d attempts", got, o.Attempts)
			}
			if tc.point != dropWhenIdle && o.Attempts != 2 {
				t.Errorf("%d attempts, want 2: the drop is a failed attempt the Transport retries", o.Attempts)
			}
		})
	}
}

// The control: without grantretry, net/http's Transport resends a keyed
// POST whose connection was dropped after it was written, and the funder
// receives it twice for one call. The test above would catch this.
func TestNetHTTPResendsAWrittenKeyedRequest(t *testing.T) {
	for _, body := range []string{`{"amount":1}`, ""} {
		f := newDroppingFunder(t, dropAfterBody)
		inner := cleanhttp.DefaultPooledTransport()
		client := &http.Client{Transport: inner}
		warm(t, client, f)
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(http.MethodPost, f.url(), r)
		req.Header.Set(HeaderIdempotencyKey, "grant-key")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		resp.Body.Close()
		if got := f.headsFor("grant-key"); got != 2 {
			t.Errorf("body %q: the funder received %d copies of one net/http call, want 2", body, got)
		}
		inner.CloseIdleConnections()
	}
}

// What stays: net/http resends an unkeyed GET it wrote on a kept-alive
// connection the funder dropped, and the Transport cannot see it, so the
// funder receives the request once more than Outcome.Attempts says. GET,
// HEAD, OPTIONS and TRACE are safe methods (RFC 9110): the resend has no
// effect, but the attempt count undercounts by it (docs/exactly-once.md).
func TestNetHTTPStillResendsAnUnkeyedGET(t *testing.T) {
	f := newDroppingFunder(t, dropAfterBody)
	inner := cleanhttp.DefaultPooledTransport()
	defer inner.CloseIdleConnections()
	client := &http.Client{Transport: New(inner, WithClock(newFakeClock()))}
	warm(t, client, f)
	resp, err := client.Get(f.url())
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != 1 || f.headsFor("/v1/applications") != 2 {
		t.Errorf("%d attempts, the funder received the GET %d times; want 1 and 2", o.Attempts, f.headsFor("/v1/applications"))
	}
}
