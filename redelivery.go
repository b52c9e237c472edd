package grantretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// A redelivery is a dead letter sent again. Its context says so
// (WithRedelivery, WithRedeliveryOf, WithFirstAttempt, WithLetter,
// WithReconcileFirst),
// and a Transport then puts it on the record: its audit lines name the
// letter (FieldRedelivers), its metrics and span count it, its questions
// to a reconciler carry the letter's first attempt, and it may ask the
// funder, before its first attempt, whether the letter's work is done.

// redeliveryKey is the context key of a *redeliveryMark.
type redeliveryKey struct{}

// redeliveryMark is what a redelivery's context says of it. It is never
// modified once in a context: each With function makes a new one.
type redeliveryMark struct {
	letterID string // the letter sent again, "" if not named
	// ask, when set, is asked before the first attempt about the letter's
	// last attempt (attempt, status, err); invalid says WithReconcileFirst
	// was given a nil letter or function.
	ask             ReconcileFunc
	attempt, status int
	err             error
	firstAttempt    time.Time // the letter's FirstAttempt
	invalid         bool
	// ambiguous says the letter's last attempt may have been applied
	// (WithLetter, WithReconcileFirst): an answer to a request that
	// carries the letter's key, key, that says it was applied tells of it.
	ambiguous bool
	key       string
}

// redeliveryOf returns ctx's mark, nil if ctx is not a redelivery's.
func redeliveryOf(ctx context.Context) *redeliveryMark {
	m, _ := ctx.Value(redeliveryKey{}).(*redeliveryMark)
	return m
}

// withMark returns ctx carrying a copy of its mark, changed by set.
func withMark(ctx context.Context, set func(*redeliveryMark)) context.Context {
	m := new(redeliveryMark)
	if old := redeliveryOf(ctx); old != nil {
		*m = *old
	}
	set(m)
	return context.WithValue(ctx, redeliveryKey{}, m)
}

// WithRedeliveryOf marks ctx as the context of the dead letter letterID
// sent again, and implies WithRedelivery. A Transport that audits the call
// writes letterID in FieldRedelivers on each of its attempt, reconcile and
// disposition lines, so that the audit trail ties the redelivery to the
// call that left the letter. [WithLetter], which
// deadletter.NewRedeliveryRequest sets, does the same.
func WithRedeliveryOf(ctx context.Context, letterID string) context.Context {
	return withMark(ctx, func(m *redeliveryMark) { m.letterID = letterID })
}

// WithFirstAttempt marks ctx as the context of a submission whose first
// attempt began at t, in an earlier call: the dead letter's
// ([Letter].FirstAttempt) that this call sends again. Every question a
// [Transport] then asks its reconciler about the call carries t in
// [ReconcileQuery].FirstAttempt, not the call's own start, so that a
// funder that dates what it records tells the submission's record from an
// earlier one under the same title. Like WithRedeliveryOf, it implies
// WithRedelivery; a zero t changes nothing. [WithLetter], which
// deadletter.NewRedeliveryRequest sets, does the same, so the mark
// reaches a Transport wherever it sits in the client's chain of
// RoundTrippers.
func WithFirstAttempt(ctx context.Context, t time.Time) context.Context {
	if t.IsZero() {
		return ctx
	}
	return withMark(ctx, func(m *redeliveryMark) { m.firstAttempt = t })
}

// WithLetter marks ctx as the context of the dead letter l sent again: it
// does what WithRedeliveryOf(ctx, l.ID) and WithFirstAttempt(ctx,
// l.FirstAttempt) do, and records whether l's last attempt may have been
// applied ([Letter].Ambiguous) and its key. A [Transport] that sends the
// redelivery of an ambiguous letter, a request whose Idempotency-Key is the
// letter's [Letter].IdempotencyKey (none, for a letter that has none), takes
// an answer whose verdict says the request was applied
// ([Classification.Applied]) as the funder's word that the letter's work is
// done: the call ends [Succeeded] with [StopAlreadyApplied], as a call does
// whose own earlier attempt was ambiguous. For a letter that is not
// ambiguous, or a request under ctx with another key, that answer is a
// refusal, as on any first attempt. A nil
// l names no letter, and leaves ctx as it is, as a zero time leaves
// WithFirstAttempt's. deadletter.NewRedeliveryRequest sets it.
func WithLetter(ctx context.Context, l *Letter) context.Context {
	if l == nil {
		return ctx
	}
	return withMark(ctx, func(m *redeliveryMark) {
		m.letterID, m.ambiguous, m.key = l.ID, l.Ambiguous, l.IdempotencyKey
		if !l.FirstAttempt.IsZero() {
			m.firstAttempt = l.FirstAttempt
		}
	})
}

