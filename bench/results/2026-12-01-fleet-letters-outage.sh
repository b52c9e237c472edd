#!/bin/sh
# The outage run of TestFleetLettersAtTheirDefaultLimitKeepTheBreakerAndLandOnce
# (16 OS processes x 8 callers, one call each 200 ms, a funder down 6 s;
# letters off, then letters on the Coordinator's pool with a fallback
# directory each), N times at REV ("after") and with fleet/letters.go and
# fleet/options.go as they were at 4cbc5f1 ("before": a 5 ms insert on the
# pool given, no Drain; a shim gives the test Close, Drain and insertPool).
# Usage: sh bench/results/2026-12-01-fleet-letters-outage.sh REV N
# with GRANTRETRY_PG_DSN set (the shared server, fsync on).
set -e
rev=${1:-HEAD}; n=${2:-2}
top=$(git rev-parse --show-toplevel)
for side in before after; do
  w=$(mktemp -d)
  git -C "$top" archive "$rev" | tar -x -C "$w"
  cd "$w/fleet"
  if [ $side = before ]; then
    git -C "$top" show 4cbc5f1:fleet/letters.go > letters.go
    git -C "$top" show 4cbc5f1:fleet/options.go > options.go
    rm -f drain.go drain_test.go letters_cut_test.go letters_pool_test.go
    cat > zz_shim_test.go <<'SHIM'
package fleet

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"
)

func (s *Letters) Close()                    {}
func (s *Letters) insertPool() *pgxpool.Pool { return s.pool }
func (s *Letters) Drain(context.Context) (int, int, error) {
	return 0, 0, errors.New("no Drain before the fix")
}
SHIM
  fi
  for i in $(seq "$n"); do
    echo "== $side, run $i ($(date -u +%H:%M:%S))"
    go test -count=1 -v -run 'TestFleetLettersAtTheirDefaultLimit' . 2>&1 | grep -v '^=== RUN' || true
  done
  cd "$top"; rm -rf "$w"
done
