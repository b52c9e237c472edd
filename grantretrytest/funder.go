package grantretrytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/grantretry/grantretry"
)

// StatusScriptRanOut is the status of the answer a [Funder] gives to a
// request its script has no answer for: one after the last Answer, or one
// whose Answer is not valid. Its body says which request it was and why.
//
// The Funder does not repeat its last answer: a test that sends more
// requests than it scripted has found something, and repeating a success
// or a failure would hide it. 501 Not Implemented is an answer grantretry
// never retries with its default status sets (an unclassified status is
// terminal) and never reads as ambiguous (a 501 says the request was not
// carried out), so the call ends at once, and [Funder.Err] reports it.
// To answer the same way many times, script it many times:
// slices.Repeat([]Answer{Reply(503, "")}, 4).
const StatusScriptRanOut = http.StatusNotImplemented

// Funder is a fake funder: an in-memory [http.RoundTripper] that answers
// each request with the next [Answer] of its script and records it. Use
// it as grantretry's inner transport, grantretry.New(f, ...), as
// net/http/httptest's Server stands in for a real server, with no socket.
//
// It meets the RoundTripper contract: it reads the request body whole and
// closes it, on every path; it never changes the request; it returns a
// response (Request set, ContentLength set, an in-memory body) or an
// error, never both. It reports no connection through
// net/http/httptrace, as no in-memory transport does, so grantretry reads
// a failed attempt by its error alone. As net/http's Transport, it
// answers a request whose context is already done with the context's
// cause alone: the request is recorded, not processed, and takes no
// answer from the script. As net/http's, a response body read after it
// is closed returns an error ("http: read on closed response body"), so
// code that reads a body it has closed fails its test.
//
// A Funder is safe for concurrent use: concurrent requests take the
// script's answers in the order they reach it, one answer each, and are
// recorded in that order.
type Funder struct {
	mu      sync.Mutex
	script  []Answer  // never changed after NewFunder
	next    int       // the index of the next answer; under mu
	reqs    []Request // under mu
	err     error     // the first request the script could not answer; under mu
	unclose int       // response bodies not yet closed; under mu
}

// NewFunder returns a Funder that answers with answers, in order. A
// request after the last answer gets a [StatusScriptRanOut] answer, as
// does one whose Answer is not valid (a Status below 200, an
// informational 1xx included, as it is not a final answer, or above 999;
// 0 is 200), and [Funder.Err] reports the first such request. With no
// answers, every request gets one.
func NewFunder(answers ...Answer) *Funder {
	return &Funder{script: append([]Answer(nil), answers...)}
}

// Request is one request as a [Funder] received it.
type Request struct {
	Method string
	URL    *url.URL    // a copy of the request's URL
	Header http.Header // a copy of the request's headers
	Body   []byte      // the request body, read whole; nil if it had none
	// Key is the request's Idempotency-Key header, "" if it had none.
	Key string
	// At is when the Funder received the request, by time.Now: in a
	// testing/synctest bubble, the bubble's clock.
	At time.Time
	// Answer is the index in the script of the Answer the request got, or
	// -1 when it took none: it got a StatusScriptRanOut answer, or its
	// context was done before it reached the Funder.
	Answer int
	// Processed says the funder read the request: true for every answer
	// but DropBeforeRead (and false for a StatusScriptRanOut answer, which
	// carries nothing out, and for a request whose context was done
	// before it reached the Funder).
	Processed bool
}

