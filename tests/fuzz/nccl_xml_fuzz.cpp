// Fuzz target: NCCL topology XML files (topology.nccl_xml, NCCL_TOPO_FILE), read by OrbiTE's own
// small XML reader (topo/nccl_xml.*) and laid over an empty machine. An accepted file must give
// devices whose switch paths hold only the bridges above them (at most the nesting depth), NICs
// that all have names after the overlay, NUMA nodes with CPU lists that are hwloc list syntax,
// and GPU tiers that name each NIC once. Seeds are small files of the format's shapes; the
// committed corpus adds the four real files of tests/data/topologies/nccl.
#include <set>
#include <string>

#include "fuzz_target.h"
#include "topo/nccl_xml.h"
#include "topo/tiers.h"

namespace orbite::fuzz {

std::vector<std::string> seeds() {
  return {
      R"(<system version="1">
  <cpu numaid="0" affinity="0000ffff,0000ffff" arch="x86_64">
    <pci busid="0000:0c:00.0" class="0x060400" vendor="0x11f8" device="0x4000">
      <pci busid="0000:0f:00.0" class="0x030000" vendor="0x10de" device="0x2204">
        <gpu dev="0" sm="86" rank="0" gdr="0"/>
      </pci>
      <pci busid="0000:9a:00.0" class="0x020700" vendor="0x15b3" device="0x101b">
        <nic><net name="mlx5_0" dev="0" speed="56000" port="1" gdr="0"/></nic>
      </pci>
    </pci>
  </cpu>
</system>
)",
      R"(<!-- a hand-written cloud file -->
<system version="1">
  <cpu numaid="1" affinity="ffffff00,00000000,00000000">
    <pci busid="ffff:ff:04.0" class="0x060400" vendor="0x0000">
      <pci busid="000b:00:00.0" class="0x030200"/>
      <pci busid="0105:00:00.0" class="0x020700"/>
    </pci>
  </cpu>
</system>
)",
      R"(<?xml version="1.0"?><system><cpu numaid="0"><nic><net name="eth&amp;0" speed="100000"/></nic></cpu></system>)",
  };
}

}  // namespace orbite::fuzz

bool orbite::fuzz::accepts(const std::uint8_t* data, std::size_t size) {
  using namespace orbite::topo;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_nccl_topology(text, "fuzz.xml");
  if (!parsed.ok()) return false;
  for (const auto* list : {&parsed->gpus, &parsed->nics}) {
    for (const NcclDevice& d : *list) require(d.pci.bridges.size() < 64, "a path deeper than 64");
  }
  for (const NumaNode& n : parsed->numa_nodes) {
    require(n.cpuset.find_first_not_of("0123456789,-") == std::string::npos,
            "a CPU list outside hwloc's list syntax");
  }
  Inventory inv;
  overlay_nccl_numa(inv.numa_nodes, *parsed);
  overlay_nccl_gpus(inv.gpus, *parsed);
  overlay_nccl_nics(inv.nics, *parsed);
  if (inv.nics.size() > kMaxNics) return true;  // discover() keeps the first 64
  for (std::size_t i = 0; i < inv.nics.size(); ++i) {
    inv.nics[i].id = static_cast<int>(i);
    require(!inv.nics[i].name.empty(), "a NIC without a name after the overlay");
  }
  for (std::size_t i = 0; i < inv.gpus.size(); ++i) {
    inv.gpus[i].ordinal = static_cast<int>(i);
    std::set<int> seen;
    for (const auto& tier : gpu_tiers(inv, inv.gpus[i]).tiers) {
      for (int id : tier) require(seen.insert(id).second, "a NIC in two tiers of one GPU");
    }
    require(seen.size() == inv.nics.size(), "a NIC missing from a GPU's tiers");
  }
  return true;
}
