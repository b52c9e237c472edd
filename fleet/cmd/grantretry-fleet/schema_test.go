package main

import (
	"context"
	"strings"
	"testing"

	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// fleetObjects counts the fleet's tables and functions in the database.
func fleetObjects(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM pg_class WHERE relname LIKE 'grantretry\_%') +
		(SELECT count(*) FROM pg_proc WHERE proname LIKE 'grantretry\_%')`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSchemaDropSaysWhatItHoldsAndDropsOnlyWithYes(t *testing.T) {
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if code, out, errOut := runCLI("schema", "drop", "-pg", dsn, "-yes"); code != exitOK || !strings.Contains(out, "no fleet schema") {
		t.Fatalf("drop on a database without the schema: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runCLI("schema", "migrate", "-pg", dsn); code != exitOK || fleetObjects(t, pool) == 0 {
		t.Fatalf("migrate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	letters := fleet.NewLetters(pool)
	for i := range 3 {
		if err := letters.PutDeadLetter(context.Background(), testLetter("http://funder.example", i, false)); err != nil {
			t.Fatal(err)
		}
	}
	letters.Close()
	n := fleetObjects(t, pool)

	code, out, errOut := runCLI("schema", "drop", "-pg", dsn)
	if code != exitFailure || !strings.Contains(out, "3 letters waiting and 0 redelivered") || !strings.Contains(errOut, "nothing dropped") {
		t.Fatalf("drop without -yes: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := fleetObjects(t, pool); got != n {
		t.Fatalf("drop without -yes left %d of the fleet's objects, want %d", got, n)
	}
	code, out, errOut = runCLI("schema", "drop", "-pg", dsn, "-yes")
	if code != exitOK || !strings.Contains(out, "dropped") || !strings.Contains(out, "3 letters waiting") {
		t.Fatalf("drop -yes: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := fleetObjects(t, pool); got != 0 {
		t.Fatalf("drop -yes left %d of the fleet's objects", got)
	}
	if code, _, _ := runCLI("schema", "drop", "-pg", dsn, "extra"); code != exitUsage {
		t.Errorf("drop with an argument: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := runCLI("schema"); code != exitUsage {
		t.Errorf("schema without a subcommand: exit %d, want %d", code, exitUsage)
	}
}
