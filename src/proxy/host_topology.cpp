#include "proxy/host_topology.h"

#include "platform/cuda_loader.h"
#include "platform/ibv_loader.h"
#include "topo/matrix.h"
#include "topo/port_rate.h"

namespace orbite::proxy {

Result<HostTopology> discover_host_topology(const EngineConfig& config) {
  topo::DiscoveryInput input;
  input.hwloc_xml = config.topology.hwloc_xml;
  input.nccl_xml = config.topology.nccl_xml;
  input.filter.whitelist = config.rdma.rdma_whitelist;
  input.filter.blacklist = config.rdma.rdma_blacklist;
  HostTopology host;
  if (!input.hwloc_xml.empty()) {
    host.verbs_note = "not consulted: the NICs come from the XML file";
    host.cuda_note = "not consulted: the GPUs come from the XML file";
  } else {
    if (auto verbs = rdma::describe_verbs_devices(); verbs.ok()) {
      std::vector<topo::VerbsDevice> list;
      for (const auto& r : *verbs) {
        topo::VerbsDevice d;
        d.name = r.name;
        d.pci = topo::PciAddress::parse(r.pci_bus_id);
        d.numa = r.numa;
        for (const auto& p : r.ports) {
          topo::PortInfo port;
          port.number = p.number;
          port.state = topo::port_state_name(static_cast<std::uint64_t>(p.state));
          port.rate_gbps = topo::port_rate_gbps(p.speed_code, p.width_code);
          d.ports.push_back(std::move(port));
        }
        list.push_back(std::move(d));
      }
      input.verbs = std::move(list);
    } else {
      // No provider: hwloc's OpenFabrics devices are listed, and nothing can open them.
      host.verbs_note = verbs.status().message();
    }
    if (auto cuda = cuda::list_devices(); cuda.ok()) {
      std::vector<topo::CudaDevice> list;
      for (const auto& d : *cuda) {
        if (auto pci = topo::PciAddress::parse(d.pci_bus_id)) {
          list.push_back(topo::CudaDevice{d.ordinal, *pci, d.name,
                                          d.numa_node >= 0 ? d.numa_node : topo::kUnknownNuma});
        }
      }
      input.cuda = std::move(list);
    } else {
      host.cuda_note = cuda.status().message();
    }
  }
  ORBITE_ASSIGN_OR_RETURN(host.inventory, topo::discover(input));
  ORBITE_ASSIGN_OR_RETURN(host.priorities, topo::load_priorities(config.rdma, host.inventory));
  return host;
}

}  // namespace orbite::proxy
