// The lane's grant source: the owner's side of the grant protocol for every peer of the lane.
// It answers QpConnect with the source-role end of a requester's slot, answers a GrantRequest
// phase by phase (grant_request.cpp: the protocol checks, the target, the QPs, the memory, the
// receipt room, the owned reservations, one window bound per segment), publishes the grant once
// every bind completed, checks each receipt field by field, and closes a grant (READY) or revokes
// it (cancel, expiry, a failed connection or link). Its state beyond the peers' GrantTables: the
// lane's memory windows and the grants whose windows could not be revoked. The lane owns it,
// routes the owner's control messages and completions to it, and calls it from the lane's thread
// only. See docs/rdma.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "p2p/rdma/engine.h"
#include "p2p/rdma/lane_services.h"
#include "p2p/rdma/mr_cache.h"
#include "p2p/rdma/peer_rdma.h"
#include "p2p/rdma/test_hooks.h"
#include "p2p/rdma/window_pool.h"
#include "p2p/registry.h"

namespace orbite::rdma {

// A random 64-bit value from a per-thread generator (grant nonces, PSNs); source.cpp.
std::uint64_t random_u64();

class GrantSource {
 public:
  using Clock = std::chrono::steady_clock;

  // Every reference outlives the source (the lane owns all of them and the source).
  GrantSource(LaneServices& lane, std::shared_ptr<RdmaEngine> engine, p2p::RegionRegistry& regions,
              std::shared_ptr<MrCache> cache, TestHooks& hooks);

  // Control messages from the peer (its requester).
  void on_qp_connect(PeerRdma& peer, const QpConnect& m);
  void on_qp_retire(PeerRdma& peer, const QpRetire& m);
  void on_grant_request(PeerRdma& peer, const GrantRequest& m);
  void on_grant_cancel(PeerRdma& peer, const GrantCancel& m);
  // Completions: a source-role WR (a window's bind), a receipt, and a flushed receive on the
  // connection `handle` (every grant through it is revoked with `why`).
  void on_wr(PeerRdma& peer, const WrRecord& r, bool ok);
  void on_receipt(PeerRdma& peer, Qp& q, CqSet& cqs, std::uint32_t slot, const ibv_wc& wc);
  // The receipt of a private grant (an ordinary SEND on its own QP; private_grant.cpp).
  void on_private_receipt(PeerRdma& peer, Qp& q, const ibv_wc& wc);
  // open_only: the grants with a segment on it not yet receipted (a flushed receive); else every
  // grant naming it (its windows must go before the QP can be destroyed).
  void connection_failed(PeerRdma& peer, std::uint16_t handle, const Status& why,
                         bool open_only = true);
  // Each pass: the peer's deferred GrantRequests again, in tier order.
  void retry_deferred(PeerRdma& peer);
  // rdma.grant_timeout: whether the earliest open grant is due (a timer, not a scan per pass),
  // then each peer's grants older than the timeout revoked (a requester that stalls, alive, must
  // not hold a range, a pin and budgets for ever).
  bool expiry_due(Clock::time_point now);
  void expire(PeerRdma& peer, Clock::time_point now);
  // The link failed: every grant of the peer closes with `why` (no GrantAck: the link is gone).
  void close_all(PeerRdma& peer, const Status& why);
  // The lane shuts down: the windows go.
  void close() { windows_.close(); }
  // Test hook kill_after_grant: a grant was published, the process dies at the next pass.
  [[nodiscard]] bool kill_pending() const { return kill_pending_; }

