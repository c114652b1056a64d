// orbite-info: what this build contains, which optional libraries this machine provides, the CUDA
// devices with their NIC tiers, and validation of configuration files.
#include <array>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <orbite/config.h>
#include <orbite/info.h>

#include "platform/cuda_loader.h"
#include "proxy/host_topology.h"
#if ORBITE_WITH_RDMA
#include "p2p/rdma/gdr.h"
#include "platform/ibv_loader.h"
#endif

namespace {

constexpr const char* kUsage = R"(usage: orbite-info [--json]
       orbite-info --cuda-entry-points
       orbite-info --config FILE
       orbite-info --config-reference

Prints OrbiTE's version, the optional features this build contains (RDMA, CUDA, MPI bootstrap),
which run-time libraries this machine provides (libibverbs.so.1, libcuda.so.1, hwloc) and the
CUDA driver's devices (ordinal, PCI bus ID, NUMA node, memory, UUID) with each one's NIC tiers
as the RDMA path ranks them (orbite-topo shows the whole topology) and the GPUDirect RDMA route
rdma.cuda_memory = "direct" would take for it (or why none).

  --json              the same report as JSON
  --cuda-entry-points how the driver's cuGetProcAddress answered each entry point OrbiTE asks
                      for (name, version, flags, required, status), one per line; exit 1 when
                      a required one is unresolved or the driver does not load
  --config FILE       validate a configuration file: print the effective configuration
                      (defaults filled in) as JSON and exit 0, or print the error (JSON path,
                      bad value, what was expected) and exit 1
  --config-reference  print the Markdown table of every configuration field
  --help              this text
)";

nlohmann::ordered_json probe_json(const orbite::LibraryProbe& p) {
  nlohmann::ordered_json j;
  j["library"] = p.library;
  j["built_with"] = p.built_with;
  j["found"] = p.found;
  j["path"] = p.path;
  j["version"] = p.version;
  j["detail"] = p.detail;
  return j;
}

void print_probe(const orbite::LibraryProbe& p) {
  std::string state = p.found ? "found" : (p.built_with ? "missing" : "not built");
  std::printf("  %-16s %-9s %s%s%s%s\n", p.library.c_str(), state.c_str(),
              p.version.empty() ? "" : ("version " + p.version + ", ").c_str(),
              p.path.empty() ? "" : p.path.c_str(), p.path.empty() ? "" : ": ", p.detail.c_str());
}

struct CudaDevices {
  std::vector<orbite::cuda::DeviceIdentity> devices;
  std::string note;  // why there are none, or why the tiers are missing
  orbite::Result<orbite::proxy::HostTopology> host =
      orbite::Status::error(orbite::Errc::Unavailable, "the topology was not discovered");
};

// The driver's devices (CUDA_VISIBLE_DEVICES applies) and the topology their tiers come from.
CudaDevices cuda_devices() {
  CudaDevices out;
  auto list = orbite::cuda::list_devices();
  if (!list.ok()) {
    out.note = list.status().message();
    return out;
  }
  out.devices = std::move(*list);
  auto config = orbite::EngineConfig::load();
  if (!config.ok()) {
    out.host = config.status();
    return out;
  }
  // The tiers of this machine's GPUs: a topology file (topology.hwloc_xml) describes another.
  config->topology.hwloc_xml.clear();
  out.host = orbite::proxy::discover_host_topology(*config);
  return out;
}

// Tier t of cuda:N as NIC names; nullopt when the topology is unknown.
std::optional<std::array<std::vector<std::string>, orbite::topo::kTierCount>> tiers_of(
    const CudaDevices& c, int ordinal) {
  if (!c.host.ok()) return std::nullopt;
  const auto& row = c.host->priorities.lookup(orbite::topo::Location::cuda(ordinal));
  std::array<std::vector<std::string>, orbite::topo::kTierCount> out;
  for (std::size_t t = 0; t < out.size(); ++t) {
    for (int id : row.tiers[t]) {
      out[t].push_back(c.host->inventory.nics[static_cast<std::size_t>(id)].name);
    }
  }
  return out;
}

// GPUDirect RDMA for a device: the route rdma.cuda_memory = "direct" with
// gpu_direct_registration = auto would take here ("dmabuf" or "peermem"), or "" and why not.
struct GpuDirectAnswer {
  std::string route;
  std::string why;
};

GpuDirectAnswer gpudirect_of(const orbite::cuda::DeviceIdentity& d) {
#if ORBITE_WITH_RDMA
  if (!d.gpudirect_rdma) return {"", "the device does not support GPUDirect RDMA"};
  if (d.gpudirect_writes_ordering < 100) {  // CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER
    return {"", "the device does not order GPUDirect RDMA writes for its own work"};
  }
  auto verbs = orbite::rdma::load_ibverbs();
  if (!verbs.ok()) return {"", verbs.status().message()};
  orbite::rdma::GdrPrerequisites p;
  p.device_dma_buf = d.dma_buf;
  p.export_entry = d.dma_buf_export;
  p.verbs_dmabuf_entry = (*verbs)->reg_dmabuf_mr != nullptr;
  p.peermem_file = orbite::rdma::peermem_probe(orbite::rdma::sysfs_root());
  auto route = orbite::rdma::resolve_gdr_route(orbite::rdma::GpuDirectRegistration::Auto, p,
                                               "cuda:" + std::to_string(d.ordinal));
  if (!route.ok()) return {"", route.status().message()};
  return {orbite::rdma::gdr_route_name(*route), ""};
#else
  (void)d;
  return {"", "this build has no RDMA transport"};
#endif
}

