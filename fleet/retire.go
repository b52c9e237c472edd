package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/jackc/pgx/v5"
)

// Retire takes the waiting letter id out of the fleet's letters for good,
// with reason on the record: as [Letters.RetireWith] with no options, so
// the record names [deadletter.DefaultRetiredBy] and no audit line is
// written.
func (s *Letters) Retire(ctx context.Context, id, reason string) error {
	_, err := s.RetireWith(ctx, id, reason, deadletter.RetireOptions{})
	return err
}

// RetireWith retires the waiting letter id: its row's state becomes
// 'retired', with retired_at (the database's clock), retired_by (o.By, or
// [deadletter.DefaultRetiredBy]) and retired_reason beside the letter, so
// that Claim, ClaimIDs, List and Redeliver never hand it out again, and
// Drain never brings its fallback file back as waiting (its row is
// there). [Letters.Retirement] reads the record. With o.Trail (the
// process's [Trail], or the trail file), the audit line
// ([deadletter.Retirement.Record]) is written once the retirement is
// committed.
//
// It refuses, changing nothing: a reason that is empty or white space
// (matching [grantretry.ErrInvalidRequest]); an id with no row (matching
// [pgx.ErrNoRows], as Get's); a letter retired already
// ([deadletter.ErrRetired]) or redelivered; and a letter a worker holds
// under a lease that has not ended ([deadletter.ErrInFlight]): release it
// first ([Letters.Release]), or wait for its lease to end. Against a
// concurrent Claim, exactly one of the two takes the letter. A letter
// whose send was in flight when its last lease ended is retired
// ambiguous, as the next claim would have found it.
func (s *Letters) RetireWith(ctx context.Context, id, reason string, o deadletter.RetireOptions) (*deadletter.Retirement, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: fleet: a letter id is required", grantretry.ErrInvalidRequest)
	}
	if err := deadletter.CheckRetireReason(id, reason); err != nil {
		return nil, err
	}
	if o.By == "" {
		o.By = deadletter.DefaultRetiredBy()
	}
	var data []byte
	var at time.Time
	err := s.pool.QueryRow(ctx, `
		UPDATE grantretry_letters SET state = 'retired', retired_at = clock_timestamp(),
			retired_by = $2, retired_reason = $3,
			letter = CASE WHEN sending_since IS NULL THEN letter
				ELSE `+sentLetterSQL("grantretry_letters")+` END,
			claimed_by = NULL, lease_until = NULL, sending_since = NULL
		WHERE id = $1 AND state = 'waiting' AND (lease_until IS NULL OR lease_until < clock_timestamp())
		RETURNING letter, retired_at`, id, o.By, reason).Scan(&data, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, s.notRetired(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: letter %s not retired: %w", id, err)
	}
	r := &deadletter.Retirement{ID: id, RetiredAt: at.UTC(), RetiredBy: o.By, Reason: reason, Letter: new(grantretry.Letter)}
	if err := json.Unmarshal(data, r.Letter); err != nil {
		return nil, fmt.Errorf("grantretry: fleet: letter %s retired, but its letter does not read back: %w", id, err)
	}
	if o.Trail != nil {
		if err := r.Record(o.Trail); err != nil {
			return r, err
		}
	}
	return r, nil
}

// notRetired says why the letter id was not retired.
func (s *Letters) notRetired(ctx context.Context, id string) error {
	var state, worker string
	var leased bool
	var until *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT state, coalesce(claimed_by, ''), lease_until, coalesce(lease_until >= clock_timestamp(), false)
		FROM grantretry_letters WHERE id = $1`, id).Scan(&state, &worker, &until, &leased)
	switch {
	case err != nil:
		return fmt.Errorf("grantretry: fleet: letter %s not retired: %w", id, err)
	case state == "retired":
		r, rerr := s.Retirement(ctx, id)
		if rerr != nil {
			return fmt.Errorf("%w: fleet: letter %s not retired again", deadletter.ErrRetired, id)
		}
		return &retiredError{r: r}
	case state == "redelivered":
		return fmt.Errorf("grantretry: fleet: letter %s not retired: it was redelivered", id)
	case leased:
		return fmt.Errorf("%w: fleet: letter %s not retired: worker %s holds it until %s; release it, or wait for its lease to end",
			deadletter.ErrInFlight, id, worker, until.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("grantretry: fleet: letter %s not retired: it changed meanwhile (state %s); try again", id, state)
}

// retiredError is the error about a letter retired already: it says who
// retired it, when and why, and matches deadletter.ErrRetired.
type retiredError struct{ r *deadletter.Retirement }

func (e *retiredError) Error() string {
	return fmt.Sprintf("grantretry: fleet: letter %s not retired again: it was retired at %s by %s: %s",
		e.r.ID, e.r.RetiredAt.UTC().Format(time.RFC3339), e.r.RetiredBy, e.r.Reason)
}

func (e *retiredError) Is(target error) bool { return target == deadletter.ErrRetired }

// Retirement returns the record of the retired letter id. The error
// matches pgx.ErrNoRows if no letter id was retired.
func (s *Letters) Retirement(ctx context.Context, id string) (*deadletter.Retirement, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, letter, retired_at, retired_by, retired_reason FROM grantretry_letters
		WHERE id = $1 AND state = 'retired'`, id)
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: letter %s: retirement: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRetirement)
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: letter %s: retirement: %w", id, err)
	}
	return r, nil
}

// Retired returns the records of the retired letters, in the order they
// were retired, then by ID.
func (s *Letters) Retired(ctx context.Context) ([]*deadletter.Retirement, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, letter, retired_at, retired_by, retired_reason FROM grantretry_letters
		WHERE state = 'retired' ORDER BY retired_at, id`)
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: retired: %w", err)
	}
	rs, err := pgx.CollectRows(rows, scanRetirement)
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: retired: %w", err)
	}
	return rs, nil
}

func scanRetirement(row pgx.CollectableRow) (*deadletter.Retirement, error) {
	r := &deadletter.Retirement{Letter: new(grantretry.Letter)}
	var data []byte
	if err := row.Scan(&r.ID, &data, &r.RetiredAt, &r.RetiredBy, &r.Reason); err != nil {
		return nil, err
	}
	r.RetiredAt = r.RetiredAt.UTC()
	return r, json.Unmarshal(data, r.Letter)
}
