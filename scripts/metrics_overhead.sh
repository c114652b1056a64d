#!/usr/bin/env bash
# The metrics exporter's cost on the data path (docs/performance.md, "The metrics exporter"):
# sendrecv_perf over shm between 2 ranks, alternately
#   idle: no exporter, a scraper curling a closed port every 100 ms (the scraper's own CPU on
#         a small machine, the same in both modes), and
#   on:   ORBITE_METRICS_LISTEN set, the same scraper curling both ranks' /metrics;
# then each size's latency and bandwidth as on/idle ratios per round, and the scrape times.
# usage: scripts/metrics_overhead.sh [BUILD_DIR=build] [ROUNDS=3]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
rounds=${2:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

scrape() {  # port: the first rank's; the second is port + 1 (its local rank)
  for _ in $(seq 1 3000); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$1/metrics" || true
    curl -s -o /dev/null "http://127.0.0.1:$(($1 + 1))/metrics" || true
    sleep 0.1
  done
}

for round in $(seq 1 "$rounds"); do
  for mode in idle on; do
    if [ "$mode" = on ]; then
      port=39200
      export ORBITE_METRICS_LISTEN=127.0.0.1:$port
    else
      port=39300
      unset ORBITE_METRICS_LISTEN
    fi
    scrape $port > "$out/scrape_${mode}_$round.txt" &
    scraper=$!
    "$build/bin/orbite-run" -n 2 -- "$build/perf_tests/sendrecv_perf" --transport shm \
      --sizes 8,65536,4194304 -n 2000 -w 100 --json "$out/${mode}_$round.json" > /dev/null
    kill $scraper 2> /dev/null || true
    wait $scraper 2> /dev/null || true
  done
done

python3 - "$out" "$rounds" << 'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {m: [json.load(open(f"{out}/{m}_{r}.json"))["rows"] for r in range(1, rounds + 1)]
        for m in ("idle", "on")}
for i, size in enumerate(r["size"] for r in rows["idle"][0]):
    for col in ("lat_us", "bw_gbps"):
        cells = [f"{rows['idle'][r][i][col]:.3f} / {rows['on'][r][i][col]:.3f} = "
                 f"{rows['on'][r][i][col] / rows['idle'][r][i][col]:.2f}" for r in range(rounds)]
        print(f"{size:>8} {col:8} idle / on = ratio: " + "; ".join(cells))
times = sorted(float(t) * 1000 for r in range(1, rounds + 1)
               for t in open(f"{out}/scrape_on_{r}.txt").read().split() if float(t) > 0)
if times:
    print(f"scrapes of rank 0: {len(times)}, median {statistics.median(times):.2f} ms, "
          f"max {times[-1]:.2f} ms")
PY
