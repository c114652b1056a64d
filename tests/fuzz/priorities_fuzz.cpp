// Fuzz target: priority matrices (rdma.priority_matrix inline, or the file custom_json_path
// names), in TENT's classic form and the native {"nics", "mems"} form, compiled against a fixed
// inventory (four NICs on two NUMA nodes, two GPUs). The first byte picks the origin (inline or
// file); the rest is the JSON text. An accepted table must hold a "*" row, and every tier only
// NIC IDs of the inventory, each at most once per row.
#include <set>
#include <string_view>

#include "fuzz_target.h"
#include "topo/matrix.h"

namespace orbite::fuzz {
namespace {

using namespace orbite::topo;

const Inventory& inventory() {
  static const Inventory inv = [] {
    Inventory i;
    i.source = "fuzz";
    for (int node : {0, 1}) {
      NumaNode numa;
      numa.os_index = node;
      numa.package = node;
      i.numa_nodes.push_back(numa);
    }
    for (int n = 0; n < 4; ++n) {
      NicInfo nic;
      nic.id = n;
      nic.name = "mlx5_" + std::to_string(n);
      nic.numa = n / 2;
      i.nics.push_back(nic);
    }
    for (int g = 0; g < 2; ++g) {
      GpuInfo gpu;
      gpu.ordinal = g;
      gpu.cuda_visible = true;
      gpu.numa = g;
      i.gpus.push_back(gpu);
    }
    return i;
  }();
  return inv;
}

}  // namespace

std::vector<std::string> seeds() {
  return {
      std::string("\0", 1) + R"({"cpu:0": [["mlx5_0"], ["mlx5_1"]], "*": [["mlx5_3"], []]})",
      std::string("\0", 1) + R"({"cuda:1": [["mlx5_2"], ["mlx5_3"]], "gpu:0": [["mlx5_0"], []]})",
      std::string("\1", 1) + R"({"nics": [{"name": "mlx5_1", "type": 0}, {"name": "mlx5_0"}],
        "mems": [{"name": "cuda:0", "type": 1,
                  "device_list": {"rank0": [0], "rank1": [1], "rank2": []}}]})",
      std::string("\1", 1) + R"({"nics": [{"name": "mlx5_2", "numa_node": 7,
        "pci_bus_id": "0000:ff:00.0", "device_attrs": {"x": [1]}}, {"name": "mlx5_3"}],
        "mems": [{"name": "cpu:1", "type": 0, "numa_node": 1, "device_list": {"rank0": [0, 1]}},
                 {"name": "*", "type": 4, "device_list": {"rank2": [1, 0]}}]})",
  };
}

bool accepts(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return false;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto table = parse_priorities(
      text, data[0] % 2 == 0 ? "priority_matrix" : "custom_json_path /fuzz.json", inventory());
  if (!table.ok()) return false;
  require(table->find(Location::any()) != nullptr, "an accepted table without a \"*\" row");
  const int nics = static_cast<int>(inventory().nics.size());
  for (const LocationTiers& row : table->rows) {
    std::set<int> seen;
    for (const auto& tier : row.tiers) {
      for (int nic : tier) {
        require(nic >= 0 && nic < nics, "a tier names a NIC outside the inventory");
        require(seen.insert(nic).second, "a NIC twice in one row");
      }
    }
  }
  return true;
}

}  // namespace orbite::fuzz
