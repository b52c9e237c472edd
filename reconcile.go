package grantretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ReconcileFunc asks the funder whether it recorded a submission whose last
// attempt was ambiguous: it may have reached the funder, and no answer said
// it was not applied. It is for funders that ignore Idempotency-Key but can
// be queried (Grants.gov S2S's GetApplicationList).
//
// It returns (resp, nil) when the funder has the submission: the call ends
// Succeeded with stop reason StopReconciled, and resp is returned to the
// caller in place of a response to a resend. It is also asked, once, when
// an answer after an ambiguous attempt says that attempt was applied
// ([Classification.Applied]): the call ends Succeeded with
// [StopAlreadyApplied] whatever it answers, and a resp it returns is the
// caller's in place of that answer. That question is not asked once the
// call's deadline has passed: the answer is the caller's as it is, the
// call still Succeeded. It returns (nil, nil) when the
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
	// Idempotency-Key and X-Correlation-ID. A body the Transport can send
	// again (buffered under the replay limit, or through the caller's
	// GetBody) is there fresh, and can be read again through GetBody; the
	// Transport closes it once the reconciler has returned. A body it
	// cannot (over the replay limit without GetBody, streamed once to the
	// funder) is gone: Body and GetBody are nil and ContentLength is 0, so
	// the funder is asked by the submission's id or key, not its bytes.
	Request        *http.Request
	SubmissionID   string // from WithSubmissionID, "" if none
	IdempotencyKey string
	CorrelationID  string
	// Attempt is the number of the ambiguous attempt, 1 for the first;
	// Status its status, 0 if it obtained no response; Err its transport
	// error, nil if it obtained a response. For the question asked once an
	// answer said an earlier attempt was applied ([StopAlreadyApplied]),
	// they describe that answer.
	Attempt int
	Status  int
	Err     error
	// FirstAttempt is when the submission's first attempt began, read
	// from the Transport's Clock: this call's, just before its first
	// attempt was sent, or, for a dead letter sent again
	// ([WithFirstAttempt], [WithReconcileFirst]), the letter's
	// FirstAttempt; zero before the first attempt of a letter that has
	// none. A funder that dates what it records (Grants.gov's
	// ReceivedDateTime) can tell by it a record of this submission from
	// an earlier one that carries the same title; zero means it cannot.
	FirstAttempt time.Time
}

