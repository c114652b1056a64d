// The lane's requester: this side of the grant protocol as the one that posts READ/WRITE, for
// every peer of the lane. A put, get or rendezvous WRITE becomes parents of at most
// rdma.max_direct_bytes (requester.cpp: slices, rails and segments planned and charged before
// any is queued); the scheduler (scheduler.h, dispatch.cpp) admits them to the direct-bytes
// budget and orders their payload by tier across peers; each parent connects its QPs, sends its
// GrantRequest within the link's window, posts its payload by SQ room and the NIC's posting
// window (payload.cpp), then one receipt per segment, and ends on the GrantAck once every WR
// completed or flushed. Its state beyond the peers' ParentTables: the scheduler, the pass's
// transmit snapshot and posting rooms, and the post scratch. The lane owns it, routes the
// requester's control messages and completions to it, and calls it from the lane's thread only.
// See docs/rdma.md.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "p2p/rdma/engine.h"
#include "p2p/rdma/lane_services.h"
#include "p2p/rdma/mr_cache.h"
#include "p2p/rdma/peer_rdma.h"
#include "p2p/rdma/scheduler.h"
#include "p2p/rdma/shared_slots.h"
#include "p2p/rdma/test_hooks.h"
#include "p2p/transport.h"
#include "topo/selector.h"

namespace orbite::rdma {

class Requester {
 public:
  using Clock = std::chrono::steady_clock;

  // Every reference outlives the requester (the lane owns all of them and the requester).
  Requester(LaneServices& lane, std::shared_ptr<RdmaEngine> engine, std::shared_ptr<MrCache> cache,
            TestHooks& hooks);

  // A put, get or rendezvous WRITE to the peer: its parents planned and queued (nothing is
  // queued when any is refused).
  Status start_rma(PeerRdma& peer, p2p::RmaOp op);
  // Control messages from the peer (its source).
  void on_qp_accept(PeerRdma& peer, const QpAccept& m);
  // The source's end of one of this side's payload QPs is gone (QpLost): the slot is rebuilt.
  void on_qp_lost(PeerRdma& peer, const QpLost& m);
  // recovery.cpp: this side's payload QP `q` was destroyed with its CQ set (its WRs already
  // handed back as failed): its slot is emptied (QpRetire to the source), the parents that name
  // it fail with `why` and forget its handle.
  void lost_qp(PeerRdma& peer, Qp& q, const Status& why);
  void on_grant(PeerRdma& peer, const Grant& m);
  void on_grant_nack(PeerRdma& peer, const GrantNack& m);
  void on_grant_ack(PeerRdma& peer, const GrantAck& m);
  // A requester-role WR completed (ok) or failed or flushed (wc names how).
  void on_wr(PeerRdma& peer, Qp& q, const WrRecord& r, bool ok, const ibv_wc* wc);
  // Each pass, per peer: the GrantRequests the link's window now allows, and parents whose drain
  // outlasted the destruction window (Unquiesced, their loans retained).
  void send_waiting_requests(PeerRdma& peer);
  void expire_drains(PeerRdma& peer);
  // The scheduler's pass. Parents are admitted (the direct-bytes budget) and post payload in its
  // order; a deadline that passed before any payload drops the parent (Timeout, nothing moved; a
  // grant already made is given back with a GrantCancel).
  void dispatch();
  // Something became dispatchable outside a pass (a new parent, a Grant): the lane must not
  // sleep before the next pass.
  [[nodiscard]] bool dispatch_due() const { return dispatch_due_; }
  // The link failed and its QPs were retired: every parent drains (what was posted flushes) and
  // ends with `why` once drained.
  void link_failed(PeerRdma& peer, const Status& why);
  // The lane shuts down and every QP is destroyed: no DMA can touch a parent's buffers any more,
  // so every parent ends now.
  void shutdown(PeerRdma& peer);

 private:
  // requester.cpp
  // A send buffer (no region): its MRs from the cache of engine-owned memory, or registered for
  // this job only (job.transient), and op.local_region set to them.
  Status register_send_buffer(p2p::RmaOp& op, RmaJob& job);
  // Cuts a parent's slices into segments by the lease's NIC runs (and QP slots).
  Status plan_segments(PeerRdma& peer, Parent& p, const MrSet& local);
  // Rail health in the selection: paused pairs leave `req.mask`; a pair whose cooldown is over
  // makes this parent its half-open trial (the mask that NIC alone). Unavailable when every
  // allowed pair is paused and none may be tried (nothing moved).
  Status apply_rail_health(PeerRdma& peer, Parent& p, topo::SelectionRequest& req);
  // The rail pair a segment's slices travel: (the peer's connection, local NIC, remote NIC).
  [[nodiscard]] static RailPair pair_of(const PeerRdma& peer, const Segment& s);
  // A payload or receipt error on the segment's pair (not a flush, not an authority failure):
  // one error for rail health, the parent's trial failed when it is that pair's.
  void note_rail_error(PeerRdma& peer, Parent& p, const Segment& s);
  void connect_parent(PeerRdma& peer, Parent& p);
  // The private grant path: the parent's own QP (INIT) before its GrantRequest, connected to the
  // grant's QP on the Grant.
  void connect_private(PeerRdma& peer, Parent& p);
  Status connect_private_grant(PeerRdma& peer, Parent& p, const Grant& m);
  // Erases the parent (its private QP, if any, retired with it).
  void erase_parent(PeerRdma& peer, std::uint64_t id);
  // The parent's private QP while it still exists (null otherwise, or for a parent without one).
  [[nodiscard]] Qp* own_qp(const Parent& p) const;
  void request_grant(PeerRdma& peer, Parent& p);
  // A parked parent (Parent::parked) back into the scheduler's passes.
  void resume(Parent& p);
  void fail_parent(PeerRdma& peer, Parent& p, const Status& why);
  void maybe_finish_parent(PeerRdma& peer, std::uint64_t id);
  void report(Parent& p, const Status& st);

