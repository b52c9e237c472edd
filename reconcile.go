package grantretry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ReconcileFunc asks the funder whether it recorded a submission whose last
// attempt was ambiguous: it may have reached the funder, and no answer said
// it was not applied. It is for funders that ignore Idempotency-Key but can
// be queried (Grants.gov S2S's GetApplicationList).
//
// It returns (resp, nil) when the funder has the submission: the call ends
// Succeeded with stop reason StopReconciled, and resp is returned to the
// caller in place of a response to a resend. It returns (nil, nil) when the
// funder does not have it: the request is sent again. It returns (nil, err)
// when it cannot tell: the Transport waits as for a transient failure and
// asks again, within the same budget and deadline, and never resends in the
// meantime. ctx ends at the call's deadline; a function that outlives it is
// abandoned, and the call goes on as if it could not tell. It must be safe
// for concurrent use.
type ReconcileFunc func(ctx context.Context, q ReconcileQuery) (*http.Response, error)

// ReconcileQuery is what a ReconcileFunc is asked about.
type ReconcileQuery struct {
	// Request is a copy of the caller's request, with the Transport's
	// Idempotency-Key and X-Correlation-ID; its body, if any, is fresh and
	// can be read again through GetBody.
	Request        *http.Request
	SubmissionID   string // from WithSubmissionID, "" if none
	IdempotencyKey string
	CorrelationID  string
	Attempt        int   // the number of the ambiguous attempt, 1 for the first
	Status         int   // its status, 0 if it obtained no response
	Err            error // its transport error, nil if it obtained a response
}

// WithReconciler makes the Transport ask fn, before it sends again a keyed
// request whose last attempt was ambiguous (see ReconcileFunc), whether the
// funder already recorded it. An attempt is ambiguous when it failed after
// any byte of the request may have been written (a reset, an EOF, a timeout
// awaiting the answer, the attempt timeout; not a refused connection, a
// failed DNS lookup or TLS handshake), or was answered 500, 502, 504 or any
// other 5xx but 501 and 503, which say the request was not carried out. A
// 429, a 503 and a 4xx are never ambiguous. Without a reconciler the call
// retries as it always does: right for funders that honour the key.
// fn must not be nil. ForHost can set it for one funder.
func WithReconciler(fn ReconcileFunc) Option {
	return policyOption(func(c *config) {
		if fn == nil {
			c.invalid("WithReconciler(nil)")
			return
		}
		c.reconciler = fn
	})
}

// errResendStopped is the error of an attempt whose inner transport set out
// to send the request again on its own, after the first copy was written:
// net/http's Transport does so for a replayable request on a kept-alive
// connection the server closed. The Transport stops it, so that every
// request on the wire is an attempt it counts, and decides itself.
var errResendStopped = errors.New("grantretry: the connection failed after the request was written, and the inner transport's own resend was stopped")

// errReconcileBroken is what a ReconcileFunc that returned both a response
// and an error is taken to have said: it cannot tell.
var errReconcileBroken = errors.New("grantretry: the reconciler returned a response and an error")

// ambiguous reports whether an attempt may have been applied by the funder
// without its answer saying so.
func ambiguous(resp *http.Response, err error, v Classification) bool {
	if resp != nil {
		s := resp.StatusCode
		return s >= 500 && s != http.StatusNotImplemented && s != http.StatusServiceUnavailable
	}
	if err == nil {
		return false
	}
	switch v.Reason {
	case "transport:refused", "transport:dns", "transport:dns_not_found", "transport:tls",
		"transport:tls_cert", "transport:malformed_url", "transport:invalid_request":
		return false // nothing was sent
	}
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		return false // the connection was never made
	}
	return true
}

// What a reconcile line's verdict field says.
const (
	ReconcileApplied    = "applied"     // the funder has the submission
	ReconcileNotApplied = "not_applied" // it does not: the request is sent again
	ReconcileUnknown    = "unknown"     // the reconciler could not tell
)

