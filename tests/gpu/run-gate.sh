#!/usr/bin/env bash
# The GPU gate (docs/softcuda.md, "The GPU gate"): what softcuda cannot prove, checked on
# NVIDIA's driver. Run on a machine with a GPU, from the repository root, on a build made there
# or carried there (the device tool: build here, carry build/, run this once, give the machine
# back). Under 5 minutes on one H200.
#
#   tests/gpu/run-gate.sh [--build DIR] [--out DIR] [--record]
#   tests/gpu/run-gate.sh --softcuda      the same steps on softcuda: checks the script's
#                                          plumbing on a machine without a GPU; not a gate result
#
#   1. asserts the libcuda.so.1 that loads is NVIDIA's, not softcuda, and records driver and GPU;
#   2. dumps how cuGetProcAddress resolves every entry point OrbiTE asks for (orbite-info
#      --cuda-entry-points) and fails on an unresolved required one;
#   3. runs the conformance program against tests/gpu/conformance.golden; --record writes the
#      observed values there instead (commit them: CI then compares softcuda with them);
#   4. runs the CUDA-labelled test binaries on the real driver (softcuda-only cases skip);
#   5. runs the guide's cuda_copy gate (ConcurrentCallersOnOneAllocation: three unaligned sizes,
#      eight callers, four rounds) and two processes on one GPU exchanging device memory over tcp,
#      shm and cuda_ipc, with a PTX producer kernel for readiness (cuda_test on the real driver);
#   6. measures cuda_ipc put/get (putget_perf --transport nvlink) beside device-to-device copies
#      in one process (cuda_d2d_bw), bytes checked.
# Everything lands in --out (default gate-out/): one log per step and SUMMARY.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=build
out=gate-out
record=0
softcuda=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --record) record=1; shift ;;
    --softcuda) softcuda=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-gate: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
summary="$out/SUMMARY"
: > "$summary"
failed=0
step() {  # step NAME COMMAND...: runs it, logs it, records PASS/FAIL
  local name="$1"; shift
  local start=$SECONDS
  if "$@" > "$out/$name.log" 2>&1; then
    echo "PASS $name ($((SECONDS - start)) s)" | tee -a "$summary"
  else
    echo "FAIL $name ($((SECONDS - start)) s): see $out/$name.log" | tee -a "$summary"
    failed=1
  fi
}

# The real driver only: nothing of softcuda or softverbs on the library path.
unset SOFTCUDA_CONFIG
export LD_LIBRARY_PATH=""
export ORBITE_GATE_DRIVER=system
if [ "$softcuda" = 1 ]; then
  [ "$record" = 0 ] || { echo "run-gate: --record needs NVIDIA's driver" >&2; exit 2; }
  export LD_LIBRARY_PATH="$PWD/$build/softcuda"
  unset ORBITE_GATE_DRIVER
  echo "NOT A GATE RESULT: softcuda (plumbing check)" | tee -a "$summary"
fi

# 1. NVIDIA's driver, not softcuda.
driver_check() {
  local lib
  if [ "$softcuda" = 1 ]; then
    "$build/bin/orbite-info"
    return
  fi
  lib="$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')"
  [ -n "$lib" ] || { echo "no libcuda.so.1 in the loader's cache"; return 1; }
  echo "libcuda.so.1: $lib -> $(readlink -f "$lib")"
  if nm -D "$lib" 2>/dev/null | grep -q softcuda_control; then
    echo "that is softcuda, not NVIDIA's driver"; return 1
  fi
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv
  "$build/bin/orbite-info"
}
step driver driver_check

# 2. Entry points as cuGetProcAddress resolves them.
step entry-points "$build/bin/orbite-info" --cuda-entry-points

# 3. Conformance.
conformance() {
  if [ "$record" = 1 ]; then
    local observed gpu version
    observed="$("$build/tests/orbite-cuda-conformance")"
    gpu="$(grep '^info.device ' <<<"$observed" | cut -d' ' -f2-)"
    version="$(grep '^info.driver_version ' <<<"$observed" | cut -d' ' -f2-)"
    {
      echo "# The driver behaviour OrbiTE relies on (tests/gpu/conformance.cpp), compared by the"
      echo "# ctest gpu.conformance on softcuda and by tests/gpu/run-gate.sh on NVIDIA's driver."
      echo "# Recorded by run-gate.sh --record on $gpu, driver $version, $(date -u +%F)."
      grep -v '^info\.' <<<"$observed"
    } > tests/gpu/conformance.golden
    echo "recorded tests/gpu/conformance.golden"
    cat tests/gpu/conformance.golden
  else
    "$build/tests/orbite-cuda-conformance" --golden tests/gpu/conformance.golden
  fi
}
step conformance conformance

# 4. The CUDA-labelled tests, their binaries run directly (ctest would put softcuda first). The
# loader's own tests run against a recording fake, not a driver: step 2 is their real-driver half.
step cuda_memory "$build/tests/cuda_memory_test"

# 5. The guide's cuda_copy gate, then two processes on one GPU over tcp and shm, with the PTX
# producer for readiness.
step cuda_copy_gate "$build/tests/cuda_memory_test" \
  --gtest_filter='CudaMemoryTest.ConcurrentCallersOnOneAllocation' --gtest_repeat=3
step two_processes "$build/tests/cuda_test" \
  --gtest_filter='Transports/CudaMemory.*tcp*:Transports/CudaMemory.*shm*:Transports/CudaEngine.*/0:Transports/CudaEngine.*/1:CudaIpc.*'

# 6. cuda_ipc's bandwidth beside device-to-device copies in one process (the ceiling), same run,
# with every byte checked (putget_perf exits non-zero on a wrong byte).
ipc_perf() {
  "$build/perf_tests/cuda_d2d_bw" --sizes 1M,4M,16M,64M,256M --window 16 -n 20
  "$build/bin/orbite-run" -n 2 --timeout 240 -- "$build/perf_tests/putget_perf" --memory cuda \
    --transport nvlink -c 1 -b 1M -e 256M -f 4 -n 20 -w 3
  # Device messages: forced onto nvlink (every size read over cuda_ipc), unspec (large ones read
  # over cuda_ipc) beside shm (staged through the host).
  "$build/bin/orbite-run" -n 2 --timeout 240 -- "$build/perf_tests/sendrecv_perf" --memory cuda \
    --transport nvlink,unspec,shm -c 1 -b 8 -e 256M -f 8 -n 20 -w 3
}
step ipc_perf ipc_perf

echo "gate: $( [ $failed = 0 ] && echo passed || echo FAILED ) (logs in $out)" | tee -a "$summary"
exit $failed
