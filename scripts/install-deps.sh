#!/usr/bin/env bash
# Installs OrbiTE's build and test dependencies from Debian's packages.
# Idempotent: does nothing (and prints nothing) when every package is already present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libhwloc-dev hwloc
  nlohmann-json3-dev
  libgtest-dev googletest
  libibverbs-dev
  ibverbs-utils       # ibv_devices/ibv_devinfo, run against softverbs by its tests
  iproute2            # ip netns/link: softverbs' rail test cuts a veth link
  perftest            # ib_write_bw/ib_read_bw: softverbs.perftest runs them unchanged on softverbs
  rdmacm-utils        # rping/ucmatose: librdmacm programs, loaded against softverbs' exports
  python3-pyverbs     # rdma-core's Python bindings: softverbs.pyverbs lists devices with them
  libopenmpi-dev openmpi-bin
  clang-format clang-tidy
  clang-16 libclang-rt-16-dev  # libFuzzer (tests/fuzz): clang 14 lacks std::source_location
  libgloo-dev         # the Gloo all_reduce reference of the collective benchmarks
  python3-matplotlib  # scripts/plot.py
  libbenchmark-dev    # Google Benchmark (perf_tests/selector_bench)
  libcivetweb-dev     # the metrics exporter's HTTP server (libcivetweb.so.1, loaded at run time)
  prometheus          # the exporter's test: a real Prometheus scrapes a job; promtool lints the text
  # The orbite Python package (docs/python.md), for Debian's /usr/bin/python3.
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-pytest-timeout
  libdlpack-dev       # DLPack (bfloat16 and other non-buffer-protocol tensors)
  python3-torch libtorch-dev  # orbite._torch, the torch.distributed backend (CPU torch 1.13, Gloo inside)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
