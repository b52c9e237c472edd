#!/bin/bash
# Issue 15's gap rounds: each round runs every given bench/ test binary in
# turn, BenchmarkSuccess in memory (GET and POST; bare, grantretry,
# failsafe-go) and then BenchmarkSuccessKeyAllowance, 200,000 calls each,
# rows tagged /v=NAME/ for bench/results/2026-11-30-success-path-gap.py.
#
# Usage: bash 2026-12-01-success-path-gap-rounds.sh ROUNDS OUT NAME=TESTBINARY...
#   TESTBINARY: cd bench && go test -c -o /tmp/bench.test .
set -u
rounds=$1
out=$2
shift 2
: >"$out"
for r in $(seq "$rounds"); do
	for nb in "$@"; do
		n=${nb%%=*}
		b=${nb#*=}
		"$b" -test.run '^$' -test.bench 'Success/net=inmem/method=(GET|POST)/rt=(bare|grantretry|failsafe)$' \
			-test.benchtime 200000x -test.benchmem 2>/dev/null |
			grep '^Benchmark' | sed -E "s#/rt=#/v=$n/rt=#" >>"$out"
		"$b" -test.run '^$' -test.bench '^BenchmarkSuccessKeyAllowance$' -test.benchtime 200000x -test.benchmem 2>/dev/null |
			grep '^Benchmark' | sed -E "s#^BenchmarkSuccessKeyAllowance-#BenchmarkSuccessKeyAllowance/v=$n-#" >>"$out"
	done
done
