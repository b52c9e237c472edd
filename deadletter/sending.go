package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/durable"
)

// sendingExt names the mark of a letter whose redelivery is in flight,
// <ID>.sending beside <ID>.json. It does not end in ".json", so List never
// takes it for a letter, and no letter's file can have its name.
const sendingExt = ".sending"

// maxLastError bounds the error text a redelivery leaves in a letter.
const maxLastError = 1024

// sendingMark is what a mark file holds: when the send began, for the
// operator who finds one.
type sendingMark struct {
	Since time.Time `json:"since"`
}

// Redeliver sends the waiting letter id again with the package's
// Redeliver, under the same rules (reconcile, TrustKey, ErrAmbiguous), and
// keeps the directory true to what the funder may have received, so that
// a letter that may have reached the funder is never sent again as if it
// had not:
//
//   - Before anything is sent, the letter is marked in flight, durably: a
//     file <ID>.sending beside it. Until the mark is gone, Get and List
//     report the letter Ambiguous: a process killed mid-send leaves it so,
//     and the next Redeliver of it first writes that into the letter.
//   - A redelivery that fails (an error, or an answer of 400 or more) is
//     written into the letter before the mark is removed: its attempts are
//     added to the letter's, its last status or error and its verdict
//     replace the letter's, it becomes Ambiguous if any of its attempts
//     may have been applied (by the Transport's rule, or, through a client
//     that gives no outcome, whenever the error or the status does not
//     say it was not), and a letter that had no FirstAttempt gets the
//     redelivery's start. The file is replaced whole, atomically; its
//     body and key never change. A redelivery that sent nothing (a letter
//     refused, a reconciler that could not tell) leaves the letter as it
//     was.
//   - A redelivery answered 1xx-3xx, or that the reconciler says the
//     funder has (Reconciled), leaves the letter waiting and in flight:
//     the caller records it with MarkRedelivered, which moves the letter
//     and removes the mark. Until then it is Ambiguous, which it is: the
//     funder has it.
//
// The letter is refused, with nothing written or sent, as Redeliver
// refuses it, and if d was opened with OpenReadOnly (fs.ErrPermission).
// Like MarkRedelivered, it assumes one redelivering process per directory.
func (d *Dir) Redeliver(ctx context.Context, client *http.Client, id string, reconcile grantretry.ReconcileFunc) (*http.Response, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil *deadletter.Dir", grantretry.ErrInvalidRequest)
	}
	if err := validateLetterID(id); err != nil {
		return nil, err
	}
	if err := d.writable(); err != nil {
		return nil, fmt.Errorf("grantretry: letter %s not sent: %w", id, err)
	}
	l, err := d.settleMark(id)
	if err != nil {
		return nil, err
	}
	if err := refuse(ctx, client, l, reconcile); err != nil {
		return nil, err
	}
	start := time.Now().UTC()
	if err := d.markSending(id, start); err != nil {
		return nil, fmt.Errorf("grantretry: letter %s not sent: it could not be marked in flight: %w", id, err)
	}
	resp, err := Redeliver(ctx, client, l, reconcile)
	if err == nil && (resp.StatusCode < 400 || Reconciled(resp)) {
		return resp, nil // the funder has it: MarkRedelivered ends the mark
	}
	if rerr := d.recordFailure(l, start, resp, err); rerr != nil {
		err = errors.Join(err, fmt.Errorf("grantretry: letter %s: the failed redelivery could not be recorded in it, and it stays marked in flight: %w", id, rerr))
	}
	return resp, err
}

// settleMark reads the letter id and, if an earlier sender left it marked
// in flight, writes the ambiguity into the letter itself before anything
// else happens to it, so that no later step (one that sends nothing and
// removes the mark) can lose it.
func (d *Dir) settleMark(id string) (*grantretry.Letter, error) {
	l, err := readLetter(d.dir, id)
	if err != nil || l.Ambiguous || !d.inFlight(id) {
		return l, err
	}
	l.Ambiguous = true
	l.Version = grantretry.LetterVersion
	if err := d.replaceLetter(l); err != nil {
		return nil, fmt.Errorf("grantretry: letter %s not sent: it is marked in flight, and could not be marked ambiguous: %w", id, err)
	}
	return l, nil
}

