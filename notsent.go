package grantretry

import (
	"errors"
	"net/http"
	"sync/atomic"
)

// ErrNotSent is for a RoundTripper inside a Transport (New's next, or a
// layer within it) to wrap when it failed before sending anything: a
// token source that could not get a token, a signer without its key, a
// client-side limiter that refused. The failure is not the funder's, and
// the Transport charges it to no one: the attempt is not ambiguous, and
// neither the host's breaker, its retry throttle nor a fleet counts it.
// Its reason is transport:not_sent, and it is retried as a transient
// failure, within the call's budget. Wrap it only when no byte of the
// request can have left the process: a wrong claim makes a resend look
// safe to a funder that may already have the submission.
var ErrNotSent = errors.New("grantretry: the request was not sent")

// reasonNotSent is the reason of an attempt that failed before anything
// was sent (see sentNothing).
const reasonNotSent = "transport:not_sent"

// sentNothing reports whether attempt a failed before anything of it could
// reach the funder: an inner layer said so (ErrNotSent), or its own trace
// saw no connection asked for beneath an inner stack known to report one
// (see traceEvidence).
//
// The attempt's own trace outranks an inner layer's word: a layer that
// retries within one attempt may have sent the request on its first try
// and wrap ErrNotSent for its last, so an attempt whose trace saw a
// connection asked for is never taken as not sent.
func (a *sentAttempt) sentNothing() bool {
	if a.err == nil {
		return false
	}
	if a.trace != nil {
		return a.trace.notSent || (!a.trace.askedForConn() && errors.Is(a.err, ErrNotSent))
	}
	return errors.Is(a.err, ErrNotSent)
}

// evidence is what the attempts of the call's kind have shown of the inner
// stack: those to the same host, with a safe method (GET, HEAD, OPTIONS,
// TRACE) or with any other. Evidence from one kind proves nothing of
// another: a stack may send reads through net/http and submissions
// through a layer that builds requests of its own (a signer, a router by
// path), whose attempts never show GetConn; that a read showed it must
// not make a lost submission look unsent.
func (c *call) evidence() *traceEvidence {
	i := 1
	switch c.req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		i = 0
	}
	return &c.host.events[i]
}

// traceEvidence is what a Transport has learned of its inner stack from
// the traces of one kind of attempt (see call.evidence): whether that stack
// reports, through httptrace, the
// connection it asks for before it sends anything (net/http's Transport
// calls GetConn first, for a new connection and a pooled one alike, over
// HTTP/1 and HTTP/2). Once an attempt has seen GetConn, an attempt that
// failed with none on its own trace sent nothing: a layer above the
// connection stopped it (a token source, a signer). Until then, and for
// good once an attempt obtained a response with no GetConn (an HTTP/3
// client, an in-memory or caching transport, a layer that swaps the
// request's context), an absent GetConn proves nothing, and a failure is
// read as cautiously as its error allows.
//
// Its zero value is unknown. It is safe for concurrent use: an attempt
// moves it only from unknown to reports, or to silent, which is final.
type traceEvidence struct {
	state atomic.Uint32
}

const (
	traceUnknown uint32 = iota // no attempt has told yet: every attempt is watched
	traceReports               // an attempt saw GetConn, and none was answered without one
	traceSilent                // an attempt was answered without GetConn: watching proves nothing
)

// watching reports whether attempts are watched for the evidence: not
// once it is known to prove nothing, so that a first-attempt success pays
// for no trace from then on.
func (e *traceEvidence) watching() bool { return e.state.Load() != traceSilent }

// reports reports whether the inner stack is known to report GetConn.
func (e *traceEvidence) reports() bool { return e.state.Load() == traceReports }

// learn takes in what one watched attempt showed. It writes only when it
// moves the state, so that calls in flight share the word read-only.
func (e *traceEvidence) learn(sawGetConn, answered bool) {
	switch s := e.state.Load(); {
	case s == traceSilent:
	case answered && !sawGetConn:
		e.state.Store(traceSilent)
	case sawGetConn && s == traceUnknown:
		e.state.CompareAndSwap(traceUnknown, traceReports)
	}
}

// observe takes in what a watched attempt's trace showed, and marks the
// attempt as having sent nothing if it failed without asking for a
// connection beneath a stack known to ask. Only the attempt's own trace is
// its evidence: another attempt's, even a late event of an earlier attempt
// of the same call, lands on that attempt's trace.
func (e *traceEvidence) observe(a *sentAttempt) {
	asked := a.trace.askedForConn()
	e.learn(asked, a.resp != nil)
	a.trace.notSent = a.resp == nil && !asked && e.reports()
}
