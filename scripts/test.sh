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
# ORBITE_UNITY_BUILD=ON|OFF overrides the preset's unity setting (the sanitizer presets are unity
# builds, the default and debug ones build per file); CI sets ON (docs/testing.md).
unity=()
if [[ -n "${ORBITE_UNITY_BUILD:-}" ]]; then
  case "$ORBITE_UNITY_BUILD" in
    ON|OFF) unity=(-DCMAKE_UNITY_BUILD="$ORBITE_UNITY_BUILD") ;;
    *) echo "scripts/test.sh: ORBITE_UNITY_BUILD='$ORBITE_UNITY_BUILD' is not ON or OFF" >&2; exit 2 ;;
  esac
fi
cmake --preset "$preset" "${unity[@]}" >/dev/null
cmake --build --preset "$preset"
# Two jobs on two cores; every test bounds its own waits.
ctest --preset "$preset" -j 2
