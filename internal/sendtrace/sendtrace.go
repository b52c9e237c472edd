// Package sendtrace holds what deadletter.Dir.Redeliver and
// fleet.Letters.Redeliver both read of a redelivery through a client that
// gives no grantretry Outcome, and how both write its error into the
// letter, so that the two stores record one send the same way.
package sendtrace

import (
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// Trace watches a send through httptrace: whether its transport asked
// for a connection, and whether it ever got one. Anything the send's
// context carries to a connection counts, a reconciler's own requests
// too: that can only make a send look possible, never hide one. The zero
// value is ready to use, and safe for concurrent use.
type Trace struct {
	getConn, gotConn atomic.Bool
}

// ClientTrace returns the hooks that feed t; give it to the send's
// context with httptrace.WithClientTrace.
func (t *Trace) ClientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn: func(string) { t.getConn.Store(true) },
		GotConn: func(httptrace.GotConnInfo) { t.gotConn.Store(true) },
	}
}

// NothingSent reports whether the trace shows that no request left: none
// ever had a connection, and either one was asked for or client (nil:
// nothing was sent through it) sends straight through an
// [http.Transport], which asks for one before it writes anything. Behind
// any other RoundTripper a request may leave by a way the trace does not
// see, so it tells nothing there.
func (t *Trace) NothingSent(client *http.Client) bool {
	if t.gotConn.Load() {
		return false
	}
	if client == nil || t.getConn.Load() {
		return true
	}
	switch client.Transport.(type) {
	case nil, *http.Transport:
		return true
	}
	return false
}

// AmbiguousStatus is the Transport's rule for an answer from a client
// that gives no Outcome: a 5xx but 501 and 503 may have been applied.
func AmbiguousStatus(status int) bool {
	return status >= 500 && status != http.StatusNotImplemented && status != http.StatusServiceUnavailable
}

// MaxError bounds the error text a redelivery leaves in a letter.
const MaxError = 1024

// CapError is s cut to MaxError bytes, ending "..." when cut.
func CapError(s string) string {
	if len(s) > MaxError {
		return s[:MaxError-3] + "..."
	}
	return s
}
