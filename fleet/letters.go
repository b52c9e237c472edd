package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Letters is a grantretry.DeadLetterSink that keeps the letters of every
// process of a fleet in one table, grantretry_letters, where any worker
// can claim and redeliver them (Claim, Redeliver). A letter is inserted
// with a synchronous commit; if the database does not take it within the
// limit, it is kept in the fallback directory (WithFallback) and the
// error, a *FallbackError, says where, so Outcome.RecordErr shows it.
// Letters is safe for concurrent use.
type Letters struct {
	pool *pgxpool.Pool
	cfg  config
}

var _ grantretry.DeadLetterSink = (*Letters)(nil)

// NewLetters returns the Letters kept in pool's database. Run Migrate
// first.
func NewLetters(pool *pgxpool.Pool, opts ...Option) *Letters {
	return &Letters{pool: pool, cfg: newConfig(opts)}
}

// ErrLeaseLost matches the error of Done or Release on a claim whose lease
// ended and whose letter another worker then claimed (or finished).
var ErrLeaseLost = errors.New("grantretry: fleet: the letter's lease was lost to another worker")

// FallbackError is PutDeadLetter's error when the database did not take a
// letter: Dir is the fallback directory that kept it instead ("" if none
// did), Err why the database did not take it, and, when the fallback
// directory failed too, why it did not.
type FallbackError struct {
	ID  string
	Dir string
	Err error

	tried string // the fallback directory that did not take it either
}

func (e *FallbackError) Error() string {
	switch {
	case e.Dir != "":
		return fmt.Sprintf("grantretry: fleet: letter %s kept in the local directory at %s because the database insert failed: %v", e.ID, e.KeptAt(), e.Err)
	case e.tried != "":
		return fmt.Sprintf("grantretry: fleet: letter %s not kept: the database insert failed, and so did the write to the local directory %s: %v", e.ID, e.tried, e.Err)
	}
	return fmt.Sprintf("grantretry: fleet: letter %s not kept: the database insert failed, and there is no fallback directory: %v", e.ID, e.Err)
}

func (e *FallbackError) Unwrap() error { return e.Err }

// KeptAt returns the file the letter was kept in, in the fallback
// directory, or "" if it was not kept. The Transport reads it to report
// the letter as kept there, not as lost (see grantretry.DeadLetterSink).
func (e *FallbackError) KeptAt() string {
	if e.Dir == "" {
		return ""
	}
	// deadletter.Dir stores a letter as <ID>.json.
	return filepath.Join(e.Dir, e.ID+".json")
}

// PutDeadLetter inserts l, and returns once the insert is committed. It
// waits at most the limit for the database; past it, or on any error, it
// writes l to the fallback directory and returns a *FallbackError.
func (s *Letters) PutDeadLetter(ctx context.Context, l *grantretry.Letter) error {
	if l == nil {
		return fmt.Errorf("%w: nil letter", grantretry.ErrInvalidRequest)
	}
	data, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("grantretry: fleet: letter %s: %w", l.ID, err)
	}
	dbCtx, cancel := context.WithTimeout(ctx, s.cfg.limit)
	defer cancel()
	_, err = s.pool.Exec(dbCtx,
		`INSERT INTO grantretry_letters (id, created, letter) VALUES ($1, $2, $3)`,
		l.ID, l.Created, data)
	if err == nil {
		return nil
	}
	fe := &FallbackError{ID: l.ID, Err: err}
	if s.cfg.fallback != nil {
		if ferr := s.cfg.fallback.PutDeadLetter(ctx, l); ferr != nil {
			fe.Err, fe.tried = fmt.Errorf("%w; the local directory: %w", err, ferr), s.cfg.fallback.Path()
		} else {
			fe.Dir = s.cfg.fallback.Path()
		}
	}
	return fe
}

// Claim is a letter a worker holds under a lease. Token fences it: a
// claim whose lease ended and was claimed again can no longer be Done.
type Claim struct {
	Letter *grantretry.Letter
	Worker string
	Until  time.Time // the lease's end, on the database's clock
	Token  int64
}

