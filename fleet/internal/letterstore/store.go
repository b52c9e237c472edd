// Package letterstore is the fleet's letters (fleet.Letters, in
// PostgreSQL) as the operator's commands see them: an operator.Store, so
// that grantretry-fleet lists, redelivers and retires them with the same
// core, and the same words, as grantretry does a directory's.
package letterstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/jackc/pgx/v5"
)

// New returns the letters of l as an operator.Store whose sends claim
// each letter, one at a time, as worker.
func New(l *fleet.Letters, worker string) operator.Store {
	return &store{l: l, worker: worker}
}

type store struct {
	l      *fleet.Letters
	worker string
}

func (s *store) Where() string { return "in the database" }

func (s *store) Waiting(ctx context.Context) ([]*grantretry.Letter, error) {
	return s.l.List(ctx)
}

// Find returns the letter id with the record of its redelivery or its
// retirement, if it left the waiting set.
func (s *store) Find(ctx context.Context, id string) (operator.Found, error) {
	l, rec, err := s.l.Get(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return operator.Found{}, noSuchLetter(id, "", err)
	}
	if err != nil {
		return operator.Found{}, err
	}
	if rec != nil {
		return operator.Found{Letter: l, Redelivery: rec}, nil
	}
	r, err := s.l.Retirement(ctx, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return operator.Found{Letter: l}, nil // waiting
	case err != nil:
		return operator.Found{}, err
	}
	return operator.Found{Letter: r.Letter, Retirement: r}, nil
}

// Send claims the letter l as the store's worker and redelivers it with
// fleet.Letters.Redeliver, which records what the send did.
func (s *store) Send(ctx context.Context, l *grantretry.Letter, client *http.Client, reconcile grantretry.ReconcileFunc, note string) (operator.Sent, error) {
	if l == nil {
		return operator.Sent{}, fmt.Errorf("%w: fleet: nil letter", grantretry.ErrInvalidRequest)
	}
	claims, err := s.l.ClaimIDs(ctx, s.worker, []string{l.ID})
	if err != nil {
		return operator.Sent{}, &notSentError{fmt.Errorf("grantretry: fleet: letter %s not sent: %w", l.ID, err)}
	}
	if len(claims) == 0 {
		return operator.Sent{}, s.notClaimed(ctx, l.ID)
	}
	c := claims[0]
	if operator.LeavesRefused(ctx) && deadletter.Refused(c.Letter) {
		// Refused since it was listed: the claim's letter is the
		// database's. Nothing was sent under the claim, so its release
		// leaves the letter as it was, not ambiguous.
		// A release that fails leaves the claim to its lease's end.
		err := s.l.Release(context.WithoutCancel(ctx), c)
		return operator.Sent{Letter: c.Letter}, errors.Join(operator.RefusedSinceListed(c.Letter), err)
	}
	rec, err := s.l.Redeliver(fleet.NoteRedelivery(ctx, note), c, client, reconcile)
	if err == nil {
		return operator.Sent{Record: rec, Delivered: true}, nil
	}
	sent := operator.Sent{Record: rec, Letter: s.reread(ctx, c)}
	switch {
	case rec.Status == 0 && sentNothing(err) && errors.Is(err, fleet.ErrLeaseLost):
		// Nothing was sent (the claim could not be confirmed before the
		// send), and the letter is another worker's. A send that may
		// have reached the funder and then lost its lease, or its
		// letter, is the send's failure, and its error says so.
		return sent, &elsewhereError{err: err}
	case rec.Status == 0:
		// Nothing sent because the database failed before the send
		// matches grantretry.ErrNotSent; any other is the send's error.
		return sent, err
	case delivered(rec):
		// The funder has it, but the letter could not be marked
		// redelivered: it stays waiting, ambiguous when the next claim
		// finds it.
		return sent, operator.NotRecorded(fmt.Errorf("grantretry: fleet: letter %s was delivered (%s), but could not be marked redelivered: %w",
			l.ID, operator.Answer(rec), err))
	}
	// Answered and not delivered: what Redeliver wrote into the letter
	// is in sent.Letter. Only a release that failed besides is an error,
	// which comes with the answer (Sent.Record.Status).
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 1 {
		return sent, fmt.Errorf("grantretry: fleet: letter %s was answered %d, which could not be recorded in it: %w",
			l.ID, rec.Status, errors.Join(j.Unwrap()[1:]...))
	}
	return sent, nil
}

// sentNothing reports whether err, a fleet.Letters.Redeliver's, says that
// nothing of the letter was sent: it matches grantretry.ErrNotSent (the
// claim could not be confirmed before the send, or the database failed
// then), and no attempt of a Transport's call left.
func sentNothing(err error) bool {
	var gerr *grantretry.Error
	return errors.Is(err, grantretry.ErrNotSent) && !(errors.As(err, &gerr) && gerr.Attempts > 0)
}

