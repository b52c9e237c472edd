package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A run whose Transport holds the funder's answer while the trail commits
// it (the trail's table locked for longer than the run's lease) keeps the
// letter: a second operator's redeliver -all -trust-key meanwhile finds
// it another's, and the funder receives it once.
func TestRedeliverKeepsItsLeaseWhileTheTrailCommits(t *testing.T) {
	dsn, pool := newDB(t)
	var n atomic.Int32
	unlocked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			ctx := context.Background()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Error(err)
				close(unlocked)
			} else {
				if _, err := tx.Exec(ctx, `LOCK TABLE grantretry_trail IN SHARE MODE`); err != nil {
					t.Error(err)
				}
				go func() {
					defer close(unlocked)
					time.Sleep(4 * time.Second) // past A's lease of 1.25 s
					tx.Rollback(ctx)
				}()
			}
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	putLetters(t, pool, testLetter(srv.URL, 0, false))
	type result struct {
		code     int
		out, err string
	}
	a := make(chan result, 1)
	go func() {
		c, o, e := runCLI("deadletter", "redeliver", "-pg", dsn, "letter-0", "-worker", "A", "-timeout", "1s")
		a <- result{c, o, e}
	}()
	time.Sleep(2 * time.Second) // past A's lease; A waits for the trail
	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-trust-key", "-worker", "B")
	if code != exitOK || !strings.Contains(out, "left, another's: 1") {
		t.Errorf("B, while A waits for its trail: exit %d, want %d and the letter another's\n%s%s", code, exitOK, out, errOut)
	}
	ra := <-a
	<-unlocked
	if ra.code != exitOK || !strings.Contains(ra.out, "delivered: 1") {
		t.Errorf("A: exit %d, want %d and the letter delivered\n%s%s", ra.code, exitOK, ra.out, ra.err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("the funder received the letter %d times, want once", got)
	}
}

// funderThat runs do on the letter's request, then hangs up without an
// answer: the funder may have it.
func funderThat(t *testing.T, do func()) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		do()
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		c.Close()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func execSQL(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Error(err)
	}
}

// A letter this run sent, that was not delivered, and whose release then
// found its claim gone (a pipeline worker claimed it after its lease, or
// a DBA deleted it) is the run's failure, not another's: the funder may
// have it.
func TestRedeliverSentLetterWhoseClaimWentIsAFailure(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
	}{
		{"claimed by a pipeline worker", `UPDATE grantretry_letters SET claimed_by = 'pipeline-w1', claims = claims + 1,
			lease_until = clock_timestamp() + interval '1 hour', sending_since = NULL,
			letter = jsonb_set(letter, '{ambiguous}', 'true') WHERE id = 'letter-0'`},
		{"deleted", `DELETE FROM grantretry_letters WHERE id = 'letter-0'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, pool := newDB(t)
			srv := funderThat(t, func() { execSQL(t, pool, tc.sql) })
			putLetters(t, pool, testLetter(srv.URL, 0, false))
			code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-budget", "0")
			if code != exitFailure || strings.Contains(out, "another's") || !strings.Contains(out, "not delivered: 1 (no answer: 1)") ||
				!strings.Contains(errOut, "letter letter-0") || !strings.Contains(errOut, "its lease was lost") {
				t.Errorf("exit %d, want %d, the letter not delivered and its lease lost, not another's\n%s%s", code, exitFailure, out, errOut)
			}
		})
	}
}

// The database goes down during a run (connections refused from the
// first letter's send on): the letter answered 503 is counted by its
// answer, not recorded; the letters that could not be claimed are not
// sent, not counted as sent.
func TestRedeliverWithTheDatabaseDownCountsOnlyWhatWasSent(t *testing.T) {
	dsn, pool := newDB(t)
	db := pool.Config().ConnConfig.Database
	server, err := pgtest.ServerDSN()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgtest.ConnConfig(server)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` ALLOW_CONNECTIONS true`)
		admin.Close(ctx)
	})
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			for _, q := range []string{`ALTER DATABASE ` + pgx.Identifier{db}.Sanitize() + ` ALLOW_CONNECTIONS false`,
				`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + db + `' AND pid <> pg_backend_pid()`} {
				if _, err := admin.Exec(ctx, q); err != nil {
					t.Error(err)
				}
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	putLetters(t, pool, testLetter(srv.URL, 0, false), testLetter(srv.URL, 1, false), testLetter(srv.URL, 2, false))
	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-budget", "0")
	if got := n.Load(); got != 1 {
		t.Fatalf("the funder received %d requests, want 1\n%s%s", got, out, errOut)
	}
	for _, want := range []string{
		"summary: 3 letters waiting, 3 selected, 1 sent\n",
		"  not delivered: 1 (answered 503 Service Unavailable, not recorded: 1)\n",
		"  not sent: 2 (",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary does not say %q", want)
		}
	}
	t.Logf("%s%s", out, errOut)
	if code != exitFailure || strings.Contains(out, "no answer") {
		t.Errorf("exit %d, want %d\n%s%s", code, exitFailure, out, errOut)
	}
}
