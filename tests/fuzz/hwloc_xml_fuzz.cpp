// Fuzz target: hwloc XML topology files (topology.hwloc_xml), read by hwloc and turned into
// OrbiTE's inventory and discovered NIC tiers (topo::discover, discovered_priorities). The input
// is the whole file. hwloc parses it (its libxml2 plugin when installed); the target checks what
// OrbiTE builds from whatever hwloc accepts: NIC IDs equal to their positions, every GPU and
// NIC on a known NUMA node or none, and tiers naming only NICs of the inventory, each at most
// once per row, with a "*" row. Seeds are hwloc's own exports of synthetic machines; the
// committed corpus adds the test topologies with GPUs and NICs under PCI switches.
#include <hwloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <set>
#include <string>

#include "common/net.h"
#include "fuzz_target.h"
#include "topo/inventory.h"
#include "topo/tiers.h"

namespace orbite::fuzz {
namespace {

using namespace orbite::topo;

// hwloc's XML export of a synthetic machine described in hwloc's synthetic syntax.
std::string synthetic_xml(const char* description) {
  hwloc_topology_t t = nullptr;
  std::string out;
  if (hwloc_topology_init(&t) != 0) return out;
  char* buffer = nullptr;
  int length = 0;
  if (hwloc_topology_set_synthetic(t, description) == 0 && hwloc_topology_load(t) == 0 &&
      hwloc_topology_export_xmlbuffer(t, &buffer, &length, 0) == 0) {
    // The length counts the terminating NUL.
    out.assign(buffer, length > 0 ? static_cast<std::size_t>(length - 1) : 0);
    hwloc_free_xmlbuffer(t, buffer);
  }
  hwloc_topology_destroy(t);
  return out;
}

void check_inventory(const Inventory& inv) {
  for (std::size_t i = 0; i < inv.nics.size(); ++i) {
    require(inv.nics[i].id == static_cast<int>(i), "a NIC whose id is not its position");
    require(inv.nics[i].numa == kUnknownNuma || inv.has_numa_node(inv.nics[i].numa),
            "a NIC on a NUMA node the inventory does not have");
  }
  for (const GpuInfo& gpu : inv.gpus) {
    require(gpu.numa == kUnknownNuma || inv.has_numa_node(gpu.numa),
            "a GPU on a NUMA node the inventory does not have");
  }
  const PriorityTable table = discovered_priorities(inv);
  require(table.find(Location::any()) != nullptr, "discovered priorities without a \"*\" row");
  const int nics = static_cast<int>(inv.nics.size());
  for (const LocationTiers& row : table.rows) {
    std::set<int> seen;
    for (const auto& tier : row.tiers) {
      for (int nic : tier) {
        require(nic >= 0 && nic < nics, "a tier names a NIC outside the inventory");
        require(seen.insert(nic).second, "a NIC twice in one row");
      }
    }
  }
}

}  // namespace

std::vector<std::string> seeds() {
  return {synthetic_xml("pack:2 core:2 pu:2"), synthetic_xml("numa:2 core:2 pu:1")};
}

bool accepts(const std::uint8_t* data, std::size_t size) {
  // hwloc reads a path: the input goes into an anonymous memory file named by /proc.
  net::Fd fd(::memfd_create("orbite-fuzz-hwloc", MFD_CLOEXEC));
  require(fd.valid(), "memfd_create");
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd.get(), data + done, size - done);
    require(n > 0, "write to the memfd");
    done += static_cast<std::size_t>(n);
  }
  DiscoveryInput in;
  in.hwloc_xml = "/proc/self/fd/" + std::to_string(fd.get());
  const auto inv = discover(in);
  if (!inv.ok()) return false;
  check_inventory(*inv);
  return true;
}

}  // namespace orbite::fuzz
