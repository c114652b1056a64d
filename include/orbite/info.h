// What this build of OrbiTE contains, and which optional libraries this machine provides.
#pragma once

#include <orbite/export.h>

#include <string>

namespace orbite {

struct BuildInfo {
  std::string version;
  std::string build_type;
  std::string compiler;
  bool with_rdma = false;  // rdma-core headers were present: libibverbs.so.1 is loaded at run time
  bool with_cuda = false;  // cuda.h was present: libcuda.so.1 is loaded at run time
  bool with_mpi = false;   // the orbite_mpi bootstrap library was built
  std::string hwloc_build_version;
};

ORBITE_API BuildInfo build_info();

// The outcome of looking for an optional run-time library. Probing never crashes: a missing
// library or export is reported in `detail`.
struct LibraryProbe {
  std::string library;      // "libibverbs.so.1", "libcuda.so.1", "libhwloc"
  bool built_with = false;  // the feature was compiled in
  bool found = false;       // the library loaded and its required exports resolved
  std::string path;         // where it was loaded from, when known
  std::string version;      // library or driver version, when known
  std::string detail;       // device counts, or why it is unavailable
};

// Loads libibverbs.so.1 (once, retained) and counts its devices.
ORBITE_API LibraryProbe probe_libibverbs();
// Loads libcuda.so.1 (once, retained), initializes the driver and counts devices.
ORBITE_API LibraryProbe probe_libcuda();
// Reports hwloc's run-time version and the machine's cores and NUMA nodes.
ORBITE_API LibraryProbe probe_hwloc();

}  // namespace orbite
