// Where a peer lives, as requests and the layers above p2p know it: no connection state.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace orbite::detail {

struct PeerLink;

// Enough to connect to a peer and to decide whether it shares this host.
struct Endpoint {
  std::string id;
  std::string address;
  std::string host_id;
  std::int64_t pid = 0;
};

// This engine, as peers know it.
using Identity = Endpoint;

// An endpoint as requests carry it: shared, with the lane's link cached after the first use so
// that the hot path skips the lookup by engine ID. Links live as long as their lane; only the
// lane's protocol reads the cache.
struct PeerRef {
  Endpoint ep;
  mutable std::atomic<PeerLink*> link{nullptr};
};

}  // namespace orbite::detail

namespace orbite::p2p {

// An engine ID as logs and errors name it: its first 8 hex digits.
inline std::string short_id(const std::string& id) {
  return id.substr(0, 8);
}

}  // namespace orbite::p2p
