// One peer's grants on a lane, this side being the source (the owner of the memory): the live
// grants by id, and the GrantRequests deferred until their connection's receipt slots or SQ room
// (or, for a rendezvous, max_grants / max_direct_bytes) allow them. grant_request.cpp answers a
// request, source.cpp receipts and closes grants; this table holds their records and enforces
// the deferred queue's bound. Touched by the lane's mutex holder only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cuda/staging.h"
#include "p2p/rdma/engine.h"
#include "p2p/rdma/range_locks.h"
#include "p2p/rdma/region_pin.h"
#include "p2p/rdma/wire.h"
#include "p2p/registry.h"
#include "p2p/request.h"

struct ibv_mw;
struct ibv_mr;
struct ibv_pd;

namespace orbite::rdma {

struct GrantSegment {
  std::size_t context = 0;  // of its QP (and window)
  std::uint16_t qp_handle = 0;
  std::uint64_t qp_incarnation = 0;
  ibv_mw* mw = nullptr;
  std::uint32_t rkey = 0;
  std::uint64_t offset = 0;  // in the target region
  std::uint64_t length = 0;
  std::uint8_t first_slice = 0;
  std::uint8_t slices = 0;
  std::uint32_t requester_qpn = 0;
  bool bound = false;
  bool bind_failed = false;
  bool receipted = false;
  bool released = false;  // its receipt had status 1: no payload was written through it
};

// A grant of device memory on the private grant path (private_grant.cpp): a PD of its own, the
// exact granted range registered in it, a host buffer for the one receipt, and a QP in it
// connected to the requester's private QP. Nothing else can reach the range through them, and
// all of it is destroyed (QP, MRs, PD, in that order) before the grant's GrantAck. Whatever
// refused to go stays here, with the grant retained.
struct PrivateGrant {
  std::size_t context = 0;
  std::uint8_t requester_nic = 0;  // the NIC of the requester's private QP
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;          // the granted range of the device memory
  ibv_mr* receipt_mr = nullptr;  // over `receipt`
  std::unique_ptr<std::byte[]> receipt;
  std::uint16_t qp_handle = 0;
  std::uint64_t qp_incarnation = 0;  // a handle is reused once its QP is destroyed
  bool has_qp = false;
};

struct GrantState {
  std::uint64_t id = 0, generation = 0, nonce = 0;
  std::uint64_t parent = 0;
  std::uint8_t op = 0;
  std::uint64_t target = 0, target_generation = 0, offset = 0, length = 0;
  std::shared_ptr<detail::RegionRecord> region;
  // What the grant holds until it closes (owners: released by close_grant, or kept for good when
  // a window could not be revoked): the region's pin, the exact range's lock, one max_grants
  // slot and its bytes of max_direct_bytes.
  RegionPin pin;
  RangeLock lock;
  Charge slot, bytes;
  // A rendezvous into a posted receive (target = its id): `region` is a record of this grant
  // only, holding the MR over exactly the granted range, and `receive` keeps the request.
  bool to_receive = false;
  std::shared_ptr<detail::RequestState> receive;
  std::uint64_t receive_id = 0;  // the receive's wire id (target names the message for RtsRma)
  // A bounced rendezvous: `region` reaches this chunk (not the receive), copied to bounce_to on
  // READY; lent as long as a window over it may exist (kept for good with a retained grant).
  std::shared_ptr<cuda::StagingLease> bounce;
  std::byte* bounce_to = nullptr;
  std::vector<GrantSegment> segments;
  std::unique_ptr<PrivateGrant> priv;  // the private grant path's objects (device memory)
  bool published = false;
  std::chrono::steady_clock::time_point started;
};

class GrantTable {
 public:
  using Clock = std::chrono::steady_clock;

