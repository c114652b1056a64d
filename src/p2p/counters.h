// The data-path counters of one lane: totals, and bytes and frames per transport in both
// directions, so a test can prove which route carried its bytes. Each lane has its own, written
// only by the holder of the lane's mutex (detail::bump: no locked instruction on the hot path)
// and summed by TransferEngine::stats().
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "p2p/request.h"
#include "p2p/transport.h"

namespace orbite::p2p {

struct TransportCounters {
  std::atomic<std::uint64_t> bytes_sent{0}, bytes_received{0}, frames_sent{0}, frames_received{0};
};

using detail::bump;
using detail::drop;

struct Counters : detail::CompletionCounters {
  std::atomic<std::uint64_t> bytes_sent{0}, bytes_received{0}, eager{0}, rendezvous{0},
      single_copy_bytes{0}, peers_connected{0}, peers_lost{0}, protocol_errors{0},
      unexpected_bytes{0}, unexpected_peak{0}, listener_rests{0};
  std::array<TransportCounters, kTransportCount> transport;

  TransportCounters& of(TransportId id) { return transport[static_cast<std::size_t>(id)]; }
};

}  // namespace orbite::p2p
