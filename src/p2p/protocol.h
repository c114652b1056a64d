// One lane's protocol: the peers assigned to the lane, their control connections and endpoints,
// and the protocol that runs send/recv matching, credits, rendezvous and put/get over whatever
// endpoint the selection table picks. It talks to transports only through the contract in
// transport.h. Not thread-safe: the lane's mutex holder calls it.
#pragma once

#include <orbite/config.h>
#include <orbite/transfer.h>

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/allocation.h"
#include "cuda/staging.h"
#include "p2p/control/channel.h"
#include "p2p/counters.h"
#include "p2p/domains.h"
#include "p2p/lane.h"
#include "p2p/notifications.h"
#include "p2p/peer.h"
#include "p2p/poller.h"
#include "p2p/registry.h"
#include "p2p/transport.h"

namespace orbite::p2p {

// How long a link whose peer closed in order (Bye, then end of stream) stays open for frames
// still arriving on its other transports (a TCP stream's last bytes, a ring's): the grace. A
// transport whose frames travel apart from the control stream proves the end instead: the peer
// sends a Bye of its own there after its last frame (RDMA's message QP, whose receive completion
// may lag the sender's and so the TCP Bye), and the link waits for it (expects_frames) up to the
// bound, for a peer that could not send it.
inline constexpr Duration kOrderlyCloseGrace = std::chrono::milliseconds(50);
inline constexpr Duration kOrderlyCloseBound = std::chrono::seconds(2);
// How long an engine's close waits for the Byes its transports queued after their last frames.
inline constexpr Duration kFarewellBound = std::chrono::milliseconds(250);

struct StagedOp;
struct StagedChunk;
struct StageWindow;

// One range of a put or get as the transports move it: host bytes at `local` (with the region
// that registers them, for a transport that needs registered memory), the remote region's
// [remote_offset, +length). `done` is called once, when the range finished or failed.
struct HostPart {
  bool put = false;
  std::shared_ptr<detail::RequestState> req;  // keeps the request (and its buffers) alive
  std::byte* local = nullptr;
  const detail::RegionRecord* local_region = nullptr;  // null: an unregistered buffer
  std::uint64_t local_offset = 0;                      // of `local` in local_region
  std::uint64_t remote_region = 0;
  std::uint64_t remote_generation = 0;
  std::uint64_t remote_offset = 0;
  std::uint64_t length = 0;
  bool remote_device = false;  // the remote region is the owner's device memory (RmaOp's)
  std::function<void(const Status&)> done;
};

class Protocol final : public LaneProtocol, public FrameHandler, public ControlHost {
 public:
  Protocol(const EngineConfig& config, const detail::Identity& self, RegionRegistry& regions,
           Counters& counters, const MemoryDomains& domains, int lane_index,
           std::shared_ptr<cuda::StagingPool> staging, NotificationBox& notifications);
  ~Protocol() override;
  Protocol(const Protocol&) = delete;
  Protocol& operator=(const Protocol&) = delete;

  // LaneProtocol
  Status init() override;
  [[nodiscard]] int epoll_fd() const override { return poller_.fd(); }
  Status set_listener(int fd, std::function<void(AcceptedConnection)> route) override;
  Status set_wake_fd(int fd) override;
  void adopt(AcceptedConnection accepted) override;
  void start(std::shared_ptr<detail::RequestState> req) override;
  int progress(bool poll_sockets) override;
  // One sendmsg per socket for what requests queued since the last pass.
  void flush_dirty() override { poller_.flush_deferred(); }
  bool prepare_sleep() override;
  void end_sleep() override;
  // Requests or sessions in flight, output queued, or connections being made.
  [[nodiscard]] bool busy() const override;
  [[nodiscard]] bool copies_pending() const override;
  [[nodiscard]] bool polled_sockets() const override { return polled_sockets_; }
  [[nodiscard]] int next_timer_ms() const override;
  void shutdown(const Status& why) override;
  std::optional<ProbeHit> probe(std::uint32_t comm, const std::string* peer_id, std::int32_t tag,
                                const PeerRanks& members) const override;
  // report.cpp
  void report(std::string& out, std::int64_t now_ns) const override;

