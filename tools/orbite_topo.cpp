// orbite-topo: the host inventory (CPUs and NUMA nodes, RDMA NICs, GPUs) and, for each memory
// location, the NIC tiers or the configured matrix that replaces them. The JSON form is stable
// (docs/topology.md).
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include <orbite/config.h>

#include "proxy/host_topology.h"
#include "topo/selector.h"

namespace {

using nlohmann::ordered_json;
using orbite::proxy::HostTopology;
namespace topo = orbite::topo;

constexpr int kJsonFormatVersion = 1;

constexpr const char* kUsage =
    R"(usage: orbite-topo [--xml FILE] [--nccl-xml FILE] [--json] [--config FILE] [--select LOCATION]

Prints what OrbiTE's topology discovery sees: packages, cores and NUMA nodes with their CPUs, RDMA
NICs (stable ID, name, network interface, NUMA node, PCI bus ID, rate) and NVIDIA GPUs (CUDA
ordinal, bus ID, NUMA node, whether the CUDA driver lists it), then for every location (cpu:N,
cuda:N, *) its NICs in priority tiers, or the rows of the configured priority matrix.

  --xml FILE      read this hwloc XML topology instead of the live machine (topology.hwloc_xml,
                  ORBITE_TOPO_XML); the local verbs provider and CUDA driver are not consulted
  --nccl-xml FILE place GPUs, NICs and NUMA nodes as this NCCL topology file says, over hwloc's
                  view (topology.nccl_xml, ORBITE_TOPO_NCCL_XML, NCCL_TOPO_FILE)
  --config FILE   take the configuration (filters, priority_matrix, ...) from this JSON file;
                  without it the environment is read (ORBITE_CONFIG, ORBITE_RDMA_HCA, ...)
  --json          print the stable JSON form (docs/topology.md)
  --select LOC    also show what the DeviceSelector picks for memory at LOC (cpu:N, cuda:N, *)
                  on idle NICs: one 64 KiB slice, then a 64-slice parent of 64 KiB slices
  --help          this text
)";

std::string nic_names(const topo::Inventory& inv, const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) {
    if (!out.empty()) out += " ";
    out += inv.nics[static_cast<std::size_t>(id)].name;
  }
  return out.empty() ? "-" : out;
}

std::string numa_text(int numa) {
  return numa == topo::kUnknownNuma ? "?" : std::to_string(numa);
}

std::string hex4(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}

ordered_json pci_json(const topo::PciFunction& f) {
  ordered_json j;
  j["bus_id"] = f.address.to_string();
  j["vendor_id"] = hex4(f.vendor_id);
  j["device_id"] = hex4(f.device_id);
  j["class_id"] = hex4(f.class_id);
  j["model"] = f.model;
  j["bridges"] = ordered_json::array();
  for (const auto& b : f.bridges) j["bridges"].push_back(b.to_string());
  return j;
}

