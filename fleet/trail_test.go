package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
	"github.com/jackc/pgx/v5/pgxpool"
)

// callThrough makes n calls through a Transport that writes to sink, to a
// funder answering 503 then 201, and returns the outcomes.
func callThrough(t *testing.T, sink grantretry.AuditSink, n int) []grantretry.Outcome {
	t.Helper()
	calls := 0
	tr := grantretry.New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		rec := newRecorder()
		if calls%2 == 1 {
			rec.WriteHeader(503)
		} else {
			rec.WriteHeader(201)
		}
		return rec.result(r), nil
	}), grantretry.WithAuditTrail(sink), grantretry.WithClock(instantClock{}), grantretry.WithoutBreaker())
	var outs []grantretry.Outcome
	for i := range n {
		ctx := grantretry.WithSubmissionID(context.Background(), fmt.Sprintf("GRANT-%d", i))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://funder.example/submit", strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		var e *grantretry.Error
		switch {
		case errors.As(err, &e):
			outs = append(outs, e.Outcome)
			continue
		case err != nil:
			t.Fatalf("call %d: %v", i, err)
		}
		resp.Body.Close()
		out, _ := grantretry.OutcomeOf(resp)
		outs = append(outs, out)
	}
	return outs
}

// instantClock never sleeps: tests never wait a real backoff.
type instantClock struct{}