  // FrameHandler
  Result<detail::Sink> begin_frame(detail::PeerLink& link, const FrameHeader& h,
                                   PeerEndpoint& from) override;
  void end_frame(detail::PeerLink& link, const FrameHeader& h, PeerEndpoint& from,
                 detail::Sink& sink, std::string&& body) override;
  void frame_written(PeerEndpoint& ep, detail::SendItem& item) override;
  void endpoint_failed(detail::PeerLink& link, const Status& why) override;
  void protocol_error(detail::PeerLink& link, const std::string& what) override;
  Result<ReceiveTarget> rendezvous_target(detail::PeerLink& link, std::uint64_t recv_id,
                                          std::uint64_t offset, std::uint64_t length) override;
  Result<ReceiveTarget> message_target(detail::PeerLink& link, std::uint64_t sender_id,
                                       std::uint64_t offset, std::uint64_t length) override;
  void rendezvous_done(detail::PeerLink& link, std::uint64_t recv_id, std::uint64_t bytes,
                       const Status& outcome) override;
  std::string take_buffer() override;
  void give_buffer(std::string&& buffer) override;

  // ControlHost
  detail::PeerLink& link_for(const detail::Endpoint& ep) override;
  std::vector<ConnectBlob> offers(detail::PeerLink& link) override;
  std::vector<ConnectBlob> accept_offers(detail::PeerLink& link, const Handshake& peer) override;
  void decline_offers(detail::PeerLink& link, const Handshake& peer) override;
  Status complete_offers(detail::PeerLink& link, const Handshake& peer) override;
  void established(detail::PeerLink& link, const Handshake& peer) override;
  void fail_link(detail::PeerLink& link, const Status& why, bool orderly) override;
  void peer_closed(detail::PeerLink& link, const Status& why) override;
  Status adopt_join(detail::PeerLink& link, net::Fd fd, const Handshake& hello) override;
  void transport_control(detail::PeerLink& link, const FrameHeader& h,
                         std::string_view body) override;

 private:
  using Link = detail::PeerLink;
  using Req = detail::RequestState;
  using ReqPtr = std::shared_ptr<detail::RequestState>;
  class WakeWatch;

  LaneTransport* transport(TransportId id) const {
    return transports_[static_cast<std::size_t>(id)].get();
  }
  void check_connect_deadlines();
  void count_sent(const PeerEndpoint& ep, std::uint64_t payload);