ordered_json to_json(const HostTopology& h) {
  const topo::Inventory& inv = h.inventory;
  ordered_json j;
  j["format"] = kJsonFormatVersion;
  j["source"] = inv.source;
  j["hwloc_api_version"] = inv.hwloc_api_version;
  j["machine"] = {{"packages", inv.packages}, {"cores", inv.cores}, {"pus", inv.pus}};
  j["numa_nodes"] = ordered_json::array();
  for (const auto& n : inv.numa_nodes) {
    j["numa_nodes"].push_back({{"os_index", n.os_index},
                               {"package", n.package},
                               {"cpuset", n.cpuset},
                               {"memory_bytes", n.memory_bytes}});
  }
  j["nics"] = ordered_json::array();
  for (const auto& n : inv.nics) {
    ordered_json nic;
    nic["id"] = n.id;
    nic["name"] = n.name;
    nic["netdev"] = n.netdev;
    nic["numa"] = n.numa;
    nic["pci"] = n.pci ? pci_json(*n.pci) : ordered_json(nullptr);
    nic["link_gbps"] = n.link_gbps;
    nic["ports"] = ordered_json::array();
    for (const auto& p : n.ports) {
      nic["ports"].push_back(
          {{"number", p.number}, {"state", p.state}, {"rate_gbps", p.rate_gbps}, {"gids", p.gids}});
    }
    nic["seen_by_hwloc"] = n.seen_by_hwloc;
    nic["seen_by_verbs"] = n.seen_by_verbs;
    j["nics"].push_back(std::move(nic));
  }
  j["gpus"] = ordered_json::array();
  for (const auto& g : inv.gpus) {
    j["gpus"].push_back({{"ordinal", g.ordinal},
                         {"cuda_visible", g.cuda_visible},
                         {"name", g.name},
                         {"numa", g.numa},
                         {"pci", pci_json(g.pci)}});
  }
  ordered_json rows = ordered_json::array();
  for (const auto& row : h.priorities.rows) {
    ordered_json tiers = ordered_json::array();
    for (const auto& tier : row.tiers) {
      ordered_json names = ordered_json::array();
      for (int id : tier) names.push_back(inv.nics[static_cast<std::size_t>(id)].name);
      tiers.push_back(std::move(names));
    }
    rows.push_back({{"location", row.location.to_string()}, {"tiers", std::move(tiers)}});
  }
  j["priorities"] = {{"origin", h.priorities.origin}, {"rows", std::move(rows)}};
  j["notes"] = {{"verbs", h.verbs_note}, {"cuda", h.cuda_note}};
  return j;
}

void print_text(const HostTopology& h) {
  const topo::Inventory& inv = h.inventory;
  std::printf("source: %s (hwloc API %s)\n", inv.source.c_str(), inv.hwloc_api_version.c_str());
  std::printf("machine: %d packages, %d cores, %d PUs, %zu NUMA nodes\n", inv.packages, inv.cores,
              inv.pus, inv.numa_nodes.size());
  for (const auto& n : inv.numa_nodes) {
    std::printf("  numa %-3d package %-3s cpus %-24s %.1f GiB\n", n.os_index,
                n.package < 0 ? "?" : std::to_string(n.package).c_str(), n.cpuset.c_str(),
                static_cast<double>(n.memory_bytes) / (1024.0 * 1024 * 1024));
  }
  std::printf("\nRDMA NICs: %zu%s%s\n", inv.nics.size(), h.verbs_note.empty() ? "" : "  (verbs: ",
              h.verbs_note.empty() ? "" : (h.verbs_note + ")").c_str());
  if (!inv.nics.empty()) {
    std::printf("  %-3s %-12s %-10s %-5s %-13s %-11s %s\n", "id", "name", "netdev", "numa", "pci",
                "vendor:dev", "rate");
  }
  for (const auto& n : inv.nics) {
    std::string rate = n.link_gbps > 0 ? std::to_string(static_cast<int>(n.link_gbps)) + " Gb/s"
                                       : std::string("unknown");
    std::printf("  %-3d %-12s %-10s %-5s %-13s %-11s %s\n", n.id, n.name.c_str(),
                n.netdev.empty() ? "-" : n.netdev.c_str(), numa_text(n.numa).c_str(),
                n.pci ? n.pci->address.to_string().c_str() : "-",
                n.pci ? (hex4(n.pci->vendor_id) + ":" + hex4(n.pci->device_id)).c_str() : "-",
                rate.c_str());
  }
  std::printf("\nGPUs: %zu%s%s\n", inv.gpus.size(), h.cuda_note.empty() ? "" : "  (CUDA: ",
              h.cuda_note.empty() ? "" : (h.cuda_note + ")").c_str());
  for (const auto& g : inv.gpus) {
    std::string where = g.ordinal >= 0 ? "cuda:" + std::to_string(g.ordinal) : "hidden";
    std::printf("  %-8s %-13s numa %-3s %-20s %s\n", where.c_str(),
                g.pci.address.to_string().c_str(), numa_text(g.numa).c_str(),
                g.cuda_visible ? "CUDA-visible" : "not CUDA-visible", g.name.c_str());
  }
  std::printf("\nNIC priorities per location (%s):\n", h.priorities.origin.c_str());
  std::printf("  %-9s %-28s %-28s %s\n", "location", "tier 0", "tier 1", "tier 2");
  for (const auto& row : h.priorities.rows) {
    std::printf("  %-9s %-28s %-28s %s%s\n", row.location.to_string().c_str(),
                nic_names(inv, row.tiers[0]).c_str(), nic_names(inv, row.tiers[1]).c_str(),
                nic_names(inv, row.tiers[2]).c_str(), row.empty() ? "  (no NIC)" : "");
  }
}

