#!/usr/bin/env bash
# A hierarchical collective (all_reduce, broadcast, reduce, all_gather or reduce_scatter) against the flat algorithms, with one machine standing in for
# several hosts: rank r claims host r % HOSTS (ORBITE_HOSTID), so the ranks of a "host" share a
# segment and talk to the other "hosts" over tcp. Open MPI over tcp only (--mca btl self,tcp:
# every rank as if on its own host) runs in the same rounds as a reference.
#
#   scripts/compare-hosts.sh [--coll C] [--ranks N] [--hosts K] [--rounds R] [-- perf flags]
#
# Prints, per size, the medians over the rounds (us per collective, out of place and in place)
# of: hierarchical (forced), the two flat algorithms forced (all_reduce: recursive doubling and
# ring; broadcast and reduce: binomial and chain; all_gather: bruck and ring; reduce_scatter: ring
# alone, shown twice), Open MPI; and the ratios flat-rule /
# hierarchical (the flat rule: the first flat algorithm up to 64 KiB, the second above) and
# MPI / hierarchical (> 1: hierarchical is faster).
set -euo pipefail
cd "$(dirname "$0")/.."
coll=all_reduce
ranks=4
hosts=2
rounds=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --coll) coll="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --hosts) hosts="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "compare-hosts: unknown argument $1" >&2; exit 2 ;;
  esac
done
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(-b 8 -e 16M -f 8 -n 200 -w 20)
case "$coll" in
  all_reduce) flat=(recursive_doubling ring) ;;
  broadcast | reduce) flat=(binomial chain) ;;
  all_gather) flat=(bruck ring) ;;
  reduce_scatter) flat=(ring) ;;
  *) echo "compare-hosts: --coll is all_reduce, broadcast, reduce, all_gather or reduce_scatter" >&2
     exit 2 ;;
esac
build=${ORBITE_BUILD_DIR:-build}
ninja -C "$build" orbite-run "${coll}_perf" "mpi_${coll}_perf" > /dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
orbite() {
  "$build/bin/orbite-run" -n "$ranks" env "$@" sh -c \
    "ORBITE_HOSTID=host\$((ORBITE_RANK % $hosts)) exec $build/perf_tests/${coll}_perf ${flags[*]}"
}
for round in $(seq "$rounds"); do
  for config in hierarchical "${flat[@]}" mpi; do
    echo "== $config" >> "$out"
    case "$config" in
      mpi)
        mpirun --allow-run-as-root --oversubscribe -n "$ranks" --mca pml ob1 --mca btl self,tcp \
          "$build/perf_tests/mpi_${coll}_perf" "${flags[@]}" ;;
      *) orbite "ORBITE_ALGO=$coll=$config" ;;
    esac 2> /dev/null | grep -E '^ +[0-9]' | awk '{print $1, $6, $10}' >> "$out"
  done
  echo "compare-hosts: round $round done" >&2
done
python3 - "$out" "$ranks" "$hosts" "$coll" "${flat[0]}" "${flat[-1]}" <<'EOF'
import statistics, sys
path, ranks, hosts, coll, small, large = sys.argv[1:7]
data, cur = {}, None
for line in open(path):
    if line.startswith("== "):
        cur = line.split()[1]
        continue
    size, oop, ip = line.split()
    data.setdefault(cur, {}).setdefault(int(size), []).append((float(oop), float(ip)))
print(f"# {coll} float32 (sum, root 0), {ranks} ranks as {hosts} hosts (rank r on host r % {hosts}); "
      "us per collective, medians")
print(f"| size | hierarchical | {small} | {large} | Open MPI tcp | flat / hier | MPI / hier "
      "| in place: hier | in place: flat / hier |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in sorted(data["hierarchical"]):
    med = lambda k, i: statistics.median(x[i] for x in data[k][s])
    flat = small if s <= 65536 else large
    h, hi = med("hierarchical", 0), med("hierarchical", 1)
    print(f"| {s} | {h:.1f} | {med(small, 0):.1f} | {med(large, 0):.1f} "
          f"| {med('mpi', 0):.1f} | {med(flat, 0) / h:.2f} | {med('mpi', 0) / h:.2f} "
          f"| {hi:.1f} | {med(flat, 1) / hi:.2f} |")
EOF
