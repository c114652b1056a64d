#!/usr/bin/env bash
# Recompiles the reduction kernels (src/coll/reduce.cpp) with their build flags and the
# compiler's vectorization report, and prints how many loops were vectorized with which vector
# width. Needs a configured build (default: build/) and GCC.
#
#   scripts/check-vectorized.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
[ -f "$build/compile_commands.json" ] || { echo "check-vectorized: no $build/compile_commands.json (configure first)" >&2; exit 1; }
report="$(mktemp)"
object="$(mktemp --suffix=.o)"
trap 'rm -f "$report" "$object" "$object.d"' EXIT
command="$(python3 - "$build/compile_commands.json" "$object" <<'PY'
import json, re, sys
entries = [e for e in json.load(open(sys.argv[1])) if e["file"].endswith("coll/reduce.cpp")]
if not entries:
    sys.exit("check-vectorized: src/coll/reduce.cpp is not in compile_commands.json")
cmd = re.sub(r" -o \S+", " -o " + sys.argv[2], entries[0]["command"])
print(re.sub(r" -MF \S+", " -MF " + sys.argv[2] + ".d", cmd))
PY
)"
(cd "$build" && eval "$command -fopt-info-vec-optimized=$report")
total="$(grep -c 'loop vectorized' "$report" || true)"
echo "src/coll/reduce.cpp: $total loops vectorized"
grep -o 'using [0-9]* byte vectors' "$report" | sort | uniq -c | sed 's/^/  /'
[ "$total" -gt 0 ]
