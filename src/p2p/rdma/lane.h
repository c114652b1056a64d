// The RDMA transport on one lane: the contract face (handshake, endpoints, put/get through
// RdmaEndpoint::start_rma), the lane's CQ sets (one per context) and their dispatch, the QP table
// and every peer's QP arrays and NIC table; the protocol's behaviour lives in the lane's three
// parts, to which it routes control messages and completions: the requester (requester.h: parents
// and the scheduler), the grant source (source.h: grants and windows) and the frame messenger
// (frames.h: send/recv's frames). The parts reach the lane through LaneServices
// (lane_services.h), which the lane implements. Everything of a peer lives on the peer's lane, so
// one thread (the lane's mutex holder) owns all of it and no grant state crosses lanes. Control
// messages travel as TransportControl frames on the peer's control connection; payload and
// receipts travel on the QPs. See docs/rdma.md.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "p2p/peer.h"
#include "p2p/poller.h"
#include "p2p/rdma/engine.h"
#include "p2p/rdma/frames.h"
#include "p2p/rdma/lane_services.h"
#include "p2p/rdma/mr_cache.h"
#include "p2p/rdma/peer_rdma.h"
#include "p2p/rdma/qp.h"
#include "p2p/rdma/qp_table.h"
#include "p2p/rdma/requester.h"
#include "p2p/rdma/source.h"
#include "p2p/rdma/test_hooks.h"
#include "p2p/registry.h"
#include "p2p/transport.h"

namespace orbite::rdma {

class RdmaLane;
using Clock = std::chrono::steady_clock;

class RdmaEndpoint final : public p2p::PeerEndpoint {
 public:
  // peer_frames: the payload bytes of the peer's frame receives (its RdmaInfo).
  RdmaEndpoint(RdmaLane& lane, detail::PeerLink& link, std::uint32_t peer_frames);
  [[nodiscard]] const p2p::Capabilities& caps() const override { return caps_; }
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
  p2p::Capabilities caps_;  // the lane's, eager_limit the smaller of the two sides' frames
  bool closed_ = false;     // later frames are released at once, never sent
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
  // report.cpp: per peer its QPs, parents by state, grants and deferred GrantRequests, frames.
  void report(std::string& out) const override;
  void forget(detail::PeerLink& link) override;
  void shutdown(const Status& why) override;

  Status start_rma(detail::PeerLink& link, p2p::RmaOp op);
  // The endpoint's frames (the frame messenger carries them).
  void send_frame(detail::PeerLink& link, detail::SendItem item);
  bool frames_pending(detail::PeerLink& link);
  void drop_unsent_frames(detail::PeerLink& link);
  // An orderly close: a Bye frame after the last one, when the peer has this side's message QP.
  void say_bye(detail::PeerLink& link);
  // The peer closed in order and its message QP's Bye has not arrived yet.
  [[nodiscard]] bool expects_frames(const detail::PeerLink& link) const override;

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
  Result<Qp*> new_qp(std::size_t context, QpRole role, PeerRdma& peer, std::uint32_t slot,
                     ibv_pd* pd = nullptr) override;
  void retire_qp(std::uint16_t handle) override { qps_.retire(handle); }
  Status destroy_qp_now(std::uint16_t handle) override { return qps_.destroy_now(handle); }
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
  // A fenced route (a local context the monitor paused, or a peer's NIC inactive in its table)
  // gets no new work; its requester QPs and message QPs are retired at both ends once idle, so
  // that the context's QPs drain and the monitor can publish the route again. Runs after a
  // NicTable (sent or received) and every 10 ms while a fenced QP is still busy.
  void retire_fenced_qps(Clock::time_point now);
  int poll_cqs();
  void poll_failed(CqSet& set, const char* which, int rc);
  // recovery.cpp: a set whose polls have failed for a second is replaced (progress_recoveries):
  // a new set on the same context (PD, MRs and key history stay), then every QP of the old set
  // destroyed at once (its completions can never be polled), and only once a destroy succeeded
  // are its WRs handed to their handlers as failed; the peers drop their ends (QpRetire from a
  // requester end, QpLost from a source end). The old set goes once no QP references it.
  void recover_progress(std::size_t context);
  void lose_qp(std::uint16_t handle, const CqSet& old, const Status& why);
  // lane.cpp: a new CQ set and channel watch for `context` in place of the current one, which
  // is returned (its channel out of the poller); the current one stays when this fails.
  Result<std::unique_ptr<CqSet>> replace_set(std::size_t context);
  Result<std::unique_ptr<CqSet>> make_set(std::size_t context);
  void on_send_cqe(const ibv_wc& wc);
  void on_recv_cqe(CqSet& cqs, const ibv_wc& wc);
  void fail_peer(PeerRdma& peer, const Status& why);

  // lane.cpp: this engine's RdmaInfo for the peer's link, and the peer's new NIC table.
  [[nodiscard]] RdmaInfo my_info(std::uint64_t link_incarnation) const;
  void send_nic_tables();
  void on_nic_table(PeerRdma& peer, const RdmaInfo& m);

  // arrays.cpp (LaneServices)
  Result<std::size_t> array_for(PeerRdma& peer) override;
  Result<std::size_t> array_to(PeerRdma& peer, std::size_t context) override;
  [[nodiscard]] std::uint64_t compatible_nics(const PeerRdma& peer) const override;

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
  std::vector<std::unique_ptr<ChannelWatch>> watches_;  // indexed like cqs_
  // Replaced sets that a QP whose destroy failed still references: kept for good (retained).
  std::vector<std::unique_ptr<CqSet>> stale_sets_;
  std::vector<WrRecord> lost_records_;  // lose_qp(): a killed QP's WRs
  QpTable qps_;                    // every QP of the lane, and the retired ones until destroyed
  Clock::time_point next_reap_{};  // reap_idle_qps()' next look
  bool fence_sweep_ = false;       // retire_fenced_qps() has work, or a table changed
  Clock::time_point next_fence_sweep_{};
  // The scans of waiting work (the source's deferred requests, the requester's scheduler pass)
  // run in a pass after an event of the lane (a completion, a control message, a new request) and
  // otherwise at most every kIdleScanPeriod: a spinning worker's passes mostly see nothing new,
  // and with a batch of hundreds waiting each scan cost more than the work (docs/rdma.md).
  bool stirred_ = true;
  Clock::time_point next_scan_{};
  std::unordered_map<detail::PeerLink*, std::unique_ptr<PeerRdma>> peers_;
  std::unordered_map<detail::PeerLink*, std::uint64_t> offered_;  // link incarnations offered
  std::uint64_t next_builder_ = 1;
  static constexpr int kPollBatch = 32;  // completions taken per ibv_poll_cq
  std::vector<ibv_wc> wcs_;
  std::uint64_t sent_nic_epoch_ = 0;  // the engine's nic_epoch() whose table the peers have
  std::vector<std::pair<WrRecord, bool>> resolved_;  // on_send_cqe(): one completion's records
  TestHooks hooks_;
  // The lane's parts (after what they refer to: the services are *this).
  FrameMessenger messenger_{*this};  // the protocol's frames over the message channels
  GrantSource source_;               // the owner's side of the grant protocol
  Requester requester_;              // the requester's side, with the scheduler
};

}  // namespace orbite::rdma
