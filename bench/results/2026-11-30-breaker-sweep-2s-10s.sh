#!/bin/bash
# The cell the breaker sweep (2026-11-30-breaker-sweep.sh) left out: a first
# probe after 2s and a 10s cooldown, the defaults it led to. The same runs,
# seeds and flags, built from the repository this script sits in. Run it
# alone on the machine: the simulator runs in scaled real time.
cd "$(dirname "$0")/../.." || exit 1
bin=$(mktemp -d)/gr
go build -o "$bin" ./cmd/grantretry || exit 1
for cfg in "2s 10s"; do
  set -- $cfg; probe=$1; cool=$2
  for sc in "def:" "30s:-outage 30s" "2m:-outage 2m" "10m:-outage 10m -run 12m -scale 120"; do
    name=${sc%%:*}; args=${sc#*:}
    for seed in 1 2 3; do
      line=$("$bin" sim -policies default -breaker 5,$cool -probe $probe -seed $seed $args -md "" -svg "" 2>/dev/null | grep "^grantretry defaults" | head -1)
      amp=$(echo "$line" | awk -F'  +' '{print $2}'); lag=$(echo "$line" | awk -F'  +' '{print $5}')
      echo "probe=$probe cool=$cool outage=$name seed=$seed amp=$amp lag=$lag"
    done
  done
done