 private:
  struct GrantPlan {  // what the phases of a GrantRequest resolved
    bool to_receive = false, write = false;
    bool receive_matched = false;  // a rendezvous target was found: a refusal fails it too
    // kOpToMessage before its message matched a receive: waiting for the announcement, or
    // (announced) for a receive.
    bool awaits_message = false, awaits_receive = false;
    std::uint64_t receive_id = 0;  // the matched receive's wire id (rendezvous_done's)
    std::shared_ptr<detail::RegionRecord> region;
    std::shared_ptr<detail::RequestState> receive;
    // A rendezvous bounced (rdma.bounce_limit): the window is bound over this chunk, and on the
    // receipt the chunk is copied to bounce_to, the granted range of the posted buffer.
    std::shared_ptr<cuda::StagingLease> bounce;
    std::byte* bounce_to = nullptr;
    bool may_bounce = false;            // within the limit, user memory: bounced or fell back
    std::vector<Qp*> qps;               // each segment's
    std::vector<std::size_t> contexts;  // each segment's QP's (a grant may span rails)
    const MrSet* set = nullptr;
  };
  // grant_request.cpp
  bool grant_request_valid(PeerRdma& peer, const GrantRequest& m);  // false: the link failed
  Status resolve_target(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan);
  Status resolve_qps(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan);  // else cache miss
  // The ready source-role end of the segment's slot that the requester names, or null.
  Qp* source_qp(PeerRdma& peer, const SegmentRequest& s) const;
  // A request deferred for room (GrantRequest::awaits_room) whose connections still lack it:
  // true when answering it again would only defer it again.
  bool room_still_short(PeerRdma& peer, const GrantRequest& m);
  Status prepare_memory(const GrantRequest& m, GrantPlan& plan);
  // Whether the QPs have receipt slots and SQ room for the grant now (false: it waits).
  Result<bool> receipt_room(const GrantPlan& plan);
  // A grant's owned reservations: each goes back by itself until the grant's record takes it.
  struct Reservations {
    Charge slot, bytes;
    RangeLock lock;
    RegionPin pin;
  };
  // Takes them; nullopt when refused (its GrantNack sent) or deferred.
  std::optional<Reservations> reserve(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan);
  // The grant's record over `res` and plan's QPs; its id.
  std::uint64_t record_grant(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan,
                             Reservations res);
  // reserve, then record_grant; nullopt when refused or deferred.
  std::optional<std::uint64_t> reserve_grant(PeerRdma& peer, const GrantRequest& m,
                                             GrantPlan& plan);
  void bind_windows(PeerRdma& peer, std::uint64_t id, const GrantPlan& plan);
  void refuse_grant(PeerRdma& peer, const GrantRequest& m, const GrantPlan& plan, const Status& why,
                    bool cache_miss = false);
  // Queues a GrantRequest to run again next pass, counting it once however often it waits.
  void defer(PeerRdma& peer, const GrantRequest& m, bool awaits_receive = false,
             bool awaits_room = false, bool awaits_own = false);
  // A budget (max_grants, max_direct_bytes) refused the grant: it waits while this peer holds
  // grants of its own, and is refused otherwise.
  void refuse_or_wait_for_own(PeerRdma& peer, const GrantRequest& m, const GrantPlan& plan,
                              const Status& why);
  // private_grant.cpp: a GrantRequest on the private grant path (device memory), its objects
  // built (PD, exact MR, receipt buffer, QP connected to the requester's), and their teardown
  // (false: something refused to go and stays, with the grant retained).
  void grant_private(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan);
  Status build_private(PeerRdma& peer, const GrantRequest& m, const GrantPlan& plan,
                       PrivateGrant& priv);
  bool teardown_private(PrivateGrant& priv, bool counted = true);
  // source.cpp
  void publish_if_bound(PeerRdma& peer, GrantState& g);
  // Ends a grant: windows invalidated or revoked, range unlocked, pins and budgets returned.
  void close_grant(PeerRdma& peer, std::uint64_t id, const Status& outcome, bool send_ack);
  Binding expected_binding(const PeerRdma& peer, const GrantState& g, const GrantSegment& s,
                           const Qp& q) const;

  LaneServices& lane_;
  std::shared_ptr<RdmaEngine> engine_;
  const RdmaConfig& cfg_;
  p2p::RegionRegistry& regions_;
  std::shared_ptr<MrCache> cache_;  // engine-owned memory's registrations (rendezvous targets)
  TestHooks& hooks_;                // the lane's (retire_source_once is spent here)
  WindowPool windows_;              // every grant's windows, their keys, the parked ones
  // Grants whose windows could not be revoked: their locks, pins and charges are kept for good.
  std::vector<GrantState> retained_grants_;
  // A private grant's objects that refused to go before the grant existed (a failed build or
  // refusal): kept for good, as a retained grant's are.
  std::vector<std::unique_ptr<PrivateGrant>> retained_private_;
  std::vector<std::uint64_t> expired_;  // expire()'s scratch (no allocation per pass)
  // retry_deferred()'s lookups of the source-role QPs that deferred requests name, for one pass
  // (a pass neither makes nor destroys QPs while it looks).
  struct QpMemo {
    std::uint32_t slot = 0;
    std::uint64_t incarnation = 0;
    std::uint32_t requester_qpn = 0;
    Qp* qp = nullptr;
  };
  std::vector<QpMemo> qp_memo_;
  // When the earliest open grant reaches rdma.grant_timeout (max: none open); a grant closed
  // early leaves it early, which only costs one scan.
  Clock::time_point next_grant_expiry_ = Clock::time_point::max();
  bool kill_pending_ = false;  // kill_after_grant: at the start of the next pass
};

}  // namespace orbite::rdma