// reconcile asks the policy's reconciler about the call's last attempt,
// and records the question. It returns the funder's response when it has
// the submission, or nil and whether it could tell.
func (c *call) reconcile() (resp *http.Response, told bool) {
	start := time.Now()
	c.out.Reconciles++
	resp, err := c.askReconciler()
	verdict := ReconcileUnknown
	switch {
	case resp != nil:
		verdict = ReconcileApplied
	case err == nil:
		verdict = ReconcileNotApplied
	}
	if err == nil {
		c.out.Ambiguous = false // the funder has told
	}
	c.logReconcile(verdict, resp, err, time.Since(start))
	return resp, err == nil
}

// askReconciler runs the reconciler on its own goroutine, so that one that
// ignores its context cannot hold the call past its deadline. A panic in
// it goes on up on the caller's goroutine, as one in the inner transport
// does; a response with an error is a broken contract, taken as "cannot
// tell".
func (c *call) askReconciler() (*http.Response, error) {
	type answer struct {
		resp   *http.Response
		err    error
		panicV any
		panics bool
	}
	q := c.reconcileQuery()
	done := make(chan answer, 1)
	go func() {
		var a answer
		defer func() {
			if v := recover(); v != nil {
				a = answer{panicV: v, panics: true}
			}
			done <- a
		}()
		a.resp, a.err = c.pol.reconciler(c.callCtx, q)
	}()
	var a answer
	select {
	case a = <-done:
	case <-c.callCtx.Done():
		go func() { // the answer comes too late: release what it holds
			if late := <-done; late.resp != nil {
				closeResp(late.resp)
			}
		}()
		return nil, fmt.Errorf("grantretry: the reconciler did not answer before the call ended: %w", context.Cause(c.callCtx))
	}
	if a.panics {
		panic(a.panicV)
	}
	if a.resp != nil && a.err != nil {
		closeResp(a.resp)
		return nil, fmt.Errorf("%w: %w", errReconcileBroken, a.err)
	}
	return a.resp, a.err
}

// reconcileQuery builds the question about the last attempt.
func (c *call) reconcileQuery() ReconcileQuery {
	req := c.base.Clone(c.callCtx)
	req.Body, req.GetBody = nil, nil
	if !c.p.empty() {
		req.GetBody = c.p.body
		if body, err := c.p.body(); err == nil {
			req.Body = body
		}
	}
	return ReconcileQuery{
		Request:        req,
		SubmissionID:   c.out.SubmissionID,
		IdempotencyKey: c.out.IdempotencyKey,
		CorrelationID:  c.out.CorrelationID,
		Attempt:        c.out.Attempts,
		Status:         c.out.Status,
		Err:            c.lastErr,
	}
}

// settle asks the reconciler until it can tell, waiting between questions
// as for a transient failure, within the call's budget and deadline. It
// returns the funder's response when it has the submission, nil when the
// request must be sent again, or the cause of the call's end.
func (c *call) settle() (*http.Response, error) {
	for {
		resp, told := c.reconcile()
		if resp != nil || told {
			return resp, nil
		}
		if cerr := c.callerErr(); cerr != nil {
			c.out.Disposition, c.out.StopReason = Canceled, StopCanceled
			return nil, cerr
		}
		wait := fullJitter(c.pol.rand, c.budget.spent, c.pol.base, c.pol.cap)
		if ok, _ := c.budget.check(c.t.clock.Now(), wait, false); !ok || c.callCtx.Err() != nil {
			c.out.Disposition, c.out.StopReason = DeadLetter, StopUnreconciled
			return nil, fmt.Errorf("grantretry: attempt %d may have been applied, and the funder was never asked successfully whether it was: ask it before sending again; the attempt ended with: %v",
				c.out.Attempts, c.lastFailure())
		}
		c.budget.spend()
		if werr := c.wait(wait); werr != nil {
			return nil, c.interrupted(werr)
		}
	}
}

// lastFailure describes the last attempt's failure.
func (c *call) lastFailure() string {
	if c.lastErr != nil {
		return c.lastErr.Error()
	}
	return fmt.Sprintf("status %d", c.out.Status)
}

