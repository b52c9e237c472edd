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
	// Sent.Record.Status set, delivered or not. A letter not sent, or
	// sent and not answered, comes back with an error naming it that
	// matches deadletter.ErrAmbiguous, ErrNotYet or ErrLate (nothing
	// sent), ErrElsewhere (another process or worker holds it, or it left
	// the waiting set since it was listed: nothing sent), or is the
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
