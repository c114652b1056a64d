#!/usr/bin/env bash
# Runs the GPU gate from gate-bundle/ (tests/gpu/bundle.sh) on a GPU machine, in a checkout of
# the same commit: the bundle's binaries go where they were built (their tests name helpers by
# absolute path), its libraries are installed only where the machine has none of that name, and
# the gate's logs are packed into OUT (default gate-out/) as SUMMARY and gate-logs.tgz.
#
#   tests/gpu/run-bundle.sh [OUT]
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-gate-out}"
mkdir -p "$out"
built="$(cat gate-bundle/build-path)"
if [ "$(readlink -f "$built")" != "$(readlink -f "$PWD/build" 2>/dev/null)" ]; then
  mkdir -p "$(dirname "$built")"
  [ -e "$built" ] || ln -s "$PWD/gate-bundle/build" "$built"
fi
[ -e build ] || ln -s gate-bundle/build build
libdir=/usr/lib/x86_64-linux-gnu
for lib in gate-bundle/syslib/*; do
  ldconfig -p | grep -q "^\s*$(basename "$lib") " || cp "$lib" "$libdir/"
done
ldconfig
logs="$(mktemp -d)"
tests/gpu/run-gate.sh --build "$built" --out "$logs"
rc=$?
cp "$logs/SUMMARY" "$out/SUMMARY"
tar -C "$logs" -czf "$out/gate-logs.tgz" .
exit $rc
