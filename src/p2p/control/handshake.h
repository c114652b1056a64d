// The handshake the control channel carries in Hello and HelloAck: who the engine is, the eager
// credit it grants, and one connect blob per transport it offers the peer (a shared-memory ring's
// name, later an RDMA NIC table). A Hello that names `join` is not a new control connection but
// an extra connection of that transport (tcp's data streams) for an established link.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/net.h"
#include "p2p/transport.h"

namespace orbite::p2p {

struct Handshake {
  std::string engine_id;
  std::string host_id;
  std::int64_t pid = 0;
  std::uint64_t eager_credit = 0;  // credit the sender grants the receiver
  std::optional<TransportId> join;
  std::uint32_t join_index = 0;
  std::vector<ConnectBlob> transports;

  [[nodiscard]] const ConnectBlob* find(TransportId id) const;
};

// Every handshake payload fits one control frame.
inline constexpr std::size_t kMaxConnectBlob = 1024;

std::string encode_handshake(const Handshake& h);
// Checks every field: identity, credit, blob sizes, known and unique transport ids.
Result<Handshake> decode_handshake(std::string_view bytes);

// A connection the listener accepted, with the Hello it carried, for the lane that owns the peer.
struct Accepted {
  net::Fd fd;
  Handshake hello;
};

}  // namespace orbite::p2p
