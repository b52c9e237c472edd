package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/durable"
	"github.com/grantretry/grantretry/internal/sendtrace"
)

// sendingExt names the mark of a letter whose redelivery is in flight,
// <ID>.sending beside <ID>.json. It does not end in ".json", so List never
// takes it for a letter, and no letter's file can have its name.
const sendingExt = ".sending"

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
//     file <ID>.sending beside it, which holds when the send began. Until
//     the mark is gone, Get and List report the letter Ambiguous: a
//     process killed mid-send leaves it so, and the next Redeliver of it
//     first writes that into the letter (Ambiguous, and, for a letter that
//     had no FirstAttempt, the mark's time), then removes the mark.
//   - A redelivery that fails (an error, or an answer of 400 or more that
//     did not deliver the letter) is
//     written into the letter before the mark is removed: its attempts are
//     added to the letter's, its last status or error and its verdict
//     replace the letter's, it becomes Ambiguous if any of its attempts
//     may have been applied (by the Transport's rule, or, through a client
//     that gives no outcome, whenever the error or the status does not
//     say it was not), and a letter that had no FirstAttempt gets the
//     redelivery's start. The redelivery's word on when the funder takes
//     it replaces the letter's NotBefore; its DueBy stays, and a
//     redelivery the Transport judged late ([grantretry.Outcome].Late)
//     makes the letter Late. The file is replaced whole, atomically; its
//     body and key never change. A redelivery that sent nothing leaves
//     the letter's attempts, status and ambiguity as they were: a letter
//     refused, a reconciler that could not tell, a context done before
//     the send set out, a client whose error matches
//     [grantretry.ErrNotSent], or one whose [http.Transport] asked for a
//     connection and never got one. But a Transport's word on it still
//     counts: a call its host's quota held ([grantretry.StopOwedLater]
//     with nothing sent) gives the letter the host's NotBefore, when it
//     has one, so that it is not due before then, and a call judged late
//     (a breaker open after the letter's DueBy) makes it Late.
//   - A redelivery that delivered the letter (see Delivered: answered
//     1xx-3xx, found at the funder by the reconciler, or ended
//     [grantretry.Succeeded] by the Transport, as one answered that the
//     ambiguous letter was already applied is) leaves the letter waiting
//     and in flight:
//     the caller records it with MarkRedelivered, which moves the letter
//     and removes the mark. Until then it is Ambiguous, which it is: the
//     funder has it.
//
// One letter is never sent by two calls at once: while a call of d is
// redelivering it, another call of d is refused, sending nothing, with an
// error matching ErrInFlight; and the mark is created exclusively, so of
// two processes that mark it at once, one is refused so. But a mark found
// when a call begins is taken for a killed sender's, so, as for
// MarkRedelivered, one process redelivers from a directory at a time.
//
// Pace and policy are the caller's, as for [Redeliver]: client's
// Transport (its grantretry options, WithBudget among them) decides the
// retries and deadline of each letter's call, and the caller decides how
// many letters it sends, how fast and how many at once.
//
// As with [http.Client.Do], a non-nil error comes with no response: the
// body of an answer that could not be written into the letter is closed.
// Every error starts "grantretry:" and names the letter. The letter is
// refused, with nothing written or sent, if it was retired (ErrRetired),
// as Redeliver refuses it (a late
// letter with ErrLate unless ctx comes from SendLate, one not yet due with
// ErrNotYet unless it comes from SendEarly), and if
// d was opened with OpenReadOnly (fs.ErrPermission).
func (d *Dir) Redeliver(ctx context.Context, client *http.Client, id string, reconcile grantretry.ReconcileFunc) (*http.Response, error) {
	if err := validateLetterID(id); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("%w: letter %s not sent: nil *deadletter.Dir", grantretry.ErrInvalidRequest, id)
	}
	if err := d.writable(); err != nil {
		return nil, fmt.Errorf("grantretry: letter %s not sent: %w", id, err)
	}
	if !d.claim(id) {
		return nil, fmt.Errorf("%w: letter %s not sent: another call is redelivering it", ErrInFlight, id)
	}
	defer d.unclaim(id)
	if err := d.retiredErr(id, " not sent"); err != nil {
		return nil, err
	}
	resp, err := d.redeliver(ctx, client, id, reconcile)
	if err != nil && resp != nil {
		drainClose(resp)
		resp = nil
	}
	return resp, err
}

