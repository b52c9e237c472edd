package grantretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Disposition is how a logical call ended. Every call ends with exactly one,
// written to the audit trail and carried by its Outcome.
type Disposition string

// The dispositions.
const (
	// Succeeded: a 1xx-3xx response was obtained, or the funder has the
	// work by its record ([StopReconciled]) or by its own answer to a
	// resend after an ambiguous attempt ([StopAlreadyApplied], whose
	// status may be 400 or more).
	Succeeded Disposition = "succeeded"
	// FailedTerminal: the funder or the transport answered with something a
	// retry cannot fix (a 4xx in the terminal set, an unknown status, a
	// certificate failure), or the request was refused before any attempt.
	FailedTerminal Disposition = "failed_terminal"
	// DeadLetter: the failure was transient but the call cannot go on (the
	// retry budget, the deadline, a Retry-After past the deadline, or a
	// request that is not safe to repeat), or the Transport was built with
	// an invalid option and sent nothing. The work is still owed.
	DeadLetter Disposition = "dead_letter"
	// CircuitOpen: the host's circuit breaker refused the attempt.
	CircuitOpen Disposition = "circuit_open"
	// Canceled: the caller's own context was cancelled or passed its
	// deadline.
	Canceled Disposition = "canceled"
)

// Outcome describes one logical call: every attempt made for one RoundTrip.
type Outcome struct {
	Disposition    Disposition
	Attempts       int    // attempts sent to the inner transport
	CorrelationID  string // X-Correlation-ID of every attempt
	IdempotencyKey string // Idempotency-Key of every attempt, "" if none
	SubmissionID   string // from WithSubmissionID, "" if none
	// Reason is the verdict on the last attempt, in Classification.Reason
	// form ("transient:503", "transport:reset"), or "" if none was made.
	Reason string
	// StopReason says why the call stopped: one of the Stop* constants.
	StopReason string
	// Status is the status of the response returned: the last attempt's,
	// or the reconciler's when it answered with the funder's record
	// (reconciled, or already applied); 0 if none was obtained.
	Status  int
	Elapsed time.Duration // from the first attempt to the disposition
	// Reconciles counts the questions asked of the reconciler (see
	// WithReconciler): before a resend, before giving up, and once an
	// answer says an earlier attempt was applied. Ambiguous says the last
	// attempt may have been applied by the funder without its answer
	// saying so (see WithReconciler for which attempts are).
	Reconciles int
	Ambiguous  bool
	// Late says the call ended owed (DeadLetter or CircuitOpen: the work is
	// still owed) under a closing time ([WithClosingTime]) that it missed:
	// its NotBefore is after the closing time, or it ended, on the
	// Transport's [Clock] (its budget spent), after the closing time. A call
	// that ends Succeeded, FailedTerminal or Canceled is never late, nor
	// is one made without a closing time. The call's dead letter keeps it
	// ([Letter].Late), and is not redelivered without an explicit choice
	// (deadletter.SendLate).
	Late bool
	// DeadLetterID is the ID of the Letter kept for this call (see
	// WithDeadLetter), "" if none was kept. A letter a sink kept only in
	// its fallback has its ID here too, and RecordErr says where it is.
	// A redelivery (WithRedeliveryOf) still owed keeps no letter of its
	// own: this is the ID of the letter it sent again, which still holds
	// the work.
	DeadLetterID string
	// RecordErr is non-nil when the call could not be recorded as promised:
	// the audit trail (WithAuditTrail) or the dead-letter sink
	// (WithDeadLetter) failed. The disposition stands, since the attempts
	// were made; it is the record of them that is missing. It matches
	// ErrAuditTrail when the trail failed.
	RecordErr error
	// NotBefore is when the funder said it will take the request again,
	// for a call that ended with StopOwedLater: the later of the verdict's
	// [Classification.NotBefore] and the end of the wait its Retry-After
	// asked for, on the Transport's [Clock], and never before that Clock's
	// now. Zero when the funder did not say, and for every other stop
	// reason. The call's dead letter keeps it (Letter.NotBefore), and is
	// not redelivered before it.
	NotBefore time.Time
}

