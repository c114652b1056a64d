// A peer as one lane's RDMA transport sees it: the peer's connect blob, its QP arrays (this side
// as the requester), the source-role ends of its slots, and the lane's three kinds of state for it
// (parents, grants, the message channel). Owned by the lane (RdmaLane::peers_) and touched by the
// lane's mutex holder only; the lane's parts (the frame messenger, the requester, the owner) get
// it by reference for one call.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "p2p/rdma/grant_table.h"
#include "p2p/rdma/message_channel.h"
#include "p2p/rdma/parent_table.h"
#include "p2p/rdma/wire.h"
#include "p2p/registry.h"

namespace orbite::rdma {

// A QP array: W slots (QpSlot, message_channel.h) between one local context and one of the
// peer's NICs, for one role.
struct QpArray {
  std::size_t context = 0;  // index into RdmaEngine::contexts()
  std::uint8_t remote_nic = 0;
  std::vector<QpSlot> slots;
};

// The source-role end of a requester's slot.
struct SourceSlot {
  std::uint16_t qp_handle = 0;
  std::uint64_t incarnation = 0;
};

struct PeerRdma {
  detail::PeerLink* link = nullptr;
  RdmaInfo info;  // the peer's
  std::uint64_t my_link_incarnation = 0;
  std::uint32_t width = 1;  // W: the smaller num_lanes
  bool failed = false;
  bool bye_received = false;    // the peer's Bye frame on its message QP: no frame follows it
  std::vector<QpArray> arrays;  // requester role
  // By (the requester's NIC, my NIC, slot): two requester NICs may map to one NIC here (a peer
  // with more rails, or one whose NIC paused), each with its own slots.
  std::map<std::tuple<std::uint8_t, std::uint8_t, std::uint32_t>, SourceSlot> sources;
  ParentTable parents;  // this side as the requester: its parents and its GrantRequest window
  GrantTable grants;    // this side as the source: its grants and deferred GrantRequests
  std::vector<std::uint16_t> qps;  // every QP of this peer (handles)
  MessageChannel frames;           // this side's message QP to the peer and its frames
  // The peer's NIC with that ID, or null.
  [[nodiscard]] const NicRecord* nic(std::uint8_t id) const {
    for (const NicRecord& n : info.nics) {
      if (n.nic_id == id) return &n;
    }
    return nullptr;
  }
};

}  // namespace orbite::rdma
