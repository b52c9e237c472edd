// Command submit is fleet mode on a local database: two "processes" (two
// Transports, each with its own Coordinator, Trail and pool) submit to a
// funder that is down, share one breaker, keep their dead letters in one
// table and their audit records in one trail. Then the funder comes back,
// a worker redelivers each letter once, and the trail is verified.
//
//	export GRANTRETRY_PG_DSN='postgres://postgres@127.0.0.1:55432/postgres?sslmode=disable'
//	cd fleet && go run ./examples/submit [-keep]
//
// It needs a database without the fleet's tables: it creates them
// (fleet.Migrate) and, when it ends, drops them again (fleet.Drop), so the
// database is left as it was. With -keep it leaves them, and says what is
// in them, for grantretry-fleet's commands to read; "grantretry-fleet
// schema drop -yes" removes them. docs/fleet.md starts the local database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	keep := flag.Bool("keep", false, "leave the fleet's tables and what the run wrote in the database")
	flag.Parse()
	log.SetFlags(0)
	dsn := os.Getenv("GRANTRETRY_PG_DSN")
	if dsn == "" {
		log.Fatal("submit: set GRANTRETRY_PG_DSN (docs/fleet.md starts a local database)")
	}
	if err := run(context.Background(), dsn, *keep); err != nil {
		log.Fatal("submit: ", err)
	}
}

func run(ctx context.Context, dsn string, keep bool) error {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.MinConns = 2 // warm connections for the failure reports (docs/fleet.md)
	admin, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	var existing int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname IN ('grantretry_letters', 'grantretry_trail', 'grantretry_hosts') AND relnamespace = current_schema()::regnamespace`).Scan(&existing); err != nil {
		return fmt.Errorf("reading the catalog: %w", err)
	}
	if existing > 0 {
		return errors.New("the database has the fleet's tables already; this example drops the tables it creates when it ends, " +
			"so run it on a database without them (go run ./cmd/grantretry-fleet schema drop says what they hold; -yes drops them)")
	}
	if err := fleet.Migrate(ctx, admin); err != nil {
		return err
	}
	dropped := false
	defer func() {
		if !keep && !dropped {
			fleet.Drop(context.WithoutCancel(ctx), admin) // on an early return
		}
	}()

	var up atomic.Bool // the funder is down until the redelivery
	var mu sync.Mutex
	received := map[string]int{} // by Idempotency-Key, once it is up
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		received[r.Header.Get(grantretry.HeaderIdempotencyKey)]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer funder.Close()

	// Two processes of the fleet, each with what a process of its own has.
	type process struct {
		tp      *grantretry.Transport
		co      *fleet.Coordinator
		letters *fleet.Letters
		pool    *pgxpool.Pool
	}
	var procs []process
	var writers []string
	for i := range 2 {
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return err
		}
		writer := fmt.Sprintf("submit-example-%d-%d", os.Getpid(), i)
		tr, err := fleet.NewTrail(ctx, pool, fleet.WithWriter(writer), fleet.WithLimit(time.Second))
		if err != nil {
			pool.Close()
			return err
		}
		writers = append(writers, writer)
		co := fleet.NewCoordinator(pool)
		letters := fleet.NewLetters(pool)
		procs = append(procs, process{
			tp: grantretry.New(nil, grantretry.WithFleet(co), grantretry.WithAuditTrail(tr),
				grantretry.WithDeadLetter(letters),
				grantretry.WithBackoff(10*time.Millisecond, 50*time.Millisecond)),
			co: co, letters: letters, pool: pool,
		})
	}
	closeProcs := func() {
		for _, p := range procs {
			p.co.Close()
			p.letters.Close() // waits for the letters still being inserted
			p.pool.Close()
		}
		procs = nil
	}
	defer closeProcs()
	time.Sleep(200 * time.Millisecond) // the Coordinators read the breaker rows

	fmt.Println("The funder is down. Twelve submissions, alternating between the two processes:")
	var ids []string
	for i := range 12 {
		p := i % 2
		sub := fmt.Sprintf("APP-%02d", i+1)
		req, _ := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, sub), http.MethodPost,
			funder.URL+"/submit", strings.NewReader(fmt.Sprintf(`{"application":%q}`, sub)))
		resp, err := procs[p].tp.RoundTrip(req)
		var e *grantretry.Error
		var out grantretry.Outcome
		switch {
		case errors.As(err, &e):
			out = e.Outcome
		case err != nil:
			return err
		default:
			resp.Body.Close()
			out, _ = grantretry.OutcomeOf(resp)
		}
		fmt.Printf("  process %d, %s: %-12s after %s (%s)\n", p, sub, out.Disposition, attempts(out.Attempts), out.StopReason)
		if out.DeadLetterID != "" {
			ids = append(ids, out.DeadLetterID)
		}
		time.Sleep(20 * time.Millisecond) // NOTIFY reaches the other process
	}
	closeProcs()

	// The funder is back: a worker claims each letter just before it
	// sends it, so that no letter is on the wire from two workers.
	up.Store(true)
	fmt.Printf("\nThe funder is back. A worker redelivers the %d letters from the database:\n", len(ids))
	tr, err := fleet.NewTrail(ctx, admin, fleet.WithWriter(fmt.Sprintf("submit-example-%d-worker", os.Getpid())), fleet.WithLimit(time.Second))
	if err != nil {
		return err
	}
	writers = append(writers, tr.Writer())
	letters := fleet.NewLetters(admin)
	defer letters.Close()
	client := &http.Client{Transport: grantretry.New(nil, grantretry.WithAuditTrail(tr))}
	claims, err := letters.ClaimIDs(ctx, "submit-example-worker", ids)
	if err != nil {
		return err
	}
	for _, c := range claims {
		rec, err := letters.Redeliver(ctx, c, client, nil)
		if err != nil {
			return err
		}
		fmt.Printf("  %s: %d %s (letter %s)\n", c.Letter.SubmissionID, rec.Status, rec.Disposition, c.Letter.ID)
	}
	mu.Lock()
	once := 0
	for _, n := range received {
		if n == 1 {
			once++
		}
	}
	mu.Unlock()
	fmt.Printf("  the funder received %d submissions, each once\n", once)

	sum, err := fleet.VerifyTrail(ctx, admin)
	if err != nil {
		return err
	}
	fmt.Printf("\nThe fleet's trail verified: %d records, one hash chain for each of %d writers.\n", sum.Records, len(sum.Writers))
	letters.Close()

	if !keep {
		if err := fleet.Drop(ctx, admin); err != nil {
			return err
		}
		dropped = true
		fmt.Println("Dropped the fleet's tables and functions: the database is as the example found it (run with -keep to look at them).")
		return nil
	}
	var hosts int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM grantretry_hosts").Scan(&hosts); err != nil {
		return err
	}
	fmt.Printf("Left in the database (-keep): the fleet's tables and functions, %d redelivered letters, %d trail records of the writers %s, %d host row.\n",
		len(ids), sum.Records, strings.Join(writers, ", "), hosts)
	fmt.Printf("Next, from fleet/:\n"+
		"  go run ./cmd/grantretry-fleet deadletter show %s\n"+
		"  go run ./cmd/grantretry-fleet audit trace -submission APP-01\n"+
		"  go run ./cmd/grantretry-fleet audit verify\n"+
		"  go run ./cmd/grantretry-fleet schema drop -yes   # removes it all\n", ids[0])
	return nil
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}
