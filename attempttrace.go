package grantretry

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// attemptTrace watches one attempt through httptrace: whether the inner
// transport asked for a connection (an attempt that failed without asking,
// beneath a stack known to ask, sent nothing: see traceEvidence), whether it
// ever had one (an attempt that never had one sent nothing, whatever its
// error says), and, for a request that net/http would resend on its own
// after writing it with no GetBody to refuse (a keyed request with no
// body), whether it sets out to do so.
type attemptTrace struct {
	ct        httptrace.ClientTrace
	ctx       attemptContext          // the attempt's context, when ct needs no other trace composed in
	guard     bool                    // stop resends
	watchConn bool                    // GotConn is watched, so neverConnected can tell
	closeH2C  bool                    // a plain connection may be closed: it is not HTTP/2
	notSent   bool                    // the attempt failed and its trace shows nothing sent; the call's goroutine's
	cancel    context.CancelCauseFunc // ends the attempt; set when guard is

	// getConn: the inner transport asked for a connection. Atomic, not
	// under mu, so that the one hook every watched attempt has takes no
	// lock.
	getConn atomic.Bool

	mu      sync.Mutex
	gotConn bool // the inner transport got a connection
	written bool // a copy was written whole, and no answer has begun since
	stopped bool // a resend was stopped
}

// withAttemptTrace returns ctx watched by a new attemptTrace: for GetConn
// alone, and with watchConn or guard for the connection it got too; with
// guard it stops resends, cancel ending the attempt when it does.
func withAttemptTrace(ctx context.Context, cancel context.CancelCauseFunc, guard, watchConn, closeH2C bool) (context.Context, *attemptTrace) {
	t := &attemptTrace{guard: guard, watchConn: watchConn || guard, closeH2C: closeH2C, cancel: cancel}
	t.ct.GetConn = t.gettingConn
	if t.watchConn {
		t.ct.GotConn = t.gotConnection
	}
	if guard {
		t.ct.WroteRequest = t.wroteRequest
		t.ct.GotFirstResponseByte = t.gotFirstByte
	}
	if clientTraceKey == nil || httptrace.ContextClientTrace(ctx) != nil {
		// The caller traces the request too: httptrace composes the two,
		// so that the caller's hooks still run.
		return httptrace.WithClientTrace(ctx, &t.ct), t
	}
	t.ctx = attemptContext{Context: ctx, t: t}
	return &t.ctx, t
}

// attemptContext is an attempt's context: its parent, with the attempt's
// ClientTrace as httptrace finds it. It lives inside the attemptTrace, so
// that watching an attempt costs no context.WithValue of its own: the
// trace is on every attempt of a Transport whose inner stack reports
// connections, first-attempt successes included.
type attemptContext struct {
	context.Context
	t *attemptTrace
}

func (c *attemptContext) Value(key any) any {
	if key == clientTraceKey {
		return &c.t.ct
	}
	return c.Context.Value(key)
}

// String names the context without printing its parent's fields, as the
// call's own context does.
func (c *attemptContext) String() string { return "grantretry.attemptContext" }

// clientTraceKey is the key httptrace keeps a context's ClientTrace under,
// nil if it could not be read: it is unexported, so it is read once, by
// asking httptrace for the trace of a context that notes the key it is
// asked for.
var clientTraceKey = func() any {
	k := keySpy{Context: context.Background()}
	httptrace.ContextClientTrace(&k)
	return k.key
}()

// keySpy is a context that notes the last key it was asked for.
type keySpy struct {
	context.Context
	key any
}

func (k *keySpy) Value(key any) any {
	k.key = key
	return nil
}

func (t *attemptTrace) gettingConn(string) { t.getConn.Store(true) }

// askedForConn reports whether the inner transport asked for a connection.
func (t *attemptTrace) askedForConn() bool { return t.getConn.Load() }

// neverConnected reports whether the inner transport asked for a
// connection and never got one.
func (t *attemptTrace) neverConnected() bool {
	if !t.watchConn || !t.getConn.Load() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.gotConn
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
