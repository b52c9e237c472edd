package fleet

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// catalog lists what the database holds in its public schema, and its
// user triggers: what Migrate adds and Drop must take away.
func catalog(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT 'relation ' || c.relkind::text || ' ' || c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
		UNION ALL
		SELECT 'function ' || p.oid::regprocedure::text
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
		UNION ALL
		SELECT 'type ' || t.typname
		FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public'
		UNION ALL
		SELECT 'trigger ' || tgname FROM pg_trigger WHERE NOT tgisinternal
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		names = append(names, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// Drop leaves the database as Migrate found it, with letters, trail
// records and host rows in the tables; it does nothing on a database
// without the schema, and Migrate works again after it.
func TestDropLeavesTheDatabaseAsMigrateFoundIt(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	before := catalog(t, pool)
	if err := Drop(ctx, pool); err != nil {
		t.Fatalf("Drop on a database Migrate never ran on: %v", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	migrated := catalog(t, pool)
	for _, want := range []string{
		"relation r grantretry_letters", "relation r grantretry_trail", "relation r grantretry_hosts",
		"function grantretry_trail_append_only()", "trigger grantretry_trail_append_only",
	} {
		if !contains(migrated, want) {
			t.Fatalf("after Migrate the catalog has no %q: %v", want, migrated)
		}
	}

	// Something in every table: a letter, a trail, a host's row.
	tr, err := NewTrail(ctx, pool, WithWriter("drop-test"), WithLimit(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	letters := NewLetters(pool)
	co := NewCoordinator(pool)
	down := answerAll(func(string) int { return http.StatusServiceUnavailable })
	tp := grantretry.New(down, grantretry.WithFleet(co), grantretry.WithAuditTrail(tr), grantretry.WithDeadLetter(letters), grantretry.WithBudget(1, time.Minute))
	req, _ := http.NewRequest(http.MethodPost, "https://funder.example/submit", strings.NewReader(`{"application":1}`))
	if resp, err := tp.RoundTrip(req); err == nil {
		resp.Body.Close()
	}
	co.Close()
	letters.Close()
	for _, table := range []string{"grantretry_letters", "grantretry_trail", "grantretry_hosts"} {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n == 0 {
			t.Fatalf("%s before Drop: %d rows, %v", table, n, err)
		}
	}

	if err := Drop(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if after := catalog(t, pool); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("after Drop the catalog is\n%s\nwant, as before Migrate,\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if err := Drop(ctx, pool); err != nil {
		t.Fatalf("Drop a second time: %v", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate after Drop: %v", err)
	}
	if got := catalog(t, pool); strings.Join(got, "\n") != strings.Join(migrated, "\n") {
		t.Fatalf("Migrate after Drop made\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(migrated, "\n"))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
