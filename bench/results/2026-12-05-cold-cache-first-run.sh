#!/usr/bin/env bash
# The README's two set-up commands on an empty module and build cache, on a
# fresh clone: the demo first, then the tests. Wall and CPU times from
# GNU time. The Go module proxy is the network.
set -euo pipefail
dir=$(mktemp -d)
git clone -q "$(git rev-parse --show-toplevel)" "$dir/repo"
cd "$dir/repo"
export GOMODCACHE=$dir/mod GOCACHE=$dir/build GOFLAGS=-modcacherw
uptime
/usr/bin/time -v go run ./examples/grantsgov > /dev/null
uptime
/usr/bin/time -v go test ./...
uptime
