// The transport table: for each TransportId, how its memory domain is made and how one lane's
// transport is made. The only file outside the transports' folders that names them.
#include "p2p/transports.h"

#include "p2p/cuda_ipc/ipc_transport.h"
#include "p2p/shm/shm_transport.h"
#include "p2p/tcp/tcp_transport.h"
#if ORBITE_WITH_RDMA
#include "p2p/rdma/factory.h"
#endif

namespace orbite::p2p {

namespace {

using DomainResult = Result<std::unique_ptr<MemoryDomain>>;
using LaneResult = Result<std::unique_ptr<LaneTransport>>;

struct Entry {
  TransportId id;
  DomainResult (*domain)(const EngineConfig& config, const detail::Identity& self,
                         std::string* note);
  // `domain`: the engine's, or null. The lane's transport, or null where it has none.
  LaneResult (*lane)(const LaneParts& parts, const MemoryDomain* domain);
};

DomainResult shm_domain(const EngineConfig& config, const detail::Identity&, std::string*) {
  // A region is published on shm only where shm serves other peers; the loopback needs no key.
  if (!config.shm.enable) return std::unique_ptr<MemoryDomain>();
  return std::unique_ptr<MemoryDomain>(std::make_unique<KeylessDomain>(TransportId::Shm));
}

LaneResult shm_lane(const LaneParts& parts, const MemoryDomain*) {
  // Always there for the loopback to this engine; shm.enable governs other peers.
  return std::unique_ptr<LaneTransport>(
      std::make_unique<ShmLane>(parts.config, parts.self, parts.handler, parts.control));
}

DomainResult tcp_domain(const EngineConfig&, const detail::Identity&, std::string*) {
  return std::unique_ptr<MemoryDomain>(std::make_unique<KeylessDomain>(TransportId::Tcp));
}

LaneResult tcp_lane(const LaneParts& parts, const MemoryDomain*) {
  return std::unique_ptr<LaneTransport>(std::make_unique<TcpLane>(
      parts.config, parts.self, parts.poller, parts.handler, parts.control));
}

#if ORBITE_WITH_RDMA
DomainResult rdma_domain(const EngineConfig& config, const detail::Identity& self,
                         std::string* note) {
  return rdma::install_domain(config, self, note);
}
#else
DomainResult rdma_domain(const EngineConfig& config, const detail::Identity&, std::string* note) {
  if (config.rdma.enable == rdma::RdmaEnable::Off) {
    *note = "rdma.enable is off";
    return std::unique_ptr<MemoryDomain>();
  }
  *note = "OrbiTE was built without RDMA support (ORBITE_WITH_RDMA=OFF)";
  if (config.rdma.enable == rdma::RdmaEnable::On) {
    return Status::error(Errc::Unavailable, "rdma.enable = on: " + *note);
  }
  return std::unique_ptr<MemoryDomain>();
}
#endif

DomainResult cuda_ipc_domain(const EngineConfig&, const detail::Identity&, std::string*) {
  // No driver call: a registration of device memory exports its handle (and loaded the driver).
  return std::unique_ptr<MemoryDomain>(std::make_unique<ipc::CudaIpcDomain>());
}

// A transport whose lanes exist only with its domain, which makes them.
LaneResult domain_lane(const LaneParts& parts, const MemoryDomain* domain) {
  if (domain == nullptr) return std::unique_ptr<LaneTransport>();
  return domain->make_lane(parts);
}

constexpr Entry kTable[] = {
    {TransportId::Shm, shm_domain, shm_lane},
    {TransportId::Tcp, tcp_domain, tcp_lane},
    {TransportId::Rdma, rdma_domain, domain_lane},
    {TransportId::CudaIpc, cuda_ipc_domain, domain_lane},
};

}  // namespace

Result<LaneTransports> make_lane_transports(const LaneParts& parts, const MemoryDomains& domains) {
  LaneTransports out;
  for (const Entry& e : kTable) {
    const auto i = static_cast<std::size_t>(e.id);
    ORBITE_ASSIGN_OR_RETURN(out[i], e.lane(parts, domains[i].get()));
  }
  return out;
}

Result<MemoryDomains> make_memory_domains(const EngineConfig& config, const detail::Identity& self,
                                          DomainNotes* notes) {
  MemoryDomains out;
  for (const Entry& e : kTable) {
    const auto i = static_cast<std::size_t>(e.id);
    ORBITE_ASSIGN_OR_RETURN(out[i], e.domain(config, self, &(*notes)[i]));
  }
  return out;
}

std::array<bool, kTransportCount> built_transports(const MemoryDomains& domains) {
  std::array<bool, kTransportCount> out{};
  // tcp and shm lanes exist without a domain (shm's loopback); the others only with theirs.
  out[static_cast<std::size_t>(TransportId::Shm)] = true;
  out[static_cast<std::size_t>(TransportId::Tcp)] = true;
  for (TransportId id : {TransportId::Rdma, TransportId::CudaIpc}) {
    out[static_cast<std::size_t>(id)] = domains[static_cast<std::size_t>(id)] != nullptr;
  }
  return out;
}

TransportReport report_of(const MemoryDomains& domains, const DomainNotes& notes) {
  TransportReport out;
  out.rdma.why_not = notes[static_cast<std::size_t>(TransportId::Rdma)];
  for (const auto& d : domains) {
    if (d) d->report(out);
  }
  return out;
}

std::vector<int> monitor_fds(const MemoryDomains& domains) {
  std::vector<int> out;
  for (const auto& d : domains) {
    if (!d) continue;
    for (int fd : d->monitor_fds()) out.push_back(fd);
  }
  return out;
}

void drain_monitor_events(const MemoryDomains& domains) {
  for (const auto& d : domains) {
    if (d) d->drain_monitor_events();
  }
}

void monitor_scan(const MemoryDomains& domains) {
  for (const auto& d : domains) {
    if (d) d->monitor_scan();
  }
}

}  // namespace orbite::p2p
