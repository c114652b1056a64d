#!/usr/bin/env bash
# Builds OrbiTE and runs the main demo on local ranks: a 4-rank communicator printing its view of
# the group, the point-to-point sweep (latency and bandwidth, every byte checked) between 2 ranks
# over shared memory and over TCP, then an all-reduce sweep (beside Open MPI's) and a send/recv
# sweep in a 4-rank job (every result checked) charted into build/demo/*.png. Fails if any check
# or chart fails.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target orbite-run orbite-hello orbite-info sendrecv_perf \
  all_reduce_perf
build/bin/orbite-info
echo
build/bin/orbite-run -n 4 --tag-output -- build/examples/orbite-hello
echo
build/bin/orbite-run -n 2 -- build/perf_tests/sendrecv_perf -b 8 -e 64M -f 4 -c 1
echo

# 4 ranks on a 2-core machine oversubscribe it: the sweeps stop at 32M and take at most 50
# iterations per point, so that the pair stays well under a minute there (about 15 s).
demo=build/demo
mkdir -p "$demo"
rm -f "$demo"/*.json "$demo"/*.png
build/bin/orbite-run -n 4 -- build/perf_tests/all_reduce_perf -b 8 -e 32M -f 4 -n 50 -w 5 -c 1 \
  --json "$demo/all_reduce.json"
echo
# The reference on the same chart: Open MPI's MPI_Allreduce over shared memory, same sweep.
charted=("$demo/all_reduce.json")
if command -v mpirun >/dev/null; then
  cmake --build --preset default --target mpi_all_reduce_perf
  mpirun --allow-run-as-root --oversubscribe -np 4 --mca pml ob1 --mca btl self,vader \
    build/perf_tests/mpi_all_reduce_perf -b 8 -e 32M -f 4 -n 50 -w 5 -c 1 \
    --json "$demo/mpi_all_reduce.json"
  charted+=("$demo/mpi_all_reduce.json")
  echo
fi
build/bin/orbite-run -n 4 -- build/perf_tests/sendrecv_perf -b 8 -e 32M -f 4 -n 50 -w 5 -c 1 \
  --transport shm --json "$demo/sendrecv.json"
echo
scripts/plot.py --out "$demo/all_reduce.png" "${charted[@]}"
scripts/plot.py --out "$demo/sendrecv.png" "$demo/sendrecv.json"
echo "demo: charts in $demo/all_reduce.png (all_reduce bus bandwidth, 4 ranks, OrbiTE and Open MPI) and" \
  "$demo/sendrecv.png (send/recv bandwidth, ranks 0 and 1 of 4)"
