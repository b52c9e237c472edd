package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bucket reads the host's row: its tokens and its size.
func bucket(t *testing.T, pool *pgxpool.Pool) (tokens, maxTokens float64) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT tokens, max_tokens FROM grantretry_hosts WHERE host = $1`,
		coordKey).Scan(&tokens, &maxTokens); err != nil {
		t.Fatal(err)
	}
	return tokens, maxTokens
}

// WithRetryThrottle takes any maxTokens in (0, 1000]: a bucket of 2.5 is
// 2.5 tokens in the shared row too, on a cold connection (Exec mode, the
// server reads the text "2.5") as on a warm one (the prepared statement's
// parameter types).
func TestCoordinatorFractionalBucket(t *testing.T) {
	pool := newPool(t)
	co := NewCoordinator(pool)
	t.Cleanup(co.Close)
	h := co.Host(coordKey, grantretry.FleetPolicy{Threshold: 5, Probe: time.Second,
		MaxTokens: 2.5, TokenRatio: 0.5, Refill: time.Hour})
	ctx := context.Background()
	if _, err := h.Failed(ctx, grantretry.FleetFailure{CallFailed: true, Retryable: true}); err != nil {
		t.Fatalf("report with a bucket of 2.5: %v", err)
	}
	if tokens, maxTokens := bucket(t, pool); maxTokens != 2.5 || tokens < 1.49 || tokens > 1.51 {
		t.Fatalf("row: %v of %v tokens; want 1.5 of 2.5", tokens, maxTokens)
	}
}

// The same statement prepared, as warm leaves it on idle connections: the
// parameter the server inferred for the bucket's size must not truncate it.
func TestFailedSQLPreparedKeepsAFractionalBucket(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Conn().Prepare(ctx, failedSQL, failedSQL); err != nil {
		t.Fatal(err)
	}
	var open, retry bool
	if err := conn.QueryRow(ctx, failedSQL, pgx.QueryExecModeExec, coordKey, int64(5), time.Second, Channel,
		2.5, (*time.Time)(nil), time.Hour.Seconds(), 0.0, time.Now()).Scan(&open, &retry, new(bool)); err != nil {
		t.Fatal(err)
	}
	if tokens, maxTokens := bucket(t, pool); maxTokens != 2.5 || tokens < 1.49 || tokens > 1.51 {
		t.Fatalf("row: %v of %v tokens; want 1.5 of 2.5", tokens, maxTokens)
	}
}

// With a threshold of 1, every failed call opens the fleet's breaker,
// including the first one after a success this process saw.
func TestCoordinatorThresholdOneOpensAfterASuccess(t *testing.T) {
	pool := newPool(t)
	_, h := oneHost(t, pool, grantretry.FleetPolicy{Threshold: 1, Probe: time.Second})
	ctx := context.Background()
	f := grantretry.FleetFailure{CallFailed: true, Retryable: true}
	if _, err := h.Failed(ctx, f); err != nil || h.State() != grantretry.FleetOpen {
		t.Fatalf("first failed call, threshold 1: %v, %v", h.State(), err)
	}
	if err := h.ProbeDone(ctx, true); err != nil || h.State() != grantretry.FleetClosed {
		t.Fatalf("good probe: %v, %v", h.State(), err)
	}
	h.Succeeded()
	if _, err := h.Failed(ctx, f); err != nil {
		t.Fatal(err)
	}
	if h.State() != grantretry.FleetOpen {
		var failures int
		pool.QueryRow(ctx, `SELECT failures FROM grantretry_hosts WHERE host = $1`, coordKey).Scan(&failures)
		t.Fatalf("a failed call after a success, threshold 1: %v with %d failure(s) in a row; want open", h.State(), failures)
	}
}

// A host's row first written by a Transport without a retry throttle
// (WithoutRetryThrottle: reports with Retryable false) leaves the bucket
// unsized, not empty: the first Transport with a throttle finds it full.
func TestCoordinatorBucketNotEmptiedByAReportWithoutThrottle(t *testing.T) {
	pool := newPool(t)
	co := NewCoordinator(pool)
	t.Cleanup(co.Close)
	h := co.Host(coordKey, grantretry.FleetPolicy{Threshold: 5, Probe: time.Second,
		MaxTokens: 10, TokenRatio: 0.1, Refill: time.Minute})
	ctx := context.Background()
	if _, err := h.Failed(ctx, grantretry.FleetFailure{CallFailed: true}); err != nil {
		t.Fatal(err)
	}
	retry, err := h.Failed(ctx, grantretry.FleetFailure{CallFailed: true, Retryable: true})
	if err != nil {
		t.Fatal(err)
	}
	if tokens, maxTokens := bucket(t, pool); !retry || tokens < 8.9 {
		t.Fatalf("first withdrawal from a bucket of 10: retry %v, row %v of %v tokens; want true, 9 of 10", retry, tokens, maxTokens)
	}
}

// warm must not hold the pool's idle connections while a Prepare waits:
// a migration's CREATE INDEX on grantretry_hosts (a SHARE lock) blocks
// the Prepare of an INSERT for up to warm's second, every re-read, and the
// pool's other users (the trail, the letters, the re-read) find no
// connection meanwhile.
func TestCoordinatorWarmDoesNotHoldThePoolWhilePrepareWaits(t *testing.T) {
	pool, cfg := newPoolOfTwo(t)
	ctx := context.Background()
	waitFor(t, "two idle connections", func() bool { return pool.Stat().IdleConns() == 2 })
	locker, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE grantretry_hosts IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	co := NewCoordinator(pool, WithReread(50*time.Millisecond))
	t.Cleanup(co.Close)
	co.Host(coordKey, grantretry.FleetPolicy{}) // fresh: re-read, then warm
	// The first warm may find one connection busy with a re-read; the
	// next, a second later, finds both idle.
	var slow int
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); {
		qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		_, err := pool.Exec(qctx, `SELECT 1`)
		cancel()
		if err != nil {
			slow++
			t.Logf("SELECT 1 on the pool: %v after %v", err, time.Since(start))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if slow > 0 {
		t.Fatalf("%d queries on the pool found no connection within 300 ms while warm waited on a lock", slow)
	}
}