// Claim leases up to n waiting letters, oldest first, to worker: letters
// never claimed, or whose lease has ended. Workers never wait for one
// another (FOR UPDATE SKIP LOCKED), and leases run on the database's
// clock, so workers' clocks need not agree.
func (s *Letters) Claim(ctx context.Context, worker string, n int) ([]*Claim, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE grantretry_letters SET claimed_by = $1,
			lease_until = clock_timestamp() + $2::interval, claims = claims + 1
		WHERE id IN (
			SELECT id FROM grantretry_letters
			WHERE state = 'waiting' AND (lease_until IS NULL OR lease_until < clock_timestamp())
			ORDER BY created, id LIMIT $3
			FOR UPDATE SKIP LOCKED)
		RETURNING letter, lease_until, claims`,
		worker, s.cfg.lease, n)
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: claim: %w", err)
	}
	return collectClaims(rows, worker)
}

func collectClaims(rows pgx.Rows, worker string) ([]*Claim, error) {
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Claim, error) {
		c := &Claim{Letter: new(grantretry.Letter), Worker: worker}
		var data []byte
		if err := r.Scan(&data, &c.Until, &c.Token); err != nil {
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
// are not leased to another worker; the others are left out of the
// result, as Claim leaves out what it cannot take.
func (s *Letters) ClaimIDs(ctx context.Context, worker string, ids []string) ([]*Claim, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE grantretry_letters SET claimed_by = $1,
			lease_until = clock_timestamp() + $2::interval, claims = claims + 1
		WHERE id IN (
			SELECT id FROM grantretry_letters
			WHERE id = ANY($3) AND state = 'waiting' AND (lease_until IS NULL OR lease_until < clock_timestamp())
			FOR UPDATE SKIP LOCKED)
		RETURNING letter, lease_until, claims`,
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
			redelivered_at = clock_timestamp(), lease_until = NULL
		WHERE id = $1 AND claimed_by = $2 AND claims = $3 AND state = 'waiting'`,
		c.Letter.ID, c.Worker, c.Token, data)
	if err != nil {
		return fmt.Errorf("grantretry: fleet: letter %s: %w", c.Letter.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("letter %s: %w", c.Letter.ID, ErrLeaseLost)
	}
	return nil
}

// Release gives the claimed letter back at once, to be claimed again.
func (s *Letters) Release(ctx context.Context, c *Claim) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE grantretry_letters SET lease_until = NULL, claimed_by = NULL
		WHERE id = $1 AND claimed_by = $2 AND claims = $3 AND state = 'waiting'`,
		c.Letter.ID, c.Worker, c.Token)
	if err != nil {
		return fmt.Errorf("grantretry: fleet: letter %s: %w", c.Letter.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("letter %s: %w", c.Letter.ID, ErrLeaseLost)
	}
	return nil
}

// Redeliver sends the claimed letter again with deadletter.Redeliver, and
// the reconcile rule: an ambiguous letter is asked about first. A letter
// answered 1xx-3xx, or that the reconciler says the funder has, is marked
// Done; any other is released for a later try, and the error says why.
// The response's body is closed.
func (s *Letters) Redeliver(ctx context.Context, c *Claim, client *http.Client, reconcile grantretry.ReconcileFunc) (deadletter.Redelivery, error) {
	resp, err := deadletter.Redeliver(ctx, client, c.Letter, reconcile)
	if err != nil {
		return deadletter.Redelivery{}, errors.Join(err, s.Release(context.WithoutCancel(ctx), c))
	}
	resp.Body.Close()
	r := deadletter.Redelivery{Status: resp.StatusCode}
	if out, ok := grantretry.OutcomeOf(resp); ok {
		r.Disposition, r.Attempts = out.Disposition, out.Attempts
	}
	if deadletter.Reconciled(resp) {
		r.Note = "reconciled: the funder already has the submission; nothing was sent"
	}
	if resp.StatusCode >= 400 {
		err := fmt.Errorf("grantretry: fleet: letter %s: redelivery answered %d", c.Letter.ID, resp.StatusCode)
		return r, errors.Join(err, s.Release(context.WithoutCancel(ctx), c))
	}
	return r, s.Done(context.WithoutCancel(ctx), c, r)
}

// List returns the letters waiting (not redelivered), oldest first.
func (s *Letters) List(ctx context.Context) ([]*grantretry.Letter, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT letter FROM grantretry_letters WHERE state = 'waiting' ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: list: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*grantretry.Letter, error) {
		var data []byte
		l := new(grantretry.Letter)
		if err := r.Scan(&data); err != nil {
			return nil, err
		}
		return l, json.Unmarshal(data, l)
	})
}

// Get returns the letter id and, if it was redelivered, the record of it
// (nil while it waits). The error matches pgx.ErrNoRows if there is none.
func (s *Letters) Get(ctx context.Context, id string) (*grantretry.Letter, *deadletter.Redelivery, error) {
	var data, result []byte
	err := s.pool.QueryRow(ctx,
		`SELECT letter, result FROM grantretry_letters WHERE id = $1`, id).Scan(&data, &result)
	if err != nil {
		return nil, nil, fmt.Errorf("grantretry: fleet: letter %s: %w", id, err)
	}
	l := new(grantretry.Letter)
	if err := json.Unmarshal(data, l); err != nil {
		return nil, nil, err
	}
	if result == nil {
		return l, nil, nil
	}
	r := new(deadletter.Redelivery)
	return l, r, json.Unmarshal(result, r)
}
