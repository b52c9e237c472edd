package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestDSNGivesAnEmptyDatabaseOfItsOwn(t *testing.T) {
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("two calls gave one database: %s", a)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d tables in a new database", n)
	}
}

func TestClusterStopsAndStartsAgain(t *testing.T) {
	c := NewCluster(t)
	ctx := context.Background()
	ping := func() error {
		conn, err := pgx.Connect(ctx, c.DSN())
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}
	c.Stop("fast")
	if err := ping(); err == nil {
		t.Fatal("the stopped cluster answered")
	}
	c.Start()
	if err := ping(); err != nil {
		t.Fatal(err)
	}
}