// Sentinel errors, for errors.Is.
var (
	// ErrCircuitOpen matches every error of a call that ended CircuitOpen
	// without a response. A call whose own failure opened the breaker
	// returns that response, with a nil error, and OutcomeOf says
	// CircuitOpen.
	ErrCircuitOpen = errors.New("grantretry: circuit open")
	// ErrDeadLetter matches every error of a call that ended DeadLetter
	// without a response.
	ErrDeadLetter = errors.New("grantretry: dead letter")
	// ErrInvalidRequest matches a request refused before any attempt: a nil
	// URL, an unsupported scheme, a header or trailer with CR or LF, a
	// method that is not an RFC 9110 token, a bad submission id.
	ErrInvalidRequest = errors.New("grantretry: invalid request")
	// ErrInvalidOption matches the error of every call through a Transport
	// built with an invalid option, and the error its Err returns.
	ErrInvalidOption = errors.New("grantretry: invalid option")
)

// Error is the error RoundTrip returns when a call obtained no response to
// return. Its Outcome says how the call ended; Unwrap gives the last cause,
// so errors.Is(err, context.Canceled) and the like work. It also matches
// ErrCircuitOpen or ErrDeadLetter by its disposition.
type Error struct {
	Outcome
	// Err is the last cause: the transport error of the last attempt, the
	// context's error, or why the request was refused.
	Err error
	// msg is the redacted message, built once.
	msg string
}

// Error returns the message: the disposition, the stop reason, the
// attempts and the cause, with no request header value and no run of the
// request body in it (see docs/secrets.md). It does not name the method or
// the URL: the *url.Error that http.Client wraps around it does, and the
// audit lines carry both. Unwrap gives the cause as the inner layer wrote
// it.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the last cause.
func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether a deadline ended the call: the caller's context
// deadline (http.Client.Timeout among them) or the Transport's own call
// deadline (WithBudget). With it, *Error satisfies net.Error's Timeout, so
// os.IsTimeout and *url.Error.Timeout agree whether http.Client hands back
// this error or its own timeout error.
func (e *Error) Timeout() bool {
	return errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, errCallDeadline)
}

// Is matches ErrCircuitOpen and ErrDeadLetter by disposition.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrCircuitOpen:
		return e.Disposition == CircuitOpen
	case ErrDeadLetter:
		return e.Disposition == DeadLetter
	}
	return false
}

// newError builds an *Error whose message says how the call ended, with
// the cause and the record's failure scrubbed of the request (scrub). It
// names neither the method nor the URL: http.Client, through which most
// calls come, wraps the error in a *url.Error that names both.
func newError(o Outcome, cause error, scrub func(error) string) *Error {
	var b strings.Builder
	b.WriteString("grantretry: ")
	b.WriteString(string(o.Disposition))
	if o.StopReason != "" && o.StopReason != string(o.Disposition) {
		b.WriteString(" (" + o.StopReason + ")")
	}
	fmt.Fprintf(&b, " after %d attempt", o.Attempts)
	if o.Attempts != 1 {
		b.WriteByte('s')
	}
	if cause != nil {
		b.WriteString(": ")
		b.WriteString(scrub(cause))
	}
	if o.RecordErr != nil {
		// scrubbed as it was recorded
		b.WriteString("; and the call was not recorded as promised: ")
		b.WriteString(o.RecordErr.Error())
	}
	return &Error{Outcome: o, Err: cause, msg: b.String()}
}

type outcomeKey struct{}

// outcomeCtx is the context every attempt of a call runs under: the
// caller's, carrying the call's outcome for OutcomeOf. The outcome is
// filled in once, when the call ends, before the response is handed to the
// caller. One type instead of context.WithValue and a holder saves an
// allocation on every call.
type outcomeCtx struct {
	context.Context
	o *Outcome // nil until the call has ended
}

func (c *outcomeCtx) Value(key any) any {
	if key == (outcomeKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// OutcomeOf returns the outcome of the call that produced resp, if resp came
// from a Transport. It reads it from resp.Request, the request the Transport
// sent, so it works through http.Client (timeouts and all) and redirects
// (the last hop's outcome).
func OutcomeOf(resp *http.Response) (Outcome, bool) {
	if resp == nil || resp.Request == nil {
		return Outcome{}, false
	}
	h, ok := resp.Request.Context().Value(outcomeKey{}).(*outcomeCtx)
	if !ok || h.o == nil {
		return Outcome{}, false
	}
	return *h.o, true
}
