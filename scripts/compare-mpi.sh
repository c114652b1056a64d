#!/usr/bin/env bash
# OrbiTE point-to-point performance side by side with Open MPI on this host, 2 ranks, per
# transport, in interleaved rounds (so drift in the machine's load hits both sides alike):
#   shm  OrbiTE --transport shm  vs  mpirun --mca btl self,vader
#   tcp  OrbiTE --transport tcp  vs  mpirun --mca btl self,tcp --mca btl_tcp_if_include lo
# Each round runs sendrecv_perf and putget_perf under orbite-run, their MPI references under
# mpirun, and memcpy_bw (single-thread memcpy and raw TCP loopback ceilings). Prints, per
# transport and size, the medians over the rounds and the ratios: bandwidth OrbiTE/MPI and latency
# MPI/OrbiTE, so > 1 means OrbiTE is better either way.
#
#   scripts/compare-mpi.sh [--rounds R] [--transports "shm tcp"] [--out DIR] [--no-build]
#                          [--] [benchmark flags...]
#
# Benchmark flags go to all four benchmarks (-n 50, -w 5, --window 8, -c 1, -b/-e/-f/-i, --sizes);
# without a size flag the sizes are --sizes 8,1M,64M. Environment: ROUNDS (default 3),
# TRANSPORTS, RUN_TIMEOUT (seconds per run, default 600), MPIRUN_ARGS (extra mpirun arguments,
# e.g. "--mca btl_vader_single_copy_mechanism none" where CMA is not permitted).
#
# pml ob1 keeps Open MPI on the named btl (pml ucx would bypass it), and osc ^ucx keeps its
# one-sided operations there too.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "compare-mpi: $*" >&2; exit 1; }

rounds="${ROUNDS:-3}"
transports="${TRANSPORTS:-shm tcp}"
run_timeout="${RUN_TIMEOUT:-600}"
out=""
build=1
bench_flags=()
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rounds) (($# >= 2)) || die "--rounds needs a value"; rounds="$2"; shift 2 ;;
    --rounds=*) rounds="${1#*=}"; shift ;;
    --transports) (($# >= 2)) || die "--transports needs a value"; transports="$2"; shift 2 ;;
    --transports=*) transports="${1#*=}"; shift ;;
    --out) (($# >= 2)) || die "--out needs a value"; out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --no-build) build=0; shift ;;
    --) shift; bench_flags+=("$@"); break ;;
    *) bench_flags+=("$1"); shift ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] ||
  die "--rounds (ROUNDS): expected a positive integer, got '$rounds'"
[[ "$run_timeout" =~ ^[1-9][0-9]*$ ]] || die "RUN_TIMEOUT: expected seconds, got '$run_timeout'"
for t in $transports; do
  case "$t" in shm|tcp) ;; *) die "--transports: expected shm and/or tcp, got '$t'" ;; esac
done
[ -n "$transports" ] || die "--transports: no transport given"

sized=0
for f in "${bench_flags[@]+"${bench_flags[@]}"}"; do
  case "$f" in
    -b*|-e*|-f*|-i*|--minbytes*|--maxbytes*|--stepfactor*|--stepbytes*|--sizes*) sized=1 ;;
    --transport|--transport=*|--json|--json=*) die "$f is set by the script; drop it" ;;
  esac
done
((sized)) || bench_flags+=(--sizes "8,1M,64M")

command -v python3 >/dev/null || die "python3 not found (it summarizes the JSON results)"
if ! command -v mpirun >/dev/null; then
  die "mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev, see
scripts/install-deps.sh) or put its bin/ on PATH"
fi
mpi_version="$(mpirun --version 2>&1 | head -n 1 || true)"
[[ "$mpi_version" == *"Open MPI"* ]] ||
  die "$(command -v mpirun) is not Open MPI's mpirun ('$mpi_version'); the --mca arguments need it"
mpi_version="${mpi_version/mpirun (Open MPI)/Open MPI}"

targets=(orbite-run sendrecv_perf putget_perf mpi_sendrecv_perf mpi_putget_perf memcpy_bw)
if ((build)); then
  [ -f build/CMakeCache.txt ] || cmake --preset default >/dev/null
  grep -q '^ORBITE_WITH_MPI:BOOL=ON' build/CMakeCache.txt ||
    die "build/ was configured without MPI: cmake --preset default -DORBITE_WITH_MPI=ON"
  echo "compare-mpi: building ${targets[*]}" >&2
  cmake --build --preset default --target "${targets[@]}" >/dev/null ||
    die "build failed: cmake --build --preset default --target ${targets[*]}"
fi
for b in sendrecv_perf putget_perf mpi_sendrecv_perf mpi_putget_perf memcpy_bw; do
  [ -x "build/perf_tests/$b" ] || die "build/perf_tests/$b is missing (drop --no-build)"
done
[ -x build/bin/orbite-run ] || die "build/bin/orbite-run is missing (drop --no-build)"

if [ -z "$out" ]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/compare-mpi.XXXXXX")"
fi
mkdir -p "$out/json" "$out/logs"

read -r -a mpirun_extra <<<"${MPIRUN_ARGS:-}"
mpi_base=(mpirun -np 2 --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo
  --mca pml ob1 --mca osc ^ucx)
mpi_transport() {
  case "$1" in
    shm) echo "--mca btl self,vader" ;;
    tcp) echo "--mca btl self,tcp --mca btl_tcp_if_include lo" ;;
  esac
}

