// discover(): hwloc's view of the machine (live or XML) joined with the verbs provider's and the
// CUDA driver's device lists.
#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>

#include "common/log.h"
#include "common/strings.h"
#include "topo/hwloc_probe.h"
#include "topo/inventory.h"
#include "topo/nccl_xml.h"

namespace orbite::topo {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// hwloc's XML loader stores the integers of bridge_type and osdev_type in its enums unchecked, and
// loading an enum object that holds a value outside the enum's range is undefined behaviour (the
// hwloc_xml fuzzer found bridge_type="2-1"). Compare the stored integer instead.
template <typename E>
bool holds(const E& field, E value) {
  std::underlying_type_t<E> stored;
  static_assert(sizeof stored == sizeof field);
  std::memcpy(&stored, &field, sizeof stored);
  return stored == static_cast<std::underlying_type_t<E>>(value);
}

// hwloc loads its plugins (the PCI one links libpciaccess) when a topology is created and unloads
// them when the last one is destroyed; the memory libpciaccess keeps then becomes unreachable
// (LeakSanitizer reports it as a leak of an unknown module) and the next discovery reloads them.
// One empty topology kept for the process keeps the plugins loaded.
void keep_plugins_loaded() {
  static const hwloc_topology_t anchor = [] {
    hwloc_topology_t t = nullptr;
    return hwloc_topology_init(&t) == 0 ? t : nullptr;
  }();
  (void)anchor;
}

Result<Topology> load(const std::string& xml_path) {
  // Before the child: it inherits the loaded plugins instead of loading them again.
  keep_plugins_loaded();
  if (!xml_path.empty()) {
    ORBITE_RETURN_IF_ERROR(check_xml_in_child(xml_path, "topology.hwloc_xml"));
  }
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return Status::error(Errc::Unavailable, "hwloc_topology_init failed");
  }
  Topology topology(raw);
  // Every bridge and PCI function: tiers need the switch ports, which the default filter may drop.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  // The live machine's PCI tree from Linux's sysfs (hwloc's linux component) rather than through
  // libpciaccess (its pci component): the same functions, bridges and link speeds, without the
  // pci.ids name lookup that doubled a live discovery (0.15 s against 0.08 s here) and cost 16 s
  // per process under ThreadSanitizer. What is lost is the PCIDevice name of a GPU no driver
  // names; an XML file keeps whatever names it carries.
  if (xml_path.empty() &&
      hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci") != 0) {
    return Status::error(Errc::Unavailable, "hwloc_topology_set_components(pci) failed");
  }
  if (!xml_path.empty() && hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) {
    return Status::error(
        Errc::Configuration,
        "topology.hwloc_xml: hwloc cannot read the XML file " + quote_path(xml_path));
  }
  if (hwloc_topology_load(raw) != 0) {
    return Status::error(Errc::Unavailable, xml_path.empty()
                                                ? std::string("hwloc could not load this machine")
                                                : "topology.hwloc_xml: hwloc could not load " +
                                                      quote_path(xml_path) +
                                                      " (not a hwloc v1/v2 topology)");
  }
  return topology;
}

// The single NUMA node covering an object's closest non-I/O ancestor; unknown when that ancestor
// spans several nodes (I/O attached to a package or the machine) or none, or when its nodeset
// names a node the topology has no NUMANode object for (an XML file can say so; the fuzz
// target found it).
int numa_of(hwloc_topology_t t, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, obj);
  if (anc == nullptr || anc->nodeset == nullptr || hwloc_bitmap_weight(anc->nodeset) != 1) {
    return kUnknownNuma;
  }
  const int node = hwloc_bitmap_first(anc->nodeset);
  if (hwloc_get_numanode_obj_by_os_index(t, static_cast<unsigned>(node)) == nullptr) {
    return kUnknownNuma;
  }
  return node;
}

PciAddress address_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  return PciAddress{a.domain, a.bus, a.dev, a.func};
}

PciFunction pci_function(hwloc_obj_t obj) {
  PciFunction f;
  const auto& a = obj->attr->pcidev;
  f.address = address_of(a);
  f.vendor_id = a.vendor_id;
  f.device_id = a.device_id;
  f.class_id = a.class_id;
  if (const char* model = hwloc_obj_get_info_by_name(obj, "PCIDevice")) f.model = model;
  for (hwloc_obj_t p = obj->parent; p != nullptr && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
    // A host bridge is the root complex: two devices "sharing" it share nothing nearer than the
    // CPU socket, so only PCI-to-PCI bridges (switch and root ports) are recorded.
    if (holds(p->attr->bridge.upstream_type, HWLOC_OBJ_BRIDGE_PCI)) {
      f.bridges.push_back(address_of(p->attr->bridge.upstream.pci));
    }
  }
  return f;
}

