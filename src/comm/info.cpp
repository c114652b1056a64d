#include <orbite/info.h>
#include <orbite/version.h>

#include "platform/cuda_loader.h"
#include "platform/ibv_loader.h"
#include "topo/hwloc_probe.h"

namespace orbite {

BuildInfo build_info() {
  BuildInfo b;
  b.version = ORBITE_VERSION_STRING;
  b.build_type = ORBITE_BUILD_TYPE;
#if defined(__clang__)
  b.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  b.compiler = "gcc " __VERSION__;
#endif
  b.with_rdma = ORBITE_WITH_RDMA != 0;
  b.with_cuda = ORBITE_WITH_CUDA != 0;
  b.with_mpi = ORBITE_WITH_MPI != 0;
  b.hwloc_build_version = topo::hwloc_build_version();
  return b;
}

LibraryProbe probe_libibverbs() {
  LibraryProbe p;
  p.library = "libibverbs.so.1";
  p.built_with = ORBITE_WITH_RDMA != 0;
  auto devices = rdma::list_verbs_devices();
  if (!devices.ok()) {
    p.detail = devices.status().message();
    p.path = rdma::ibverbs_path();
    p.found = !p.path.empty();
    return p;
  }
  p.found = true;
  p.path = rdma::ibverbs_path();
  p.detail = std::to_string(devices->size()) + " device(s)";
  for (size_t i = 0; i < devices->size(); ++i) p.detail += (i == 0 ? ": " : ", ") + (*devices)[i];
  return p;
}

LibraryProbe probe_libcuda() {
  LibraryProbe p;
  p.library = "libcuda.so.1";
  p.built_with = ORBITE_WITH_CUDA != 0;
  auto driver = cuda::probe_driver();
  if (!driver.ok()) {
    p.detail = driver.status().message();
    return p;
  }
  p.found = true;
  p.path = driver->path;
  p.version = std::to_string(driver->driver_version / 1000) + "." +
              std::to_string((driver->driver_version % 1000) / 10);
  p.detail = std::to_string(driver->device_count) + " device(s)";
  return p;
}

LibraryProbe probe_hwloc() {
  LibraryProbe p;
  p.library = "libhwloc";
  p.built_with = true;
  auto summary = topo::summarize_machine();
  if (!summary.ok()) {
    p.detail = summary.status().message();
    return p;
  }
  p.found = true;
  p.version = "API " + summary->runtime_version;
  p.detail = std::to_string(summary->packages) + " package(s), " + std::to_string(summary->cores) +
             " core(s), " + std::to_string(summary->pus) + " PU(s), " +
             std::to_string(summary->numa_nodes) + " NUMA node(s)";
  return p;
}

}  // namespace orbite