// The selector as the RDMA path will use it, on idle NICs seeded at their link rates.
int print_selection(const HostTopology& h, const orbite::EngineConfig& config,
                    const std::string& where) {
  auto location = topo::Location::parse(where);
  if (!location.ok()) {
    std::fprintf(stderr, "orbite-topo: --select: %s\n", location.status().message().c_str());
    return 2;
  }
  auto selector = topo::DeviceSelector::create(h.priorities, h.inventory,
                                               topo::SelectorConfig::from(config.rdma));
  if (!selector.ok()) {
    std::fprintf(stderr, "orbite-topo: %s\n", selector.status().to_string().c_str());
    return 1;
  }
  topo::SelectionRequest request;
  request.location = topo::selection_location(*location, config.rdma.preferred_numa_node);
  if (config.rdma.device_mask) request.mask = *config.rdma.device_mask;
  constexpr std::uint64_t kSlice = 64 * 1024;
  std::printf("\nselection for %s (idle NICs):\n", request.location.to_string().c_str());
  auto one = (*selector)->select(request, kSlice);
  if (!one.ok()) {
    std::printf("  %s\n", one.status().message().c_str());
    return 1;
  }
  std::printf("  one 64 KiB slice: %s\n",
              h.inventory.nics[static_cast<std::size_t>(one->nic(0))].name.c_str());
  one->abandon();
  std::vector<std::uint64_t> slices(topo::kMaxSlices, kSlice);
  auto parent = (*selector)->select_multi(request, slices);
  if (!parent.ok()) {
    std::printf("  %s\n", parent.status().message().c_str());
    return 1;
  }
  std::vector<int> counts(h.inventory.nics.size(), 0);
  for (std::size_t i = 0; i < parent->size(); ++i)
    ++counts[static_cast<std::size_t>(parent->nic(i))];
  std::string shares;
  for (std::size_t n = 0; n < counts.size(); ++n) {
    if (counts[n] == 0) continue;
    shares += " " + h.inventory.nics[n].name + "=" + std::to_string(counts[n]);
  }
  std::printf("  a 64-slice parent:%s\n", shares.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false;
  std::string xml;
  std::string nccl_xml;
  std::string config_file;
  std::string select;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      as_json = true;
    } else if ((arg == "--xml" || arg == "--nccl-xml" || arg == "--config" || arg == "--select") &&
               i + 1 < argc) {
      (arg == "--xml"        ? xml
       : arg == "--nccl-xml" ? nccl_xml
       : arg == "--config"   ? config_file
                             : select) = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "orbite-topo: unknown or incomplete argument '%s'\n%s", arg.c_str(),
                   kUsage);
      return 2;
    }
  }
  auto config = config_file.empty() ? orbite::EngineConfig::load()
                                    : orbite::EngineConfig::from_file(config_file);
  if (!config.ok()) {
    std::fprintf(stderr, "orbite-topo: %s\n", config.status().to_string().c_str());
    return 1;
  }
  if (!xml.empty()) config->topology.hwloc_xml = xml;
  if (!nccl_xml.empty()) config->topology.nccl_xml = nccl_xml;
  auto host = orbite::proxy::discover_host_topology(*config);
  if (!host.ok()) {
    std::fprintf(stderr, "orbite-topo: %s\n", host.status().to_string().c_str());
    return 1;
  }
  if (as_json) {
    // Names come from sysfs, hwloc or a user's XML file, not necessarily UTF-8: replace, not throw.
    std::cout << to_json(*host).dump(2, ' ', false, ordered_json::error_handler_t::replace) << "\n";
  } else {
    print_text(*host);
  }
  return select.empty() || as_json ? 0 : print_selection(*host, *config, select);
}