// hwloc stores an OpenFabrics device's ports as info pairs "Port<N>State", "Port<N>GID<i>".
std::vector<PortInfo> ports_of(hwloc_obj_t osdev) {
  std::map<std::uint32_t, PortInfo> ports;
  for (unsigned i = 0; i < osdev->infos_count; ++i) {
    const std::string_view name = osdev->infos[i].name;
    const std::string_view value = osdev->infos[i].value;
    if (name.substr(0, 4) != "Port") continue;
    const auto digits_end = name.find_first_not_of("0123456789", 4);
    const auto number = parse_uint64(name.substr(4, digits_end - 4));
    if (!number || digits_end == std::string_view::npos || *number == 0 || *number > 255) continue;
    PortInfo& port = ports[static_cast<std::uint32_t>(*number)];
    port.number = static_cast<std::uint32_t>(*number);
    const std::string_view key = name.substr(digits_end);
    if (key == "State") {
      // ibv_port_state values as the kernel reports them.
      const auto s = parse_uint64(value);
      port.state = s ? port_state_name(*s) : std::string(value);
    } else if (key.substr(0, 3) == "GID") {
      port.gids.emplace_back(value);
    }
  }
  std::vector<PortInfo> out;
  for (auto& [n, p] : ports) out.push_back(std::move(p));
  return out;
}

// The port a filter entry "name:PORT" is compared with: the first active one, else the first.
std::uint32_t filter_port(const std::vector<PortInfo>& ports) {
  for (const PortInfo& p : ports) {
    if (p.state == "ACTIVE") return p.number;
  }
  return ports.empty() ? 1 : ports.front().number;
}

NicInfo nic_from_osdev(hwloc_topology_t t, hwloc_obj_t osdev) {
  NicInfo nic;
  nic.name = osdev->name != nullptr ? osdev->name : "";
  nic.seen_by_hwloc = true;
  nic.numa = numa_of(t, osdev);
  nic.ports = ports_of(osdev);
  hwloc_obj_t parent = osdev->parent;
  if (parent != nullptr && parent->type == HWLOC_OBJ_PCI_DEVICE) {
    nic.pci = pci_function(parent);
    for (hwloc_obj_t c = parent->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type == HWLOC_OBJ_OS_DEVICE && holds(c->attr->osdev.type, HWLOC_OBJ_OSDEV_NETWORK) &&
          c->name != nullptr) {
        nic.netdev = c->name;
        break;
      }
    }
  }
  return nic;
}

hwloc_obj_t find_pci(hwloc_topology_t t, const PciAddress& a) {
  return hwloc_get_pcidev_by_busid(t, a.domain, a.bus, a.device, a.function);
}

bool is_gpu(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  // NVIDIA display controllers (VGA 0x0300, 3D 0x0302). NVSwitches are bridges (0x0680).
  return a.vendor_id == 0x10de && (a.class_id >> 8) == 0x03;
}

std::vector<NicInfo> join_nics(hwloc_topology_t t, const DiscoveryInput& in,
                               const NcclTopology* nccl) {
  std::vector<NicInfo> from_hwloc;
  for (hwloc_obj_t o = hwloc_get_next_osdev(t, nullptr); o != nullptr;
       o = hwloc_get_next_osdev(t, o)) {
    if (holds(o->attr->osdev.type, HWLOC_OBJ_OSDEV_OPENFABRICS))
      from_hwloc.push_back(nic_from_osdev(t, o));
  }
  if (nccl != nullptr) overlay_nccl_nics(from_hwloc, *nccl);
  if (!in.verbs) return from_hwloc;
  // With a provider, its list is the truth (and its order gives the IDs, as in TENT); hwloc (and
  // the NCCL file) only place each device in the PCI tree.
  std::vector<NicInfo> nics;
  for (const VerbsDevice& v : *in.verbs) {
    auto it = std::find_if(from_hwloc.begin(), from_hwloc.end(),
                           [&](const NicInfo& n) { return n.name == v.name; });
    if (it == from_hwloc.end() && v.pci) {
      it = std::find_if(from_hwloc.begin(), from_hwloc.end(),
                        [&](const NicInfo& n) { return n.pci && n.pci->address == *v.pci; });
    }
    NicInfo nic;
    if (it != from_hwloc.end()) {
      nic = *it;
    } else if (hwloc_obj_t pci = v.pci ? find_pci(t, *v.pci) : nullptr) {
      nic.pci = pci_function(pci);
      nic.numa = numa_of(t, pci);
    } else if (v.pci) {
      nic.pci = PciFunction{};
      nic.pci->address = *v.pci;
    }
    nic.name = v.name;
    nic.seen_by_verbs = true;
    if (nic.numa == kUnknownNuma) nic.numa = v.numa;
    if (!v.ports.empty()) nic.ports = v.ports;
    nics.push_back(std::move(nic));
  }
  return nics;
}