// redeliver is Redeliver once the letter is claimed in this process.
func (d *Dir) redeliver(ctx context.Context, client *http.Client, id string, reconcile grantretry.ReconcileFunc) (*http.Response, error) {
	l, err := d.settleMark(id)
	if err != nil {
		return nil, err
	}
	if err := refuse(ctx, client, l, reconcile); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("grantretry: letter %s not sent: %w", id, err)
	}
	start := time.Now().UTC()
	if err := d.markSending(id, start); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: letter %s not sent: another process marked it in flight", ErrInFlight, id)
		}
		return nil, fmt.Errorf("grantretry: letter %s not sent: it could not be marked in flight: %w", id, err)
	}
	tr := new(sendtrace.Trace)
	resp, err := Redeliver(httptrace.WithClientTrace(ctx, tr.ClientTrace()), client, l, reconcile)
	if err == nil && Delivered(resp) {
		return resp, nil // the funder has it: MarkRedelivered ends the mark
	}
	if errors.As(err, new(*url.Error)) && !errors.Is(err, ErrNotReconciled) {
		err = fmt.Errorf("grantretry: letter %s: %w", id, err) // the client's own error, which knows no letter
	}
	sent := whatWasSent(resp, err, tr.NothingSent(client))
	if rerr := d.recordFailure(l, start, resp, err, sent); rerr != nil {
		what := "the failed redelivery"
		if err == nil {
			what = fmt.Sprintf("its redelivery was answered %d, which", resp.StatusCode)
		}
		err = errors.Join(err, fmt.Errorf("grantretry: letter %s: %s could not be recorded in it, and it stays marked in flight: %w", id, what, rerr))
	}
	return resp, err
}

// claim takes id for a call of d, false if another call has it.
func (d *Dir) claim(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sending[id] {
		return false
	}
	if d.sending == nil {
		d.sending = map[string]bool{}
	}
	d.sending[id] = true
	return true
}

func (d *Dir) unclaim(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.sending, id)
}