// delivered reports whether rec is the record of a redelivery that
// delivered the letter (deadletter.Delivered): answered 1xx-3xx, found
// at the funder by the reconciler, or ended Succeeded by the Transport.
func delivered(rec deadletter.Redelivery) bool {
	return rec.Status > 0 && (rec.Status < 400 || rec.Disposition == grantretry.Succeeded)
}

// reread returns c's letter as the database holds it after the send, or,
// if it cannot be read, as the release left it in c.
func (s *store) reread(ctx context.Context, c *fleet.Claim) *grantretry.Letter {
	l, rec, err := s.l.Get(context.WithoutCancel(ctx), c.Letter.ID)
	if err != nil || rec != nil {
		return c.Letter
	}
	return l
}

// notClaimed says why the letter id, listed as waiting, could not be
// claimed; the error matches operator.ErrElsewhere.
func (s *store) notClaimed(ctx context.Context, id string) error {
	f, err := s.Find(ctx, id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &elsewhereError{err: fmt.Errorf("grantretry: fleet: letter %s not sent: it is no longer in the database: %w", id, err)}
	case err != nil:
		return &notSentError{fmt.Errorf("grantretry: fleet: letter %s not sent: it could not be claimed, nor read: %w", id, err)}
	case f.Redelivery != nil:
		return &elsewhereError{err: fmt.Errorf("grantretry: fleet: letter %s not sent: it was redelivered since it was listed, %s",
			id, strings.TrimPrefix(operator.LetterState(f.Redelivery), "redelivered "))}
	case f.Retirement != nil:
		return &elsewhereError{err: fmt.Errorf("grantretry: fleet: letter %s not sent: it was retired since it was listed, at %s by %s: %s",
			id, f.Retirement.RetiredAt.UTC().Format(time.RFC3339), f.Retirement.RetiredBy, f.Retirement.Reason)}
	}
	return &elsewhereError{err: fmt.Errorf("grantretry: fleet: letter %s not sent: another worker holds its lease", id)}
}

// Retire retires the waiting letter id with fleet.Letters.RetireWith.
func (s *store) Retire(ctx context.Context, id, reason string, o deadletter.RetireOptions) (*deadletter.Retirement, error) {
	r, err := s.l.RetireWith(ctx, id, reason, o)
	switch {
	case err == nil, r != nil:
		return r, err // r != nil: retired, and its audit line failed
	case errors.Is(err, pgx.ErrNoRows):
		return nil, noSuchLetter(id, " not retired", err)
	case errors.Is(err, deadletter.ErrRetired):
		return nil, &notWaitingError{err: err}
	case errors.Is(err, grantretry.ErrInvalidRequest), errors.Is(err, deadletter.ErrInFlight):
		return nil, err
	}
	// Redelivered, say: the error says so, and it waits no more.
	if _, rec, gerr := s.l.Get(ctx, id); gerr == nil && rec != nil {
		return nil, &notWaitingError{err: err}
	}
	return nil, err
}

// noSuchLetter is the error about a letter id the database does not have,
// what being what was not done (" not retired"); it matches
// fs.ErrNotExist, and pgx.ErrNoRows through err.
func noSuchLetter(id, what string, err error) error {
	return &notWaitingError{
		msg: fmt.Sprintf("grantretry: fleet: letter %s%s: there is no such letter in the database", id, what),
		err: err,
	}
}

// notWaitingError is the error about a letter that does not wait: none
// such, or one redelivered or retired. It matches fs.ErrNotExist, and
// says what err says unless msg says it.
type notWaitingError struct {
	msg string
	err error
}

func (e *notWaitingError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.err.Error()
}

func (e *notWaitingError) Unwrap() error { return e.err }

func (e *notWaitingError) Is(target error) bool { return target == fs.ErrNotExist }

// notSentError is the error of a send that sent nothing because the
// database failed (the letter could not be claimed, nor read): it says
// what err says, and matches grantretry.ErrNotSent, which the operator's
// core counts as a letter not sent.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }

func (e *notSentError) Unwrap() error { return e.err }

func (e *notSentError) Is(target error) bool { return target == grantretry.ErrNotSent }

// elsewhereError is the error of a send that sent nothing because the
// letter is another's: it says what err says, and matches
// operator.ErrElsewhere.
type elsewhereError struct{ err error }

func (e *elsewhereError) Error() string { return e.err.Error() }

func (e *elsewhereError) Unwrap() error { return e.err }

func (e *elsewhereError) Is(target error) bool { return target == operator.ErrElsewhere }