  // protocol.cpp: routes, send/recv matching
  Result<PeerEndpoint*> route(Link& link, const Req& req);
  // A message forced onto nvlink: its frames' endpoint (shm), when cuda_ipc reaches the peer.
  Result<PeerEndpoint*> nvlink_message_route(Link& link);
  void issue(Link& link, const ReqPtr& req);
  void issue_send(Link& link, const ReqPtr& req);
  void issue_recv(Link& link, const ReqPtr& req);
  // A receive on a failed link: a message that arrived whole before the failure is still
  // delivered, in order per tag; an announced (rendezvous) one, or none, fails with the failure.
  void recv_on_failed(Link& link, const ReqPtr& req);
  // A receive and the message it matched (taken from `unexpected` or just arrived): its bytes
  // move, or it ends as on a failed link when the message's endpoint is gone.
  void deliver_matched(Link& link, const ReqPtr& recv, detail::Arrival& a);
  void deliver_after_failure(Link& link, const ReqPtr& req, detail::Arrival& a);
  void deliver_arrival(Link& link, detail::Arrival&& a);
  bool try_match_arrival(Link& link, detail::Arrival& a);
  // The receive a message of (comm, tag) arriving on `link` goes to, taken off its queue: the
  // earliest posted of the link's matching receives and the matching receives from any source.
  // Null when none is posted.
  ReqPtr take_receive(Link& link, std::uint32_t comm, std::int32_t tag);
  void match_rts(Link& link, const ReqPtr& recv, const detail::Arrival& a);
  void consume_eager(Link& link, const ReqPtr& recv, detail::Arrival& a);
  // Fails a receive too small for its message and tells the sender (Reject).
  void reject_truncated(Link& link, const ReqPtr& recv, const detail::Arrival& a);
  static Status truncation(const Link& link, const Req& recv, const detail::Arrival& a);
  void return_credit(Link& link, std::uint64_t bytes, PeerEndpoint& ep);
  void send_control(PeerEndpoint& ep, FrameType type, std::uint64_t id, std::uint64_t a,
                    std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0,
                    std::string payload = {});
  // Queues [data + base, data + base + len) as Data frames whose offsets start at base. False if
  // pin_each could not be pinned (the region was unregistered): the rest was not queued.
  bool send_data(Link& link, PeerEndpoint& ep, DataTarget target, std::uint64_t id,
                 const std::byte* data, std::uint64_t len, const ReqPtr& req,
                 detail::RegionRecord* pin_each, std::uint64_t base = 0);
  // Counts bytes of a request copied by either side; completes it when all are there.
  void add_received(Link& link, std::uint64_t id, std::uint64_t bytes, const Status& error = {});
  void fail_inflight_of(Link& link, const Status& why);

  // any_source.cpp: receives from any source (kAnySource) and probes
  void post_any_source(const ReqPtr& recv);
  // The first unclaimed receive from any source posted before `before` that matches a message
  // of (comm, tag) from `link`'s peer, claimed; null when there is none.
  ReqPtr take_any_source(Link& link, std::uint32_t comm, std::int32_t tag, std::uint64_t before);
  // Takes `recv` for this lane (false: another lane's message matched it first) and fills in
  // what its match with a message of `tag` on `link` tells.
  bool claim(Link& link, Req& recv, std::int32_t tag);
  void fail_any_source(const Status& why);

  // frames.cpp: frame handlers; rma.cpp: put/get
  Result<detail::Sink> data_sink(Link& link, const FrameHeader& h);
  void on_cts(Link& link, const FrameHeader& h, PeerEndpoint& ep);
  // rendezvous.cpp: a rendezvous whose payload the endpoint writes itself into the receiver's
  // buffer (RDMA), after the Cts (naming the receive `recv_id`) or announced (RtsRma) at once.
  bool announce_rma(const Link& link, const PeerEndpoint& ep, const Req& req) const;
  void rendezvous_rma(Link& link, const ReqPtr& req, PeerEndpoint& ep, std::uint64_t recv_id,
                      bool announced, std::uint64_t offset, std::uint64_t count);
  void match_rts_rma(Link& link, const ReqPtr& recv, const detail::Arrival& a);
  void on_abandon(Link& link, const FrameHeader& h, PeerEndpoint& from, std::string_view body);
  // A receive matched to an RtsRma ended: its entry goes (success) or says why (failure).
  static void settle_announced(Link& link, const detail::Inflight& f, const Status& result);
  void on_share(Link& link, const FrameHeader& h, PeerEndpoint& ep, std::string_view body);
  void on_data(Link& link, const FrameHeader& h);
  void issue_put_get(Link& link, const ReqPtr& req);
  // One host range through the endpoint: frames or single copy, or the transport's own
  // one-sided protocol (RDMA).
  void issue_host_part(Link& link, PeerEndpoint& ep, HostPart part);
  void issue_part(Link& link, PeerEndpoint& ep, HostPart part, bool by_address);
  void on_put_or_get(Link& link, const FrameHeader& h, PeerEndpoint& ep, std::string_view body);
  void on_ack(Link& link, const FrameHeader& h, std::string_view body);
  void maybe_complete_part(Link& link, std::uint64_t wire_id);
  // notify.cpp: a put/get's notification (TransferOptions::notification), sent once its bytes
  // moved; the request completes on the owner's Ack. The owner keeps it in notifications_.
  // The end of a put/get request: its notification when it has one and `outcome` is ok, else
  // its completion.
  void finish_put_get(const ReqPtr& req, const Status& outcome);
  void send_notification(Link& link, const ReqPtr& req);
  void on_notify(Link& link, const FrameHeader& h, PeerEndpoint& ep, std::string&& body);

