package fleet

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// withLetterRun shortens the bound of a letter's insert, for the test of
// one that never ends by itself.
func withLetterRun(d time.Duration) Option {
	return optionFunc(func(c *config) { c.letterRun = d })
}

// An insert cut at the limit that commits anyway: its commit waits for a
// synchronous standby that is not there, so that it outlives the limit,
// and the letter falls back; the commit then completes, either when the
// standby is no longer required ("released") or when the client gives up
// on the statement, which makes the server commit it locally ("abandoned";
// PostgreSQL warns "The transaction has already committed locally"). The
// letter ends in one place, the database, and its fallback file is gone.
func TestLetterInsertCutAtTheLimitThatCommitsLeavesNoSecondCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := pgtest.NewCluster(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cl.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	standby := func(names string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = '`+names+`'`); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range []struct {
		name    string
		release bool
	}{{"released", true}, {"abandoned", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := deadletter.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			s := NewLetters(pool, WithFallback(dir), WithLimit(20*time.Millisecond), withLetterRun(500*time.Millisecond))
			defer s.Close()
			standby("nobody")
			defer standby("")
			time.Sleep(100 * time.Millisecond) // the reload reaches the backends
			l := testLetter("http://funder.example", i)
			err = s.PutDeadLetter(ctx, l)
			var fe *FallbackError
			if !errors.As(err, &fe) || fe.KeptAt() == "" {
				t.Fatalf("PutDeadLetter with its commit held: %v, want a FallbackError naming a file", err)
			}
			if _, err := os.Stat(fe.KeptAt()); err != nil {
				t.Fatalf("the fallback file: %v", err)
			}
			if tc.release {
				standby("")
			}
			inDB := func() bool {
				var n int
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM grantretry_letters WHERE id = $1`, l.ID).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n == 1
			}
			waitFor(t, "the cut insert to commit", inDB)
			fileGone := func() bool {
				_, err := os.Stat(fe.KeptAt())
				return errors.Is(err, fs.ErrNotExist)
			}
			for deadline := time.Now().Add(3 * time.Second); !fileGone() && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if !fileGone() {
				t.Fatalf("letter %s is both in the database and in %s: redelivering both sends it twice", l.ID, fe.KeptAt())
			}
			if ls, err := dir.List(); err != nil || len(ls) != 0 {
				t.Errorf("the fallback directory holds %d letters (%v), want none", len(ls), err)
			}
		})
	}
}