// RoundTrip answers req with the next Answer of the script, and records it.
func (f *Funder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("grantretrytest: nil request")
	}
	body, readErr := readBody(req)
	if req.URL == nil {
		return nil, errors.New("grantretrytest: request with no URL")
	}
	r := Request{
		Method: req.Method,
		URL:    cloneURL(req.URL),
		Header: req.Header.Clone(),
		Body:   body,
		Key:    req.Header.Get(grantretry.HeaderIdempotencyKey),
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	ctx := req.Context()
	a, n, problem := f.take(ctx, r, readErr == nil)
	switch {
	case n == 0:
		return nil, context.Cause(ctx)
	case problem != "":
		return f.respond(req, Answer{
			Status: StatusScriptRanOut,
			Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
			Body:   fmt.Sprintf("grantretrytest: request %d: %s\n", n, problem),
		}), nil
	case readErr != nil:
		return nil, fmt.Errorf("grantretrytest: reading the request body: %w", readErr)
	}
	if err := wait(ctx, a.Delay); err != nil {
		return nil, err
	}
	switch a.drop {
	case dropBefore:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: hostAddr(req.URL),
			Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case dropAfter:
		return nil, &net.OpError{Op: "read", Net: "tcp", Addr: hostAddr(req.URL),
			Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	return f.respond(req, a), nil
}

// readBody reads req's body whole and closes it.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	return io.ReadAll(req.Body)
}

// take hands r the next answer of the script and records it, in one
// critical section, so that the requests are recorded in the order they
// took their answers. It returns the answer and r's number, counting
// from 1, or says why there is none: the script ran out, or the answer is
// not valid. A request whose ctx is done takes no answer, and its number
// is 0. read says the request body was read whole.
func (f *Funder) take(ctx context.Context, r Request, read bool) (a Answer, n int, problem string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.At, r.Answer = time.Now(), -1
	done := ctx.Err() != nil
	switch {
	case done:
	case f.next >= len(f.script):
		problem = fmt.Sprintf("the script ran out: it has %d answers", len(f.script))
	default:
		r.Answer = f.next
		a = f.script[f.next]
		f.next++
		if a.drop == noDrop && a.Status != 0 && (a.Status < 200 || a.Status > 999) {
			problem = fmt.Sprintf("answer %d has status %d: want 200 to 999, or 0 for 200", r.Answer, a.Status)
		}
		r.Processed = problem == "" && read && a.drop != dropBefore
	}
	f.reqs = append(f.reqs, r)
	if problem != "" && f.err == nil {
		f.err = fmt.Errorf("grantretrytest: request %d (%s %s): %s", len(f.reqs), r.Method, r.URL.Redacted(), problem)
	}
	if done {
		return Answer{}, 0, ""
	}
	return a, len(f.reqs), problem
}

// wait waits d, or until ctx ends, and then returns its cause.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// respond builds the response to req that a gives.
func (f *Funder) respond(req *http.Request, a Answer) *http.Response {
	status := a.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := a.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	body := a.Body
	if req.Method == http.MethodHead {
		body = ""
	}
	f.mu.Lock()
	f.unclose++
	f.mu.Unlock()
	text := http.StatusText(status)
	if text == "" {
		text = "status code " + strconv.Itoa(status)
	}
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + text,
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          &responseBody{r: bytes.NewReader([]byte(body)), f: f},
		ContentLength: int64(len(a.Body)),
		Request:       req,
	}
}

// errReadOnClosedBody is what a response body's Read returns after Close:
// net/http's text.
var errReadOnClosedBody = errors.New("http: read on closed response body")

// responseBody is an in-memory response body that tells its Funder when
// it is closed, and that cannot be read once it is.
type responseBody struct {
	f      *Funder
	mu     sync.Mutex
	r      *bytes.Reader // under mu
	closed bool          // under mu
}

func (b *responseBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errReadOnClosedBody
	}
	return b.r.Read(p)
}

func (b *responseBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.f.mu.Lock()
	b.f.unclose--
	b.f.mu.Unlock()
	return nil
}

func cloneURL(u *url.URL) *url.URL {
	c := *u
	if u.User != nil {
		user := *u.User
		c.User = &user
	}
	return &c
}

// hostAddr is the address a drop's error names: the URL's host, as a
// *net.TCPAddr when it is an IP address, nil otherwise.
func hostAddr(u *url.URL) net.Addr {
	ip := net.ParseIP(u.Hostname())
	if ip == nil {
		return nil
	}
	port, _ := strconv.Atoi(u.Port())
	return &net.TCPAddr{IP: ip, Port: port}
}

// Requests returns every request the Funder received, in the order they
// were received. The slice and what it holds are the caller's: changing
// them changes nothing the Funder keeps.
func (f *Funder) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Request, len(f.reqs))
	for i, r := range f.reqs {
		r.URL = cloneURL(r.URL)
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Count returns how many requests carried the Idempotency-Key key, whatever
// their answer; key "" counts the requests that carried none.
func (f *Funder) Count(key string) int {
	return f.count(func(r *Request) bool { return r.Key == key })
}

// Processed returns how many requests that carried the Idempotency-Key key
// the funder read ([Request].Processed): the ones that may have been
// carried out. Count(key) - Processed(key) were dropped before they were
// read, came after the script ran out, or came with their context done.
// key "" counts the requests that carried none.
func (f *Funder) Processed(key string) int {
	return f.count(func(r *Request) bool { return r.Key == key && r.Processed })
}

func (f *Funder) count(match func(*Request) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i := range f.reqs {
		if match(&f.reqs[i]) {
			n++
		}
	}
	return n
}

// Remaining returns how many answers of the script are yet to be given.
func (f *Funder) Remaining() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.script) - f.next
}

// Unclosed returns how many response bodies the Funder has returned that
// have not been closed: after a test has closed the responses it got, a
// nonzero count is a body someone leaked.
func (f *Funder) Unclosed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unclose
}

// Err returns an error that names the first request the script could not
// answer (see [StatusScriptRanOut]), or nil if there was none. A test
// checks it at its end: if err := f.Err(); err != nil { t.Error(err) }.
func (f *Funder) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
