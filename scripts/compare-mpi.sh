#!/usr/bin/env bash
# OrbiTE performance side by side with Open MPI on this host, per transport, in interleaved rounds
# (so drift in the machine's load hits both sides alike):
#   shm  OrbiTE --transport shm  vs  mpirun --mca btl self,vader
#   tcp  OrbiTE --transport tcp  vs  mpirun --mca btl self,tcp --mca btl_tcp_if_include lo
# Each round runs, per transport:
#   point to point (2 ranks): sendrecv_perf and putget_perf under orbite-run, their MPI
#     references under mpirun, and memcpy_bw (single-thread memcpy and raw TCP loopback ceilings);
#   collectives, per rank count: <coll>_perf under orbite-run and mpi_<coll>_perf under mpirun,
#     and over tcp gloo_all_reduce_perf (Gloo's ring all-reduce) when it was built.
# Prints, per transport and size, the medians over the rounds and the ratios, so that > 1 means
# OrbiTE is better either way: bandwidth (busbw for the collectives) OrbiTE/MPI, latency (time
# per collective) MPI/OrbiTE.
#
#   scripts/compare-mpi.sh [--rounds R] [--transports "shm tcp"] [--colls "all_reduce ..."]
#                          [--ranks "2 4"] [--p2p-only | --no-p2p] [--out DIR] [--no-build]
#                          [--baseline DIR [--baseline-label NAME] | --baseline-env "VAR=VALUE ..."]
#                          [--] [benchmark flags...]
#
# --colls: all_reduce all_gather broadcast reduce reduce_scatter alltoall (default), or none
# (--p2p-only). --ranks: rank counts of the collectives (default 2); more ranks than cores
# oversubscribe them, which measures scheduling as much as the library. --no-p2p skips the
# point-to-point part.
#
# --baseline DIR (BASELINE): measures another OrbiTE build too, e.g. an older commit's build
# directory (DIR/bin/orbite-run and DIR/perf_tests/<bench>, as in build/; the script does not
# build it; a relative DIR is taken from the directory the script is called from). Every round
# then also runs DIR's sendrecv_perf, putget_perf and <coll>_perf, with the same flags, beside
# the current build's and Open MPI's (the current build first in odd rounds, the baseline in
# even ones); a benchmark DIR lacks is skipped with a note. The summary adds, per transport and
# size, the columns "before" (the baseline's medians), "before/mpi" and "orbite/before", which
# is > 1 when the current build is better (bandwidth orbite/before, latency before/orbite).
# --baseline-label NAME (BASELINE_LABEL) names the baseline in the output (default: DIR's
# basename), e.g. --baseline-label 44d17d7.
# --baseline-env "VAR=VALUE ..." (BASELINE_ENV): the baseline is this build run with those
# environment settings (instead of a DIR), e.g. --baseline-env ORBITE_COLL_SHM_SLOT_BYTES=0 to
# set the collectives' shared segment against the message algorithms in the same rounds.
#
# Benchmark flags go to every benchmark (-n 50, -w 5, -c 1, -b/-e/-f/-i, --sizes), except
# --window (point to point only) and -d/-o/-r/-z (collectives only); without a size flag the
# sizes are --sizes 8,1M,64M. Environment: ROUNDS (default 3), TRANSPORTS, COLLS, RANKS,
# RUN_TIMEOUT (seconds per run, default 600), MPIRUN_ARGS (extra mpirun arguments, e.g.
# "--mca btl_vader_single_copy_mechanism none" where CMA is not permitted).
#
# pml ob1 keeps Open MPI on the named btl (pml ucx would bypass it), and osc ^ucx keeps its
# one-sided operations there too.
set -euo pipefail
invoked_from="$PWD"
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "scripts/$(basename "$0")" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "compare-mpi: $*" >&2; exit 1; }

