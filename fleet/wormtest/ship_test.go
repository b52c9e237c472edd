package wormtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/grantretry/grantretry/worm"
	"github.com/grantretry/grantretry/worm/s3test"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The fleet's trail ships to write-once storage one writer a stream, and
// the verifier names the writer and seq of a row a superuser edited.
func TestTrailShipsPerWriter(t *testing.T) {
	pool := newPool(t)
	endpoint, bucket := s3test.Endpoint(t)
	defer s3test.Stop() // the one test of the package that uses it
	ctx := context.Background()
	var writers []string
	for _, w := range []string{"writer-a", "writer-b"} {
		tr, err := fleet.NewTrail(ctx, pool, fleet.WithWriter(w), fleet.WithLimit(2*time.Second)) // a loaded machine must not fail the commit over
		if err != nil {
			t.Fatal(err)
		}
		callThrough(t, tr, 5)
		writers = append(writers, tr.Writer())
	}
	var b [6]byte
	rand.Read(b[:])
	st, err := worm.NewStore(ctx, worm.StoreConfig{Endpoint: endpoint, Bucket: bucket, Prefix: "fleet-" + hex.EncodeToString(b[:])})
	if err != nil {
		t.Fatal(err)
	}
	src := fleet.NewTrailSource(pool)
	s, err := worm.NewShipper(worm.Options{Store: st, Source: src, QueueDir: t.TempDir(), Retention: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := worm.Verify(ctx, st, worm.VerifyOptions{Local: src, MinRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := fleet.VerifyTrail(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Streams) != 2 || rep.Streams[0].Stream != writers[0] || rep.Streams[1].Stream != writers[1] {
		t.Fatalf("streams %+v, want one per writer %v", rep.Streams, writers)
	}
	for i, r := range rep.Streams {
		if r.LastSeq != sum.Writers[i].LastSeq || r.Local != sum.Writers[i].Records || r.AtRisk != 0 {
			t.Fatalf("stream %+v, want all %d records of %s anchored and equal", r, sum.Writers[i].Records, writers[i])
		}
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{
		`ALTER TABLE grantretry_trail DISABLE TRIGGER USER`,
		`UPDATE grantretry_trail SET record = replace(record, '"succeeded"', '"abandoned"') WHERE writer = 'writer-b' AND seq = (SELECT min(seq) FROM grantretry_trail WHERE writer = 'writer-b' AND record LIKE '%"succeeded"%')`,
		`ALTER TABLE grantretry_trail ENABLE TRIGGER USER`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Skipf("needs a superuser to tamper with the table: %v", err)
		}
	}
	var seq int64
	if err := conn.QueryRow(ctx, `SELECT min(seq) FROM grantretry_trail WHERE writer = 'writer-b' AND record LIKE '%"abandoned"%'`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	_, err = worm.Verify(ctx, st, worm.VerifyOptions{Local: src, MinRetention: time.Hour})
	var ve *worm.VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("Verify after an edit: %v, want a *worm.VerifyError", err)
	}
	p := ve.Problems[0]
	if p.Kind != worm.ProblemTampered || p.Stream != "writer-b" || p.Seq != uint64(seq) || p.File != fleet.TrailTable {
		t.Fatalf("problem %v, want the edit of writer-b seq %d in %s", p, seq, fleet.TrailTable)
	}
}

// newPool returns a pool on a new database with the fleet's schema.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := fleet.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

// callThrough makes n calls through a Transport that writes to sink, to a
// funder answering 503 then 201.
func callThrough(t *testing.T, sink grantretry.AuditSink, n int) {
	t.Helper()
	calls := 0
	tr := grantretry.New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		rec := httptest.NewRecorder()
		if calls%2 == 1 {
			rec.WriteHeader(503)
		} else {
			rec.WriteHeader(201)
		}
		resp := rec.Result()
		resp.Request = r
		return resp, nil
	}), grantretry.WithAuditTrail(sink), grantretry.WithClock(instantClock{}), grantretry.WithoutBreaker())
	for i := range n {
		ctx := grantretry.WithSubmissionID(context.Background(), fmt.Sprintf("GRANT-%d", i))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://funder.example/submit", strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		var e *grantretry.Error
		switch {
		case errors.As(err, &e):
			continue
		case err != nil:
			t.Fatalf("call %d: %v", i, err)
		}
		resp.Body.Close()
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// instantClock never sleeps: tests never wait a real backoff.
type instantClock struct{}

func (instantClock) Now() time.Time                                   { return time.Now() }
func (instantClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
