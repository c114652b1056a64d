#!/usr/bin/env bash
# Job start-up to a ready communicator, side by side with Open MPI in the same run, interleaved:
#   A  orbite-run -n N orbite-hello           (launcher + TCP store + communicator + barrier)
#   B  mpirun -np N mpi_startup mpi           (MPI_Init + MPI_Barrier + MPI_Finalize: reference)
#   C  mpirun -np N mpi_startup orbite        (B plus the OrbiTE MPI bootstrap and a communicator)
# Prints the median wall time of each and the ratios A/B and C/B.
#   scripts/bootstrap-perf.sh [ranks=4] [repetitions=15]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks="${1:-4}"
reps="${2:-15}"
cmake --build --preset default --target orbite-run orbite-hello mpi_startup >/dev/null
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)

ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000)); }
declare -a a b c
for ((i = 0; i < reps; i++)); do
  a+=("$(ms build/bin/orbite-run -n "$ranks" build/examples/orbite-hello)")
  b+=("$(ms "${mpirun[@]}" -np "$ranks" build/perf_tests/mpi_startup mpi)")
  c+=("$(ms "${mpirun[@]}" -np "$ranks" build/perf_tests/mpi_startup orbite)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ma=$(median "${a[@]}"); mb=$(median "${b[@]}"); mc=$(median "${c[@]}")
awk -v a="$ma" -v b="$mb" -v c="$mc" -v n="$ranks" -v cores="$(nproc)" -v reps="$reps" 'BEGIN {
  printf "# bootstrap-perf: %d ranks on %d cores, %d interleaved repetitions, median wall time\n", n, cores, reps
  printf "%-52s %10s\n", "job", "ms"
  printf "%-52s %10.1f\n", "A orbite-run + communicator", a / 1000
  printf "%-52s %10.1f\n", "B mpirun, MPI_Init + barrier (reference)", b / 1000
  printf "%-52s %10.1f\n", "C mpirun + OrbiTE MPI bootstrap + communicator", c / 1000
  printf "A/B %.2f   C/B %.2f   C-B %.1f ms\n", a / b, c / b, (c - b) / 1000
}'
