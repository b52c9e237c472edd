package grantretry

import (
	"context"
	"time"
)

// Reasons a call stopped retrying, as they appear in Outcome.StopReason and
// the stop_reason audit field.
const (
	StopSuccess         = "success"                     // a 1xx-3xx response
	StopTerminal        = "terminal"                    // the last verdict was terminal
	StopRetriesSpent    = "retries_exhausted"           // maxRetries retries were spent
	StopDeadline        = "deadline"                    // the next wait would end at or after the deadline
	StopRetryAfter      = "retry_after_beyond_deadline" // found in older letters only: a call whose Retry-After ends past the deadline stops StopOwedLater
	StopOwedLater       = "owed_later"                  // the funder will take the request later: an Owed verdict, or a Retry-After past the deadline (Outcome.NotBefore says when, if known)
	StopNotReplayable   = "body_not_replayable"         // the body could not be sent twice
	StopNotIdempotent   = "not_idempotent"              // a non-idempotent method without an Idempotency-Key
	StopCircuitOpen     = "circuit_open"                // the host's breaker refused the attempt
	StopThrottled       = "retry_throttled"             // the host's retry throttle refused the retry
	StopCanceled        = "canceled"                    // the caller's context ended
	StopInvalidRequest  = "invalid_request"             // the request was refused before any attempt
	StopBodyReadFailure = "body_read_failed"            // the request body failed while it was buffered
	StopAuditTrail      = "audit_trail_failed"          // the audit trail could not record the call, so it was not sent
	StopReconciled      = "reconciled"                  // the reconciler said the funder has the submission
	StopAlreadyApplied  = "already_applied"             // the funder answered that an earlier, ambiguous attempt of the call or of its dead letter was applied (Classification.Applied): a success
	StopUnreconciled    = "reconcile_unanswered"        // the last attempt was ambiguous, and the reconciler never told whether the funder has it
	StopInvalidOption   = "invalid_option"              // the Transport was built with an invalid option (see Transport.Err), or the call given one (WithCallOptions), so nothing was sent
)

// callBudget is the retry budget of one logical call. It belongs to one
// RoundTrip and is never shared, so it needs no lock.
type callBudget struct {
	maxRetries int
	spent      int
	deadline   time.Time // on the Transport's Clock
}

// newCallBudget starts a budget at now, ending at now+deadline or at ctx's
// deadline, whichever is earlier. ctx's deadline is real time; it is moved
// onto the Clock by how far away it is.
func newCallBudget(ctx context.Context, now time.Time, maxRetries int, deadline time.Duration) callBudget {
	end := now.Add(deadline)
	if d, ok := ctx.Deadline(); ok {
		if ctxEnd := now.Add(time.Until(d)); ctxEnd.Before(end) {
			end = ctxEnd
		}
	}
	return callBudget{maxRetries: maxRetries, deadline: end}
}

// check says whether one more retry after wait is in budget at now, and if
// not, why. A wait that would end at or after the deadline is refused before
// it starts: a worker never sleeps for an attempt it will not make.
func (b *callBudget) check(now time.Time, wait time.Duration, fromRetryAfter bool) (ok bool, stop string) {
	if b.spent >= b.maxRetries {
		return false, StopRetriesSpent
	}
	if wait >= b.deadline.Sub(now) { // Sub saturates where Add would overflow
		if fromRetryAfter {
			return false, StopOwedLater
		}
		return false, StopDeadline
	}
	return true, ""
}

// spend records one retry.
func (b *callBudget) spend() { b.spent++ }
