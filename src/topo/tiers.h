// GPU-to-NIC and NUMA-to-NIC tiers computed from the inventory (the priorities used when no
// explicit matrix is configured).
#pragma once

#include "topo/inventory.h"
#include "topo/location.h"

namespace orbite::topo {

// cuda:N: tier 0 = the NICs below the nearest PCI-to-PCI bridge the GPU shares with any NIC
// (empty when it shares none); tier 1 = the other NICs on the GPU's NUMA node (when known);
// tier 2 = the rest. Missing locality never counts as nearest.
LocationTiers gpu_tiers(const Inventory& inventory, const GpuInfo& gpu);
// cpu:N: tier 0 = the NICs on node N; tier 2 = the rest (TENT's discovery leaves tier 1 empty).
LocationTiers cpu_tiers(const Inventory& inventory, int numa_node);
// Every NUMA node and every GPU with an ordinal, plus "*" with every NIC in tier 2 (as TENT's
// discovery writes it).
PriorityTable discovered_priorities(const Inventory& inventory);

}  // namespace orbite::topo
