// The transport table: the one place that names every transport's implementation. Everything else
// reaches a transport through the contract (transport.h) and its TransportId.
#pragma once

#include <orbite/config.h>

#include <array>
#include <memory>

#include "p2p/peer.h"
#include "p2p/poller.h"
#include "p2p/transport.h"

namespace orbite::p2p {

using LaneTransports = std::array<std::unique_ptr<LaneTransport>, kTransportCount>;
using MemoryDomains = std::array<std::unique_ptr<MemoryDomain>, kTransportCount>;

// The lane transports of one lane, indexed by TransportId (null: not built or not enabled).
Result<LaneTransports> make_lane_transports(const EngineConfig& config,
                                            const detail::Identity& self, Poller& poller,
                                            FrameHandler& handler, ControlSender& control);
// The engine's memory domains, indexed by TransportId.
MemoryDomains make_memory_domains(const EngineConfig& config);
// Which transports this engine has at all (the selection table's "built" column).
std::array<bool, kTransportCount> built_transports(const EngineConfig& config);

}  // namespace orbite::p2p
