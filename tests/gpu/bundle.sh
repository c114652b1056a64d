#!/usr/bin/env bash
# Packs what the GPU gate runs into gate-bundle/ (ignored by git), for a GPU machine that cannot
# build OrbiTE (no Debian packages there): the gate's binaries from BUILD, stripped of debug
# information, at the same paths under gate-bundle/build/, and the system libraries they need
# that such a machine may lack (hwloc and its udev). tests/gpu/run-bundle.sh runs the gate there.
#
#   tests/gpu/bundle.sh [BUILD]      (default build/; then carry gate-bundle to the GPU machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
out=gate-bundle
rm -rf "$out"
mkdir -p "$out/build/bin" "$out/build/tests" "$out/build/perf_tests" "$out/syslib"
for f in bin/orbite-info bin/orbite-run tests/orbite-cuda-conformance tests/cuda_memory_test \
         tests/cuda_test tests/orbite-cuda-probe perf_tests/putget_perf perf_tests/sendrecv_perf \
         perf_tests/cuda_d2d_bw; do
  [ -x "$build/$f" ] || { echo "bundle: $build/$f is missing: build it first" >&2; exit 1; }
  strip --strip-debug -o "$out/build/$f" "$build/$f"
done
for lib in libhwloc.so.15 libudev.so.1; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$out/syslib/$lib"
done
# The tests name their helpers by the absolute paths they were built with.
echo "$(cd "$build" && pwd)" > "$out/build-path"
du -sh "$out"