func (instantClock) Now() time.Time                                   { return time.Now() }
func (instantClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func newTrail(t *testing.T, pool *pgxpool.Pool, opts ...Option) *Trail {
	t.Helper()
	tr, err := NewTrail(context.Background(), pool, append([]Option{WithLimit(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTrailCommitsEveryDispositionAndVerifies(t *testing.T) {
	pool := newPool(t)
	a, b := newTrail(t, pool), newTrail(t, pool)
	for _, out := range append(callThrough(t, a, 3), callThrough(t, b, 2)...) {
		if out.RecordErr != nil {
			t.Fatal(out.RecordErr)
		}
	}
	sum, err := VerifyTrail(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Writers) != 2 || sum.Dispositions[string(grantretry.Succeeded)] != 5 {
		t.Fatalf("summary: %+v", sum)
	}
	// 1 opened + per call 2 attempts and 1 disposition.
	if want := 2 + 5*3; sum.Records != want {
		t.Fatalf("%d records, want %d", sum.Records, want)
	}
}

// A Sync commits any number of records: up to maxValuesRows with VALUES,
// more with unnest; both chain and verify, in order.
func TestTrailCommitsSyncsOfEverySize(t *testing.T) {
	pool := newPool(t)
	tr := newTrail(t, pool)
	sizes := []int{1, 2, maxValuesRows, maxValuesRows + 1, 3 * maxValuesRows}
	want := 1 // the opening record
	for _, n := range sizes {
		for i := range n {
			rec := fmt.Sprintf(`{"level":"info","msg":"test.record","sync":%d,"i":%d}`+"\n", n, i)
			if _, err := tr.Write([]byte(rec)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.Sync(); err != nil {
			t.Fatalf("Sync of %d records: %v", n, err)
		}
		want += n
	}
	var got []string
	sum, err := ReadTrail(context.Background(), pool, func(r TrailRecord) error {
		if r.Msg == "test.record" {
			got = append(got, fmt.Sprint(r.Fields["sync"], "/", r.Fields["i"]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != want || tr.FellBack() != 0 {
		t.Fatalf("%d records (%d fell back), want %d", sum.Records, tr.FellBack(), want)
	}
	var order []string
	for _, n := range sizes {
		for i := range n {
			order = append(order, fmt.Sprint(n, "/", i))
		}
	}
	if !slices.Equal(got, order) {
		t.Fatalf("records in chain order %v, want %v", got, order)
	}
}

func TestTrailChainIsTheTrailFilesChain(t *testing.T) {
	pool := newPool(t)
	tr := newTrail(t, pool)
	callThrough(t, tr, 2)
	rows, err := pool.Query(context.Background(),
		`SELECT record FROM grantretry_trail WHERE writer = $1 ORDER BY seq`, tr.Writer())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		var rec string
		if err := rows.Scan(&rec); err != nil {
			t.Fatal(err)
		}
		b.WriteString(rec + "\n")
	}
	path := filepath.Join(t.TempDir(), "writer.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := trail.Verify(path); err != nil {
		t.Fatalf("a writer's records do not verify as a trail file: %v", err)
	}
}

func TestTrailTableRefusesUpdateDeleteAndTruncate(t *testing.T) {
	pool := newPool(t)
	callThrough(t, newTrail(t, pool), 1)
	for _, stmt := range []string{
		`UPDATE grantretry_trail SET record = '{}' WHERE seq = 1`,
		`DELETE FROM grantretry_trail WHERE seq = 1`,
		`TRUNCATE grantretry_trail`,
	} {
		if _, err := pool.Exec(context.Background(), stmt); err == nil {
			t.Errorf("%s was allowed", stmt)
		}
	}
}

func TestTrailApplicationRoleHasNoUpdateOrDelete(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	role := "grantretry_app_" + randomID()
	if _, err := pool.Exec(ctx, "CREATE ROLE "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Exec(context.Background(), "DROP OWNED BY "+role)
		pool.Exec(context.Background(), "DROP ROLE "+role)
	})
	for _, s := range GrantStatements(role) {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET ROLE "+role); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET ROLE")
	if _, err := conn.Exec(ctx, `INSERT INTO grantretry_trail (writer, seq, record, prev, hash) VALUES ('w', 1, '{}', '', '')`); err != nil {
		t.Fatalf("the application role cannot insert: %v", err)
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE grantretry_trail DISABLE TRIGGER USER`); err == nil {
		t.Fatal("the application role could disable the trigger")
	}
	for _, stmt := range []string{`UPDATE grantretry_trail SET record = '{}'`, `DELETE FROM grantretry_trail`} {
		_, err := conn.Exec(ctx, stmt)
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s as the application role: %v, want permission denied", stmt, err)
		}
	}
}

func TestVerifyTrailNamesASuperusersEdit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, stmt, want string
		seq              uint64
	}{
		{"edit", `UPDATE grantretry_trail SET record = replace(record, '"status":503', '"status":200') WHERE writer = $1 AND seq = 2`, "hash does not match", 2},
		{"delete", `DELETE FROM grantretry_trail WHERE writer = $1 AND seq = 3`, "missing", 3},
		{"rechained", `UPDATE grantretry_trail SET hash = repeat('0', 64) WHERE writer = $1 AND seq = 2`, "column", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t)
			tr := newTrail(t, pool)
			callThrough(t, tr, 2)
			if _, err := VerifyTrail(ctx, pool); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `ALTER TABLE grantretry_trail DISABLE TRIGGER USER`); err != nil {
				t.Fatal(err)
			}
			if tag, err := pool.Exec(ctx, tc.stmt, tr.Writer()); err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("%v, %v", tag, err)
			}
			_, err := VerifyTrail(ctx, pool)
			var te *TrailError
			if !errors.As(err, &te) || te.Writer != tr.Writer() || te.Seq != tc.seq || !strings.Contains(te.Problem, tc.want) {
				t.Fatalf("VerifyTrail after a superuser's %s: %v", tc.name, err)
			}
			if !errors.Is(err, grantretry.ErrAuditTrail) {
				t.Fatal("a TrailError does not match ErrAuditTrail")
			}
		})
	}
}

func TestTrailWithoutALocalTrailFailsClosed(t *testing.T) {
	pool := newPool(t)
	tr := newTrail(t, pool)
	pool.Close()
	outs := callThrough(t, tr, 2)
	if outs[0].RecordErr == nil || !errors.Is(tr.Err(), grantretry.ErrAuditTrail) {
		t.Fatalf("RecordErr %v, Err %v", outs[0].RecordErr, tr.Err())
	}
	if outs[1].StopReason != grantretry.StopAuditTrail || outs[1].Attempts != 0 {
		t.Fatalf("the call after the failure: %+v, want nothing sent", outs[1])
	}
}

func TestTrailFallsBackToTheLocalTrailAndRejoins(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "local.jsonl")
	local, err := trail.Open(path, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	clock := &stepClock{now: time.Now()}
	tr := newTrail(t, pool, WithLocalTrail(local), WithLimit(time.Second))
	tr.cfg.now = clock.Now
	callThrough(t, tr, 1)

	var db string
	if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	away(t, pool, db, true)
	outs := callThrough(t, tr, 2)
	for _, out := range outs {
		if out.RecordErr != nil {
			t.Fatalf("with a local trail, a database outage is not a record error: %v", out.RecordErr)
		}
	}
	if tr.FellBack() != 6 {
		t.Fatalf("%d records fell back, want 6", tr.FellBack())
	}
	away(t, pool, db, false)
	clock.add(2 * retryAfterFailure)
	callThrough(t, tr, 1)
	sum, err := VerifyTrail(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Dispositions[string(grantretry.Succeeded)] != 2 {
		t.Fatalf("database dispositions: %v, want the 2 before and after the outage", sum.Dispositions)
	}
	lsum, err := trail.Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	if lsum.Dispositions[string(grantretry.Succeeded)] != 2 {
		t.Fatalf("local dispositions: %v, want the 2 of the outage", lsum.Dispositions)
	}
}

// away makes the database refuse connections and ends those open (true),
// or takes it back (false), without touching the server.
func away(t *testing.T, pool *pgxpool.Pool, db string, down bool) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, strings.Replace(pool.Config().ConnString(), "/"+db, "/postgres", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	limit := -1
	if down {
		limit = 0
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s CONNECTION LIMIT %d", db, limit)); err != nil {
		t.Fatal(err)
	}
	if down {
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db); err != nil {
			t.Fatal(err)
		}
		return
	}
	// The connections terminated while it was away are dead: a pool that
	// keeps idle ones warm (pool_min_conns) would hand one to the test's
	// own queries once the database is back.
	pool.Reset()
}

type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time      { return c.now }
func (c *stepClock) add(d time.Duration) { c.now = c.now.Add(d) }
