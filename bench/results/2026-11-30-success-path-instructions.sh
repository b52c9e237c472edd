#!/bin/bash
# Instructions per call of the success-path variants, counted by
# callgrind: deterministic where the time is not (docs/performance.md,
# "Issue 15, where it ends"). Counts only what runs inside the benchmark's
# call (bench.do: build the request, Do, read and close the response),
# with the collector off (GOGC=off: the allocations are counted, the
# collector's later work is not; see B/op for that) on one P, and without
# asynchronous preemption (its signals crash callgrind's toggle).
#
# Each figure is the median of 3 runs: the counts repeat to about 0.5%,
# with a rare run a few percent higher.
#
# Usage: bash 2026-11-30-success-path-instructions.sh TESTBINARY [N]
#   TESTBINARY: cd bench && go test -c -o /tmp/bench.test .
set -eu
bin=$1
n=${2:-20000}
count1() { # pattern function
	local out
	out=$(mktemp)
	GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off valgrind --tool=callgrind \
		--callgrind-out-file=/dev/null --toggle-collect="$2" \
		"$bin" -test.run '^$' -test.bench "$1" -test.benchtime "${n}x" -test.count 1 >/dev/null 2>"$out"
	local c
	c=$(grep -o 'Collected : [0-9]*' "$out" | awk '{print $3}')
	rm -f "$out"
	echo $((c / (n + 1))) # b.N = 1 runs first
}
count() { # the median of 3
	{ count1 "$@"; count1 "$@"; count1 "$@"; } | sort -n | sed -n 2p
}
for m in GET POST; do
	for rt in bare grantretry failsafe; do
		echo "$m $rt $(count "Success/net=inmem/method=$m/rt=$rt\$" '*bench.do')"
	done
done
if "$bin" -test.list '^BenchmarkSuccessKeyAllowance$' | grep -q .; then
	echo "key $(count '^BenchmarkSuccessKeyAllowance$' '*grantretry.IdempotencyKey')"
fi