std::vector<GpuInfo> join_gpus(hwloc_topology_t t, const DiscoveryInput& in,
                               const NcclTopology* nccl) {
  std::vector<GpuInfo> from_hwloc;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(t, nullptr); o != nullptr;
       o = hwloc_get_next_pcidev(t, o)) {
    if (!is_gpu(o->attr->pcidev)) continue;
    GpuInfo g;
    g.pci = pci_function(o);
    g.numa = numa_of(t, o);
    g.name = g.pci.model;
    from_hwloc.push_back(std::move(g));
  }
  if (nccl != nullptr) overlay_nccl_gpus(from_hwloc, *nccl);
  std::sort(from_hwloc.begin(), from_hwloc.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.pci.address < b.pci.address; });
  if (!in.cuda) {
    // No driver: keep the GPUs for tests and orbite-topo, numbered in bus order.
    for (std::size_t i = 0; i < from_hwloc.size(); ++i) from_hwloc[i].ordinal = static_cast<int>(i);
    return from_hwloc;
  }
  std::vector<GpuInfo> gpus;
  std::vector<bool> matched(from_hwloc.size(), false);
  std::vector<CudaDevice> cuda = *in.cuda;
  std::sort(cuda.begin(), cuda.end(),
            [](const CudaDevice& a, const CudaDevice& b) { return a.ordinal < b.ordinal; });
  for (const CudaDevice& c : cuda) {
    GpuInfo g;
    auto it = std::find_if(from_hwloc.begin(), from_hwloc.end(),
                           [&](const GpuInfo& h) { return h.pci.address == c.pci; });
    if (it != from_hwloc.end()) {
      g = *it;
      matched[static_cast<std::size_t>(it - from_hwloc.begin())] = true;
    } else {
      // hwloc without PCI data (a container) or a device it cannot see: no path; the NUMA node
      // is the driver's where it reports one.
      g.pci.address = c.pci;
      g.numa = c.numa;
    }
    g.ordinal = c.ordinal;
    g.cuda_visible = true;
    if (!c.name.empty()) g.name = c.name;
    gpus.push_back(std::move(g));
  }
  for (std::size_t i = 0; i < from_hwloc.size(); ++i) {
    if (matched[i]) continue;
    GpuInfo hidden = from_hwloc[i];  // e.g. masked by CUDA_VISIBLE_DEVICES
    hidden.ordinal = -1;
    gpus.push_back(std::move(hidden));
  }
  return gpus;
}

}  // namespace

Result<Inventory> discover(const DiscoveryInput& in) {
  std::optional<NcclTopology> nccl;
  if (!in.nccl_xml.empty()) {
    ORBITE_ASSIGN_OR_RETURN(nccl, load_nccl_topology(in.nccl_xml));
  }
  auto topology = load(in.hwloc_xml);
  if (!topology.ok()) return topology.status();
  hwloc_topology_t t = topology->get();
  Inventory inv;
  inv.source = in.hwloc_xml.empty() ? "live machine" : in.hwloc_xml;
  if (nccl) inv.source += " + NCCL topology " + in.nccl_xml;
  inv.hwloc_api_version = hwloc_runtime_version();
  inv.packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  inv.cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  inv.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  const int numa_count = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < numa_count; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    NumaNode n;
    n.os_index = static_cast<int>(node->os_index);
    if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, node)) {
      n.package = static_cast<int>(pkg->os_index);
    }
    if (node->cpuset != nullptr) {
      char* text = nullptr;
      if (hwloc_bitmap_list_asprintf(&text, node->cpuset) >= 0 && text != nullptr) {
        n.cpuset = text;
      }
      std::free(text);
    }
    n.memory_bytes = node->attr->numanode.local_memory;
    inv.numa_nodes.push_back(std::move(n));
  }
  if (nccl) overlay_nccl_numa(inv.numa_nodes, *nccl);

  const NcclTopology* placed_by = nccl ? &*nccl : nullptr;
  for (NicInfo& nic : join_nics(t, in, placed_by)) {
    if (!filter_allows(in.filter, nic.name, filter_port(nic.ports))) continue;
    if (inv.nics.size() == kMaxNics) {
      ORBITE_LOG(Warn, Topo) << "more than " << kMaxNics << " RDMA devices after filters; "
                             << quote(nic.name) << " and later ones are left out "
                             << "(rdma.rdma_whitelist selects which)";
      break;
    }
    nic.id = static_cast<int>(inv.nics.size());
    for (const PortInfo& p : nic.ports) nic.link_gbps = std::max(nic.link_gbps, p.rate_gbps);
    inv.nics.push_back(std::move(nic));
  }
  inv.gpus = join_gpus(t, in, placed_by);
  return inv;
}

}  // namespace orbite::topo
