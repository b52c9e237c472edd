#!/bin/bash
cd /work/main
go build -o /tmp/sweep/gr ./cmd/grantretry || exit 1
for cfg in "1s 8s" "2s 8s" "1s 10s" "2s 15s" "2s 60s"; do
  set -- $cfg; probe=$1; cool=$2
  for sc in "def:" "30s:-outage 30s" "2m:-outage 2m" "10m:-outage 10m -run 12m -scale 120"; do
    name=${sc%%:*}; args=${sc#*:}
    for seed in 1 2 3; do
      line=$(/tmp/sweep/gr sim -policies default -breaker 5,$cool -probe $probe -seed $seed $args -md "" -svg "" 2>/dev/null | grep "^grantretry defaults" | head -1)
      amp=$(echo "$line" | awk -F'  +' '{print $2}'); lag=$(echo "$line" | awk -F'  +' '{print $5}')
      echo "probe=$probe cool=$cool outage=$name seed=$seed amp=$amp lag=$lag"
    done
  done
done
