// The RDMA transport on one lane: the lane's CQ sets (one per context), the QP table, and for
// every peer of the lane its NIC table, its QP arrays and the two state machines of the grant
// protocol: parents (this side posts READ/WRITE: the requester) and grants (this side's memory
// is accessed: the source). Everything of a peer lives on the peer's lane, so one thread (the
// lane's mutex holder) owns all of it and no grant state crosses lanes. Control messages travel
// as TransportControl frames on the peer's control connection; payload and receipts travel on
// the QPs. put/get enter through RdmaEndpoint::start_rma. See docs/rdma.md.
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "p2p/peer.h"
#include "p2p/poller.h"
#include "p2p/rdma/engine.h"
#include "p2p/rdma/frames.h"
#include "p2p/rdma/grant_table.h"
#include "p2p/rdma/lane_services.h"
#include "p2p/rdma/message_channel.h"
#include "p2p/rdma/mr_cache.h"
#include "p2p/rdma/parent_table.h"
#include "p2p/rdma/peer_rdma.h"
#include "p2p/rdma/qp.h"
#include "p2p/rdma/qp_table.h"
#include "p2p/rdma/range_locks.h"
#include "p2p/rdma/region_pin.h"
#include "p2p/rdma/scheduler.h"
#include "p2p/rdma/slicing.h"
#include "p2p/rdma/source.h"
#include "p2p/rdma/test_hooks.h"
#include "p2p/rdma/window_pool.h"
#include "p2p/registry.h"
#include "p2p/transport.h"

namespace orbite::rdma {

class RdmaLane;
using Clock = std::chrono::steady_clock;

class RdmaEndpoint final : public p2p::PeerEndpoint {
 public:
  RdmaEndpoint(RdmaLane& lane, detail::PeerLink& link) : lane_(lane), link_(link) {}
  [[nodiscard]] const p2p::Capabilities& caps() const override;
  void send(detail::SendItem item) override;
  bool send_now(const p2p::FrameHeader&, std::span<const iovec>) override { return false; }
  [[nodiscard]] std::size_t paths() const override { return 1; }
  Status read_peer(std::byte*, std::uint64_t, std::uint64_t) override;
  Status write_peer(const std::byte*, std::uint64_t, std::uint64_t) override;
  [[nodiscard]] bool one_sided_usable() const override { return false; }
  Status start_rma(p2p::RmaOp op) override;
  [[nodiscard]] bool busy() const override;
  // Frames not yet posted are dropped (their pins released); posted ones complete or flush.
  void close(bool) override;

 private:
  RdmaLane& lane_;
  detail::PeerLink& link_;
  bool closed_ = false;  // later frames are released at once, never sent
};

class RdmaLane final : public p2p::LaneTransport, private LaneServices {
 public:
  RdmaLane(std::shared_ptr<RdmaEngine> engine, std::shared_ptr<MrCache> cache,
           const detail::Identity& self, p2p::RegionRegistry& regions, p2p::Poller& poller,
           p2p::FrameHandler& handler, p2p::ControlSender& control);
  ~RdmaLane() override;
  Status init();

  [[nodiscard]] const p2p::Capabilities& caps() const override { return caps_; }
  std::optional<std::string> offer(detail::PeerLink& link) override;
  Result<std::string> accept(detail::PeerLink& link, std::string_view blob) override;
  Status complete(detail::PeerLink& link, std::optional<std::string_view> blob) override;
  Status open_self(detail::PeerLink& link) override;
  Status adopt_connection(detail::PeerLink&, int fd, std::uint32_t) override;
  Status on_control(detail::PeerLink& link, std::uint64_t kind, std::string_view body) override;
  int progress() override;
  bool prepare_sleep() override;
  void end_sleep() override;
  [[nodiscard]] bool busy() const override;
  [[nodiscard]] int next_timer_ms() const override;  // the idle-QP reaper's next look
  void forget(detail::PeerLink& link) override;
  void shutdown(const Status& why) override;

  Status start_rma(detail::PeerLink& link, p2p::RmaOp op);
  // The endpoint's frames (the frame messenger carries them).
  void send_frame(detail::PeerLink& link, detail::SendItem item);
  bool frames_pending(detail::PeerLink& link);
  void drop_unsent_frames(detail::PeerLink& link);

 private:
  class ChannelWatch;
  // lane.cpp
  Result<PeerRdma*> make_peer(detail::PeerLink& link, std::string_view blob,
                              std::uint64_t my_incarnation);
  PeerRdma* peer_of(detail::PeerLink& link);
  // LaneServices (lane_services.h), for the lane's parts and the lane itself.
  void send(PeerRdma& peer, ControlKind kind, std::string body) override;
  [[nodiscard]] Qp* qp(std::uint16_t handle) const override { return qps_.get(handle); }
  // A QP on the lane's CQ set of `context` for the peer's slot (listed in peer.qps).
  Result<Qp*> new_qp(std::size_t context, QpRole role, PeerRdma& peer, std::uint32_t slot) override;
  void retire_qp(std::uint16_t handle) override { qps_.retire(handle); }
  Status post_receives(Qp& q) override { return qps_.post_receives(q); }
  void protocol_error(PeerRdma& peer, const std::string& what) override;
  std::uint64_t next_builder() override { return next_builder_++; }
  [[nodiscard]] RdmaEngine& engine() const override { return *engine_; }
  [[nodiscard]] p2p::FrameHandler& handler() const override { return handler_; }
  [[nodiscard]] bool context_usable(std::size_t context) const override {
    return context < cqs_.size() && cqs_[context] != nullptr;
  }
  [[nodiscard]] std::size_t context_of(const CqSet& cqs) const override;
  // Requester payload QPs idle for rdma.idle_qp_timeout (no WR outstanding, no parent naming
  // them) are retired at both ends; looked at a few times per timeout.
  void reap_idle_qps(Clock::time_point now);
  int poll_cqs();
  void on_send_cqe(const ibv_wc& wc);
  void on_recv_cqe(CqSet& cqs, const ibv_wc& wc);
  void fail_peer(PeerRdma& peer, const Status& why);

