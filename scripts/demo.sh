#!/usr/bin/env bash
# Builds OrbiTE and runs the main demo on local ranks: a 4-rank communicator printing its view of
# the group, then the point-to-point sweep (latency and bandwidth, every byte checked) between 2
# ranks over shared memory and over TCP.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target orbite-run orbite-hello orbite-info sendrecv_perf
build/bin/orbite-info
echo
build/bin/orbite-run -n 4 --tag-output -- build/examples/orbite-hello
echo
build/bin/orbite-run -n 2 -- build/perf_tests/sendrecv_perf -b 8 -e 64M -f 4 -c 1
