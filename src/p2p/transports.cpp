#include "p2p/transports.h"

#include "common/log.h"
#include "p2p/shm/shm_transport.h"
#include "p2p/tcp/tcp_transport.h"
#if ORBITE_WITH_RDMA
#include "p2p/rdma/engine.h"
#include "p2p/rdma/lane.h"
#endif

namespace orbite::p2p {

namespace {
constexpr auto kRdma = static_cast<std::size_t>(TransportId::Rdma);
}

Result<LaneTransports> make_lane_transports(const EngineConfig& config,
                                            const detail::Identity& self, Poller& poller,
                                            FrameHandler& handler, ControlSender& control,
                                            const MemoryDomains& domains, RegionRegistry& regions) {
  LaneTransports out;
  // shm is always there for the loopback to this engine; shm.enable governs other peers.
  out[static_cast<std::size_t>(TransportId::Shm)] =
      std::make_unique<ShmLane>(config, self, handler, control);
  out[static_cast<std::size_t>(TransportId::Tcp)] =
      std::make_unique<TcpLane>(config, self, poller, handler, control);
#if ORBITE_WITH_RDMA
  if (const auto* domain = dynamic_cast<const rdma::RdmaDomain*>(domains[kRdma].get())) {
    auto lane = std::make_unique<rdma::RdmaLane>(domain->engine(), domain->cache(), self, regions,
                                                 poller, handler, control);
    ORBITE_RETURN_IF_ERROR(lane->init());
    out[kRdma] = std::move(lane);
  }
#else
  (void)domains;
  (void)regions;
#endif
  return out;
}

Result<MemoryDomains> make_memory_domains(const EngineConfig& config, const detail::Identity& self,
                                          std::string* rdma_note) {
  MemoryDomains out;
  // A region is published on shm only where shm serves other peers; the loopback needs no key.
  if (config.shm.enable) {
    out[static_cast<std::size_t>(TransportId::Shm)] =
        std::make_unique<KeylessDomain>(TransportId::Shm);
  }
  out[static_cast<std::size_t>(TransportId::Tcp)] =
      std::make_unique<KeylessDomain>(TransportId::Tcp);
  const auto enable = config.rdma.enable;
  if (enable == rdma::RdmaEnable::Off) {
    *rdma_note = "rdma.enable is off";
    return out;
  }
#if ORBITE_WITH_RDMA
  auto engine = rdma::RdmaEngine::install(config, self);
  if (!engine.ok()) {
    // A conflicting library path is the configuration's fault, whatever rdma.enable says.
    if (enable == rdma::RdmaEnable::On || engine.status().code() == Errc::Configuration) {
      return engine.status().with_context(enable == rdma::RdmaEnable::On ? "rdma.enable = on"
                                                                         : "rdma");
    }
    *rdma_note = engine.status().message();
    ORBITE_LOG(Debug, Rdma) << "RDMA not installed: " << *rdma_note;
    return out;
  }
  out[kRdma] = std::make_unique<rdma::RdmaDomain>(std::move(*engine));
#else
  (void)self;
  *rdma_note = "OrbiTE was built without RDMA support (ORBITE_WITH_RDMA=OFF)";
  if (enable == rdma::RdmaEnable::On) {
    return Status::error(Errc::Unavailable, "rdma.enable = on: " + *rdma_note);
  }
#endif
  return out;
}

std::array<bool, kTransportCount> built_transports(const MemoryDomains& domains) {
  std::array<bool, kTransportCount> out{};
  out[static_cast<std::size_t>(TransportId::Shm)] = true;
  out[static_cast<std::size_t>(TransportId::Tcp)] = true;
  out[kRdma] = domains[kRdma] != nullptr;
  return out;
}

void scan_rdma_ports(const MemoryDomains& domains) {
#if ORBITE_WITH_RDMA
  if (const auto* domain = dynamic_cast<const rdma::RdmaDomain*>(domains[kRdma].get())) {
    domain->engine()->scan_ports();
  }
#else
  (void)domains;
#endif
}

std::vector<int> rdma_event_fds(const MemoryDomains& domains) {
#if ORBITE_WITH_RDMA
  if (const auto* domain = dynamic_cast<const rdma::RdmaDomain*>(domains[kRdma].get())) {
    return domain->engine()->event_fds();
  }
#else
  (void)domains;
#endif
  return {};
}

void drain_rdma_events(const MemoryDomains& domains) {
#if ORBITE_WITH_RDMA
  if (const auto* domain = dynamic_cast<const rdma::RdmaDomain*>(domains[kRdma].get())) {
    domain->engine()->drain_events();
  }
#else
  (void)domains;
#endif
}

std::vector<NicLoad> nic_load_of(const MemoryDomains& domains) {
  std::vector<NicLoad> out;
#if ORBITE_WITH_RDMA
  if (const auto* domain = dynamic_cast<const rdma::RdmaDomain*>(domains[kRdma].get())) {
    for (const topo::NicLoadStats& n : domain->engine()->nic_load_stats()) {
      NicLoad l;
      l.nic_id = n.id;
      l.name = n.name;
      l.healthy = n.healthy;
      l.link_gbps = n.link_gbps;
      l.effective_gbps = n.effective_gbps;
      l.selection_bytes_per_s = n.selection_Bps;
      l.transmit_bytes_per_s = n.transmit_Bps;
      l.charged_bytes = n.charged_bytes;
      l.posted_bytes = n.posted_bytes;
      l.completed_bytes = n.completed_bytes;
      l.allocated_bytes = n.allocated_bytes;
      if (n.id >= 0 && static_cast<std::size_t>(n.id) < rdma::kMaxNics) {
        for (std::size_t t = 0; t < l.posted_by_tier.size(); ++t) {
          l.posted_by_tier[t] =
              domain->engine()->counters().nic_tier_posted[static_cast<std::size_t>(n.id)][t].load(
                  std::memory_order_relaxed);
        }
      }
      out.push_back(std::move(l));
    }
  }
#else
  (void)domains;
#endif
  return out;
}

RdmaStats rdma_stats_of(const MemoryDomains& domains, const std::string& note) {
#if ORBITE_WITH_RDMA
  if (const auto* domain = dynamic_cast<const rdma::RdmaDomain*>(domains[kRdma].get())) {
    RdmaStats stats = domain->engine()->stats();
    stats.mr_cache = domain->cache()->stats();
    return stats;
  }
#else
  (void)domains;
#endif
  RdmaStats s;
  s.why_not = note;
  return s;
}

}  // namespace orbite::p2p
