package operator

import (
	"context"
	"errors"
	"net/http"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// Store is where dead letters wait, as the operator's commands see them:
// a directory (deadletter.Dir, DirStore) or the fleet's table
// (fleet.Letters, in the fleet's tool). Listing, selecting, redelivering,
// retiring and the summary are written once, over a Store, so that both
// tools do and say the same.
type Store interface {
	// Where names where the letters wait, as the commands' lines say it:
	// "in /srv/letters", "in the database".
	Where() string

	// Waiting returns every letter waiting: neither redelivered nor
	// retired. An error about letters that could not be read comes with
	// the others, which are still returned.
	Waiting(ctx context.Context) ([]*grantretry.Letter, error)

	// Find returns the letter id in whatever state it is in: waiting
	// (Redelivery and Retirement nil), redelivered (Redelivery set) or
	// retired (Retirement set). The error matches fs.ErrNotExist when
	// there is no such letter.
	Find(ctx context.Context, id string) (Found, error)

	// Send redelivers the waiting letter l through client, with reconcile
	// asked first about an ambiguous letter (nil: an ambiguous keyed
	// letter is not sent, and the error matches deadletter.ErrAmbiguous),
	// and records the result in the store: a letter delivered
	// (deadletter.Delivered) leaves the waiting set with a record of its
	// answer, whose Note ends with note; any other stays waiting with what
	// the send did written into it (attempts, last answer, ambiguous, a new
	// not_before, late).
	//
	// A letter the funder answered comes back with a nil error and
	// Sent.Record.Status set, delivered or not; if the answer could not
	// be recorded, with Sent.Record.Status set and an error, which
	// matches ErrNotRecorded if the answer delivered it. A letter not
	// sent, or sent and not answered, comes back with an error naming it
	// that matches deadletter.ErrAmbiguous, ErrNotYet or ErrLate (nothing
	// sent), ErrElsewhere (another process or worker holds it, or it left
	// the waiting set since it was listed: nothing sent),
	// grantretry.ErrNotSent (the store failed before sending), or is the
	// redelivering Transport's *grantretry.Error, or the client's. The
	// options of ctx (deadletter.SendEarly, SendLate) are honoured.
	// Sent.Letter is the letter as the store holds it after the send,
	// when it is still waiting.
	Send(ctx context.Context, l *grantretry.Letter, client *http.Client, reconcile grantretry.ReconcileFunc, note string) (Sent, error)

	// Retire retires the waiting letter id with reason, as
	// deadletter.Dir.RetireWith and fleet.Letters.RetireWith do. The
	// error matches fs.ErrNotExist when no such letter waits, with a
	// message that says whether it was redelivered or retired already.
	Retire(ctx context.Context, id, reason string, o deadletter.RetireOptions) (*deadletter.Retirement, error)
}

// Found is a letter and the record of where it went, if it left the
// waiting set.
type Found struct {
	Letter     *grantretry.Letter
	Redelivery *deadletter.Redelivery // redelivered
	Retirement *deadletter.Retirement // retired
}

// Sent is what a Store's Send of a letter the funder answered did.
type Sent struct {
	// Record is the funder's answer and the redelivering Transport's
	// outcome, with the notes of a reconciled or already applied letter.
	Record deadletter.Redelivery
	// Delivered says the letter left the waiting set: the funder has it.
	Delivered bool
	// Letter is the letter as the store now holds it, when it still
	// waits: what the send wrote into it (ambiguous, not_before, late).
	Letter *grantretry.Letter
}

// ErrElsewhere matches the error of a Send that did not send a letter
// because it is another's: another process or worker is sending it, holds
// its lease, or redelivered or retired it since it was listed.
var ErrElsewhere = errors.New("grantretry: the letter is another's: another process or worker holds it, or it left the waiting set")

// ErrRefused matches the error of a Send under LeaveRefused that did not
// send its letter because the funder refused it (deadletter.Refused)
// since it was listed: nothing was sent, and Sent.Letter is the letter as
// it waits.
var ErrRefused = errors.New("grantretry: the funder refused the letter since it was listed")

// ErrNotRecorded matches the error of a Send whose letter the funder took
// (Sent.Record says how it answered) but which could not be recorded as
// redelivered: the letter stays waiting, ambiguous, though the funder has
// it.
var ErrNotRecorded = errors.New("grantretry: the funder has the letter, but it could not be recorded as redelivered")

// leaveRefusedKey is the context key of LeaveRefused.
type leaveRefusedKey struct{}

// LeaveRefused returns ctx for the Send of a letter chosen from a listing
// (-all, -submission) that leaves refused letters: the Store reads the
// letter again once it holds it (the directory's hold, the fleet's
// claim), and, if the funder refused it since it was listed, sends
// nothing and returns an error matching ErrRefused.
func LeaveRefused(ctx context.Context) context.Context {
	return context.WithValue(ctx, leaveRefusedKey{}, true)
}

// LeavesRefused reports whether ctx comes from LeaveRefused.
func LeavesRefused(ctx context.Context) bool {
	b, _ := ctx.Value(leaveRefusedKey{}).(bool)
	return b
}

// refusedError is a Send's error about a letter left because the funder
// refused it since it was listed: it matches ErrRefused.
type refusedError struct{ l *grantretry.Letter }

// RefusedSinceListed is the error of a Send under LeaveRefused that left
// l, refused since it was listed: it names l and matches ErrRefused.
func RefusedSinceListed(l *grantretry.Letter) error { return refusedError{l} }

func (e refusedError) Error() string {
	return "grantretry: " + LetterName(e.l) + " not sent: the funder refused it since it was listed: last answered " + LastAnswer(e.l)
}

func (e refusedError) Is(target error) bool { return target == ErrRefused }

// notRecordedError is a Send's error about a letter the funder took that
// could not be recorded: it matches ErrNotRecorded and what it wraps.
type notRecordedError struct{ err error }

// NotRecorded wraps err, the error of recording a letter the funder took,
// so that it matches ErrNotRecorded.
func NotRecorded(err error) error { return notRecordedError{err} }

func (e notRecordedError) Error() string        { return e.err.Error() }
func (e notRecordedError) Unwrap() error        { return e.err }
func (e notRecordedError) Is(target error) bool { return target == ErrNotRecorded }
