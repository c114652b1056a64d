// The RDMA transport's factory and monitor hook: the domain it installs, the lanes that domain
// makes, and what the proxy's monitor and reports ask of it.
#include "p2p/rdma/factory.h"

#include <algorithm>

#include "common/log.h"
#include "p2p/rdma/engine.h"
#include "p2p/rdma/lane.h"

namespace orbite::rdma {

Result<std::unique_ptr<p2p::MemoryDomain>> install_domain(const EngineConfig& config,
                                                          const detail::Identity& self,
                                                          std::string* note) {
  const auto enable = config.rdma.enable;
  if (enable == RdmaEnable::Off) {
    *note = "rdma.enable is off";
    return std::unique_ptr<p2p::MemoryDomain>();
  }
  auto engine = RdmaEngine::install(config, self);
  if (!engine.ok()) {
    // A conflicting library path is the configuration's fault, whatever rdma.enable says.
    if (enable == RdmaEnable::On || engine.status().code() == Errc::Configuration) {
      return engine.status().with_context(enable == RdmaEnable::On ? "rdma.enable = on" : "rdma");
    }
    *note = engine.status().message();
    ORBITE_LOG(Debug, Rdma) << "RDMA not installed: " << *note;
    return std::unique_ptr<p2p::MemoryDomain>();
  }
  return std::unique_ptr<p2p::MemoryDomain>(std::make_unique<RdmaDomain>(std::move(*engine)));
}

Result<std::unique_ptr<p2p::LaneTransport>> RdmaDomain::make_lane(
    const p2p::LaneParts& parts) const {
  auto lane = std::make_unique<RdmaLane>(engine_, cache_, parts.self, parts.regions, parts.poller,
                                         parts.handler, parts.control);
  ORBITE_RETURN_IF_ERROR(lane->init());
  return std::unique_ptr<p2p::LaneTransport>(std::move(lane));
}

std::vector<int> RdmaDomain::monitor_fds() const {
  return engine_->event_fds();
}

void RdmaDomain::drain_monitor_events() const {
  engine_->drain_events();
}

void RdmaDomain::monitor_scan() const {
  engine_->scan_ports();
}

void RdmaDomain::report(p2p::TransportReport& out) const {
  out.rdma = engine_->stats();
  out.rdma.mr_cache = cache_->stats();
  for (const topo::NicLoadStats& n : engine_->nic_load_stats()) {
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
    const RailHealth::NicCounts rail = engine_->rail_health().nic(n.id);
    l.rail_errors = rail.errors;
    l.rail_probes = rail.probes;
    l.rail_open_pairs = rail.paused;
    if (n.id >= 0 && static_cast<std::size_t>(n.id) < kMaxNics) {
      const auto& tiers = engine_->counters().nic_tier_posted[static_cast<std::size_t>(n.id)];
      const auto& outstanding =
          engine_->counters().nic_tier_outstanding[static_cast<std::size_t>(n.id)];
      for (std::size_t t = 0; t < l.posted_by_tier.size(); ++t) {
        l.posted_by_tier[t] = tiers[t].load(std::memory_order_relaxed);
        l.outstanding_by_tier[t] = static_cast<std::uint64_t>(
            std::max<std::int64_t>(0, outstanding[t].load(std::memory_order_relaxed)));
      }
    }
    out.nics.push_back(std::move(l));
  }
}

}  // namespace orbite::rdma
