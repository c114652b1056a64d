// Transport selection: a pure function over an ordered table (self, shm, cuda_ipc, rdma, tcp), as
// NCCL walks ncclTransports[] with canConnect. For Transport::Unspec the first row that reaches
// the peer for the request's memory wins; a forced transport must pass its own row, or the answer
// is Errc::Unavailable naming why.
#pragma once

#include <orbite/status.h>
#include <orbite/transfer.h>

#include <array>
#include <string_view>

#include "p2p/transport.h"

namespace orbite::p2p {

struct RouteQuery {
  Transport requested = Transport::Unspec;
  // The local memory's kind; `carries[i]` says which kinds transport i can carry from this
  // engine, natively or through staging (bit 1 << MemoryKind), as its memory domain decides.
  MemoryKind memory = MemoryKind::Host;
  std::array<std::uint8_t, kTransportCount> carries{};
  bool is_self = false;
  bool same_host = false;
  // A put or get (transports that run them without frames qualify), and the transports its
  // target region is published on (bit i: TransportId i).
  bool rma = false;
  std::uint32_t target_transports = ~0u;
  // Transports this engine has at all.
  std::array<bool, kTransportCount> built{};
  // Capabilities of the endpoints open to this peer (null: none open for that transport).
  std::array<const Capabilities*, kTransportCount> open{};
  // The peer as errors name it: its engine ID (first 8 characters) and address. Views, so that
  // a successful selection allocates nothing.
  std::string_view peer_id;
  std::string_view peer_address;
};

// The rows in order: which transport each one picks, and the reach it needs.
struct RouteRow {
  const char* name;
  TransportId id;
  std::uint8_t reach;
};
const std::array<RouteRow, 5>& route_table();

Result<TransportId> select_route(const RouteQuery& q);

// Before a request is queued: a forced transport this engine does not have at all.
Status check_requested(Transport requested, const std::array<bool, kTransportCount>& built);

}  // namespace orbite::p2p