// askBeforeGivingUp asks the reconciler once, without waiting, about a call
// that ends still owed (dead_letter, circuit_open) after an ambiguous
// attempt: the throttle, the breaker or the budget stopped the resend, not
// the question, and a funder that has the submission makes the call a
// success rather than a letter to redeliver. It returns the funder's
// response if it has the submission, after discarding the attempt's; an
// answer that it does not clears Ambiguous (as any answer does), so the
// letter may be sent again as it is.
func (c *call) askBeforeGivingUp(a sentAttempt) *http.Response {
	switch {
	case c.pol.reconciler == nil || c.out.IdempotencyKey == "" || !c.out.Ambiguous,
		c.out.Disposition != DeadLetter && c.out.Disposition != CircuitOpen,
		c.out.StopReason == StopAuditTrail, c.callerErr() != nil:
		return nil
	}
	resp, _ := c.reconcile()
	if resp != nil {
		if a.resp != nil {
			c.unhold()
			drain(a.resp.Body)
		}
		a.stop(true)
	}
	return resp
}

// finishReconciled hands the reconciler's response to the caller: the call
// succeeded, by the funder's own record.
func (c *call) finishReconciled(resp *http.Response) (*http.Response, error) {
	c.out.Disposition, c.out.StopReason = Succeeded, StopReconciled
	c.out.Status = resp.StatusCode
	c.hold(c.callCtx)
	return c.finishResp(sentAttempt{req: c.base, resp: resp, stop: func(bool) {}})
}

// logReconcile writes the reconcile line.
func (c *call) logReconcile(verdict string, resp *http.Response, err error, latency time.Duration) {
	level := zap.InfoLevel
	if verdict == ReconcileUnknown {
		level = zap.WarnLevel
	}
	if !c.t.auditing(level) {
		return
	}
	status, errText := 0, ""
	if resp != nil {
		status = resp.StatusCode
	}
	if err != nil {
		errText = capText(c.t.cfg.redact.scrub(err, c.req))
	}
	if werr := c.t.audit(level, MsgReconcile, append(c.callFields(5),
		zap.Int(FieldAttempt, c.out.Attempts),
		zap.String(FieldVerdict, verdict),
		zap.Int(FieldStatus, status),
		zap.String(FieldError, errText),
		zap.Duration(FieldLatency, latency),
	)); werr != nil {
		c.trailFailed(werr)
	}
}

// resendGuard watches one attempt of a request that net/http would resend
// on its own after writing it, and that no GetBody can stop: a keyed
// request with no body. When the inner transport takes a second
// connection after the request was written, the guard closes that
// connection before anything is written to it and ends the attempt.
type resendGuard struct {
	mu      sync.Mutex
	written bool // a copy of the request was written whole
	stopped bool // a resend was stopped
	cancel  context.CancelCauseFunc
}

// stoppedResend reports whether the guard stopped a resend.
func (g *resendGuard) stoppedResend() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped
}

func (g *resendGuard) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		g.mu.Lock()
		g.written = true
		g.mu.Unlock()
	}
}

func (g *resendGuard) gotConn(info httptrace.GotConnInfo) {
	g.mu.Lock()
	stop := g.written
	g.stopped = g.stopped || stop
	g.mu.Unlock()
	if !stop {
		return
	}
	g.cancel(errResendStopped)
	if !isHTTP2(info.Conn) {
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

// isHTTP2 reports whether conn negotiated HTTP/2.
func isHTTP2(conn net.Conn) bool {
	tc, ok := conn.(*tls.Conn)
	return ok && tc.ConnectionState().NegotiatedProtocol == "h2"
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

// withResendGuard returns ctx with a guard on the attempt run under it,
// whose cancel ends it.
func withResendGuard(ctx context.Context, cancel context.CancelCauseFunc) (context.Context, *resendGuard) {
	g := &resendGuard{cancel: cancel}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      g.gotConn,
		WroteRequest: g.wroteRequest,
	}), g
}