// WithReconciler makes the Transport ask fn, before it sends again a keyed
// request whose last attempt was ambiguous (see ReconcileFunc), whether the
// funder already recorded it. An attempt is ambiguous when it failed after
// any byte of the request may have been written (a reset, an EOF, a timeout
// awaiting the answer, the attempt timeout; not a refused connection, a
// failed DNS lookup or TLS handshake), or was answered 500 or above but 501
// and 503, which say the request was not carried out: 502, 504, any other
// 5xx, and a status from 600 to 999, which belongs to no class and says
// nothing of what the funder did. A 429, a 503 and a 4xx are never
// ambiguous. Without a reconciler the call
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
// without its answer saying so. v is the attempt's verdict.
func (a *sentAttempt) ambiguous(v Classification) bool {
	if a.resp != nil {
		if a.classified && !v.Retryable {
			return false // the body says the funder refused it (soap:Client)
		}
		s := a.resp.StatusCode
		return s >= 500 && s != http.StatusNotImplemented && s != http.StatusServiceUnavailable
	}
	if a.err == nil || a.sentNothing() {
		return false
	}
	if a.trace != nil && a.trace.neverConnected() {
		return false // the inner transport never had a connection: nothing was sent
	}
	switch v.Reason {
	case "transport:refused", "transport:dns", "transport:dns_not_found", "transport:tls",
		"transport:tls_cert", "transport:malformed_url", "transport:invalid_request":
		return false // nothing was sent
	}
	var op *net.OpError
	if errors.As(a.err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
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
func (c *call) reconcile(ctx context.Context) (resp *http.Response, told bool) {
	start := time.Now()
	c.out.Reconciles++
	resp, err := c.askReconciler(ctx)
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
	if c.t.met != nil || c.span != nil {
		c.observeReconcile(verdict)
	}
	return resp, err == nil
}

// askReconciler runs the reconciler under ctx on its own goroutine, so
// that one that ignores its context cannot hold the call past ctx's end. A
// panic in it goes on up on the caller's goroutine, as one in the inner
// transport does; a response with an error is a broken contract, and a
// reconciler that never returns (runtime.Goexit) gave no answer: both are
// taken as "cannot tell".
func (c *call) askReconciler(ctx context.Context) (*http.Response, error) {
	type answer struct {
		resp   *http.Response
		err    error
		panicV any
		panics bool
	}
	q := c.reconcileQuery(ctx)
	done := make(chan answer, 1)
	go func() {
		var a answer
		returned := false
		defer func() {
			if q.Request.Body != nil {
				q.Request.Body.Close()
			}
			switch v := recover(); {
			case v != nil:
				a = answer{panicV: v, panics: true}
			case !returned:
				a = answer{err: errors.New("grantretry: the reconciler exited without answering")}
			}
			done <- a
		}()
		a.resp, a.err = c.pol.reconciler(ctx, q)
		returned = true
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		go func() { // the answer comes too late: release what it holds
			if late := <-done; late.resp != nil {
				drain(late.resp.Body)
			}
		}()
		return nil, fmt.Errorf("grantretry: the reconciler did not answer before the call ended: %w", context.Cause(ctx))
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
func (c *call) reconcileQuery(ctx context.Context) ReconcileQuery {
	req := c.base.Clone(ctx)
	req.Body, req.GetBody = nil, nil
	switch {
	case c.p.empty():
	case !c.p.replayable():
		// Streamed once, and spent: nothing here can be read, so nothing
		// says it can. A length without a body would fail the request
		// if the reconciler sent it on.
		req.ContentLength = 0
	default:
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
		FirstAttempt:   c.firstAttempt(),
	}
}

// firstAttempt is when the call's submission began: the letter's first
// attempt for a redelivery that names it (WithFirstAttempt), else this
// call's.
func (c *call) firstAttempt() time.Time {
	if m := redeliveryOf(c.req.Context()); m != nil && !m.firstAttempt.IsZero() {
		return m.firstAttempt
	}
	return c.start
}

// settle asks the reconciler until it can tell, waiting between questions
// as for a transient failure, within the call's budget and deadline. It
// returns the funder's response when it has the submission, nil when the
// request must be sent again, or the cause of the call's end.
func (c *call) settle() (*http.Response, error) {
	for {
		resp, told := c.reconcile(c.callCtx())
		if resp != nil || told {
			return resp, nil
		}
		if cerr := c.callerErr(); cerr != nil {
			c.out.Disposition, c.out.StopReason = Canceled, StopCanceled
			return nil, cerr
		}
		wait := fullJitter(c.pol.rand, c.budget.spent, c.pol.base, c.pol.cap)
		if ok, _ := c.budget.check(c.t.clock.Now(), wait, false); !ok || c.callCtx().Err() != nil {
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
	return c.askOnce(a)
}

// followsAmbiguous reports whether the answer being judged tells of an
// earlier attempt that may have been applied: an ambiguous attempt of the
// call (whatever a reconciler answered about it since), or, for the
// redelivery of an ambiguous letter (WithLetter, WithReconcileFirst), the
// letter's last attempt, when the request carries the letter's key. A
// question asked before the first attempt of a redelivery is no attempt
// of the call: it makes the call follow nothing ambiguous.
func (c *call) followsAmbiguous() bool {
	if c.anyAmbig {
		return true
	}
	m := redeliveryOf(c.req.Context())
	return m != nil && m.ambiguous && m.key == c.out.IdempotencyKey
}

// askAlreadyApplied asks the reconciler once, without waiting, for the
// funder's record of a call that ends [StopAlreadyApplied], when there is
// one to ask, the call is keyed and its deadline has not passed (askOnce
// skips the question then). It returns that record, after discarding the
// attempt's response, or nil: the funder does not have it, the reconciler
// cannot tell, or it was not asked, and the answer that says it was
// applied is the caller's, the call still succeeded.
func (c *call) askAlreadyApplied(a sentAttempt) *http.Response {
	if c.out.StopReason != StopAlreadyApplied || c.pol.reconciler == nil ||
		c.out.IdempotencyKey == "" || c.callerErr() != nil {
		return nil
	}
	return c.askOnce(a)
}

// askOnce asks the reconciler once, without waiting, at the end of the
// call whose last attempt is a, and returns the funder's response if it
// has the submission, after discarding the attempt's.
func (c *call) askOnce(a sentAttempt) *http.Response {
	// The call is held from here on, as it is while a response is judged:
	// its deadline, passing now, would cut the reconciler's response on
	// its way to the caller. The question gets a deadline of its own, the
	// call's as the Clock tells it, on a timer that stops once the
	// reconciler has answered: its response is the caller's to read, as
	// any returned response is, with no deadline on it. Its context lives
	// as long as the call, since that response may be read under it.
	left := c.budget.deadline.Sub(c.t.clock.Now())
	if left <= 0 || !c.hold(c.callCtx()) || c.callCtx().Err() != nil {
		return nil
	}
	ctx, cancel := context.WithCancelCause(c.callCtx())
	timer := time.AfterFunc(left, func() { cancel(errCallDeadline) })
	// A reconciler's panic goes on up (see askReconciler): the attempt's
	// response, held for the caller, is released first, with the
	// question's context.
	answered := false
	defer func() {
		if answered {
			return
		}
		timer.Stop()
		cancel(nil)
		if a.resp != nil {
			closeResp(a.resp)
		}
		a.stop(true)
	}()
	resp, _ := c.reconcile(ctx)
	answered = true
	timer.Stop()
	if resp == nil {
		cancel(nil)
		return nil
	}
	c.askCancel = func() { cancel(nil) }
	if a.resp != nil {
		drain(a.resp.Body) // still held: no timer fires on the reconciler's answer
	}
	a.stop(true)
	return resp
}

// finishReconciled hands the reconciler's response to the caller: the call
// succeeded, by the funder's own record.
func (c *call) finishReconciled(resp *http.Response) (*http.Response, error) {
	c.out.Disposition, c.out.StopReason = Succeeded, StopReconciled
	return c.finishRecord(resp)
}

// finishRecord hands the reconciler's response to the caller, the
// disposition and stop reason already set.
func (c *call) finishRecord(resp *http.Response) (*http.Response, error) {
	c.out.Status = resp.StatusCode
	c.hold(c.callCtx())
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
		errText = capText(c.scrub(err))
	}
	if werr := c.audit(level, MsgReconcile, []zapcore.Field{
		zap.Inline(c.shared(nil)),
		zap.Int(FieldAttempt, c.out.Attempts),
		zap.String(FieldVerdict, verdict),
		zap.Int(FieldStatus, status),
		zap.String(FieldError, errText),
		zap.Duration(FieldLatency, latency),
	}); werr != nil {
		c.trailFailed(werr)
	}
}
