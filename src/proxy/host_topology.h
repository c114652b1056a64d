// The glue between the configuration, the device loaders (src/p2p) and the topology layer: the
// one place that decides which device lists discovery gets.
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <string>

#include "topo/inventory.h"
#include "topo/location.h"

namespace orbite::proxy {

struct HostTopology {
  topo::Inventory inventory;
  topo::PriorityTable priorities;
  // Why the verbs provider's or the driver's list was not used ("" when it was).
  std::string verbs_note;
  std::string cuda_note;
};

// Loads the inventory (topology.hwloc_xml, or the live machine joined with the verbs provider's
// and the CUDA driver's device lists), applies the rdma filters and compiles the priorities
// (rdma.priority_matrix / custom_json_path, else the discovered tiers). An XML file describes
// another machine, so with one the local provider and driver are not consulted: NICs and GPUs
// come from the file alone. An invalid explicit matrix fails (no fallback to discovery).
Result<HostTopology> discover_host_topology(const EngineConfig& config);

}  // namespace orbite::proxy
