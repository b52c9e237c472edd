#!/bin/bash
# The run docs/performance.md quotes: bench/'s success-path, throttle and
# pieces benchmarks and the key's, in interleaved rounds of one test
# binary, then callgrind's instruction counts of the in-memory success
# path. Writes OUT.txt (benchstat input) and OUT-instructions.txt.
#
# Usage (from bench/): bash results/2026-12-01-success-key-throttle-pieces.sh OUT [ROUNDS]
set -eu
out=$1
rounds=${2:-8}
bin=$(mktemp -d)/bench.test
go test -c -o "$bin" .
{
	echo "# $(go version); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "# rounds: $rounds; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
	for r in $(seq "$rounds"); do
		"$bin" -test.run '^$' -test.bench 'Success/|Throttle|Pieces' \
			-test.benchmem -test.benchtime 300ms -test.count 1 -test.timeout 30m
		"$bin" -test.run '^$' -test.bench 'IdempotencyKey|KeyedPost' \
			-test.benchmem -test.benchtime 300ms -test.count 1 -test.timeout 30m
		echo "# round $r done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	done
} >"$out.txt" 2>&1
bash "$(dirname "$0")/2026-11-30-success-path-instructions.sh" "$bin" >"$out-instructions.txt"
rm -f "$bin"
