package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/jackc/pgx/v5"
)

// ErrLeaseLost matches the error of Done or Release on a claim whose lease
// ended and whose letter another worker then claimed (or finished).
var ErrLeaseLost = errors.New("grantretry: fleet: the letter's lease was lost to another worker")

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
