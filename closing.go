package grantretry

import (
	"context"
	"time"
)

type closingTimeKey struct{}

// WithClosingTime returns a copy of ctx that carries t, the time by which
// the funder must have the submission of the call made with it: a
// programme's deadline. A [Transport] reads it from the request's context.
// It does not cut the call short (the retry policy and [WithBudget] do
// that), but a call that ends owed (DeadLetter or CircuitOpen) after t, or
// with an [Outcome.NotBefore] after t, is late: [Outcome.Late] says so, as
// do its dead letter ([Letter].DueBy and [Letter].Late), its audit line
// ([FieldLate], [FieldDueBy]) and the grantretry.calls.late counter. A late
// letter is not redelivered without an explicit choice (see
// deadletter.SendLate).
//
// A zero t gives a context without a closing time, whatever ctx carried.
func WithClosingTime(ctx context.Context, t time.Time) context.Context {
	if t.IsZero() {
		if _, ok := closingTime(ctx); !ok {
			return ctx
		}
	}
	return context.WithValue(ctx, closingTimeKey{}, t)
}

// closingTime returns the closing time ctx carries (WithClosingTime), if
// it carries one.
func closingTime(ctx context.Context) (time.Time, bool) {
	t, _ := ctx.Value(closingTimeKey{}).(time.Time)
	return t, !t.IsZero()
}

// judgeLate sets Outcome.Late for the ended call: work still owed under a
// closing time, that the funder will not take before it or that is still
// owed after it. It reads the Clock only for such a call.
func (c *call) judgeLate() {
	c.out.Late = false
	if !keepsLetter(c.out.Disposition) {
		return
	}
	due, ok := closingTime(c.req.Context())
	if !ok {
		return
	}
	c.out.Late = c.out.NotBefore.After(due) || c.t.clock.Now().After(due)
}
