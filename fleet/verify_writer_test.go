package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/grantretry/grantretry/trail"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// callFunder makes n calls through a Transport that writes to sink, over
// loopback to a real funder, each of which it must accept.
func callFunder(t *testing.T, sink grantretry.AuditSink, n int) {
	t.Helper()
	f := newFunder(t)
	tp := grantretry.New(http.DefaultTransport, grantretry.WithAuditTrail(sink), grantretry.WithClock(instantClock{}))
	for i := range n {
		ctx := grantretry.WithSubmissionID(context.Background(), fmt.Sprintf("GRANT-%d", i))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/submit", strings.NewReader("{}"))
		resp, err := tp.RoundTrip(req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		resp.Body.Close()
		if out, _ := grantretry.OutcomeOf(resp); out.RecordErr != nil {
			t.Fatalf("call %d: %v", i, out.RecordErr)
		}
	}
}

// superuser runs stmts with the trail's append-only trigger disabled, as
// a superuser can.
func superuser(t *testing.T, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE grantretry_trail DISABLE TRIGGER USER`); err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if tag, err := pool.Exec(ctx, s); err != nil || tag.RowsAffected() == 0 {
			t.Fatalf("%s: %v, %v", s, tag, err)
		}
	}
}

// The writer column is outside the hashed bytes: rows moved to another
// writer, or a chain renamed whole, must fail VerifyTrail at a named row.
func TestVerifyTrailChecksTheWriterColumn(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		stmts func(a, b string) []string
		// the chain and seq VerifyTrail must name
		writer func(a, b string) string
		seq    uint64
	}{
		{
			name: "chain renamed",
			stmts: func(a, _ string) []string {
				return []string{fmt.Sprintf(`UPDATE grantretry_trail SET writer = 'some-other-worker' WHERE writer = '%s'`, a)}
			},
			writer: func(_, _ string) string { return "some-other-worker" },
			seq:    1,
		},
		{
			name: "chains swapped",
			stmts: func(a, b string) []string {
				return []string{
					fmt.Sprintf(`UPDATE grantretry_trail SET writer = 'swap' WHERE writer = '%s'`, a),
					fmt.Sprintf(`UPDATE grantretry_trail SET writer = '%s' WHERE writer = '%s'`, a, b),
					fmt.Sprintf(`UPDATE grantretry_trail SET writer = '%s' WHERE writer = 'swap'`, b),
				}
			},
			writer: func(a, b string) string { return min(a, b) }, // chains are verified in writer order
			seq:    1,
		},
		{
			name: "first records moved to a new writer",
			stmts: func(a, _ string) []string {
				return []string{fmt.Sprintf(`UPDATE grantretry_trail SET writer = 'a-new-worker' WHERE writer = '%s' AND seq <= 4`, a)}
			},
			writer: func(_, _ string) string { return "a-new-worker" },
			seq:    1,
		},
		{
			name: "one record moved to another writer",
			stmts: func(a, _ string) []string {
				return []string{fmt.Sprintf(`UPDATE grantretry_trail SET writer = 'some-other-worker' WHERE writer = '%s' AND seq = 3`, a)}
			},
			writer: func(a, _ string) string { return min(a, "some-other-worker") },
			seq:    3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t)
			a, b := newTrail(t, pool, WithWriter("worker-a")), newTrail(t, pool, WithWriter("worker-b"))
			callFunder(t, a, 3)
			callFunder(t, b, 3)
			if _, err := VerifyTrail(ctx, pool); err != nil {
				t.Fatal(err)
			}
			superuser(t, pool, tc.stmts(a.Writer(), b.Writer())...)
			_, err := VerifyTrail(ctx, pool)
			var te *TrailError
			if !errors.As(err, &te) || !errors.Is(err, grantretry.ErrAuditTrail) {
				t.Fatalf("VerifyTrail after the writer column was edited: %v, want a *TrailError", err)
			}
			want := tc.writer(a.Writer(), b.Writer())
			if te.Writer != want || te.Seq != tc.seq {
				t.Fatalf("VerifyTrail named writer %s seq %d, want %s seq %d: %v", te.Writer, te.Seq, want, tc.seq, err)
			}
			// Naming the row is the promise, to whoever reads the error.
			if msg := err.Error(); !strings.Contains(msg, want) || !strings.Contains(msg, fmt.Sprintf("seq %d", tc.seq)) {
				t.Fatalf("the error does not name the row: %v", err)
			}
		})
	}
}

// The opening record is the only one that names its writer inside the
// hashed bytes, so a chain in the database starts with it even when the
// database was away for the Trail's first commit.
func TestTrailOpensItsDatabaseChainAfterFallingBackFirst(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	local, err := trail.Open(filepath.Join(t.TempDir(), "local.jsonl"), trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	clock := &stepClock{now: time.Now()}
	var db string
	if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	tr := newTrail(t, pool, WithLocalTrail(local))
	tr.cfg.now = clock.Now
	away(t, pool, db, true)
	callThrough(t, tr, 1)
	if tr.FellBack() == 0 {
		t.Fatal("the first commit did not fall back")
	}
	away(t, pool, db, false)
	clock.add(2 * retryAfterFailure)
	callThrough(t, tr, 1)
	var first []TrailRecord
	if _, err := ReadTrail(ctx, pool, func(r TrailRecord) error {
		if r.Seq == 1 {
			first = append(first, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0].Msg != MsgTrailOpened || first[0].Fields["writer"] != tr.Writer() {
		t.Fatalf("the database chain's first records: %+v, want one %s naming %s", first, MsgTrailOpened, tr.Writer())
	}
}

// A database Migrate never ran on has no trail: VerifyTrail says so, and
// the server's error is still there for errors.As.
func TestVerifyTrailOnADatabaseNeverMigrated(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = VerifyTrail(ctx, pool)
	var pe *pgconn.PgError
	if !errors.Is(err, grantretry.ErrAuditTrail) || !errors.As(err, &pe) || pe.Code != undefinedTable {
		t.Fatalf("VerifyTrail on a database without the schema: %v", err)
	}
	if !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("the error does not say to run Migrate: %v", err)
	}
}
