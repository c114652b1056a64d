#include "topo/hwloc_probe.h"

#include <hwloc.h>

namespace orbite::topo {
namespace {

std::string version_text(unsigned v) {
  return std::to_string((v >> 16) & 0xff) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string(v & 0xff);
}

}  // namespace

std::string hwloc_build_version() {
  return version_text(HWLOC_API_VERSION);
}

std::string hwloc_runtime_version() {
  return version_text(hwloc_get_api_version());
}

Result<HwlocSummary> summarize_machine(const std::string& xml_path) {
  HwlocSummary s;
  s.runtime_version = hwloc_runtime_version();
  s.build_version = hwloc_build_version();
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) {
    return Status::error(Errc::Unavailable, "hwloc_topology_init failed");
  }
  if (!xml_path.empty() && hwloc_topology_set_xml(topology, xml_path.c_str()) != 0) {
    hwloc_topology_destroy(topology);
    return Status::error(Errc::Configuration, "hwloc cannot read XML topology '" + xml_path + "'");
  }
  if (hwloc_topology_load(topology) != 0) {
    hwloc_topology_destroy(topology);
    return Status::error(Errc::Unavailable, "hwloc_topology_load failed");
  }
  s.packages = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PACKAGE);
  s.cores = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE);
  s.pus = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PU);
  s.numa_nodes = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
  hwloc_topology_destroy(topology);
  return s;
}

}  // namespace orbite::topo
