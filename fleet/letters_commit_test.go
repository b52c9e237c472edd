package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The Coordinator's pool may turn synchronous_commit off (its writes are
// advisory); the letters' own pool, made from its configuration, must not
// inherit that: a letter acknowledged (and its fallback file removed)
// before its WAL is flushed is lost in a crash.
func TestLettersPoolCommitsSynchronously(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := NewLetters(pool)
	defer s.Close()
	var v string
	if err := s.own.QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "on" {
		t.Fatalf("the letters' inserts run with synchronous_commit=%s, want on", v)
	}
}

// With no fallback directory, an insert cut at the limit runs on and may
// commit: PutDeadLetter must not say the letter was kept nowhere while the
// database then takes it, or a pipeline told its work is lost submits it
// again beside the letter the fleet redelivers.
func TestLetterSaidNotKeptIsNotKeptAfterAll(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE grantretry_letters IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	// The lock goes well after the limit: the insert then commits.
	release := time.AfterFunc(300*time.Millisecond, func() { tx.Rollback(ctx) })
	defer release.Stop()
	s := NewLetters(pool, WithLimit(50*time.Millisecond))
	defer s.Close()
	l := testLetter("http://funder.example", 1)
	err = s.PutDeadLetter(ctx, l)
	var n int
	if qerr := pool.QueryRow(ctx, `SELECT count(*) FROM grantretry_letters WHERE id = $1`, l.ID).Scan(&n); qerr != nil {
		t.Fatal(qerr)
	}
	var fe *FallbackError
	switch {
	case err == nil && n == 1:
	case errors.As(err, &fe) && fe.KeptAt() == "" && n == 0:
	default:
		t.Fatalf("PutDeadLetter said %v, and the database holds %d copies of the letter: want nil and 1, or kept nowhere and 0", err, n)
	}
	if err != nil {
		t.Errorf("PutDeadLetter: %v: the insert committed once the lock went, want nil", err)
	}
}