  // dispatch.cpp
  Scheduler::Verdict visit(SchedEntry& e, Clock::time_point now);
  Scheduler::Verdict admit(PeerRdma& peer, Parent& p, const SchedEntry& e, Clock::time_point now);
  [[nodiscard]] ArbCandidate describe(const SchedEntry& e) const;
  // rdma.deadline_admission_mlu: the parent's DeadlineMlu over the healthy NICs it may use.
  bool predicted_late(const PeerRdma& peer, const Parent& p, Clock::time_point now);
  // The selector's transmit snapshot for this pass (and post_room_ from it), taken once.
  void read_transmit();
  void drop(PeerRdma& peer, Parent& p, const SchedEntry& e, const char* waited_for);
  void cancel_grant(PeerRdma& peer, Parent& p, const SchedEntry& e);
  // The deadline passed after the payload started: segments not yet posted are given back with
  // status-1 receipts, started ones finish (posted DMA is never preempted).
  void release_unstarted(Parent& p);

  // payload.cpp
  void post_payload(PeerRdma& peer, Parent& p);
  // How many of segment `s`'s next slices may go on `q` now (SQ room, the NIC's posting window).
  std::uint32_t payload_room(const Parent& p, const Segment& s, const Qp& q);
  // Posts them; false when the post failed (the parent failed, and may have ended).
  bool post_slices(PeerRdma& peer, Parent& p, std::size_t si, Qp& q, std::uint32_t n);
  // The transmit meter's share of `count` payload WRs the HCA accepted for segment `s`.
  void note_posted(Segment& s, const ibv_send_wr* wrs, std::uint32_t count);
  // The selection estimate's sample of one rail of a parent (its last segment just completed).
  void learn_rail(Parent& p, const Segment& last, Clock::time_point now);
  // The segment's receipt: status 0 once its payload completed, status 1 (release) when it gives
  // an unposted segment's window back.
  void post_receipt(PeerRdma& peer, Parent& p, Segment& s, bool release = false);
  [[nodiscard]] Binding receipt_binding(const PeerRdma& peer, const Parent& p, const Segment& s,
                                        const Qp& q, bool release) const;
  void slot_broken(PeerRdma& peer, Qp& q);
  // A receipt's registered slot back to its pool, once the HCA is done with it (or never had it).
  void release_receipt_slot(Qp& q, Segment& s);

  LaneServices& lane_;
  std::shared_ptr<RdmaEngine> engine_;
  const RdmaConfig& cfg_;
  std::shared_ptr<MrCache> cache_;  // engine-owned memory's registrations (send/recv buffers)
  TestHooks& hooks_;                // the lane's
  std::uint64_t next_parent_ = 1;
  std::uint64_t withheld_parent_ = 0;  // test hook withhold_receipt: the parent it stalls
  std::uint32_t replay_rkey_ = 0;      // replay_key: the key of the last receipted segment
  // post_slices()' chain under construction (reused: no allocation per post once grown).
  std::vector<ibv_send_wr> wr_scratch_;
  std::vector<ibv_sge> sge_scratch_;
  std::vector<std::uint32_t> seq_scratch_;
  std::vector<std::uint64_t> drain_scratch_;  // expire_drains()' list of draining parents
  // The order of work (dispatch.cpp): every parent from its start until its payload is all
  // posted or it ends.
  Scheduler sched_;
  bool dispatch_due_ = false;
  bool admission_open_ = true;  // this pass: no parent was refused the direct-bytes budget yet
  bool transmit_read_ = false;  // this pass: transmit_ holds the selector's snapshot
  std::array<topo::NicTransmit, kMaxNics> transmit_{};
  std::vector<NicRate> nic_rates_;  // arbitration's view of transmit_
  // rdma.post_queue_target: the payload bytes each NIC may still take this pass (post_payload
  // spends them in the scheduler's order); unbounded when the target is 0.
  bool post_room_bounded_ = false;
  const SharedSlots* slots_ = nullptr;  // the engine's (it outlives the lane), or null
  bool slot_wait_ = false;              // this pass: a payload waited for its shared slot
  std::size_t posting_tier_ = 0;        // the tier of the parent post_payload() posts for
  // Per NIC and tier: the window less the payload outstanding for that tier and the tiers above
  // it (a lower tier's backlog never holds back higher-tier work; a post counts against its own
  // tier and the tiers below).
  std::array<std::array<std::uint64_t, kTiers>, kMaxNics> post_room_{};
};

}  // namespace orbite::rdma
