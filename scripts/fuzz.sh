#!/usr/bin/env bash
# Coverage-guided fuzzing of OrbiTE's decoders with libFuzzer (tests/fuzz, docs/reliability.md).
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Builds tests/fuzz/libfuzzer with clang++-16 into build-fuzz/, then runs each target for the
# given time (default 20 s) from the committed seed corpus (tests/fuzz/corpus/NAME, read only)
# into a working corpus (build-fuzz/corpus/NAME, kept between runs). A crash leaves its input in
# build-fuzz/findings/NAME/ and fails the script: add it to tests/fuzz/corpus/NAME once fixed,
# so that every build's replay test (ctest fuzz_replay.NAME) keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-20}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(rdma_wire control store descriptor config_json priorities hwloc_xml nccl_xml)

scripts/install-deps.sh
cmake -S tests/fuzz/libfuzzer -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_BUILD_TYPE= >/dev/null
cmake --build build-fuzz -- "${targets[@]}"

status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t"
  log="build-fuzz/$t.log"
  if ! build-fuzz/"$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t/" \
      "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    echo "fuzz: $t: FINDING (see $log and build-fuzz/findings/$t/)" >&2
    tail -30 "$log" >&2
    status=1
    continue
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  corpus=$(find "build-fuzz/corpus/$t" -type f | wc -l)
  echo "fuzz: $t: ${seconds} s, ${runs} runs, coverage ${cov} edges, corpus ${corpus} inputs, no finding"
done
exit $status
