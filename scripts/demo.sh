#!/usr/bin/env bash
# Builds OrbiTE and runs the main demo: a 4-rank communicator on local ranks over the TCP store,
# each rank printing its view of the group.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target orbite-run orbite-hello orbite-info
build/bin/orbite-info
echo
build/bin/orbite-run -n 4 --tag-output -- build/examples/orbite-hello