  [[nodiscard]] GrantState* find(std::uint64_t id) {
    auto it = grants_.find(id);
    return it == grants_.end() ? nullptr : &it->second;
  }
  GrantState& insert(GrantState g) {
    const std::uint64_t id = g.id;
    parents_.insert(g.parent);
    return grants_.emplace(id, std::move(g)).first->second;
  }
  // Removes the grant; nullopt when it is not (or no longer) there.
  std::optional<GrantState> take(std::uint64_t id) {
    auto it = grants_.find(id);
    if (it == grants_.end()) return std::nullopt;
    GrantState g = std::move(it->second);
    grants_.erase(it);
    if (auto p = parents_.find(g.parent); p != parents_.end()) parents_.erase(p);
    return g;
  }
  [[nodiscard]] bool empty() const { return grants_.empty(); }
  [[nodiscard]] std::size_t size() const { return grants_.size(); }
  [[nodiscard]] std::size_t deferred_count() const { return deferred_.size(); }
  [[nodiscard]] std::size_t deferred_for_receives() const { return receive_waits_; }
  [[nodiscard]] bool has_parent(std::uint64_t parent) const { return parents_.count(parent) != 0; }
  // The grants with a segment on QP `handle` (only those not yet receipted with `open_only`).
  void through(std::uint16_t handle, bool open_only, std::vector<std::uint64_t>& out) const {
    out.clear();
    for (const auto& [id, g] : grants_) {
      for (const GrantSegment& s : g.segments) {
        if (s.qp_handle == handle && (!open_only || !s.receipted)) {
          out.push_back(id);
          break;
        }
      }
    }
  }
  void ids(std::vector<std::uint64_t>& out) const {
    out.clear();
    for (const auto& [id, g] : grants_) out.push_back(id);
  }
  // The grants `timeout` old at `now` into `out`; `next` lowered to the earliest other expiry.
  void due(Clock::time_point now, Clock::duration timeout, std::vector<std::uint64_t>& out,
           Clock::time_point& next) const {
    out.clear();
    for (const auto& [id, g] : grants_) {
      if (now - g.started >= timeout) {
        out.push_back(id);
      } else {
        next = std::min(next, g.started + timeout);
      }
    }
  }

  // Deferred GrantRequests: at most kMaxPendingGrantRequests (false: the peer exceeded it, a
  // protocol error). `first` says whether this request had not waited before.
  bool defer(const GrantRequest& m, bool* first, bool awaits_receive = false,
             bool awaits_room = false, bool awaits_own = false) {
    if (deferred_.size() >= kMaxPendingGrantRequests) return false;
    *first = !m.deferred;
    deferred_.push_back(m);
    deferred_.back().deferred = true;
    deferred_.back().awaits_receive = awaits_receive;
    deferred_.back().awaits_room = awaits_room;
    deferred_.back().awaits_own = awaits_own;
    if (awaits_receive) ++receive_waits_;
    return true;
  }
  // Whether a deferred request waits for a receive to be posted: that is no event of the lane's
  // (the user posts it), so the lane looks every pass while one does.
  [[nodiscard]] bool awaits_receives() const { return receive_waits_ > 0; }
  [[nodiscard]] bool has_deferred() const { return !deferred_.empty(); }
  // Any deferred request that ends by itself (not one waiting for a receive to be posted).
  [[nodiscard]] bool has_deferred_work() const {
    return std::any_of(deferred_.begin(), deferred_.end(),
                       [](const GrantRequest& m) { return !m.awaits_receive; });
  }
  // The deferred requests, in the requesters' tier order (FIFO within a tier: High waits least
  // behind Low), except those `stays(m)` keeps queued, in that order, ahead of any deferred
  // again. The others leave the queue (those still waiting defer again).
  template <class Stays>
  std::vector<GrantRequest> take_deferred(Stays&& stays) {
    const auto by_tier = [](const GrantRequest& a, const GrantRequest& b) {
      return a.priority < b.priority;
    };
    // Mostly one tier, and then already in order: no sort every pass.
    if (!std::is_sorted(deferred_.begin(), deferred_.end(), by_tier)) {
      std::stable_sort(deferred_.begin(), deferred_.end(), by_tier);
    }
    const auto mid = std::stable_partition(deferred_.begin(), deferred_.end(),
                                           [&](const GrantRequest& m) { return stays(m); });
    std::vector<GrantRequest> out(std::make_move_iterator(mid),
                                  std::make_move_iterator(deferred_.end()));
    deferred_.erase(mid, deferred_.end());
    receive_waits_ = static_cast<std::size_t>(
        std::count_if(deferred_.begin(), deferred_.end(),
                      [](const GrantRequest& m) { return m.awaits_receive; }));
    return out;
  }
  std::vector<GrantRequest> take_deferred() {
    return take_deferred([](const GrantRequest&) { return false; });
  }
  void clear_deferred() {
    deferred_.clear();
    receive_waits_ = 0;
  }

 private:
  std::unordered_map<std::uint64_t, GrantState> grants_;
  // The requesters' parent ids of grants_ (a multiset: a forged second request is refused by
  // has_parent, but the index must never forget a live grant). Every GrantRequest asks.
  std::unordered_multiset<std::uint64_t> parents_;
  std::deque<GrantRequest> deferred_;
  std::size_t receive_waits_ = 0;  // of deferred_, those with awaits_receive
};

}  // namespace orbite::rdma
