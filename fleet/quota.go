package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5"
)

// A host's quota hold is shared through its row: quota_until is when the
// fleet sends the host something again (NULL: not held), and quota_known
// says whether that is the funder's own time (a NotBefore) or the turn of
// the next probe of a quota whose end the funder did not give. Every
// comparison with the present is made in SQL, on the database's clock,
// and a funder's time that has passed is read as no hold.
// What a process heard is in coordHost.quota, kept by the re-read that
// keeps State (each second, and at each announcement on Channel) and by
// the answers of its own statements, so that QuotaUntil asks nothing.

// quotaHeard is a quota hold as a process heard it: a zero until is no
// hold. A probe turn's end is on this process's wall clock (the time the
// answer came, plus what the database said was left), so that the
// Transport, comparing it with its clock, does not ask for the probe
// before the database grants it; the funder's time is as given. The
// Transport's clock must be the wall clock (see grantretry.FleetQuota).
// row is quota_until as the database has it.
type quotaHeard struct {
	until time.Time
	known bool
	row   time.Time
}

// quotaColumns reads a row's quota hold (see quotaRow) in a statement on
// grantretry_hosts.
const quotaColumns = `quota_until IS NOT NULL AND NOT (quota_known AND quota_until <= now()) AS q_held, COALESCE(quota_until, 'epoch') AS q_until,
	quota_known AS q_known, COALESCE(EXTRACT(EPOCH FROM quota_until - now())::float8, 0) AS q_left`

// quotaRow is a row's quota hold as quotaColumns read it: left is how
// long, in seconds on the database's clock, the hold has to run.
type quotaRow struct {
	held  bool
	until time.Time
	known bool
	left  float64
}

func (r *quotaRow) dest() []any { return []any{&r.held, &r.until, &r.known, &r.left} }

// heard is the hold as this process notes it, the answer having come at
// at.
func (r quotaRow) heard(at time.Time) quotaHeard {
	switch {
	case !r.held:
		return quotaHeard{}
	case r.known:
		return quotaHeard{until: r.until, known: true, row: r.until}
	}
	return quotaHeard{until: at.Round(0).Add(time.Duration(r.left * float64(time.Second))), row: r.until}
}

// hearQuota notes what a re-read asked when the host's view was old:
// unless a statement of this process has answered since (the view is no
// longer old), whose answer is newer.
func (h *coordHost) hearQuota(old *quotaHeard, q quotaHeard) {
	if old == nil && q.until.IsZero() || old != nil && old.known == q.known && old.until.Equal(q.until) {
		return
	}
	h.quota.CompareAndSwap(old, &q)
}

// QuotaUntil returns the host's quota hold as last heard from the
// database: until when the fleet sends the host nothing, and whether that
// is the funder's time (known) or the next probe's turn. Zero: not held.
// It reads an atomic, and the wall clock while the funder's time holds:
// once that time passes it is forgotten. A hold another process set
// reaches this one with its announcement on Channel, or the next re-read
// (WithReread). The times are on the wall clock.
func (h *coordHost) QuotaUntil() (until time.Time, known bool) {
	q := h.quota.Load()
	if q == nil {
		return time.Time{}, false
	}
	if q.known && !time.Now().Before(q.until) {
		h.quota.CompareAndSwap(q, nil)
		return time.Time{}, false
	}
	return q.until, q.known
}

// owedSQL is Owed's statement. $2 is the funder's time, NULL if it gave
// none, $3 the probe wait. The answer may be to a request sent before
// the hold began, which says nothing of it: a known time only extends a
// hold (a funder's time or a probe turn), and one that has come or ends
// first leaves it as it was; a probe turn extends only a shorter hold. A hold
// that grew is announced (the bare key on Channel: every listener
// re-reads the row); "grew" is judged against the statement's snapshot,
// so a hold that concurrent statements changed may be announced twice.
const owedSQL = `
	WITH old AS (SELECT quota_until FROM grantretry_hosts WHERE host = $1),
	u AS (
		INSERT INTO grantretry_hosts AS h (host, tokens, max_tokens, quota_until, quota_known)
		VALUES ($1, 0, 0, COALESCE($2::timestamptz, now() + $3::interval), $2::timestamptz IS NOT NULL)
		ON CONFLICT (host) DO UPDATE SET
			quota_until = CASE
				WHEN $2 IS NOT NULL THEN CASE WHEN h.quota_until > now() AND h.quota_until >= $2 THEN h.quota_until ELSE $2 END
				WHEN h.quota_until > now() + $3 THEN h.quota_until
				ELSE now() + $3 END,
			quota_known = CASE
				WHEN $2 IS NOT NULL THEN h.quota_until IS NULL OR h.quota_until <= now() OR h.quota_until < $2 OR h.quota_known
				ELSE COALESCE(h.quota_known AND h.quota_until > now() + $3, false) END
		RETURNING ` + quotaColumns + `, quota_until AS until)
	SELECT q_held, q_until, q_known, q_left, CASE WHEN old.quota_until IS NULL OR u.until > old.quota_until
		THEN pg_notify($4, $1) IS NOT NULL ELSE false END
	FROM u LEFT JOIN old ON true, ` + asyncCommit

