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
// hwloc 2.9 crashes (SIGSEGV) on some malformed XML files, and leaks what a failed load
// allocated (both found by the hwloc_xml fuzz target). Before a file is loaded in this process,
// a forked child loads it and exits: a child that fails the load, dies by a signal (or exits
// through a handler), or runs past 30 s makes this return Configuration naming `field`, the file
// and what happened; only a file the child loaded is loaded here.
Status check_xml_in_child(const std::string& xml_path, const char* field);
// Loads the live machine's topology (or the XML file given) and counts its objects.
Result<HwlocSummary> summarize_machine(const std::string& xml_path = {});

}  // namespace orbite::topo