rounds="${ROUNDS:-3}"
transports="${TRANSPORTS:-shm tcp}"
all_colls="all_reduce all_gather broadcast reduce reduce_scatter alltoall"
colls="${COLLS:-$all_colls}"
ranks_list="${RANKS:-2}"
run_timeout="${RUN_TIMEOUT:-600}"
out=""
build=1
p2p=1
baseline="${BASELINE:-}"
baseline_label="${BASELINE_LABEL:-}"
baseline_env="${BASELINE_ENV:-}"
bench_flags=()
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rounds) (($# >= 2)) || die "--rounds needs a value"; rounds="$2"; shift 2 ;;
    --rounds=*) rounds="${1#*=}"; shift ;;
    --transports) (($# >= 2)) || die "--transports needs a value"; transports="$2"; shift 2 ;;
    --transports=*) transports="${1#*=}"; shift ;;
    --colls) (($# >= 2)) || die "--colls needs a value"; colls="$2"; shift 2 ;;
    --colls=*) colls="${1#*=}"; shift ;;
    --ranks) (($# >= 2)) || die "--ranks needs a value"; ranks_list="$2"; shift 2 ;;
    --ranks=*) ranks_list="${1#*=}"; shift ;;
    --p2p-only) colls="none"; shift ;;
    --no-p2p) p2p=0; shift ;;
    --out) (($# >= 2)) || die "--out needs a value"; out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --no-build) build=0; shift ;;
    --baseline) (($# >= 2)) || die "--baseline needs a value"; baseline="$2"; shift 2 ;;
    --baseline=*) baseline="${1#*=}"; shift ;;
    --baseline-label)
      (($# >= 2)) || die "--baseline-label needs a value"; baseline_label="$2"; shift 2 ;;
    --baseline-label=*) baseline_label="${1#*=}"; shift ;;
    --baseline-env)
      (($# >= 2)) || die "--baseline-env needs a value"; baseline_env="$2"; shift 2 ;;
    --baseline-env=*) baseline_env="${1#*=}"; shift ;;
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
[ "$colls" = none ] && colls=""
for c in $colls; do
  [[ " $all_colls " == *" $c "* ]] || die "--colls: expected some of '$all_colls' or none, got '$c'"
done
for n in $ranks_list; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] && ((n >= 2)) || die "--ranks: expected rank counts >= 2, got '$n'"
done
[ -n "$colls" ] && [ -z "$ranks_list" ] && die "--ranks: no rank count given"
((p2p)) || [ -n "$colls" ] || die "--no-p2p with no collectives: nothing to run"
if [ -n "$baseline_env" ]; then
  # A build directory of wrappers: orbite-run with the settings, the benchmarks of build/.
  [ -z "$baseline" ] || die "--baseline and --baseline-env exclude each other"
  for kv in $baseline_env; do
    [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "--baseline-env: '$kv' is not VAR=VALUE"
  done
  baseline="$(mktemp -d /tmp/compare-mpi-baseline.XXXXXX)"
  mkdir -p "$baseline/bin" "$baseline/perf_tests"
  printf '#!/usr/bin/env bash\nexec env %s %q "$@"\n' "$baseline_env" \
    "$PWD/build/bin/orbite-run" >"$baseline/bin/orbite-run"
  chmod +x "$baseline/bin/orbite-run"
  for b in build/perf_tests/*_perf; do ln -s "$PWD/$b" "$baseline/perf_tests/"; done
  [ -n "$baseline_label" ] || baseline_label="$baseline_env"
fi
if [ -n "$baseline" ]; then
  given="$baseline"
  baseline="$(cd "$invoked_from" && cd -- "$given" 2>/dev/null && pwd)" ||
    die "--baseline (BASELINE): '$given' is not a directory"
  [ -n "$baseline_label" ] || baseline_label="$(basename -- "$baseline")"
  [ -x "$baseline/bin/orbite-run" ] ||
    die "--baseline: $baseline/bin/orbite-run is missing (DIR is a build directory, as build/)"
elif [ -n "$baseline_label" ]; then
  die "--baseline-label (BASELINE_LABEL) without --baseline (BASELINE)"
fi

sized=0
for f in "${bench_flags[@]+"${bench_flags[@]}"}"; do
  case "$f" in
    -b*|-e*|-f*|-i*|--minbytes*|--maxbytes*|--stepfactor*|--stepbytes*|--sizes*) sized=1 ;;
    --transport|--transport=*|--json|--json=*) die "$f is set by the script; drop it" ;;
  esac
done
((sized)) || bench_flags+=(--sizes "8,1M,64M")

# Every harness flag takes a value ("-n 50", "-n50", "--iters=50"); the flags one family lacks
# are left out of its runs.
p2p_flags=()
coll_flags=()
for ((i = 0; i < ${#bench_flags[@]}; i++)); do
  f="${bench_flags[i]}"
  pair=("$f")
  if [[ "$f" =~ ^-[a-zA-Z]$ || ("$f" =~ ^--[a-z_-]+$ && "$f" != *=*) ]] &&
    ((i + 1 < ${#bench_flags[@]})); then
    pair+=("${bench_flags[i + 1]}")
    i=$((i + 1))
  fi
  case "$f" in
    --window*) p2p_flags+=("${pair[@]}") ;;
    -d*|-o*|-r*|-z*|--datatype*|--op*|--root*|--blocking*) coll_flags+=("${pair[@]}") ;;
    *) p2p_flags+=("${pair[@]}"); coll_flags+=("${pair[@]}") ;;
  esac
done

command -v python3 >/dev/null || die "python3 not found (it summarizes the JSON results)"
if ! command -v mpirun >/dev/null; then
  die "mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev, see
scripts/install-deps.sh) or put its bin/ on PATH"
fi
mpi_version="$(mpirun --version 2>&1 | head -n 1 || true)"
[[ "$mpi_version" == *"Open MPI"* ]] ||
  die "$(command -v mpirun) is not Open MPI's mpirun ('$mpi_version'); the --mca arguments need it"
mpi_version="${mpi_version/mpirun (Open MPI)/Open MPI}"

benches=()
((p2p)) && benches+=(sendrecv_perf putget_perf mpi_sendrecv_perf mpi_putget_perf memcpy_bw)
for c in $colls; do benches+=("${c}_perf" "mpi_${c}_perf"); done
if ((build)) && [ ! -f build/CMakeCache.txt ]; then cmake --preset default >/dev/null; fi
# Gloo's reference is built only where CMake found the library (libgloo-dev).
gloo=0
if [[ " $colls " == *" all_reduce "* && " $transports " == *" tcp "* ]] &&
  grep -q '^ORBITE_GLOO_LIBRARY:FILEPATH=/' build/CMakeCache.txt 2>/dev/null; then
  gloo=1
  benches+=(gloo_all_reduce_perf)
fi
if ((build)); then
  grep -q '^ORBITE_WITH_MPI:BOOL=ON' build/CMakeCache.txt ||
    die "build/ was configured without MPI: cmake --preset default -DORBITE_WITH_MPI=ON"
  echo "compare-mpi: building orbite-run ${benches[*]}" >&2
  cmake --build --preset default --target orbite-run "${benches[@]}" >/dev/null ||
    die "build failed: cmake --build --preset default --target orbite-run ${benches[*]}"
fi
for b in "${benches[@]}"; do
  [ -x "build/perf_tests/$b" ] || die "build/perf_tests/$b is missing (drop --no-build)"
done
[ -x build/bin/orbite-run ] || die "build/bin/orbite-run is missing (drop --no-build)"
# The baseline's benchmarks that run: those of the current ones that DIR has.
before_tests=""
if [ -n "$baseline" ]; then
  tests="$colls"
  ((p2p)) && tests="sendrecv putget $tests"
  for b in $tests; do
    if [ -x "$baseline/perf_tests/${b}_perf" ]; then
      before_tests+="${before_tests:+ }$b"
    else
      echo "compare-mpi: note: $baseline/perf_tests/${b}_perf is missing: $b runs without" \
        "the baseline ($baseline_label)" >&2
    fi
  done
  [ -n "$before_tests" ] || die "--baseline: $baseline/perf_tests has none of the benchmarks to run"
fi
cores="$(nproc)"
for n in $ranks_list; do
  if [ -n "$colls" ] && ((n > cores)); then
    echo "compare-mpi: note: $n ranks on $cores cores oversubscribe them; the collectives'" \
      "figures then measure the scheduler as much as the libraries" >&2
  fi
done

if [ -z "$out" ]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/compare-mpi.XXXXXX")"
fi
mkdir -p "$out/json" "$out/logs"

read -r -a mpirun_extra <<<"${MPIRUN_ARGS:-}"
mpi_opts=(--allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo --mca pml ob1
  --mca osc ^ucx)
mpi_base=(mpirun -np 2 "${mpi_opts[@]}")
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

# builds ROUND TEST: the OrbiTE builds that run TEST in round ROUND: orbite (build/) and, with
# --baseline, before (DIR), which runs first in the even rounds so that neither always runs first.
builds() {
  if [ -z "$baseline" ] || [[ " $before_tests " != *" $2 "* ]]; then
    echo orbite
  elif (($1 % 2)); then
    echo orbite before
  else
    echo before orbite
  fi
}
build_dir() { if [ "$1" = before ]; then echo "$baseline"; else echo build; fi; }

for ((r = 1; r <= rounds; r++)); do
  for t in $transports; do
    read -r -a mca <<<"$(mpi_transport "$t")"
    if ((p2p)); then
      for bench in sendrecv putget; do
        for who in $(builds "$r" "$bench"); do
          dir="$(build_dir "$who")"
          run "$who-$bench-$t-r$r" "$dir/bin/orbite-run" -n 2 -- "$dir/perf_tests/${bench}_perf" \
            --transport "$t" --json "$out/json/$who-$bench-$t-r$r.json" "${p2p_flags[@]}"
        done
        run "mpi-$bench-$t-r$r" "${mpi_base[@]}" "${mca[@]}" \
          "${mpirun_extra[@]+"${mpirun_extra[@]}"}" "build/perf_tests/mpi_${bench}_perf" \
          --transport "$t" --json "$out/json/mpi-$bench-$t-r$r.json" "${p2p_flags[@]}"
      done
    fi
    for n in $ranks_list; do
      for c in $colls; do
        name="$c-$t-n$n-r$r"
        for who in $(builds "$r" "$c"); do
          dir="$(build_dir "$who")"
          run "$who-$name" "$dir/bin/orbite-run" -n "$n" -- "$dir/perf_tests/${c}_perf" \
            --transport "$t" --json "$out/json/coll-$who-$name.json" "${coll_flags[@]}"
        done
        run "mpi-$name" mpirun -np "$n" "${mpi_opts[@]}" "${mca[@]}" \
          "${mpirun_extra[@]+"${mpirun_extra[@]}"}" "build/perf_tests/mpi_${c}_perf" \
          --transport "$t" --json "$out/json/coll-mpi-$name.json" "${coll_flags[@]}"
        if ((gloo)) && [ "$c" = all_reduce ] && [ "$t" = tcp ]; then
          # Unbound: Gloo's TCP device thread would otherwise share its rank's one core.
          run "gloo-$name" build/bin/orbite-run -n "$n" --bind-to none -- \
            build/perf_tests/gloo_all_reduce_perf --transport tcp \
            --json "$out/json/coll-gloo-$name.json" "${coll_flags[@]}"
        fi
      done
    done
  done
  if ((p2p)); then
    run "memcpy-r$r" build/perf_tests/memcpy_bw --json "$out/json/memcpy-r$r.json"
  fi
done

echo "# compare-mpi: OrbiTE vs $mpi_version on $cores cores, $rounds interleaved round(s);" \
  "medians over the rounds"
echo "# ratio > 1 means OrbiTE is better: bandwidth OrbiTE/MPI, latency MPI/OrbiTE (ratio of the" \
  "medians)"
before_args=()
if [ -n "$baseline" ]; then
  echo "# before: the baseline OrbiTE $baseline_label ($baseline), the same flags in the same" \
    "rounds; orbite/before > 1 means the current build is better: bandwidth orbite/before," \
    "latency before/orbite"
  before_args=("$baseline_label" "$baseline" "$before_tests")
fi

if ((p2p)); then
  scripts/compare_summary.py p2p "$out" "$rounds" "$transports" "$(nproc)" "$mpi_version" \
    "$(mpi_transport shm)" "$(mpi_transport tcp)" "${p2p_flags[*]}" \
    "${before_args[@]+"${before_args[@]}"}"
fi

if [ -n "$colls" ]; then
  scripts/compare_summary.py coll "$out" "$rounds" "$transports" "$colls" "$ranks_list" "$gloo" \
    "$(mpi_transport shm)" "$(mpi_transport tcp)" "${coll_flags[*]}" \
    "${before_args[@]+"${before_args[@]}"}"
fi
echo "# results: $out/json, logs: $out/logs, summaries: $out/summary*.json"
