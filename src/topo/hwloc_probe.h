// Minimal hwloc facts for orbite-info. The full inventory (PCI tree, NICs, GPUs, tiers) lives in
// the topology module.
#pragma once

#include <orbite/status.h>

#include <string>

namespace orbite::topo {

struct HwlocSummary {
  std::string runtime_version;  // hwloc_get_api_version() of the loaded library
  std::string build_version;    // HWLOC_API_VERSION of the headers we compiled against
  int packages = 0;
  int cores = 0;
  int pus = 0;
  int numa_nodes = 0;
};

std::string hwloc_build_version();
// hwloc_get_api_version() of the library loaded at run time, as "2.8.0".
std::string hwloc_runtime_version();
// Loads the live machine's topology (or the XML file given) and counts its objects.
Result<HwlocSummary> summarize_machine(const std::string& xml_path = {});

}  // namespace orbite::topo