  // lane.cpp: this engine's RdmaInfo for the peer's link, and the peer's new NIC table.
  [[nodiscard]] RdmaInfo my_info(std::uint64_t link_incarnation) const;
  void send_nic_tables();
  void on_nic_table(PeerRdma& peer, const RdmaInfo& m);

  // dispatch.cpp: the scheduler's pass. Parents are admitted (the direct-bytes budget) and post
  // payload in its order; a deadline that passed before any payload drops the parent (Timeout,
  // nothing moved; a grant already made is given back with a GrantCancel).
  void dispatch();
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

  // requester.cpp
  // A send buffer (no region): its MRs from the cache of engine-owned memory, or registered for
  // this job only (job.transient), and op.local_region set to them.
  Status register_send_buffer(p2p::RmaOp& op, RmaJob& job);
  void connect_parent(PeerRdma& peer, Parent& p);
  void request_grant(PeerRdma& peer, Parent& p);
  // Sends the waiting GrantRequests that kMaxPendingGrantRequests now allows.
  void send_waiting_requests(PeerRdma& peer);
  void on_qp_accept(PeerRdma& peer, const QpAccept& m);
  void on_grant(PeerRdma& peer, const Grant& m);
  // A parked parent (Parent::parked) back into the scheduler's passes.
  void resume(Parent& p);
  void on_grant_nack(PeerRdma& peer, const GrantNack& m);
  void on_grant_ack(PeerRdma& peer, const GrantAck& m);
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
  void on_requester_wr(PeerRdma& peer, Qp& q, const WrRecord& r, bool ok, const ibv_wc* wc);
  void fail_parent(PeerRdma& peer, Parent& p, const Status& why);
  void maybe_finish_parent(PeerRdma& peer, std::uint64_t id);
  // Parents whose drain outlasted the destruction window: Unquiesced, their loans retained.
  void expire_drains(PeerRdma& peer);
  void report(Parent& p, const Status& st);
  Result<std::size_t> array_for(PeerRdma& peer) override;
  // The QP array from local context `context` to its rail-mapped NIC of the peer: the NIC of the
  // same name, else one of its active NICs spread by context.
  Result<std::size_t> array_to(PeerRdma& peer, std::size_t context);
  // The local NICs (bit = NIC id) with a usable context and a path to an active NIC of the peer.
  std::uint64_t compatible_nics(const PeerRdma& peer) const;
  // Cuts a parent's slices into segments by the lease's NIC runs (and QP slots).
  Status plan_segments(PeerRdma& peer, Parent& p, const MrSet& local);
  void slot_broken(PeerRdma& peer, Qp& q);
  // A receipt's registered slot back to its pool, once the HCA is done with it (or never had it).
  void release_receipt_slot(Qp& q, Segment& s);

  std::shared_ptr<RdmaEngine> engine_;
  std::shared_ptr<MrCache> cache_;  // engine-owned memory's registrations (send/recv buffers)
  const detail::Identity& self_;
  p2p::RegionRegistry& regions_;
  p2p::Poller& poller_;
  p2p::FrameHandler& handler_;
  p2p::ControlSender& control_;
  p2p::Capabilities caps_;
  const rdma::RdmaConfig& cfg_;
  // One CQ set per usable context (null for inert ones), indexed like engine_->contexts().
  std::vector<std::unique_ptr<CqSet>> cqs_;
  std::vector<std::unique_ptr<ChannelWatch>> watches_;
  QpTable qps_;                        // every QP of the lane, and the retired ones until destroyed
  Clock::time_point next_reap_{};      // reap_idle_qps()' next look
  std::uint64_t withheld_parent_ = 0;  // test hook withhold_receipt: the parent it stalls
  std::unordered_map<detail::PeerLink*, std::unique_ptr<PeerRdma>> peers_;
  std::unordered_map<detail::PeerLink*, std::uint64_t> offered_;  // link incarnations offered
  std::uint64_t next_parent_ = 1;
  std::uint64_t next_builder_ = 1;
  std::vector<ibv_wc> wcs_;
  std::uint64_t sent_nic_epoch_ = 0;  // the engine's nic_epoch() whose table the peers have
  std::vector<std::pair<WrRecord, bool>> resolved_;  // on_send_cqe(): one completion's records
  // post_slices()' chain under construction (reused: no allocation per post once grown).
  std::vector<ibv_send_wr> wr_scratch_;
  std::vector<ibv_sge> sge_scratch_;
  std::vector<std::uint32_t> seq_scratch_;
  TestHooks hooks_;
  // The lane's parts (after what they refer to: the services are *this).
  FrameMessenger messenger_{*this};  // the protocol's frames over the message channels
  GrantSource source_;               // the owner's side of the grant protocol
  // The requester's order of work (dispatch.cpp): every parent from its start until its payload
  // is all posted or it ends. dispatch_due_: something became dispatchable outside a pass (a
  // new parent, a Grant), so the lane must not sleep before the next pass.
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
  std::uint32_t replay_rkey_ = 0;  // replay_key: the key of the last receipted segment
};

}  // namespace orbite::rdma