// Owed notes that a call to the host ended owed: until is the funder's
// time (its NotBefore), zero if it gave none. With a time, the fleet
// holds the host until the later of it and the funder's time already
// held; without one, for probe (the host's probe wait if probe is not
// positive) unless it is held longer already, after which one process
// probes (TryQuotaProbe). The hold is announced to every process. A
// statement its caller stopped waiting for still lands (see detach),
// and its error is returned: the Transport holds the host on its own.
func (h *coordHost) Owed(ctx context.Context, until time.Time, probe time.Duration) error {
	if probe <= 0 {
		probe = h.policy.Load().Probe
	}
	var at *time.Time
	if !until.IsZero() {
		// The database keeps microseconds: rounded up, the hold does not
		// end before the funder's time.
		u := until.Add(time.Microsecond - 1).Truncate(time.Microsecond)
		at = &u
	}
	return h.c.detach(ctx, func(ctx context.Context) error {
		var r quotaRow
		var notified bool
		err := h.c.pool.QueryRow(ctx, owedSQL, h.key, at, probe, Channel).
			Scan(append(r.dest(), &notified)...)
		if err != nil {
			return err
		}
		q := r.heard(time.Now())
		h.quota.Store(&q)
		return nil
	})
}

// tryQuotaProbeSQL is TryQuotaProbe's statement. cur locks the row and
// reads its newest version, so that of the statements that find a probe
// turn passed, the first takes the next and the others see it taken. Its
// first column says this process probes: it took the turn, or the host
// is not held (no hold, or the funder's time has passed). The others are
// the hold after it (quotaColumns).
const tryQuotaProbeSQL = `
	WITH cur AS (SELECT quota_until, quota_known FROM grantretry_hosts WHERE host = $1 FOR NO KEY UPDATE),
	u AS (
		UPDATE grantretry_hosts SET quota_until = now() + $2::interval, quota_known = false
		WHERE host = $1 AND EXISTS (SELECT FROM cur WHERE quota_until <= now() AND NOT quota_known)
		RETURNING quota_until),
	q AS (SELECT COALESCE((SELECT quota_until FROM u), (SELECT quota_until FROM cur)) AS quota_until,
		COALESCE((SELECT false FROM u), (SELECT quota_known FROM cur), false) AS quota_known)
	SELECT EXISTS (SELECT FROM u) OR NOT EXISTS (SELECT FROM cur WHERE quota_until > now()),
		EXISTS (SELECT FROM u), ` + quotaColumns + `
	FROM q, ` + asyncCommit

// quotaAsk is a TryQuotaProbe statement in flight, whose answer the
// process's other calls wait for: its fields are set before done is
// closed.
type quotaAsk struct {
	done       chan struct{}
	send, took bool
	err        error
}

// TryQuotaProbe asks, once the host's probe turn has passed, to send the
// one probe of a quota of unknown length: true means this process sends
// it, and the fleet holds the others for another probe (the host's
// probe wait if probe is not positive). It is true too when the host is
// no longer held. It asks the database only when no turn it heard of
// still runs and no other call of this process is asking; a call that
// finds one asking waits for its answer, and is given an error if ctx
// ends first. A turn taken after its caller stopped waiting goes to the
// next call. A caller that stops waiting for its own statement is
// refused, not given an error, while the database is heard (the host's
// State is not FleetUnknown); otherwise, when no statement can be
// started (errBusy), and when the statement fails, the error is returned
// and the Transport decides on its own.
func (h *coordHost) TryQuotaProbe(ctx context.Context, probe time.Duration) (bool, error) {
	now := time.Now()
	if h.takeQuotaTurn(now) {
		return true, nil
	}
	if q := h.quota.Load(); q != nil && !q.known && now.Before(q.until) {
		return false, nil
	}
	ask := &quotaAsk{done: make(chan struct{})}
	if !h.quotaAsk.CompareAndSwap(nil, ask) {
		if other := h.quotaAsk.Load(); other != nil {
			return h.awaitQuotaAsk(ctx, other)
		}
		return false, errors.New("grantretry: fleet: the quota probe's turn is being asked")
	}
	answered := func() {
		h.quotaAsk.CompareAndSwap(ask, nil)
		close(ask.done)
	}
	if probe <= 0 {
		probe = h.policy.Load().Probe
	}
	// st hands a turn over once: 1 the caller stopped waiting first, 2
	// the statement answered first.
	var st atomic.Int32
	var send atomic.Bool
	err := h.c.detach(ctx, func(qctx context.Context) error {
		defer answered()
		ok, took, turn, err := h.tryQuotaProbe(qctx, probe)
		ask.send, ask.took, ask.err = ok, took, err
		send.Store(ok)
		if !st.CompareAndSwap(0, 2) && took {
			h.quotaTurn.Store(turn.UnixNano()) // for the next call
		}
		return err
	})
	switch {
	case errors.Is(err, errBusy):
		ask.err = err
		answered()
		return false, err
	case err != nil && ctx.Err() != nil:
		if !st.CompareAndSwap(0, 1) {
			return send.Load(), nil // answered as the caller left
		}
		if h.State() == grantretry.FleetUnknown {
			return false, err
		}
		return false, nil
	case err != nil:
		return false, err
	}
	return send.Load(), nil
}