nlohmann::ordered_json cuda_json(const CudaDevices& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const auto& d : c.devices) {
    nlohmann::ordered_json dev;
    dev["ordinal"] = d.ordinal;
    dev["name"] = d.name;
    dev["pci_bus_id"] = d.pci_bus_id;
    dev["uuid"] = d.uuid;
    dev["memory_bytes"] = d.memory_bytes;
    dev["numa_node"] = d.numa_node;
    auto tiers = tiers_of(c, d.ordinal);
    dev["nic_tiers"] = tiers ? nlohmann::ordered_json(*tiers) : nlohmann::ordered_json(nullptr);
    const GpuDirectAnswer g = gpudirect_of(d);
    dev["gpudirect"] = {{"rdma_supported", d.gpudirect_rdma},
                        {"dma_buf_supported", d.dma_buf},
                        {"writes_ordering", d.gpudirect_writes_ordering},
                        {"route", g.route.empty() ? nlohmann::ordered_json(nullptr)
                                                  : nlohmann::ordered_json(g.route)},
                        {"why_not", g.why}};
    j.push_back(std::move(dev));
  }
  return j;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " ") + n;
  return out.empty() ? "-" : out;
}

void print_cuda(const CudaDevices& c) {
  if (c.devices.empty()) {
    std::printf("CUDA devices: none%s%s\n", c.note.empty() ? "" : " (",
                c.note.empty() ? "" : (c.note + ")").c_str());
    return;
  }
  std::printf("CUDA devices: %zu (NIC tiers as the RDMA path ranks them)\n", c.devices.size());
  for (const auto& d : c.devices) {
    std::printf("  cuda:%-3d %-13s numa %-3s %7.1f GiB  %s  %s\n", d.ordinal, d.pci_bus_id.c_str(),
                d.numa_node < 0 ? "?" : std::to_string(d.numa_node).c_str(),
                static_cast<double>(d.memory_bytes) / (1024.0 * 1024 * 1024), d.uuid.c_str(),
                d.name.c_str());
    if (auto tiers = tiers_of(c, d.ordinal)) {
      std::printf("           tier 0: %s; tier 1: %s; tier 2: %s\n", join((*tiers)[0]).c_str(),
                  join((*tiers)[1]).c_str(), join((*tiers)[2]).c_str());
    } else {
      std::printf("           NIC tiers unknown: %s\n", c.host.status().to_string().c_str());
    }
    const GpuDirectAnswer g = gpudirect_of(d);
    std::printf("           GPUDirect RDMA (auto route): %s\n",
                g.route.empty() ? ("none: " + g.why).c_str() : g.route.c_str());
  }
}

int print_entry_points() {
  auto table = orbite::cuda::entry_points();
  if (table.empty()) {
    auto driver = orbite::cuda::probe_driver();
    std::fprintf(
        stderr, "orbite-info: %s\n",
        driver.ok() ? "the driver resolved no entry point" : driver.status().to_string().c_str());
    return 1;
  }
  bool complete = true;
  std::printf("%-36s %-8s %-6s %-9s %s\n", "entry point", "version", "flags", "required", "status");
  for (const auto& e : table) {
    std::printf("%-36s %-8d %-6llu %-9s %s\n", e.name.c_str(), e.version,
                static_cast<unsigned long long>(e.flags), e.required ? "yes" : "no",
                e.status.c_str());
    if (e.required && !e.resolved) complete = false;
  }
  return complete ? 0 : 1;
}

int report(bool as_json) {
  orbite::BuildInfo b = orbite::build_info();
  orbite::LibraryProbe probes[] = {orbite::probe_libibverbs(), orbite::probe_libcuda(),
                                   orbite::probe_hwloc()};
  if (as_json) {
    nlohmann::ordered_json j;
    j["version"] = b.version;
    j["build_type"] = b.build_type;
    j["compiler"] = b.compiler;
    j["features"] = {{"rdma", b.with_rdma}, {"cuda", b.with_cuda}, {"mpi", b.with_mpi}};
    j["hwloc_build_version"] = b.hwloc_build_version;
    j["libraries"] = nlohmann::ordered_json::array();
    for (const auto& p : probes) j["libraries"].push_back(probe_json(p));
    const CudaDevices cuda = cuda_devices();
    j["cuda_devices"] = cuda_json(cuda);
    j["cuda_note"] = cuda.note;
    // A library path is file-system bytes, not necessarily UTF-8: replace rather than throw.
    std::cout << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("OrbiTE %s (%s, %s)\n", b.version.c_str(), b.build_type.c_str(), b.compiler.c_str());
  std::printf("features built:\n");
  std::printf("  RDMA  %-3s (libibverbs.so.1 is loaded at run time, never linked)\n",
              b.with_rdma ? "yes" : "no");
  std::printf("  CUDA  %-3s (libcuda.so.1 is loaded at run time, never linked)\n",
              b.with_cuda ? "yes" : "no");
  std::printf("  MPI   %-3s (bootstrap library orbite_mpi)\n", b.with_mpi ? "yes" : "no");
  std::printf("run-time libraries:\n");
  for (const auto& p : probes) print_probe(p);
  std::printf("  (hwloc headers at build time: API %s)\n", b.hwloc_build_version.c_str());
  print_cuda(cuda_devices());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--json") {
      as_json = true;
    } else if (arg == "--cuda-entry-points") {
      return print_entry_points();
    } else if (arg == "--config-reference") {
      std::cout << orbite::configuration_reference_markdown();
      return 0;
    } else if (arg == "--config") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "orbite-info: --config needs a file name\n");
        return 2;
      }
      auto config = orbite::EngineConfig::from_file(argv[++i]);
      if (!config.ok()) {
        std::fprintf(stderr, "orbite-info: %s\n", config.status().to_string().c_str());
        return 1;
      }
      std::cout << config->to_json();
      return 0;
    } else {
      std::fprintf(stderr, "orbite-info: unknown option '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  return report(as_json);
}
