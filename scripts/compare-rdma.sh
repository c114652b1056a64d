#!/usr/bin/env bash
# OrbiTE's RDMA put/get on softverbs beside softverbs' own raw RDMA WRITE/READ (softverbs_bw),
# the raw TCP stream softverbs is read against, and OrbiTE's tcp put/get, in the same rounds
# (the machine is noisy: each round runs all of them back to back), then the medians and ratios.
# Every figure is softverbs on one host, not hardware.
#
#   scripts/compare-rdma.sh [--rounds 3] [--out DIR] [-b 4K] [-e 64M]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
out=/tmp/orbite-compare-rdma
lo=4K
hi=64M
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -b) lo="$2"; shift 2 ;;
    -e) hi="$2"; shift 2 ;;
    *) echo "usage: scripts/compare-rdma.sh [--rounds N] [--out DIR] [-b SIZE] [-e SIZE]" >&2; exit 2 ;;
  esac
done

build=build
ninja -C "$build" putget_perf softverbs_bw orbite-run softverbs >/dev/null
mkdir -p "$out/json"
export LD_LIBRARY_PATH="$PWD/$build/softverbs"
unset SOFTVERBS_CONFIG
for r in $(seq 1 "$rounds"); do
  echo "round $r of $rounds"
  "$build/perf_tests/softverbs_bw" -b "$lo" -e "$hi" -f 4 -n 10 -w 2 \
    --json "$out/json/softverbs_bw.$r.json" >"$out/softverbs_bw.$r.txt"
  for t in rdma tcp; do
    "$build/bin/orbite-run" -n 2 -- "$build/perf_tests/putget_perf" --transport "$t" \
      -b "$lo" -e "$hi" -f 4 -c 1 --json "$out/json/putget_$t.$r.json" >"$out/putget_$t.$r.txt"
  done
done
python3 scripts/compare_rdma_summary.py "$out" "$rounds"