// takeQuotaTurn takes a probe turn that a statement of this process
// took after its caller stopped waiting, if it still runs at now.
func (h *coordHost) takeQuotaTurn(now time.Time) bool {
	t := h.quotaTurn.Load()
	return t > now.UnixNano() && h.quotaTurn.CompareAndSwap(t, 0)
}

// awaitQuotaAsk waits for the answer of another call's TryQuotaProbe
// statement: the turn is that call's (or the next call's, if it left),
// and every call may go if the host is no longer held.
func (h *coordHost) awaitQuotaAsk(ctx context.Context, ask *quotaAsk) (bool, error) {
	select {
	case <-ask.done:
	case <-ctx.Done():
		return false, fmt.Errorf("grantretry: fleet: the quota probe's statement has not answered: %w", ctx.Err())
	}
	switch {
	case ask.err != nil:
		return false, ask.err
	case ask.took:
		return h.takeQuotaTurn(time.Now()), nil
	}
	return ask.send, nil
}

// tryQuotaProbe runs TryQuotaProbe's statement: send says this process
// probes, took that it took a turn, which ends at turn; the hold after
// it is noted.
func (h *coordHost) tryQuotaProbe(ctx context.Context, probe time.Duration) (send, took bool, turn time.Time, err error) {
	var r quotaRow
	if err = h.c.pool.QueryRow(ctx, tryQuotaProbeSQL, h.key, probe).
		Scan(append([]any{&send, &took}, r.dest()...)...); err != nil {
		return false, false, time.Time{}, err
	}
	q := r.heard(time.Now())
	h.quota.Store(&q)
	return send, took, q.until, nil
}

// giveBackQuotaProbeSQL is GiveBackQuotaProbe's statement: $2 is the
// probe turn's end as the database has it; a hold that is no longer that
// turn is left as it is.
const giveBackQuotaProbeSQL = `
	WITH u AS (UPDATE grantretry_hosts SET quota_until = now()
		WHERE host = $1 AND NOT quota_known AND quota_until = $2 RETURNING ` + quotaColumns + `, host)
	SELECT q_held, q_until, q_known, q_left, pg_notify($3, host) IS NOT NULL FROM u, ` + asyncCommit

// GiveBackQuotaProbe notes that the probe TryQuotaProbe granted sent
// nothing: the probe turn this process last heard ends now, announced on
// Channel, so that the next call of any process may take the next. A
// funder's time, or a turn that changed since, stays.
func (h *coordHost) GiveBackQuotaProbe(ctx context.Context) error {
	q := h.quota.Load()
	if q == nil || q.known || q.row.IsZero() {
		return nil
	}
	return h.c.detach(ctx, func(ctx context.Context) error {
		var r quotaRow
		var notified bool
		err := h.c.pool.QueryRow(ctx, giveBackQuotaProbeSQL, h.key, q.row, Channel).
			Scan(append(r.dest(), &notified)...)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		heard := r.heard(time.Now())
		h.quota.CompareAndSwap(q, &heard)
		return nil
	})
}

// quotaClearedSQL is QuotaCleared's statement: it writes, and announces,
// only a hold there is.
const quotaClearedSQL = `
	WITH u AS (UPDATE grantretry_hosts SET quota_until = NULL, quota_known = false
		WHERE host = $1 AND quota_until IS NOT NULL RETURNING host)
	SELECT pg_notify($2, host) FROM u, ` + asyncCommit

// QuotaCleared notes that the host answered a call that was not owed:
// the hold ends for every process, announced on Channel.
func (h *coordHost) QuotaCleared(ctx context.Context) error {
	return h.c.detach(ctx, func(ctx context.Context) error {
		if _, err := h.c.pool.Exec(ctx, quotaClearedSQL, h.key, Channel); err != nil {
			return err
		}
		h.quota.Store(&quotaHeard{})
		return nil
	})
}
