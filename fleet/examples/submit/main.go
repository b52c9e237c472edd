// Command submit is fleet mode on a local database: two "processes" (two
// Transports, each with its own Coordinator, Trail and pool) submit to a
// funder that fails, share one breaker, keep their dead letters in one
// table and their audit records in one trail, which it then verifies.
//
//	export GRANTRETRY_PG_DSN='postgres://postgres@127.0.0.1:55432/postgres?sslmode=disable'
//	cd fleet && go run ./examples/submit
//
// See docs/fleet.md for the command that starts the local database.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	dsn := os.Getenv("GRANTRETRY_PG_DSN")
	if dsn == "" {
		log.Fatal("set GRANTRETRY_PG_DSN (docs/fleet.md starts a local database)")
	}
	ctx := context.Background()
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable) // down for the whole demo
	}))
	defer funder.Close()

	var procs []*grantretry.Transport
	for i := range 2 {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			log.Fatal(err)
		}
		cfg.MinConns = 2 // warm connections for the failure reports (docs/fleet.md)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer pool.Close()
		if err := fleet.Migrate(ctx, pool); err != nil {
			log.Fatal(err)
		}
		co := fleet.NewCoordinator(pool)
		defer co.Close()
		tr, err := fleet.NewTrail(ctx, pool, fleet.WithWriter(fmt.Sprintf("demo-%d-%d", os.Getpid(), i)), fleet.WithLimit(time.Second))
		if err != nil {
			log.Fatal(err)
		}
		letters := fleet.NewLetters(pool)
		defer letters.Close() // waits for the letters still being inserted
		procs = append(procs, grantretry.New(nil, grantretry.WithFleet(co), grantretry.WithAuditTrail(tr),
			grantretry.WithDeadLetter(letters),
			grantretry.WithBackoff(10*time.Millisecond, 50*time.Millisecond)))
	}
	time.Sleep(200 * time.Millisecond) // the Coordinators read the breaker rows
	for i := range 12 {
		p := i % 2
		req, _ := http.NewRequest(http.MethodPost, funder.URL+"/submit", strings.NewReader(fmt.Sprintf(`{"application":%d}`, i)))
		resp, err := procs[p].RoundTrip(req)
		var e *grantretry.Error
		switch {
		case errors.As(err, &e):
			fmt.Printf("process %d, call %2d: %-13s after %d attempts (%s)\n", p, i, e.Outcome.Disposition, e.Outcome.Attempts, e.Outcome.StopReason)
		case err != nil:
			log.Fatal(err)
		default:
			resp.Body.Close()
			out, _ := grantretry.OutcomeOf(resp)
			fmt.Printf("process %d, call %2d: %-13s after %d attempts\n", p, i, out.Disposition, out.Attempts)
		}
		time.Sleep(20 * time.Millisecond) // NOTIFY reaches the other process
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	sum, err := fleet.VerifyTrail(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	letters, err := fleet.NewLetters(pool).List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("trail verified: %d records from %d writers; %d letters waiting\n", sum.Records, len(sum.Writers), len(letters))
	fmt.Println("next: go run ./cmd/grantretry-fleet deadletter list, audit verify")
}