# run NAME COMMAND...: runs one benchmark with a bound, its output in logs/NAME.log.
run() {
  local name="$1" log="$out/logs/$1.log"
  shift
  printf 'compare-mpi: %-34s ' "$name" >&2
  local start=$SECONDS
  if timeout --kill-after=10 "$run_timeout" "$@" >"$log" 2>&1; then
    echo "ok ($((SECONDS - start)) s)" >&2
  else
    local rc=$?
    echo "FAILED (exit $rc)" >&2
    echo "--- command: $*" >&2
    echo "--- last lines of $log:" >&2
    tail -n 20 "$log" >&2
    ((rc == 124)) && echo "(timed out after $run_timeout s: RUN_TIMEOUT)" >&2
    exit 1
  fi
}

for ((r = 1; r <= rounds; r++)); do
  for t in $transports; do
    read -r -a mca <<<"$(mpi_transport "$t")"
    for bench in sendrecv putget; do
      run "orbite-$bench-$t-r$r" build/bin/orbite-run -n 2 -- "build/perf_tests/${bench}_perf" \
        --transport "$t" --json "$out/json/orbite-$bench-$t-r$r.json" "${bench_flags[@]}"
      run "mpi-$bench-$t-r$r" "${mpi_base[@]}" "${mca[@]}" \
        "${mpirun_extra[@]+"${mpirun_extra[@]}"}" "build/perf_tests/mpi_${bench}_perf" \
        --transport "$t" --json "$out/json/mpi-$bench-$t-r$r.json" "${bench_flags[@]}"
    done
  done
  run "memcpy-r$r" build/perf_tests/memcpy_bw --json "$out/json/memcpy-r$r.json"
done

python3 - "$out" "$rounds" "$transports" "$(nproc)" "$mpi_version" \
  "$(mpi_transport shm)" "$(mpi_transport tcp)" "${bench_flags[*]}" <<'PY'
import json, os, statistics, sys

out, rounds, transports, cores, mpi_version, mca_shm, mca_tcp, flags = sys.argv[1:]
rounds = int(rounds)
transports = transports.split()
mca = {"shm": mca_shm, "tcp": mca_tcp}

def load(name):
    with open(os.path.join(out, "json", name)) as f:
        return json.load(f)

def by_size(docs, key):
    """size -> median over the rounds of `key` (rounds where it is null are left out)."""
    values = {}
    for doc in docs:
        for row in doc["rows"]:
            v = row.get(key)
            if v is not None:
                values.setdefault(int(row["size"]), []).append(v)
    return {s: statistics.median(v) for s, v in values.items()}

def fmt_size(n):
    for unit, suffix in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)

def fmt(v):
    if v is None:
        return "N/A"
    # Small-message bandwidths would all read 0.00.
    return f"{v:.3g}" if 0 < abs(v) < 0.1 else f"{v:.2f}"

# (test, metric label, JSON key, higher is better)
metrics = [
    ("sendrecv", "sendrecv lat(us)", "lat_us", False),
    ("sendrecv", "sendrecv bw(GB/s)", "bw_gbps", True),
    ("putget", "put lat(us)", "put_lat_us", False),
    ("putget", "get lat(us)", "get_lat_us", False),
    ("putget", "put bw(GB/s)", "put_bw_gbps", True),
    ("putget", "get bw(GB/s)", "get_bw_gbps", True),
]

summary = {"rounds": rounds, "cores": int(cores), "mpi": mpi_version, "flags": flags,
           "transports": {}, "reference": {}}
print(f"# compare-mpi: OrbiTE vs {mpi_version}, 2 ranks on {cores} cores, {rounds} interleaved "
      f"round(s); medians over the rounds")
print("# ratio: bandwidth OrbiTE/MPI, latency MPI/OrbiTE (ratio of the medians): > 1 means "
      "OrbiTE is better")
print(f"# benchmark flags: {flags}")
for t in transports:
    docs = {(impl, test): [load(f"{impl}-{test}-{t}-r{r}.json") for r in range(1, rounds + 1)]
            for impl in ("orbite", "mpi") for test in ("sendrecv", "putget")}
    print("#")
    print(f"# transport {t}: OrbiTE --transport {t}; "
          f"Open MPI --mca pml ob1 --mca osc ^ucx {mca[t]}")
    print(f"# {'size':>8}  {'metric':<18} {'OrbiTE':>10} {'MPI':>10} {'ratio':>8}")
    medians = {}
    for test, label, key, _ in metrics:
        medians[label] = (by_size(docs[("orbite", test)], key), by_size(docs[("mpi", test)], key))
    sizes = sorted(set().union(*(set(o) | set(m) for o, m in medians.values())))
    rows = []
    for size in sizes:
        for test, label, key, higher_better in metrics:
            o, m = medians[label][0].get(size), medians[label][1].get(size)
            ratio = None
            if o and m:
                ratio = o / m if higher_better else m / o
            rows.append({"size": size, "metric": key, "test": test, "orbite": o, "mpi": m,
                         "ratio": ratio})
            print(f"  {fmt_size(size):>8}  {label:<18} {fmt(o):>10} {fmt(m):>10} {fmt(ratio):>8}")
    summary["transports"][t] = rows

ref = [load(f"memcpy-r{r}.json") for r in range(1, rounds + 1)]
copy, tcp = by_size(ref, "memcpy_gbps"), by_size(ref, "tcp_gbps")
print("#")
print("# reference (one process): single-thread memcpy and a raw TCP loopback stream, GB/s")
for size in sorted(copy):
    print(f"  {fmt_size(size):>8}  memcpy {fmt(copy.get(size)):>8}   tcp loopback "
          f"{fmt(tcp.get(size)):>8}")
    summary["reference"][str(size)] = {"memcpy_gbps": copy.get(size), "tcp_gbps": tcp.get(size)}

with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
print(f"# results: {out}/json, logs: {out}/logs, summary: {out}/summary.json")
PY