  // staged.cpp: the requester's staging pipeline
  void issue_staged_put_get(Link& link, const ReqPtr& req, PeerEndpoint& ep, bool local_staged,
                            bool remote_staged);
  void start_staged(std::shared_ptr<StagedOp> op);
  void advance_staged(StagedOp& op);
  void advance_chunk(StagedOp& op, StagedChunk& c);
  // The chunk's device copy in `dir` (submitted at the first call, then polled): true once it
  // finished, false while it runs, an error when it could not be submitted or failed.
  Result<bool> chunk_device_copy(StagedOp& op, StagedChunk& c, cuda::CopyJob::Direction dir);
  void chunk_failed(StagedOp& op, StagedChunk& c, const Status& why);
  static std::size_t chunk_index(const StagedOp& op, const StagedChunk& c);
  int progress_staged();
  void on_stage_reply(Link& link, const FrameHeader& h, std::string_view body);
  void fail_staged_of(Link& link, const Status& why);
  // stage_owner.cpp: the owner's windows
  void on_stage_open(Link& link, const FrameHeader& h, PeerEndpoint& ep, std::string_view body);
  void on_stage_close(Link& link, const FrameHeader& h);
  void advance_window(Link& link, StageWindow& w);
  void end_window(Link& link, StageWindow& w, const Status& outcome, bool reply);
  // Whether a device copy or an access under way still uses the window's chunk.
  bool window_in_use(StageWindow& w);
  // Deregisters the window and returns its chunk (retained when its copy is unproven).
  void release_window(StageWindow& w);
  Status copy_region(StageWindow& w, cuda::CopyJob::Direction dir);
  Status publish_window(StageWindow& w);
  int progress_windows();
  void fail_windows_of(Link& link);
  // exposed.cpp: the exposed rendezvous
  Backing backing_on(TransportId via, MemoryKind kind) const;
  bool needs_exposure(const Req& req, const PeerEndpoint& ep) const;
  // The send buffer of `req` as a region on `ep`'s transport; a device buffer is published on
  // cuda_ipc too when `link` has it (the receiver may then read it device to device).
  Result<std::shared_ptr<detail::RegionRecord>> expose(Link& link, PeerEndpoint& ep,
                                                       const ReqPtr& req);
  // The exposure word an Rts or Exposed carries for `rec` (frame.h, kExposedNativeShift).
  static std::uint32_t exposure_bits(const detail::RegionRecord& rec,
                                     const MemoryDomain* ipc_domain);
  // A device receive of a buffer exposed on cuda_ipc, read device to device; false when this
  // receive does not go that way.
  // A read of an exposed buffer that both ends publish natively on the messages' transport
  // (a receive's device memory registered for it alone); false when one of them is staged.
  bool read_exposed_natively(Link& link, PeerEndpoint& ep, const ReqPtr& recv,
                             std::uint64_t sender_id, std::uint64_t length, std::uint64_t region,
                             std::uint64_t generation, std::uint32_t staged);
  bool read_exposed_over_ipc(Link& link, PeerEndpoint& ep, const ReqPtr& recv,
                             std::uint64_t sender_id, std::uint64_t length, std::uint64_t region,
                             std::uint64_t generation, std::uint32_t staged);
  void withdraw(const ReqPtr& req);
  void release_withdrawn();
  void send_exposed_rts(Link& link, PeerEndpoint& ep, const ReqPtr& req, std::uint64_t comm_tag,
                        std::uint64_t seq);
  void on_expose_request(Link& link, const FrameHeader& h, PeerEndpoint& ep);
  void ask_exposure(Link& link, const ReqPtr& recv, const detail::Arrival& a);
  void on_exposed(Link& link, const FrameHeader& h, PeerEndpoint& ep);
  // The end of a receiver's read of an exposed message: Fin (or Reject naming `st`) to the
  // sender while its link and endpoint stand, then the receive completes.
  void finish_exposed_read(Link& link, PeerEndpoint& ep, Req& recv, std::uint64_t sender_id,
                           const Status& st, std::uint64_t bytes);
  void read_exposed(Link& link, PeerEndpoint& ep, const ReqPtr& recv, std::uint64_t sender_id,
                    std::uint64_t length, std::uint64_t region, std::uint64_t generation,
                    std::uint32_t staged, std::uint64_t chunk);
  Status copy_into_device(const ReqPtr& recv, const std::byte* src, std::uint64_t n);

