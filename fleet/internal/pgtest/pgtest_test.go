package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestDSNGivesAnEmptyDatabaseOfItsOwn(t *testing.T) {
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("two calls gave one database: %s", a)
	}
	ctx := context.Background()
	cfg, err := ConnConfig(a)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
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

// withPoolParams is dsn with the pool parameters docs/fleet.md's DSN has.
func withPoolParams(dsn string) string {
	switch {
	case !strings.Contains(dsn, "://"):
		return dsn + " pool_min_conns=2 pool_max_conns=4"
	case strings.Contains(dsn, "?"):
		return dsn + "&pool_min_conns=2&pool_max_conns=4"
	default:
		return dsn + "?pool_min_conns=2&pool_max_conns=4"
	}
}

func TestDSNWithPoolParametersGivesADatabase(t *testing.T) {
	server, err := ServerDSN()
	if err != nil {
		if Required() {
			t.Fatalf("no PostgreSQL, and CI asks for one: %v", err)
		}
		t.Skipf("no PostgreSQL (set %s to run): %v", EnvDSN, err)
	}
	t.Setenv(EnvDSN, withPoolParams(server))
	t.Setenv(EnvRequired, "1") // a refused connection must fail here, not skip
	dsn := DSN(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if got := pool.Config().MinConns; got != 2 {
		t.Errorf("the test database's DSN lost pool_min_conns: MinConns %d, want 2", got)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil {
		t.Fatal(err)
	}
}

// endedTB records how a test was ended instead of ending it.
type endedTB struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (e *endedTB) Helper() {}
func (e *endedTB) Fatalf(format string, args ...any) {
	e.failed, e.msg = true, fmt.Sprintf(format, args...)
}
func (e *endedTB) Skipf(format string, args ...any) {
	e.skipped, e.msg = true, fmt.Sprintf(format, args...)
}

func TestMissingServerFailsWhenAskedForAndSaysWhy(t *testing.T) {
	why := errors.New("nothing answers on 127.0.0.1:5432")
	for _, c := range []struct {
		name, dsn, required, ci string
		fail                    bool
	}{
		{name: "nothing asked", fail: false},
		{name: "CI set", ci: "true", fail: true},
		{name: "CI=false", ci: "false", fail: false},
		{name: "required", required: "1", fail: true},
		{name: "DSN given", dsn: "postgres://postgres@127.0.0.1:1/postgres", fail: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvDSN, c.dsn)
			t.Setenv(EnvRequired, c.required)
			t.Setenv("CI", c.ci)
			e := &endedTB{}
			unavailable(e, why)
			if e.failed != c.fail || e.skipped == c.fail {
				t.Fatalf("failed %v, skipped %v; want failed %v", e.failed, e.skipped, c.fail)
			}
			if !strings.Contains(e.msg, why.Error()) {
				t.Errorf("the message does not say why: %q", e.msg)
			}
		})
	}
}

// The DSN docs/fleet.md's "Trying it" exports is one the tests take: its
// pool parameters reach the pool and never the server.
func TestTheGuidesDSNKeepsPoolParametersFromTheServer(t *testing.T) {
	page, err := os.ReadFile("../../../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^export GRANTRETRY_PG_DSN='([^']+)'$`).FindSubmatch(page)
	if m == nil {
		t.Fatal("docs/fleet.md exports no GRANTRETRY_PG_DSN")
	}
	dsn := string(m[1])
	cfg, err := ConnConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.RuntimeParams {
		if strings.HasPrefix(name, "pool_") {
			t.Errorf("%s would be sent to the server, which refuses it", name)
		}
	}
	pcfg, err := pgxpool.ParseConfig(withDatabase(t, dsn, "grantretry_test_x"))
	if err != nil {
		t.Fatal(err)
	}
	if pcfg.MinConns != 2 {
		t.Errorf("a test database's DSN from the guide's gives a pool MinConns %d, want the guide's 2", pcfg.MinConns)
	}
}
