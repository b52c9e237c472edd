// Package pgtest gives each test a PostgreSQL database of its own, and
// drops it when the test ends.
//
// The server is the one GRANTRETRY_PG_DSN names; without it, the local
// server on 127.0.0.1:5432 (user postgres, trust auth) if one answers.
// The DSN may carry pgxpool's parameters (pool_min_conns=2, as the fleet's
// docs recommend): they are kept in the DSN a test gets, for its pool, and
// left out of the connections pgtest makes itself, which the server would
// refuse. Without a server the test is skipped, with the reason; a server
// that GRANTRETRY_PG_DSN names and that cannot be used is a failure, and so
// is a missing one when CI is set or GRANTRETRY_PG_REQUIRED=1, since a run
// that skipped every fleet test would pass having tested nothing. .ci/run
// starts a throwaway cluster when neither is there.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvDSN names the variable that gives the server's DSN.
const EnvDSN = "GRANTRETRY_PG_DSN"

// EnvRequired, set to 1, makes a missing server a failure, as CI does.
const EnvRequired = "GRANTRETRY_PG_REQUIRED"

// localDSN is the server a developer's machine usually has.
const localDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Required reports whether a test must fail, not skip, without a server.
func Required() bool {
	return os.Getenv(EnvRequired) == "1" || (os.Getenv("CI") != "" && os.Getenv("CI") != "false")
}

// ServerDSN returns the DSN of the server to use, and why there is none.
func ServerDSN() (string, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn, nil
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:5432", time.Second)
	if err != nil {
		return "", fmt.Errorf("%s is not set and nothing answers on 127.0.0.1:5432: %v", EnvDSN, err)
	}
	c.Close()
	return localDSN, nil
}

// DSN returns the DSN of a new, empty database that is dropped (with
// every connection still open to it) when t ends.
func DSN(t testing.TB) string {
	t.Helper()
	server, err := ServerDSN()
	if err != nil {
		unavailable(t, err)
		return ""
	}
	cfg, err := ConnConfig(server)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvDSN, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		unavailable(t, fmt.Errorf("connect %s: %w", redacted(server), err))
		return ""
	}
	defer admin.Close(ctx)
	name := "grantretry_test_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() { drop(t, server, name) })
	return withDatabase(t, server, name)
}

// ConnConfig is the config of one connection to dsn: pgxpool's own
// parameters (pool_min_conns and the rest) are taken out, since the
// server refuses them as unknown settings.
func ConnConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return cfg.ConnConfig, nil
}

// unavailable ends t for want of a server: a failure when the server was
// asked for (CI, GRANTRETRY_PG_REQUIRED=1, or a GRANTRETRY_PG_DSN that
// names it), a skip otherwise. Either way the message says why.
func unavailable(t testing.TB, err error) {
	t.Helper()
	switch {
	case os.Getenv(EnvDSN) != "":
		t.Fatalf("pgtest: %s names a server the tests cannot use: %v", EnvDSN, err)
	case Required():
		t.Fatalf("pgtest: no PostgreSQL, and CI or %s=1 asks for one: %v", EnvRequired, err)
	default:
		t.Skipf("pgtest: no PostgreSQL (set %s to run): %v", EnvDSN, err)
	}
}

func drop(t testing.TB, server, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := ConnConfig(server)
	if err != nil {
		t.Errorf("pgtest: drop %s: %v", name, err)
		return
	}
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Errorf("pgtest: drop %s: %v", name, err)
		return
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: drop %s: %v", name, err)
	}
}

// withDatabase is server's DSN with its database replaced by name. It
// accepts both URL and key=value DSNs.
func withDatabase(t testing.TB, server, name string) string {
	if strings.HasPrefix(server, "postgres://") || strings.HasPrefix(server, "postgresql://") {
		u, err := url.Parse(server)
		if err != nil {
			t.Fatalf("pgtest: %s: %v", EnvDSN, err)
		}
		u.Path = "/" + name
		return u.String()
	}
	return server + " dbname=" + name
}

func redacted(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return "the server"
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