// drainClose reads a little of a discarded response's body, so that its
// connection can be reused, and closes it.
func drainClose(resp *http.Response) {
	if resp.Body != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

// settleMark reads the letter id and, if an earlier sender left it marked
// in flight (one killed mid-send, or one whose letter the funder has and
// that was not marked redelivered), writes the ambiguity into the letter
// itself, with the mark's time as its FirstAttempt if it had none, then
// removes the mark, so that a new one can be taken exclusively and no
// later step can lose what the old one said.
func (d *Dir) settleMark(id string) (*grantretry.Letter, error) {
	l, err := readLetter(d.dir, id)
	if err != nil {
		return nil, err
	}
	since, marked := d.readMark(id)
	if !marked {
		return l, nil
	}
	if !l.Ambiguous || (l.FirstAttempt.IsZero() && !since.IsZero()) {
		l.Ambiguous = true
		if l.FirstAttempt.IsZero() {
			l.FirstAttempt = since
		}
		l.Version = grantretry.LetterVersion
		if err := d.replaceLetter(l); err != nil {
			return nil, fmt.Errorf("grantretry: letter %s not sent: it is marked in flight, and could not be marked ambiguous: %w", id, err)
		}
	}
	if err := d.unmarkSending(id); err != nil {
		return nil, fmt.Errorf("grantretry: letter %s not sent: its earlier in-flight mark could not be removed: %w", id, err)
	}
	return l, nil
}

// refuse returns the error of a letter Redeliver would send nothing for,
// before anything is sent: a bad letter, a nil client or context, a late
// letter, a letter not yet due, or an ambiguous letter without a
// reconciler.
func refuse(ctx context.Context, client *http.Client, l *grantretry.Letter, reconcile grantretry.ReconcileFunc) error {
	if _, err := NewRedeliveryRequest(ctx, l); err != nil {
		return err
	}
	if client == nil {
		return fmt.Errorf("grantretry: letter %s: nil *http.Client: %w", l.ID, grantretry.ErrInvalidRequest)
	}
	if err := late(ctx, l, time.Now()); err != nil {
		return err
	}
	if err := notYet(ctx, l, time.Now()); err != nil {
		return err
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
// at start did, resp and err being what Redeliver returned and sent what
// whatWasSent read of them, then removes the letter's mark.
func (d *Dir) recordFailure(l *grantretry.Letter, start time.Time, resp *http.Response, err error, sent sendResult) error {
	if sent.sent {
		l.Attempts += max(sent.out.Attempts, 1)
		l.Ambiguous = l.Ambiguous || sent.mayHave
		if l.FirstAttempt.IsZero() {
			l.FirstAttempt = start
		}
		l.LastAttempt = time.Now().UTC()
		l.LastStatus, l.LastError = 0, ""
		switch {
		case resp != nil:
			l.LastStatus = resp.StatusCode
		case err != nil:
			l.LastError = sendtrace.CapError(err.Error())
		}
		if sent.known && sent.out.Reason != "" {
			l.Reason = sent.out.Reason
		}
		if sent.known {
			// The funder's latest word on when it takes the request
			// replaces the letter's: a time if it owes it for later
			// again, none if it does not.
			l.NotBefore = time.Time{}
			if sent.out.StopReason == grantretry.StopOwedLater {
				l.NotBefore = sent.out.NotBefore
			}
			// A redelivery under the letter's closing time that is
			// late makes the letter late; one in time leaves it as
			// it was, and the DueBy stays.
			l.Late = l.Late || sent.out.Late
		}
		l.Version = grantretry.LetterVersion
		if werr := d.replaceLetter(l); werr != nil {
			return werr
		}
	} else if sent.known && heldOrLate(l, sent.out) {
		if werr := d.replaceLetter(l); werr != nil {
			return werr
		}
	}
	return d.unmarkSending(l.ID)
}

// heldOrLate writes into l what a redelivery that sent nothing still
// says of it, and reports whether that changed l: a host in quota that
// held it gives the funder's newest time, when it has one, as its
// NotBefore, and one judged late (a breaker open past its closing time,
// a hold that ends after it) makes it Late.
func heldOrLate(l *grantretry.Letter, out grantretry.Outcome) bool {
	changed := false
	if out.StopReason == grantretry.StopOwedLater && !out.NotBefore.IsZero() && !out.NotBefore.Equal(l.NotBefore) {
		l.NotBefore = out.NotBefore
		changed = true
	}
	if out.Late && !l.Late {
		l.Late = true
		changed = true
	}
	if changed {
		l.Version = grantretry.LetterVersion
	}
	return changed
}

// sendResult is what a failed redelivery did: whether any request may
// have left (sent), and whether any may have been applied (mayHave). out
// is the redelivering Transport's outcome, when known says there was one.
type sendResult struct {
	sent, mayHave bool
	out           grantretry.Outcome
	known         bool
}

// whatWasSent reads what a failed redelivery did from what Redeliver
// returned; nothingSent says the client's trace shows no request left.
func whatWasSent(resp *http.Response, err error, nothingSent bool) sendResult {
	if resp != nil {
		out, known := grantretry.OutcomeOf(resp)
		if known {
			return sendResult{sent: out.Attempts > 0, mayHave: out.Ambiguous, out: out, known: true}
		}
		return sendResult{sent: true, mayHave: sendtrace.AmbiguousStatus(resp.StatusCode)}
	}
	if errors.Is(err, ErrBadLetter) || errors.Is(err, ErrNotReconciled) || errors.Is(err, ErrAmbiguous) || errors.Is(err, ErrLate) || errors.Is(err, ErrNotYet) {
		return sendResult{}
	}
	var ge *grantretry.Error
	if errors.As(err, &ge) {
		return sendResult{sent: ge.Attempts > 0, mayHave: ge.Attempts > 0 && ge.Ambiguous, out: ge.Outcome, known: true}
	}
	if errors.Is(err, grantretry.ErrInvalidRequest) || errors.Is(err, grantretry.ErrNotSent) || nothingSent {
		return sendResult{}
	}
	return sendResult{sent: true, mayHave: true} // a client that says nothing: it may have been applied
}

func (d *Dir) sendingPath(id string) string { return filepath.Join(d.dir, id+sendingExt) }

// markSending writes id's mark, durably, before its letter is sent. It
// never replaces a mark: if id has one, the error matches fs.ErrExist.
func (d *Dir) markSending(id string, since time.Time) error {
	data, err := json.Marshal(sendingMark{Since: since})
	if err != nil {
		return err
	}
	return d.writeFile(d.dir, id+sendingExt, append(data, '\n'), d.publishNew)
}

// readMark reports whether id is marked in flight and, if the mark can be
// read, since when.
func (d *Dir) readMark(id string) (since time.Time, marked bool) {
	data, err := readFileLimited(d.sendingPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, false
	}
	var m sendingMark
	if err == nil && json.Unmarshal(data, &m) == nil {
		since = m.Since.UTC()
	}
	return since, true
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

// ErrInFlight matches the error of a Dir.Redeliver refused because the
// letter's redelivery is already in flight, from another call of the same
// Dir or another process: nothing was sent.
var ErrInFlight = errors.New("grantretry: the letter's redelivery is already in flight")
