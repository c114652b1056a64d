#include "p2p/transports.h"

#include "p2p/shm/shm_transport.h"
#include "p2p/tcp/tcp_transport.h"

namespace orbite::p2p {

Result<LaneTransports> make_lane_transports(const EngineConfig& config,
                                            const detail::Identity& self, Poller& poller,
                                            FrameHandler& handler, ControlSender& control) {
  LaneTransports out;
  // shm is always there for the loopback to this engine; shm.enable governs other peers.
  out[static_cast<std::size_t>(TransportId::Shm)] =
      std::make_unique<ShmLane>(config, self, handler, control);
  out[static_cast<std::size_t>(TransportId::Tcp)] =
      std::make_unique<TcpLane>(config, self, poller, handler, control);
  return out;
}

MemoryDomains make_memory_domains(const EngineConfig& config) {
  MemoryDomains out;
  // A region is published on shm only where shm serves other peers; the loopback needs no key.
  if (config.shm.enable) {
    out[static_cast<std::size_t>(TransportId::Shm)] =
        std::make_unique<KeylessDomain>(TransportId::Shm);
  }
  out[static_cast<std::size_t>(TransportId::Tcp)] =
      std::make_unique<KeylessDomain>(TransportId::Tcp);
  return out;
}

std::array<bool, kTransportCount> built_transports(const EngineConfig&) {
  std::array<bool, kTransportCount> out{};
  out[static_cast<std::size_t>(TransportId::Shm)] = true;
  out[static_cast<std::size_t>(TransportId::Tcp)] = true;
  return out;
}

}  // namespace orbite::p2p
