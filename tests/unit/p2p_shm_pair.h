// Two shm lanes' links in one process, as the shm handshake and peer-proof suites set them up.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "p2p/peer.h"

namespace orbite::p2p::testing {

// An engine id no other lane of this run uses (the proof socket is named after it).
inline std::string unique_engine_id() {
  static std::atomic<unsigned> counter{0};
  char id[33];
  std::snprintf(id, sizeof id, "5eed%020x%08x", static_cast<unsigned>(::getpid()),
                counter.fetch_add(1));
  return id;
}

// Points each link at the other engine (a's link names ids[1]) on one host, established.
inline void link_same_host(detail::PeerLink& a, detail::PeerLink& b,
                           const detail::Identity (&ids)[2]) {
  a.ep = ids[1];
  b.ep = ids[0];
  for (detail::PeerLink* l : {&a, &b}) {
    l->same_host = true;
    l->state = detail::PeerLink::State::Established;
  }
}

}  // namespace orbite::p2p::testing
