// The lane's QP arrays: a peer's requester-role QPs per (local context, remote NIC), shared by
// the requester's parents and the message channel, and the rail map that picks the peer's NIC.
#include <algorithm>

#include "p2p/rdma/lane.h"

namespace orbite::rdma {

Result<std::size_t> RdmaLane::array_to(PeerRdma& peer, std::size_t context) {
  const Context& local = *engine_->contexts()[context];
  // The rail map: the peer's NIC of the same name, else its active NICs spread by context.
  const NicRecord* remote = nullptr;
  std::vector<const NicRecord*> active;
  for (const NicRecord& n : peer.info.nics) {
    if (!n.active) continue;
    active.push_back(&n);
    if (n.name == local.name) remote = &n;
  }
  if (active.empty()) {
    return Status::error(Errc::Unavailable,
                         "peer " + p2p::short_id(peer.link->ep.id) + " has no active RDMA NIC");
  }
  if (remote == nullptr) remote = active[context % active.size()];
  for (std::size_t a = 0; a < peer.arrays.size(); ++a) {
    if (peer.arrays[a].context == context && peer.arrays[a].remote_nic == remote->nic_id) return a;
  }
  QpArray arr;
  arr.context = context;
  arr.remote_nic = remote->nic_id;
  arr.slots.resize(peer.width);
  peer.arrays.push_back(std::move(arr));
  return peer.arrays.size() - 1;
}

std::uint64_t RdmaLane::compatible_nics(const PeerRdma& peer) const {
  const bool reachable = std::any_of(peer.info.nics.begin(), peer.info.nics.end(),
                                     [](const NicRecord& n) { return n.active != 0; });
  if (!reachable) return 0;
  std::uint64_t mask = 0;
  const auto& contexts = engine_->contexts();
  for (std::size_t c = 0; c < contexts.size(); ++c) {
    if (cqs_[c] && contexts[c]->state == ContextState::Active) mask |= 1ULL << contexts[c]->nic_id;
  }
  return mask;
}

Result<std::size_t> RdmaLane::array_for(PeerRdma& peer) {
  // The message QP's rail: the first active local context.
  const auto& contexts = engine_->contexts();
  for (std::size_t c = 0; c < contexts.size(); ++c) {
    if (cqs_[c] && contexts[c]->state == ContextState::Active) return array_to(peer, c);
  }
  return Status::error(Errc::Unavailable,
                       "no active RDMA context here reaches an active NIC of peer " +
                           p2p::short_id(peer.link->ep.id));
}

}  // namespace orbite::rdma
