package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/sendtrace"
	"github.com/jackc/pgx/v5"
)

// ErrLeaseLost matches the error of Done or Release on a claim whose lease
// ended and whose letter another worker then claimed (or finished), and
// the error of Redeliver when it could not confirm the claim before
// sending (nothing was sent) or cut the send because the lease was ending
// (the letter is then ambiguous: see Redeliver).
var ErrLeaseLost = errors.New("grantretry: fleet: the letter's lease was lost to another worker")

// errLeaseEnding is the cause of a send Redeliver cut because its lease
// was about to end.
var errLeaseEnding = errors.New("grantretry: fleet: the claim's lease was ending")

// cutError is the error of a send Redeliver cut at the end of its lease.
// It matches ErrLeaseLost and context.DeadlineExceeded, whichever of the
// two the client's error carries.
type cutError struct {
	id  string
	err error
}

func (e *cutError) Error() string {
	return fmt.Sprintf("grantretry: fleet: letter %s: its send was cut before its lease ended, so the funder may have it and the letter is now ambiguous: %v", e.id, e.err)
}

func (e *cutError) Unwrap() error { return e.err }

func (e *cutError) Is(target error) bool {
	return target == ErrLeaseLost || target == context.DeadlineExceeded
}

// lostError is the error of a claim found no longer this worker's: it
// names the letter, says what was not done, and matches ErrLeaseLost,
// and grantretry.ErrNotSent too when nothing was sent (notSent: the
// claim could not be confirmed before the send).
type lostError struct {
	id      string
	what    string // after the letter's id: ": its lease was lost to another worker"
	notSent bool
}

func (e *lostError) Error() string { return "grantretry: fleet: letter " + e.id + e.what }

func (e *lostError) Is(target error) bool {
	return target == ErrLeaseLost || (e.notSent && target == grantretry.ErrNotSent)
}

// notSentError is the error of a Redeliver that sent nothing because the
// database failed before the send: it says what err says, and matches
// grantretry.ErrNotSent and what err matches.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }

func (e *notSentError) Unwrap() error { return e.err }

func (e *notSentError) Is(target error) bool { return target == grantretry.ErrNotSent }

// errLost is a lostError for a Done or Release.
func errLost(id string) error {
	return &lostError{id: id, what: ": its lease was lost to another worker"}
}

// Claim is a letter a worker holds under a lease. Token fences it: a
// claim whose lease ended and was claimed again can no longer be Done.
type Claim struct {
	Letter *grantretry.Letter
	Worker string
	Until  time.Time // the lease's end, on the database's clock; Redeliver renews it
	Token  int64
	// InFlight says an earlier claim's send of this letter was in flight
	// when that claim ended (its lease ran out, or its worker died), so
	// the funder may have it: the letter is marked ambiguous
	// (Letter.Ambiguous) from then on, here and in the database.
	InFlight bool
}

// Claim leases up to n waiting letters that are due, oldest first, to
// worker: letters never claimed, or whose lease has ended, and whose
// NotBefore (the time the funder said it will take them) is not ahead on
// the database's clock; a letter not yet due waits until then. A late
// letter (it missed its closing time: deadletter.Late) is left too, unless
// ctx comes from deadletter.SendLate, the explicit choice to send late
// letters. Workers never wait for one
// another (FOR UPDATE SKIP LOCKED), and leases run on the database's
// clock, so workers' clocks need not agree. A letter whose earlier send
// was in flight when its claim ended comes back ambiguous (see
// Claim.InFlight). Claim only what is sent soon: Redeliver renews the
// lease as it sends, but a claim whose lease ended before Redeliver is
// called is lost, and nothing is sent for it.
func (s *Letters) Claim(ctx context.Context, worker string, n int) ([]*Claim, error) {
	rows, err := s.pool.Query(ctx, claimSQL(`state = 'waiting' AND (lease_until IS NULL OR lease_until < clock_timestamp())
			AND (not_before IS NULL OR not_before <= clock_timestamp())
			AND ($4 OR (NOT late AND (due_by IS NULL OR due_by >= clock_timestamp())))
			ORDER BY created, id LIMIT $3`), worker, s.cfg.lease, n, deadletter.SendsLate(ctx))
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: claim: %w", err)
	}
	return collectClaims(rows, worker)
}

