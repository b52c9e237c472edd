#!/bin/sh
# BenchmarkQuotaHold (bench/quota_test.go): a funder answering 429
# LimitExceededException (no Retry-After) for a window, then 200; 100
# callers, one call each 100 ms, through one grantretry Transport (probe
# interval 1 s) and through go-retryablehttp's defaults. Real clock. Two
# windows: 6 s, a whole number of probe intervals, and 5.5 s, whose end
# falls half-way between two probe turns.
# Usage, from the repository's root:
#   sh bench/results/2026-12-04-quota-hold.sh > bench/results/2026-12-04-quota-hold.txt
set -e
cd "$(git rev-parse --show-toplevel)/bench"
echo "# commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for w in 6s 5.5s; do
  echo "# command, in bench/: GRANTRETRY_QUOTA_WINDOW=$w go test -run '^\$' -bench 'BenchmarkQuotaHold' -benchtime 1x -count 5 -v ."
  GRANTRETRY_QUOTA_WINDOW=$w go test -run '^$' -bench 'BenchmarkQuotaHold' -benchtime 1x -count 5 -v .
done
