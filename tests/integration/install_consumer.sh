#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds examples/consumer against it twice:
# with find_package(orbite CONFIG) and with pkg-config. Both programs must run.
#   install_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
source="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/lib/cmake/orbite/orbiteConfig.cmake"
test -f "$work/prefix/lib/pkgconfig/orbite.pc"
test -x "$work/prefix/bin/orbite-run"
# Public headers must not pull in third-party headers.
if grep -rlE '#include <(infiniband|cuda|hwloc|nlohmann|mpi)' "$work/prefix/include/orbite"; then
  echo "a public header includes a third-party header" >&2
  exit 1
fi

cmake -S "$source/examples/consumer" -B "$work/cmake-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/cmake-build/consumer" | grep -q "rank 0 of 1"

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
g++ -o "$work/pc-consumer" "$source/examples/consumer/main.cpp" $(pkg-config --cflags --libs orbite)
LD_LIBRARY_PATH="$work/prefix/lib" "$work/pc-consumer" | grep -q "rank 0 of 1"
echo "install_consumer: find_package and pkg-config consumers built and ran"