  const EngineConfig& config_;
  detail::Identity self_;
  RegionRegistry& regions_;
  Counters& counters_;
  const MemoryDomains& domains_;    // the engine's; outlives every lane
  NotificationBox& notifications_;  // the engine's; outlives every lane
  int lane_index_;
  // The engine's staging pool (outlives every lane), the staged transfers this lane runs, the
  // owner windows whose copies outlived their link, and withdrawn exposed regions whose
  // registrations wait for their last access. advance_staged's guard against re-entry.
  std::shared_ptr<cuda::StagingPool> staging_;
  std::vector<std::shared_ptr<StagedOp>> staged_ops_;
  std::vector<std::shared_ptr<StageWindow>> draining_windows_;
  std::vector<std::shared_ptr<detail::RegionRecord>> withdrawn_;
  StagedOp* advancing_ = nullptr;
  bool again_ = false;
  std::size_t open_windows_ = 0;  // in every link's windows
  // Member order is destruction order reversed: links (with their endpoints) go before the
  // transports and the control channel, and those before the poller they are registered with.
  Poller poller_;
  std::unique_ptr<ControlPlane> control_;
  std::array<std::unique_ptr<LaneTransport>, kTransportCount> transports_;
  std::unique_ptr<WakeWatch> wake_;
  std::unordered_map<std::string, std::unique_ptr<Link>> links_;
  // Endpoints of links that failed during a pass: destroyed at its end, never mid-call.
  std::vector<std::unique_ptr<PeerEndpoint>> dead_endpoints_;
  // Links whose peer closed in order (peer_closed): failed once kOrderlyCloseGrace has passed
  // and the transports were polled after it, so that frames the peer sent before its Bye on
  // another transport (an RDMA SEND whose receive completion lags its sender's) still arrive.
  struct Closing {
    std::string peer_id;
    Status why;
    Deadline grace;
    Deadline bound;    // kOrderlyCloseBound: a transport's own Bye is waited for until then
    bool due = false;  // when this pass began, the grace had passed and no Bye was awaited
  };
  // Whether a transport still expects frames of the closing link's peer (Closing above).
  [[nodiscard]] bool awaits_frames(const std::string& peer_id) const;
  // close(): the Byes the endpoints queued leave before the links go, within kFarewellBound.
  void send_farewells();
  std::vector<Closing> closing_;
  std::vector<std::string> spare_buffers_;
  std::uint64_t next_wire_id_ = 1;
  // Receives are numbered as the lane posts them (post_order), so that a message goes to the
  // earliest of a link's posted receives and the receives from any source that match it.
  std::uint64_t post_order_ = 0;
  struct AnySource {
    ReqPtr recv;
    std::uint64_t order = 0;
  };
  // Receives from any source posted on this lane, in posting order. An entry another lane
  // claimed is dropped when a scan meets it.
  std::deque<AnySource> wildcards_;
  int quiet_polls_ = 0;
  bool polled_sockets_ = false;  // by the last progress()
};

}  // namespace orbite::p2p
