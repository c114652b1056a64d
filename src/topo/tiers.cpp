#include "topo/tiers.h"

#include <algorithm>

namespace orbite::topo {
namespace {

bool under(const NicInfo& nic, const PciAddress& bridge) {
  if (!nic.pci) return false;
  const auto& b = nic.pci->bridges;
  return std::find(b.begin(), b.end(), bridge) != b.end();
}

bool listed(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

LocationTiers gpu_tiers(const Inventory& inv, const GpuInfo& gpu) {
  LocationTiers row;
  row.location = Location::cuda(gpu.ordinal);
  auto& [t0, t1, t2] = row.tiers;
  // The nearest switch or root port above the GPU that any NIC also sits below. A GPU without
  // PCI path data has no such bridge: unknown locality never makes a NIC nearest.
  for (const PciAddress& bridge : gpu.pci.bridges) {
    for (const NicInfo& nic : inv.nics) {
      if (under(nic, bridge)) t0.push_back(nic.id);
    }
    if (!t0.empty()) break;
  }
  for (const NicInfo& nic : inv.nics) {
    if (listed(t0, nic.id)) continue;
    const bool same_node = gpu.numa != kUnknownNuma && nic.numa == gpu.numa;
    (same_node ? t1 : t2).push_back(nic.id);
  }
  return row;
}

LocationTiers cpu_tiers(const Inventory& inv, int numa_node) {
  LocationTiers row;
  row.location = Location::cpu(numa_node);
  for (const NicInfo& nic : inv.nics) {
    row.tiers[nic.numa == numa_node ? 0 : 2].push_back(nic.id);
  }
  return row;
}

PriorityTable discovered_priorities(const Inventory& inv) {
  PriorityTable table;
  table.origin = "discovery";
  for (const NumaNode& node : inv.numa_nodes) table.rows.push_back(cpu_tiers(inv, node.os_index));
  for (const GpuInfo& gpu : inv.gpus) {
    if (gpu.ordinal >= 0) table.rows.push_back(gpu_tiers(inv, gpu));
  }
  LocationTiers star;
  for (const NicInfo& nic : inv.nics) star.tiers[2].push_back(nic.id);
  table.rows.push_back(std::move(star));
  std::sort(table.rows.begin(), table.rows.end(),
            [](const LocationTiers& a, const LocationTiers& b) { return a.location < b.location; });
  return table;
}

}  // namespace orbite::topo
