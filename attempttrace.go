package grantretry

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
)

// attemptTrace watches one attempt through httptrace: whether the inner
// transport ever had a connection (an attempt that never had one sent
// nothing, whatever its error says), and, for a request that net/http would
// resend on its own after writing it with no GetBody to refuse (a keyed
// request with no body), whether it sets out to do so.
type attemptTrace struct {
	ct       httptrace.ClientTrace
	guard    bool                    // stop resends
	closeH2C bool                    // a plain connection may be closed: it is not HTTP/2
	cancel   context.CancelCauseFunc // ends the attempt; set when guard is

	mu      sync.Mutex
	getConn bool // the inner transport asked for a connection
	gotConn bool // and got one
	written bool // a copy was written whole, and no answer has begun since
	stopped bool // a resend was stopped
}

// withAttemptTrace returns ctx watched by a new attemptTrace; cancel ends
// the attempt when a resend is stopped.
func withAttemptTrace(ctx context.Context, cancel context.CancelCauseFunc, guard, closeH2C bool) (context.Context, *attemptTrace) {
	t := &attemptTrace{guard: guard, closeH2C: closeH2C, cancel: cancel}
	t.ct.GetConn, t.ct.GotConn = t.gettingConn, t.gotConnection
	if guard {
		t.ct.WroteRequest = t.wroteRequest
		t.ct.GotFirstResponseByte = t.gotFirstByte
	}
	return httptrace.WithClientTrace(ctx, &t.ct), t
}

func (t *attemptTrace) gettingConn(string) {
	t.mu.Lock()
	t.getConn = true
	t.mu.Unlock()
}

// neverConnected reports whether the inner transport asked for a
// connection and never got one.
func (t *attemptTrace) neverConnected() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.getConn && !t.gotConn
}

// stoppedResend reports whether a resend was stopped.
func (t *attemptTrace) stoppedResend() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopped
}

func (t *attemptTrace) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		t.mu.Lock()
		t.written = true
		t.mu.Unlock()
	}
}

// gotFirstByte: an answer began, so a next request on this attempt is the
// inner transport's own (a Digest or NTLM challenge answered), not a
// resend of one that got no answer.
func (t *attemptTrace) gotFirstByte() {
	t.mu.Lock()
	t.written = false
	t.mu.Unlock()
}

func (t *attemptTrace) gotConnection(info httptrace.GotConnInfo) {
	t.mu.Lock()
	t.gotConn = true
	stop := t.guard && t.written
	t.stopped = t.stopped || stop
	t.mu.Unlock()
	if !stop {
		return
	}
	t.cancel(errResendStopped)
	if isHTTP1(info.Conn, t.closeH2C) {
		// HTTP/1 writes the request as soon as it has the connection,
		// whatever the context says: only closing it stops the write.
		// An HTTP/2 connection carries other calls' streams, so it is
		// left open and only the context is ended: HTTP/2 resends a
		// stream the server refused or never processed, and also one it
		// reset with PROTOCOL_ERROR, which the cancelled context then
		// races (docs/exactly-once.md says so).
		info.Conn.Close()
	}
}

// isHTTP1 reports whether conn is known to carry HTTP/1 only: a TLS
// connection that did not negotiate h2, or a plain one when plainIsHTTP1
// says the inner transport speaks no cleartext HTTP/2.
func isHTTP1(conn net.Conn, plainIsHTTP1 bool) bool {
	if tc, ok := conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		return tc.ConnectionState().NegotiatedProtocol != "h2"
	}
	return plainIsHTTP1
}

// stopsH2C reports whether a plain connection of the inner transport is
// known to be HTTP/1: it is an *http.Transport that does not speak
// cleartext HTTP/2. Of any other, a plain connection may carry HTTP/2.
func (c *call) stopsH2C() bool {
	ht, ok := c.t.next.(*http.Transport)
	return ok && (ht.Protocols == nil || !ht.Protocols.UnencryptedHTTP2())
}

// guardsResend reports whether the inner transport could resend the call's
// request on its own after writing it, beyond a GetBody the Transport
// withholds: net/http does so for a request with no body whose method is
// not GET, HEAD, OPTIONS or TRACE when it carries Idempotency-Key or
// X-Idempotency-Key.
func (c *call) guardsResend() bool {
	if !c.p.empty() {
		return false
	}
	switch c.req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	_, x := c.base.Header["X-Idempotency-Key"]
	return c.out.IdempotencyKey != "" || x
}
