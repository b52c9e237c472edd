package fleet

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lettersAway makes pool's database refuse every connection, a
// superuser's too, and ends those open: closing pool alone would leave
// the database to the connections a Letters opens on its own pool.
func lettersAway(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	db := pool.Config().ConnConfig.Database
	admin, err := pgxpool.New(ctx, strings.Replace(pool.Config().ConnString(), "/"+db, "/postgres", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db); err != nil {
		t.Fatal(err)
	}
	pool.Reset() // the connections the server ended
}
