#!/usr/bin/env bash
# Device memory against host memory in one run (issue 23): putget_perf and sendrecv_perf with
# --memory cuda beside --memory host, per transport, in interleaved rounds (so drift in the
# machine's load hits both sides alike), on softcuda and softverbs from the build tree unless
# LD_LIBRARY_PATH already names a driver. Prints, per transport, benchmark and size, the median
# bandwidths over the rounds and the ratio cuda/host (1 = staging costs nothing).
#
#   scripts/compare-memory.sh [--rounds R] [--transports "tcp shm rdma"] [--out DIR]
#                             [--] [benchmark flags...]
#
# Benchmark flags go to every run (default: --sizes 1M,4M,16M,64M -n 20 -w 3 -c 1). On softcuda
# the device copies are CPU copies on the same cores as the transport's: the figures are
# softcuda's, not a GPU's (docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${ROUNDS:-3}"
transports="${TRANSPORTS:-tcp shm rdma}"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --transports) transports="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--sizes 1M,4M,16M,64M -n 20 -w 3 -c 1)

[ -x build/perf_tests/putget_perf ] || { echo "compare-memory: build first (cmake --build --preset default)" >&2; exit 1; }
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-$PWD/build/softcuda:$PWD/build/softverbs}"
[ -n "$out" ] || out="$(mktemp -d /tmp/orbite-compare-memory.XXXXXX)"
mkdir -p "$out"

for round in $(seq 1 "$rounds"); do
  for transport in $transports; do
    for bench in putget_perf sendrecv_perf; do
      # Odd rounds measure host first, even rounds cuda first.
      order="host cuda"; [ $((round % 2)) -eq 0 ] && order="cuda host"
      for memory in $order; do
        json="$out/$bench.$transport.$memory.$round.json"
        echo "round $round: $bench --transport $transport --memory $memory" >&2
        build/bin/orbite-run -n 2 --timeout 600 -- "build/perf_tests/$bench" \
          --transport "$transport" --memory "$memory" --json "$json" "${flags[@]}" >/dev/null
      done
    done
  done
done

python3 - "$out" <<'EOF'
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}  # (transport, bench, column, size) -> {memory: [values]}
for path in glob.glob(os.path.join(out, "*.json")):
    bench, transport, memory, _round, _ = os.path.basename(path).split(".")
    doc = json.load(open(path))
    if not doc.get("ok", False):
        sys.exit(f"compare-memory: {path} reports a failure")
    columns = ["put_bw_gbps", "get_bw_gbps"] if bench == "putget_perf" else ["bw_gbps"]
    for row in doc["rows"]:
        for c in columns:
            rows.setdefault((transport, bench, c, row["size"]), {}).setdefault(memory, []).append(row[c])
print(f"# medians of {out}: GB/s, host and cuda (softcuda), ratio cuda/host")
print(f"{'transport':<9} {'benchmark':<22} {'size':>10} {'host':>8} {'cuda':>8} {'ratio':>6}")
for (transport, bench, column, size) in sorted(rows):
    v = rows[(transport, bench, column, size)]
    if "host" not in v or "cuda" not in v:
        continue
    h, d = statistics.median(v["host"]), statistics.median(v["cuda"])
    what = bench.replace("_perf", "") + ("" if column == "bw_gbps" else " " + column.split("_")[0])
    print(f"{transport:<9} {what:<22} {size:>10} {h:>8.2f} {d:>8.2f} {d / h if h else 0:>6.2f}")
EOF
