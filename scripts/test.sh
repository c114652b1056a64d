#!/usr/bin/env bash
# Builds OrbiTE and runs its tests; exits non-zero on any failure.
#   scripts/test.sh            the default preset (RelWithDebInfo), every test
#   scripts/test.sh asan       ASan+UBSan build, unit and integration tests
#   scripts/test.sh tsan       TSan build, unit and integration tests
#   scripts/test.sh debug      Debug build, every test
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-default}"
case "$preset" in
  default|debug|asan|tsan) ;;
  *) echo "usage: scripts/test.sh [default|debug|asan|tsan]" >&2; exit 2 ;;
esac

scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
# Two jobs on two cores; every test bounds its own waits.
ctest --preset "$preset" -j 2