// claimSQL is the statement that leases the letters which, with a
// claimable state and lease, meet where ($1 the worker, $2 the lease).
// A letter whose sending_since is still set was being sent when its
// claim ended: it is marked ambiguous (see sentLetterSQL) in the same
// statement, so that no later reader of the letter can miss it.
func claimSQL(where string) string {
	return `
		UPDATE grantretry_letters l SET claimed_by = $1,
			lease_until = clock_timestamp() + $2::interval, claims = l.claims + 1,
			letter = CASE WHEN l.sending_since IS NULL THEN l.letter
				ELSE ` + sentLetterSQL("l") + ` END,
			sending_since = NULL
		FROM (
			SELECT id, sending_since IS NOT NULL AS in_flight FROM grantretry_letters
			WHERE ` + where + `
			FOR UPDATE SKIP LOCKED) c
		WHERE l.id = c.id
		RETURNING l.letter, l.lease_until, l.claims, c.in_flight`
}

// sentLetterSQL is the letter of row (a table name or alias) as a send of
// it that may have reached the funder leaves it: ambiguous and, if it had
// no first attempt, dated by the send's start (sending_since), as
// Dir.Redeliver dates a letter, so that a reconciler asked about it later
// can tell this submission's record from an earlier one under the same
// title.
func sentLetterSQL(row string) string {
	return `jsonb_set(CASE WHEN coalesce(` + row + `.letter->>'first_attempt', '') IN ('', '0001-01-01T00:00:00Z')
				THEN jsonb_set(` + row + `.letter, '{first_attempt}', to_jsonb(` + row + `.sending_since))
				ELSE ` + row + `.letter END, '{ambiguous}', 'true')`
}

func collectClaims(rows pgx.Rows, worker string) ([]*Claim, error) {
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Claim, error) {
		c := &Claim{Letter: new(grantretry.Letter), Worker: worker}
		var data []byte
		if err := r.Scan(&data, &c.Until, &c.Token, &c.InFlight); err != nil {
			return nil, err
		}
		return c, json.Unmarshal(data, c.Letter)
	})
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: claim: %w", err)
	}
	return claims, nil
}

// ClaimIDs leases the letters named by ids to worker, those that wait and
// are not leased to another worker, due or not, late or not: Redeliver
// refuses one not yet due, unless its context comes from
// deadletter.SendEarly, and a late one (deadletter.Late), unless it comes
// from deadletter.SendLate, releasing it as it was. The others are left
// out of the result, as Claim leaves out what it cannot take.
func (s *Letters) ClaimIDs(ctx context.Context, worker string, ids []string) ([]*Claim, error) {
	rows, err := s.pool.Query(ctx, claimSQL(`id = ANY($3) AND state = 'waiting' AND (lease_until IS NULL OR lease_until < clock_timestamp())`),
		worker, s.cfg.lease, ids)
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: claim: %w", err)
	}
	return collectClaims(rows, worker)
}

