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
// a failed attempt by its error alone.
//
// A Funder is safe for concurrent use: concurrent requests take the
// script's answers in the order they reach it, one answer each.
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
// does one whose Answer is not valid (a Status from 1 to 99 or above
// 999), and [Funder.Err] reports the first such request. With no answers,
// every request gets one.
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
	// -1 when it got a StatusScriptRanOut answer.
	Answer int
	// Processed says the funder read the request: true for every answer
	// but DropBeforeRead (and a StatusScriptRanOut answer, which carries
	// nothing out).
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
	a, i, problem := f.take()
	r := Request{
		Method:    req.Method,
		URL:       cloneURL(req.URL),
		Header:    req.Header.Clone(),
		Body:      body,
		Key:       req.Header.Get(grantretry.HeaderIdempotencyKey),
		At:        time.Now(),
		Answer:    i,
		Processed: problem == "" && readErr == nil && a.drop != dropBefore,
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	n := f.record(r, problem)
	if problem != "" {
		return f.respond(req, Answer{
			Status: StatusScriptRanOut,
			Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
			Body:   fmt.Sprintf("grantretrytest: request %d: %s\n", n, problem),
		}), nil
	}
	if readErr != nil {
		return nil, fmt.Errorf("grantretrytest: reading the request body: %w", readErr)
	}
	if err := wait(req.Context(), a.Delay); err != nil {
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

// take hands out the next answer and its index, or says why there is
// none: then the index is -1 past the script's end.
func (f *Funder) take() (Answer, int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next >= len(f.script) {
		return Answer{}, -1, fmt.Sprintf("the script ran out: it has %d answers", len(f.script))
	}
	i := f.next
	f.next++
	a := f.script[i]
	if a.drop == noDrop && a.Status != 0 && (a.Status < 100 || a.Status > 999) {
		return a, i, fmt.Sprintf("answer %d has status %d: want 100 to 999, or 0 for 200", i, a.Status)
	}
	return a, i, ""
}

// record keeps r, and problem as the Funder's error if it is the first;
// it returns r's number, counting from 1.
func (f *Funder) record(r Request, problem string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
	n := len(f.reqs)
	if problem != "" && f.err == nil {
		f.err = fmt.Errorf("grantretrytest: request %d (%s %s): %s", n, r.Method, r.URL.Redacted(), problem)
	}
	return n
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
		Body:          &responseBody{Reader: bytes.NewReader([]byte(body)), f: f},
		ContentLength: int64(len(a.Body)),
		Request:       req,
	}
}

// responseBody is an in-memory response body that tells its Funder when
// it is closed.
type responseBody struct {
	*bytes.Reader
	f    *Funder
	once sync.Once
}

func (b *responseBody) Close() error {
	b.once.Do(func() {
		b.f.mu.Lock()
		b.f.unclose--
		b.f.mu.Unlock()
	})
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
// read, or came after the script ran out. key "" counts the requests that
// carried none.
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
