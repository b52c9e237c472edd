package fleet_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/trail"
	"github.com/jackc/pgx/v5/pgxpool"
)

// One process of a fleet: its funder hosts' breakers and retry budgets
// shared through the Coordinator, its dead letters in the database and
// its audit records as its own hash chain in the fleet's trail, each
// with a local place for when the database is away.
func Example_withFleet() {
	ctx := context.Background()
	// The DSN ends in pool_min_conns=2: warm connections for failures.
	pool, err := pgxpool.New(ctx, os.Getenv("GRANTRETRY_PG_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// Idempotent; or "grantretry-fleet schema migrate" once, as the owner.
	if err := fleet.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}

	co := fleet.NewCoordinator(pool)
	defer co.Close()
	fallback, err := deadletter.Open("/var/lib/grant-pipeline/fleet-letters")
	if err != nil {
		log.Fatal(err)
	}
	letters := fleet.NewLetters(pool, fleet.WithFallback(fallback))
	defer letters.Close() // after the Transport's last call
	local, err := trail.Open("/var/lib/grant-pipeline/fleet-trail.jsonl", trail.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer local.Close()
	records, err := fleet.NewTrail(ctx, pool, fleet.WithLocalTrail(local))
	if err != nil {
		log.Fatal(err)
	}

	client := &http.Client{Transport: grantretry.New(nil,
		grantretry.WithFleet(co),
		grantretry.WithDeadLetter(letters),
		grantretry.WithAuditTrail(records),
	)}

	req, err := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, "APP-2291"), http.MethodPost,
		"https://portal.example-foundation.org/api/applications",
		strings.NewReader(`{"application":"APP-2291"}`))
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil { // given up: its letter is in the database, or the fallback
		log.Print(err)
		return
	}
	defer resp.Body.Close()
	out, _ := grantretry.OutcomeOf(resp)
	log.Printf("%s: %d after %d attempts", out.SubmissionID, resp.StatusCode, out.Attempts)
}