// WithReconcileFirst marks ctx as the context of the dead letter l sent
// again, as WithRedeliveryOf(ctx, l.ID) does, and makes a Transport ask
// fn, before the call's first attempt, whether the funder already has the
// letter's submission: the query describes the letter's last attempt
// (Attempt, Status and Err are l.Attempts, l.LastStatus and l.LastError).
// It is asked as the Transport asks its own reconciler (see
// WithReconciler), and on its audit trail: if the funder has the
// submission, nothing is sent and the call ends Succeeded
// (StopReconciled) after 0 attempts with fn's response; if it has not,
// the request is sent, and fn is asked again should an attempt of it be
// ambiguous; if fn cannot tell, it is asked again within the call's
// budget and deadline, and the call ends DeadLetter (StopUnreconciled)
// with nothing sent. Only a request that carries its own Idempotency-Key
// header is asked about, as the request of deadletter.NewRedeliveryRequest
// for a keyed letter does; any other is sent without the question. Such a
// request under a nil l or fn fails with ErrInvalidRequest, sending
// nothing. deadletter.Redeliver uses it for a client whose Transport is a
// *Transport.
func WithReconcileFirst(ctx context.Context, l *Letter, fn ReconcileFunc) context.Context {
	return withMark(ctx, func(m *redeliveryMark) {
		if l == nil || fn == nil {
			m.invalid = true
			return
		}
		m.letterID, m.ask, m.attempt, m.status, m.err = l.ID, fn, l.Attempts, l.LastStatus, nil
		m.ambiguous, m.key = l.Ambiguous, l.IdempotencyKey
		if !l.FirstAttempt.IsZero() {
			m.firstAttempt = l.FirstAttempt
		}
		if l.LastError != "" {
			m.err = errors.New(l.LastError)
		}
	})
}

// reconcileFirst asks, before the first attempt of a redelivery under
// WithReconcileFirst, whether the funder already has the letter's
// submission. done says the call has ended, with resp and err; otherwise
// the call goes on to its first attempt. Only a request that carries its
// own Idempotency-Key, as a redelivery does, costs a context lookup here:
// one without a key, or with the key the Transport derived (a pipeline's
// usual POST), costs none.
func (c *call) reconcileFirst() (done bool, resp *http.Response, err error) {
	if c.out.IdempotencyKey == "" || c.p.key != "" {
		return false, nil, nil
	}
	m := redeliveryOf(c.req.Context())
	switch {
	case m == nil:
		return false, nil, nil
	case m.invalid:
		c.out.Disposition, c.out.StopReason = FailedTerminal, StopInvalidRequest
		return true, nil, c.finishErr(fmt.Errorf("%w: WithReconcileFirst with a nil letter or a nil ReconcileFunc", ErrInvalidRequest))
	case m.ask == nil:
		return false, nil, nil
	}
	// The letter's reconciler is the call's for every question, the ones
	// after an ambiguous attempt of the redelivery too.
	pol := *c.pol
	ask := m.ask
	pol.reconciler = func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
		if q.Attempt == 0 { // the question before the first attempt: about the letter's last
			q.Attempt, q.Status, q.Err = m.attempt, m.status, m.err
			// The submission began with the letter's call; a letter
			// with no first attempt was never sent, so zero.
			q.FirstAttempt = m.firstAttempt
		}
		// A later question keeps the query's own: the letter's first
		// attempt, or, for a letter that has none, this call's start.
		return ask(ctx, q)
	}
	c.pol = &pol
	c.out.Ambiguous = true // the letter's last attempt is, until the funder tells
	resp, err = c.settle()
	switch {
	case resp != nil:
		resp, err = c.finishReconciled(resp)
		return true, resp, err
	case err != nil && c.out.StopReason == StopUnreconciled:
		err = fmt.Errorf("grantretry: dead letter %s: its last attempt may have been applied, and the funder was never asked successfully whether it was, so nothing was sent: ask again later", m.letterID)
		return true, nil, c.finishErr(err)
	case err != nil:
		return true, nil, c.finishErr(err)
	}
	return false, nil, nil
}