// refuse returns the error of a letter Redeliver would send nothing for,
// before anything is sent: a bad letter, a nil client or context, or an
// ambiguous letter without a reconciler.
func refuse(ctx context.Context, client *http.Client, l *grantretry.Letter, reconcile grantretry.ReconcileFunc) error {
	if _, err := NewRedeliveryRequest(ctx, l); err != nil {
		return err
	}
	if client == nil {
		return fmt.Errorf("grantretry: letter %s: nil *http.Client: %w", l.ID, grantretry.ErrInvalidRequest)
	}
	if reconcile == nil && l.Ambiguous && l.IdempotencyKey != "" {
		return ambiguousError(l)
	}
	return nil
}

func ambiguousError(l *grantretry.Letter) error {
	return fmt.Errorf("%w: letter %s was not sent: ask the funder first (a ReconcileFunc), or pass TrustKey if it honours Idempotency-Key", ErrAmbiguous, l.ID)
}

// recordFailure writes into l's file what the failed redelivery that began
// at start did, resp and err being what Redeliver returned, then removes
// the letter's mark.
func (d *Dir) recordFailure(l *grantretry.Letter, start time.Time, resp *http.Response, err error) error {
	sent, mayHave, out, known := whatWasSent(resp, err)
	if sent {
		l.Attempts += max(out.Attempts, 1)
		l.Ambiguous = l.Ambiguous || mayHave
		if l.FirstAttempt.IsZero() {
			l.FirstAttempt = start
		}
		l.LastAttempt = time.Now().UTC()
		l.LastStatus, l.LastError = 0, ""
		switch {
		case resp != nil:
			l.LastStatus = resp.StatusCode
		case err != nil:
			l.LastError = capError(err.Error())
		}
		if known && out.Reason != "" {
			l.Reason = out.Reason
		}
		l.Version = grantretry.LetterVersion
		if werr := d.replaceLetter(l); werr != nil {
			return werr
		}
	}
	return d.unmarkSending(l.ID)
}

// whatWasSent reads what a failed redelivery did: whether any request may
// have left, and whether any may have been applied. out is the redelivering
// Transport's outcome, when known says there was one.
func whatWasSent(resp *http.Response, err error) (sent, mayHave bool, out grantretry.Outcome, known bool) {
	if resp != nil {
		out, known = grantretry.OutcomeOf(resp)
		if known {
			return out.Attempts > 0, out.Ambiguous, out, true
		}
		return true, ambiguousStatus(resp.StatusCode), out, false
	}
	if errors.Is(err, ErrBadLetter) || errors.Is(err, ErrNotReconciled) || errors.Is(err, ErrAmbiguous) {
		return false, false, out, false
	}
	var ge *grantretry.Error
	if errors.As(err, &ge) {
		return ge.Attempts > 0, ge.Attempts > 0 && ge.Ambiguous, ge.Outcome, true
	}
	if errors.Is(err, grantretry.ErrInvalidRequest) {
		return false, false, out, false
	}
	return true, true, out, false // a client that says nothing: it may have been applied
}

// ambiguousStatus is the Transport's rule for an answer from a client that
// gives no Outcome: a 5xx but 501 and 503 may have been applied.
func ambiguousStatus(status int) bool {
	return status >= 500 && status != http.StatusNotImplemented && status != http.StatusServiceUnavailable
}

func capError(s string) string {
	if len(s) > maxLastError {
		return s[:maxLastError-3] + "..."
	}
	return s
}

func (d *Dir) sendingPath(id string) string { return filepath.Join(d.dir, id+sendingExt) }

// markSending writes id's mark, durably, before its letter is sent.
func (d *Dir) markSending(id string, since time.Time) error {
	data, err := json.Marshal(sendingMark{Since: since})
	if err != nil {
		return err
	}
	return d.writeFile(d.dir, id+sendingExt, append(data, '\n'), os.Rename)
}

// unmarkSending removes id's mark, durably; a mark already gone is no
// error.
func (d *Dir) unmarkSending(id string) error {
	if err := os.Remove(d.sendingPath(id)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return durable.SyncDir(d.dir)
}

// inFlight reports whether id's letter is marked in flight.
func (d *Dir) inFlight(id string) bool {
	_, err := os.Lstat(d.sendingPath(id))
	return err == nil
}

// replaceLetter writes l over its waiting letter file, whole and
// atomically, and refuses if the letter is no longer waiting (marked
// redelivered meanwhile).
func (d *Dir) replaceLetter(l *grantretry.Letter) error {
	if err := validateLetter(l); err != nil {
		return err
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Lstat(filepath.Join(d.dir, l.ID+letterExt)); err != nil {
		return err
	}
	return d.writeFile(d.dir, l.ID+letterExt, append(data, '\n'), os.Rename)
}
