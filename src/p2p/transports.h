// The transport table: the one place that names every transport's implementation. Everything else
// reaches a transport through the contract (transport.h) and its TransportId.
#pragma once

#include <orbite/config.h>

#include <array>
#include <memory>

#include "p2p/domains.h"
#include "p2p/peer.h"
#include "p2p/poller.h"
#include "p2p/registry.h"
#include "p2p/transport.h"

namespace orbite::p2p {

using LaneTransports = std::array<std::unique_ptr<LaneTransport>, kTransportCount>;

// The lane transports of one lane, indexed by TransportId (null: not built or not enabled).
Result<LaneTransports> make_lane_transports(const LaneParts& parts, const MemoryDomains& domains);

}  // namespace orbite::p2p
