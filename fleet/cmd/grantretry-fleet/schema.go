package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/grantretry/grantretry/fleet"
	"github.com/jackc/pgx/v5/pgxpool"
)

const schemaMigrateSynopsis = `Usage: grantretry-fleet schema migrate [-pg DSN]

Creates the fleet's tables and functions in the database if they are
missing (fleet.Migrate): grantretry_letters, grantretry_trail and
grantretry_hosts, the trail's append-only trigger and its function, and
the functions grantretry_level_at and grantretry_credit, all in the
schema public. Run it as the role that will own them.
`

const schemaDropSynopsis = `Usage: grantretry-fleet schema drop [-pg DSN] [-yes]

Removes what "schema migrate" (fleet.Migrate) created, and everything in
it: the letters, waiting or redelivered, every writer's audit trail and
the hosts' shared breakers and budgets (fleet.Drop). Stop the fleet's
processes first. Without -yes it only says what the tables hold, drops
nothing and exits 1. Run it as the role that owns the tables.
`

func runSchema(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("missing subcommand: migrate or drop")
	}
	switch sub := args[0]; {
	case isHelp(sub):
		io.WriteString(stdout, schemaMigrateSynopsis+"\n"+schemaDropSynopsis)
		return flag.ErrHelp
	case sub == "migrate":
		return subUsage("schema migrate", schemaMigrate(args[1:], stdout))
	case sub == "drop":
		return subUsage("schema drop", schemaDrop(args[1:], stdout))
	default:
		return usagef("unknown subcommand %q: migrate or drop", sub)
	}
}

func schemaMigrate(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("schema migrate")
	rest, err := parse(fs, args, schemaMigrateSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("migrate: unexpected argument %q", rest[0])
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := fleet.Migrate(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "the fleet's tables and functions are in place")
	return nil
}

func schemaDrop(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("schema drop")
	yes := fs.Bool("yes", false, "drop the tables and what they hold")
	rest, err := parse(fs, args, schemaDropSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("drop: unexpected argument %q", rest[0])
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	held, found, err := schemaHolds(ctx, pool)
	if err != nil {
		return err
	}
	if !found {
		fmt.Fprintln(stdout, "the database has no fleet schema: nothing to drop")
		return nil
	}
	if !*yes {
		fmt.Fprintf(stdout, "the fleet's tables hold %s\n", held)
		return fmt.Errorf("nothing dropped: give -yes to drop the tables, the functions and what they hold")
	}
	if err := fleet.Drop(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dropped the fleet's tables and functions, and what they held: %s\n", held)
	return nil
}

// schemaHolds says what the fleet's tables hold, and whether any of the
// fleet's tables or functions is there at all.
func schemaHolds(ctx context.Context, pool *pgxpool.Pool) (string, bool, error) {
	var tables, funcs int
	err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = current_schema() AND c.relname IN ('grantretry_letters', 'grantretry_trail', 'grantretry_hosts')),
		(SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = current_schema() AND p.proname IN ('grantretry_trail_append_only', 'grantretry_level_at', 'grantretry_credit'))`).Scan(&tables, &funcs)
	if err != nil {
		return "", false, fmt.Errorf("reading the catalog: %w", err)
	}
	if tables+funcs == 0 {
		return "", false, nil
	}
	var parts []string
	count := func(what, query string) error {
		var n, m int
		err := pool.QueryRow(ctx, query).Scan(&n, &m)
		if noTable(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("counting %s: %w", what, err)
		}
		switch what {
		case "letters":
			parts = append(parts, fmt.Sprintf("%s waiting and %d redelivered", countNoun(n, "letter"), m))
		case "trail":
			parts = append(parts, fmt.Sprintf("%s from %s", countNoun(n, "trail record"), countNoun(m, "writer")))
		case "hosts":
			parts = append(parts, countNoun(n, "host row"))
		}
		return nil
	}
	for _, q := range [][2]string{
		{"letters", `SELECT count(*) FILTER (WHERE state = 'waiting'), count(*) FILTER (WHERE state = 'redelivered') FROM grantretry_letters`},
		{"trail", `SELECT count(*), count(DISTINCT writer) FROM grantretry_trail`},
		{"hosts", `SELECT count(*), 0 FROM grantretry_hosts`},
	} {
		if err := count(q[0], q[1]); err != nil {
			return "", true, err
		}
	}
	return strings.Join(parts, "; "), true, nil
}
