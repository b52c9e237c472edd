package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// DirStore is the Store of a dead letter directory, as "grantretry
// deadletter" works on it.
type DirStore struct{ Dir *deadletter.Dir }

var _ Store = DirStore{}

// DirNote is the note of a letter DirStore delivers for "grantretry
// deadletter redeliver", whose redeliveries are on the audit trail path.
func DirNote(trail string) string {
	return "grantretry deadletter redeliver, on the audit trail " + trail
}

// Where is "in DIR".
func (s DirStore) Where() string { return "in " + s.Dir.Path() }

// Waiting is the directory's List.
func (s DirStore) Waiting(context.Context) ([]*grantretry.Letter, error) {
	return s.Dir.List()
}

// Find looks for a waiting letter, then a retired one, then a redelivered
// one.
func (s DirStore) Find(_ context.Context, id string) (Found, error) {
	l, err := s.Dir.Get(id)
	if err == nil {
		return Found{Letter: l}, nil
	}
	if errors.Is(err, deadletter.ErrRetired) {
		r, rerr := s.Dir.Retirement(id)
		if rerr != nil {
			return Found{}, rerr
		}
		return Found{Letter: r.Letter, Retirement: r}, nil
	}
	if errors.Is(err, deadletter.ErrBadLetter) {
		// A letter that does not read, or an id that no letter can have
		// (Redelivered refuses it too, before it looks).
		if _, _, rerr := s.Dir.Redelivered(id); errors.Is(rerr, deadletter.ErrBadLetter) {
			return Found{}, noSuchID{err, s.Where()}
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Found{}, err
	}
	l, rec, err := s.Dir.Redelivered(id)
	switch {
	case errors.Is(err, fs.ErrNotExist) && l == nil:
		return Found{}, missing("letter " + id + ": not " + s.Where() + ", nor redelivered, nor retired")
	case err != nil:
		return Found{}, err
	}
	return Found{Letter: l, Redelivery: rec}, nil
}

// elsewhereError is a Send's error about a letter that is another's: it
// matches ErrElsewhere and what it wraps.
type elsewhereError struct{ err error }

func (e elsewhereError) Error() string        { return e.err.Error() }
func (e elsewhereError) Unwrap() error        { return e.err }
func (e elsewhereError) Is(target error) bool { return target == ErrElsewhere }

// Send redelivers l with the directory's Redeliver and, if it was
// delivered, marks it redelivered with the record of its answer
// (RedeliveryRecord) and note. A letter another call or process is
// sending (deadletter.ErrInFlight), or that left the waiting set since it
// was listed, comes back with an error matching ErrElsewhere.
func (s DirStore) Send(ctx context.Context, l *grantretry.Letter, client *http.Client, reconcile grantretry.ReconcileFunc, note string) (Sent, error) {
	// The Dir lets go of a letter when Redeliver returns, and a delivered
	// one stays marked in flight until MarkRedelivered: a worker that
	// began on it in between would take the mark for a killed sender's.
	// So a letter is held from before its send until it is recorded.
	key := sendKey{s.Dir, l.ID}
	if _, busy := sending.LoadOrStore(key, true); busy {
		return Sent{}, elsewhereError{fmt.Errorf("%w: letter %s not sent: another worker is redelivering it", deadletter.ErrInFlight, l.ID)}
	}
	defer sending.Delete(key)
	if LeavesRefused(ctx) {
		// Chosen from a listing: another run may have had it refused
		// since.
		cur, err := s.Dir.Get(l.ID)
		if err == nil && deadletter.Refused(cur) {
			return Sent{Letter: cur}, RefusedSinceListed(cur)
		}
	}
	resp, err := s.Dir.Redeliver(ctx, client, l.ID, reconcile)
	if errors.Is(err, deadletter.ErrInFlight) || errors.Is(err, fs.ErrNotExist) {
		return Sent{}, elsewhereError{err}
	}
	if err != nil {
		return Sent{Letter: s.still(l.ID)}, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	rec := RedeliveryRecord(resp, note)
	if !deadletter.Delivered(resp) {
		return Sent{Record: rec, Letter: s.still(l.ID)}, nil
	}
	rec.Time = time.Now().UTC()
	if err := s.Dir.MarkRedelivered(l.ID, rec); err != nil {
		return Sent{Record: rec, Letter: s.still(l.ID)}, NotRecorded(fmt.Errorf("%s was %s, but could not be marked redelivered, and is marked in flight (ambiguous): %w", LetterName(l), Answer(rec), err))
	}
	return Sent{Record: rec, Delivered: true}, nil
}

// sending holds the letters a DirStore is sending, by directory and ID,
// from before the send until its result is recorded.
var sending sync.Map

type sendKey struct {
	d  *deadletter.Dir
	id string
}

// still is the letter id as it waits, nil if it does not.
func (s DirStore) still(id string) *grantretry.Letter {
	l, err := s.Dir.Get(id)
	if err != nil {
		return nil
	}
	return l
}

// Retire is the directory's RetireWith; a letter that is not waiting is
// said to be redelivered already, or not there at all.
func (s DirStore) Retire(_ context.Context, id, reason string, o deadletter.RetireOptions) (*deadletter.Retirement, error) {
	r, err := s.Dir.RetireWith(id, reason, o)
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, deadletter.ErrRetired) {
		if _, rec, rerr := s.Dir.Redelivered(id); rerr == nil && rec != nil {
			return nil, missing("it was redelivered already; its record is in " + filepath.Join(s.Dir.Path(), deadletter.RedeliveredDir))
		}
		return nil, missing("there is no such letter waiting " + s.Where())
	}
	return r, err
}

// missing is the error about a letter that is not there; it matches
// fs.ErrNotExist.
type missing string

func (e missing) Error() string        { return string(e) }
func (e missing) Is(target error) bool { return target == fs.ErrNotExist }

// noSuchID is the error about an id that no letter can have: err, the
// directory's word on it, which it wraps; it matches fs.ErrNotExist.
type noSuchID struct {
	err   error
	where string
}

func (e noSuchID) Error() string        { return e.err.Error() + ", so there is no such letter " + e.where }
func (e noSuchID) Unwrap() error        { return e.err }
func (e noSuchID) Is(target error) bool { return target == fs.ErrNotExist }
