// NCCL's topology XML (the NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format that cloud GPU images
// ship): NUMA nodes (<cpu numaid affinity>), PCI switches (<pci class="0x0604xx">) and the GPUs
// and NICs below them, read by a small XML reader of its own (hwloc cannot read the format).
// Cloud vendors' files are partial by design (NCCL merges them with what it detects): vendor IDs,
// <gpu>/<nic> elements and real switch bus IDs may be missing, and are not required.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "topo/inventory.h"

namespace orbite::topo {

struct NcclDevice {
  // Without a PCI element (a <nic> NCCL could not place) the address is all zero and `placed`
  // false.
  PciFunction pci;
  bool placed = true;
  int numa = kUnknownNuma;
  std::string name;         // a NIC's <net name>, e.g. mlx5_0; empty when the file has none
  double speed_gbps = 0.0;  // a NIC's <net speed> (Mb/s in the file); 0 when absent
};

struct NcclTopology {
  std::vector<NumaNode> numa_nodes;  // os_index from numaid, cpuset from affinity
  std::vector<NcclDevice> gpus;      // display controllers of NVIDIA (or of no stated vendor)
  std::vector<NcclDevice> nics;      // network controllers (Ethernet, InfiniBand), or <nic>
};

// Parses the text of a file; `origin` names it in errors (Configuration, naming
// topology.nccl_xml, the origin, the line and what is wrong).
Result<NcclTopology> parse_nccl_topology(std::string_view xml, std::string_view origin);
// Reads and parses a file (at most 16 MiB).
Result<NcclTopology> load_nccl_topology(const std::string& path);

// "0000ffff,0000ffff" (32-bit hex words, most significant first, as NCCL and the kernel's
// cpumask print them) as hwloc's list syntax ("0-15,32-47"); nullopt when malformed.
std::optional<std::string> cpu_list_of_mask(std::string_view mask);

// Places hwloc's devices as the NCCL file says (the file wins where both know a bus ID: it is the
// operator's description of a machine whose PCI tree the VM hides) and appends the devices and
// NUMA nodes only the file knows. A NIC the file names by <net name> is also found by that name;
// one named by neither is listed by its bus ID ("pci:0000:10:1b.0") until a provider names it.
void overlay_nccl_gpus(std::vector<GpuInfo>& gpus, const NcclTopology& nccl);
void overlay_nccl_nics(std::vector<NicInfo>& nics, const NcclTopology& nccl);
void overlay_nccl_numa(std::vector<NumaNode>& nodes, const NcclTopology& nccl);

}  // namespace orbite::topo