// Done marks the claimed letter redelivered, with r as the record of it.
// The error matches ErrLeaseLost if the claim is no longer this worker's.
func (s *Letters) Done(ctx context.Context, c *Claim, r deadletter.Redelivery) error {
	r.ID = c.Letter.ID
	if r.Time.IsZero() {
		r.Time = s.cfg.now().UTC()
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE grantretry_letters SET state = 'redelivered', result = $4,
			redelivered_at = clock_timestamp(), lease_until = NULL, sending_since = NULL
		WHERE id = $1 AND claimed_by = $2 AND claims = $3 AND state = 'waiting'`,
		c.Letter.ID, c.Worker, c.Token, data)
	if err != nil {
		return fmt.Errorf("grantretry: fleet: letter %s: %w", c.Letter.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return errLost(c.Letter.ID)
	}
	return nil
}

// Release gives the claimed letter back at once, to be claimed again. If
// Redeliver set out to send it under this claim, the send's outcome is
// taken as unknown: the letter is marked ambiguous (Redeliver itself
// releases a letter it knows was not applied without marking it).
func (s *Letters) Release(ctx context.Context, c *Claim) error {
	return s.release(ctx, c, releasing{mayHave: true})
}

// releasing is what a release writes into the letter it gives back.
type releasing struct {
	// mayHave says a send of the letter under the claim may have reached
	// the funder, which marks the letter ambiguous and, if it had none,
	// gives it the send's start as its first attempt.
	mayHave bool
	// notBefore, when not nil, is the funder's new time for a letter it
	// owes for later again, or its host's quota holds: the letter's
	// not_before, and the column's, so that Claim leaves it until then.
	notBefore *time.Time
	// late says a send of it under the claim was late
	// (grantretry.Outcome.Late): the letter's late is set, and the
	// column's, so that Claim leaves it without the explicit choice.
	late bool
	// sent, when not nil, is what a send that reached the funder did,
	// written into the letter as deadletter.Dir.Redeliver writes it.
	sent *sentRecord
}

// sentRecord is what a redelivery that was not delivered, and sent at
// least one request, did: the attempts it adds to the letter's, its last
// status (0 for an error) or its error, its verdict (the redelivering
// Transport's Outcome.Reason, "" if it gave none) and, when the Transport
// gave its outcome (known), its word on when the funder takes the letter,
// which replaces the letter's: notBefore, or none.
type sentRecord struct {
	attempts  int
	status    int
	err       string
	reason    string
	known     bool
	notBefore time.Time
}

// patch is the JSON of the fields of r that replace the letter's, beside
// its attempts and dates, which the release's statement writes.
func (r *sentRecord) patch() ([]byte, error) {
	p := map[string]any{"last_status": r.status}
	if r.err != "" {
		p["last_error"] = sendtrace.CapError(r.err)
	}
	if r.reason != "" {
		p["reason"] = r.reason
	}
	return json.Marshal(p)
}

// release gives c's letter back with what rel says of it, fenced by the
// claim, and updates c.Letter to the letter as the database then holds
// it. A send that reached the funder (rel.sent) is written into the
// letter in the same statement, with the rules of deadletter.Dir's: its
// attempts are added, its last status or error and, when it has one, its
// verdict replace the letter's, its last attempt is now and its first the
// send's start if the letter had none, and the Transport's word on when
// the funder takes it replaces the letter's not_before.
func (s *Letters) release(ctx context.Context, c *Claim, rel releasing) error {
	notBefore, replace := rel.notBefore, false
	var attempts int
	patch := []byte("{}")
	if r := rel.sent; r != nil {
		attempts = max(r.attempts, 1)
		var err error
		if patch, err = r.patch(); err != nil {
			return fmt.Errorf("grantretry: fleet: letter %s: %w", c.Letter.ID, err)
		}
		if r.known {
			replace, notBefore = true, nil
			if !r.notBefore.IsZero() {
				notBefore = &r.notBefore
			}
		}
	}
	var data []byte
	err := s.pool.QueryRow(ctx, `
		UPDATE grantretry_letters SET lease_until = NULL, claimed_by = NULL,
			letter = (CASE WHEN ($4 OR $7 > 0) AND sending_since IS NOT NULL
					AND coalesce(letter->>'first_attempt', '') IN ('', '0001-01-01T00:00:00Z')
				THEN jsonb_set(letter, '{first_attempt}', to_jsonb(sending_since)) ELSE letter END
				- CASE WHEN $5::timestamptz IS NULL AND $9 THEN 'not_before' ELSE '' END
				- CASE WHEN $7 > 0 THEN 'last_error' ELSE '' END)
				|| CASE WHEN $5::timestamptz IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('not_before', $5::timestamptz) END
				|| CASE WHEN $4 AND sending_since IS NOT NULL THEN '{"ambiguous": true}'::jsonb ELSE '{}'::jsonb END
				|| CASE WHEN $6 THEN '{"late": true}'::jsonb ELSE '{}'::jsonb END
				|| CASE WHEN $7 > 0 THEN $8::jsonb || jsonb_build_object(
					'attempts', coalesce((letter->>'attempts')::int, 0) + $7,
					'last_attempt', clock_timestamp()) ELSE '{}'::jsonb END,
			not_before = CASE WHEN $9 THEN $5::timestamptz ELSE coalesce($5::timestamptz, not_before) END,
			late = late OR $6,
			sending_since = NULL
		WHERE id = $1 AND claimed_by = $2 AND claims = $3 AND state = 'waiting'
		RETURNING letter`,
		c.Letter.ID, c.Worker, c.Token, rel.mayHave, notBefore, rel.late, attempts, patch, replace).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return errLost(c.Letter.ID)
	}
	if err != nil {
		return fmt.Errorf("grantretry: fleet: letter %s: %w", c.Letter.ID, err)
	}
	l := new(grantretry.Letter)
	if err := json.Unmarshal(data, l); err != nil {
		return fmt.Errorf("grantretry: fleet: letter %s released, but its letter does not read back: %w", c.Letter.ID, err)
	}
	if notBefore != nil {
		l.NotBefore = *notBefore // as given: the database keeps microseconds
	}
	*c.Letter = *l
	return nil
}

// leaseGuard is the part of a lease a send may not use: Redeliver cuts
// the send that much before the lease ends, so that the request is off
// the wire before another worker can claim the letter.
func leaseGuard(lease time.Duration) time.Duration { return lease / 10 }

// confirm checks, on the database's clock and immediately before a send,
// that c still holds its letter (its worker, its token, a waiting letter,
// a lease not ended), renews the lease for a whole send, and marks the
// send as in flight, all in one statement. It returns ctx bounded to end
// leaseGuard before the renewed lease does.
func (s *Letters) confirm(ctx context.Context, c *Claim) (context.Context, context.CancelFunc, error) {
	// The send's bound is on the real clock, as context deadlines are;
	// taken before the statement, it can only end early, never late,
	// whatever the database's clock says.
	start := time.Now()
	var until time.Time
	err := s.pool.QueryRow(ctx, `
		UPDATE grantretry_letters SET sending_since = clock_timestamp(),
			lease_until = clock_timestamp() + $4::interval
		WHERE id = $1 AND claimed_by = $2 AND claims = $3 AND state = 'waiting'
			AND lease_until > clock_timestamp()
		RETURNING lease_until`,
		c.Letter.ID, c.Worker, c.Token, s.cfg.lease).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, &lostError{id: c.Letter.ID, notSent: true,
			what: " not sent: its claim could not be confirmed (the lease ended, or the letter is another worker's or redelivered)"}
	}
	if err != nil {
		return nil, nil, &notSentError{fmt.Errorf("grantretry: fleet: letter %s not sent: confirming its claim: %w", c.Letter.ID, err)}
	}
	c.Until = until
	sendCtx, cancel := context.WithDeadlineCause(ctx, start.Add(s.cfg.lease-leaseGuard(s.cfg.lease)), errLeaseEnding)
	return sendCtx, cancel, nil
}

// keepLease renews c's lease, on the database's clock, every third of a
// lease, while Redeliver finishes a send it confirmed: a Transport that
// holds the answer until its trail has committed it, the release or the
// Done that follows. Each renewal is fenced as confirm is (the claim's
// worker and token, the letter waiting) and by the send's mark
// (sending_since), which Done and the release clear, so none outlives
// them. It returns the function that stops the renewals, and waits for
// the one in flight. A worker that dies renews nothing, and the lease
// ends as if it were not renewed.
func (s *Letters) keepLease(c *Claim) (stop func()) {
	every := max(s.cfg.lease/3, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, every)
			// A renewal that fails is tried again at the next tick; the
			// lease holds meanwhile, until its end.
			_, _ = s.pool.Exec(rctx, `
				UPDATE grantretry_letters SET lease_until = clock_timestamp() + $4::interval
				WHERE id = $1 AND claimed_by = $2 AND claims = $3 AND state = 'waiting'
					AND sending_since IS NOT NULL`,
				c.Letter.ID, c.Worker, c.Token, s.cfg.lease)
			rcancel()
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// Redeliver sends the claimed letter again with deadletter.Redeliver, and
// the reconcile rule: an ambiguous letter is asked about first. A letter
// delivered (deadletter.Delivered: answered 1xx-3xx, found at the funder
// by the reconciler, or ended Succeeded by the redelivering grantretry
// Transport, as an ambiguous letter answered that it was already applied
// is, whatever the status: grantretry.StopAlreadyApplied) is marked Done;
// any other is released for a later try, and the error says why. The
// record's Note ends with the note of ctx (NoteRedelivery), if any. The
// response's body is closed.
//
// A redelivery that sent the letter and did not deliver it (an answer of
// 400 or more, the Transport's *grantretry.Error after its attempts, or
// the error of a client that gives no outcome, as one attempt, unless its
// trace shows that nothing left) is written into the letter as
// deadletter.Dir.Redeliver writes it, in the statement that releases it:
// its attempts are added to the
// letter's, its last status or error replace the letter's, and its
// verdict (the Transport's Outcome.Reason) too, so that a letter the
// funder refused is deadletter.Refused; the letter's LastAttempt is the
// redelivery's end, its FirstAttempt, if it had none, the redelivery's
// start, and the Transport's word on when the funder takes it replaces
// its NotBefore. A redelivery that sent nothing (the letter not yet due,
// late, ambiguous with no reconciler, held by its host's quota, a
// breaker open, or a client that never got a connection) leaves all of
// that as it was, and the letter not ambiguous.
//
// Pace and policy are the caller's. Redeliver makes one call, through client:
// the retries and the deadline of each letter's call are those of the
// client's grantretry Transport (grantretry.WithBudget), as are its
// breaker (WithBreaker) and its retry throttle (WithRetryThrottle); how
// many letters are sent at once, and how fast, is the caller's own pacing
// of its calls. The -rate, -budget, -deadline and -concurrency flags of
// grantretry-fleet's deadletter redeliver do exactly that.
//
// No letter is on the wire from two workers. Immediately before sending,
// Redeliver confirms the claim on the database's clock (its worker and
// token, the letter still waiting, the lease not ended) and renews the
// lease for the send, in the statement that marks the send in flight; if
// it cannot, it sends nothing and the error matches ErrLeaseLost and
// grantretry.ErrNotSent (as does the error of a database that failed
// before the send). The send is cut a tenth of the lease before the lease
// it had at that confirmation ends, so the lease (WithLease) must be
// longer than a send may last: the redelivering Transport's deadline
// (grantretry.DefaultDeadline, 45 s, within the default lease of a
// minute) plus a margin. From the confirmation until the letter is Done
// or released, Redeliver renews the lease every third of it, on the
// database's clock, fenced by the claim and the send's mark, so that a
// live worker never loses a letter it is still finishing: a Transport
// that holds the funder's answer until its trail has committed it, on the
// trail's own limit, keeps the letter from other workers meanwhile. A
// worker that dies renews nothing, and its lease then ends. A send that
// was cut, or whose worker died, may have reached the funder: the letter
// is then marked
// ambiguous, with that send's start as its FirstAttempt if it had none
// (as deadletter.Dir.Redeliver dates it, so that every later question
// about it carries the date), and the next claim of it says so
// (Claim.InFlight), so that
// it is sent again only after reconcile says the funder does not have it,
// or when reconcile is deadletter.TrustKey, the caller's word that the
// funder honours the key. With a nil reconcile an ambiguous letter is not
// sent: it is released, and the error matches deadletter.ErrAmbiguous.
// A letter not yet due (its NotBefore ahead) is not sent either, unless
// ctx comes from deadletter.SendEarly: it is released as it was, and the
// error matches deadletter.ErrNotYet. Nor is a late letter (it missed its
// closing time: deadletter.Late), unless ctx comes from
// deadletter.SendLate: it is released as it was, and the error matches
// deadletter.ErrLate. A redelivery the Transport judges late (its
// closing time is the letter's DueBy) makes the letter late, and one its
// host's quota holds (grantretry.StopOwedLater, nothing sent) gives the
// letter the host's NotBefore, when it has one, as one owed again does:
// Claim leaves it until then.
// The error of a cut send matches ErrLeaseLost and the context's error.
func (s *Letters) Redeliver(ctx context.Context, c *Claim, client *http.Client, reconcile grantretry.ReconcileFunc) (deadletter.Redelivery, error) {
	if c == nil || c.Letter == nil {
		return deadletter.Redelivery{}, fmt.Errorf("%w: fleet: nil claim", grantretry.ErrInvalidRequest)
	}
	sendCtx, cancel, err := s.confirm(ctx, c)
	if err != nil {
		return deadletter.Redelivery{}, err
	}
	defer cancel()
	defer s.keepLease(c)()
	tr := new(sendtrace.Trace)
	resp, err := deadletter.Redeliver(httptrace.WithClientTrace(sendCtx, tr.ClientTrace()), client, c.Letter, reconcile)
	if err != nil {
		cut := errors.Is(context.Cause(sendCtx), errLeaseEnding)
		var gerr *grantretry.Error
		known := errors.As(err, &gerr)
		// A client that gives no outcome sent nothing when its error or
		// its trace says so, as deadletter.Dir.Redeliver reads it.
		nothing := !known && (sentNothing(err) || errors.Is(err, grantretry.ErrInvalidRequest) ||
			errors.Is(err, grantretry.ErrNotSent) || tr.NothingSent(client))
		rel := releasing{mayHave: !nothing && (cut || mayHaveApplied(err))}
		if known {
			rel.late = gerr.Late
			if gerr.StopReason == grantretry.StopOwedLater && !gerr.NotBefore.IsZero() {
				rel.notBefore = &gerr.NotBefore // a host in quota held it: not claimed before the host's time
			}
		}
		switch {
		case cut && !nothing:
			err = &cutError{id: c.Letter.ID, err: err}
		case errors.As(err, new(*url.Error)) && !errors.Is(err, deadletter.ErrNotReconciled):
			// The client's own error, which knows no letter.
			err = fmt.Errorf("grantretry: fleet: letter %s: %w", c.Letter.ID, err)
		}
		switch {
		case known && gerr.Attempts > 0 && !sentNothing(err):
			rel.sent = &sentRecord{attempts: gerr.Attempts, err: err.Error(), reason: gerr.Reason,
				known: true, notBefore: owedAt(gerr.Outcome)}
		case !known && !nothing:
			rel.sent = &sentRecord{attempts: 1, err: err.Error()} // one request, which may have left
		}
		return deadletter.Redelivery{}, errors.Join(err, s.release(context.WithoutCancel(ctx), c, rel))
	}
	resp.Body.Close()
	r := deadletter.Redelivery{Status: resp.StatusCode}
	out, ok := grantretry.OutcomeOf(resp)
	if ok {
		r.Disposition, r.Attempts = out.Disposition, out.Attempts
	}
	switch {
	case deadletter.Reconciled(resp):
		r.Note = "reconciled: the funder already has the submission; nothing was sent"
	case ok && out.StopReason == grantretry.StopAlreadyApplied:
		r.Note = alreadyAppliedNote
	}
	if note, _ := ctx.Value(noteKey{}).(string); note != "" {
		r.Note = strings.TrimPrefix(r.Note+"; "+note, "; ")
	}
	if !deadletter.Delivered(resp) {
		err := fmt.Errorf("grantretry: fleet: letter %s: redelivery answered %d", c.Letter.ID, resp.StatusCode)
		rel := releasing{mayHave: sendtrace.AmbiguousStatus(resp.StatusCode)}
		if ok {
			rel.late = out.Late // a redelivery under the letter's closing time that missed it
			rel.mayHave = out.Ambiguous
			if out.StopReason == grantretry.StopOwedLater && !out.NotBefore.IsZero() {
				rel.notBefore = &out.NotBefore // owed for later again: not claimed before then
			}
		}
		if !ok || out.Attempts > 0 {
			rel.sent = &sentRecord{attempts: out.Attempts, status: resp.StatusCode, reason: out.Reason,
				known: ok, notBefore: owedAt(out)}
		}
		return r, errors.Join(err, s.release(context.WithoutCancel(ctx), c, rel))
	}
	return r, s.Done(context.WithoutCancel(ctx), c, r)
}

// noteKey is the context key of NoteRedelivery's note.
type noteKey struct{}

// NoteRedelivery returns ctx with note for the record of the letter that
// Redeliver sends under it: the record's Note ends with note, after
// Redeliver's own (that the letter was reconciled, or already applied),
// as the operator's tools say on the record who redelivered a letter.
func NoteRedelivery(ctx context.Context, note string) context.Context {
	return context.WithValue(ctx, noteKey{}, note)
}

// alreadyAppliedNote is the note of a redelivery that the funder answered
// with its word that the letter's work was already applied.
const alreadyAppliedNote = "already applied: the funder answered that an earlier attempt of the letter was applied"

// mayHaveApplied reports whether a redelivery that failed with err may
// have reached the funder. Only what says so is taken as not: a letter
// refused before sending, one not yet due or late, an ambiguous one given no
// reconciler, a reconciler that could not tell (nothing was sent in any of
// these), or a grantretry Transport whose last attempt was not ambiguous,
// the rule by which a Transport marks its own letters.
func mayHaveApplied(err error) bool {
	if sentNothing(err) {
		return false
	}
	var gerr *grantretry.Error
	if errors.As(err, &gerr) {
		return gerr.Attempts > 0 && gerr.Ambiguous
	}
	return !errors.Is(err, grantretry.ErrInvalidRequest)
}

// sentNothing reports whether err says that a redelivery sent nothing,
// whatever else it carries: a letter refused before sending, one not yet
// due or late, an ambiguous one given no reconciler, or a reconciler that
// could not tell.
func sentNothing(err error) bool {
	return errors.Is(err, deadletter.ErrBadLetter) || errors.Is(err, deadletter.ErrNotReconciled) || errors.Is(err, deadletter.ErrAmbiguous) ||
		errors.Is(err, deadletter.ErrNotYet) || errors.Is(err, deadletter.ErrLate)
}

// owedAt is the funder's time for a letter in out: its NotBefore when the
// call stopped owed for later, else none.
func owedAt(out grantretry.Outcome) time.Time {
	if out.StopReason == grantretry.StopOwedLater {
		return out.NotBefore
	}
	return time.Time{}
}
