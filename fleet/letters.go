package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

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
