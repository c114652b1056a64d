// The lane's frame messenger: the protocol's frames (send/recv's eager messages and rendezvous
// control) over each peer's message channel (message_channel.h): one message QP per peer and
// direction, slot kMessageSlot, SENDs into receives of a frame header and rdma.eager_limit bytes
// that the receiving end keeps posted, one credit per free receive (FrameCredit returns them), so a
// frame never meets an empty receive queue. The lane owns it and routes to it: the endpoint's
// frames, the message QP's QpAccept, its send and receive completions, and FrameCredit. See
// docs/rdma.md, "send/recv".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "p2p/peer.h"
#include "p2p/rdma/lane_services.h"
#include "p2p/rdma/peer_rdma.h"

namespace orbite::rdma {

class FrameMessenger {
 public:
  explicit FrameMessenger(LaneServices& lane) : lane_(lane) {}

  // A frame for the peer (null: the endpoint has failed): queued, then posted as credits, SQ room
  // and the message QP allow; one that cannot fit a frame slot fails the endpoint.
  void send(detail::PeerLink& link, PeerRdma* peer, detail::SendItem item);
  // Posts what the channel holds (building the message QP first if there is none).
  void pump(PeerRdma& peer);
  // The peer's answer to this side's message QP connect.
  void on_accept(PeerRdma& peer, const QpAccept& m);
  // A frame's SEND completed (ok) or failed or flushed (wc names how).
  void on_sent(PeerRdma& peer, Qp& q, const WrRecord& r, bool ok, const ibv_wc* wc);
  // A frame arrived in receive slot `slot` of `cqs`' frame pool.
  void on_received(PeerRdma& peer, Qp& q, CqSet& cqs, std::uint32_t slot, const ibv_wc& wc);
  void on_credit(PeerRdma& peer, const FrameCredit& m);
  // The endpoint closes in order: frames not posted were dropped; a Bye frame goes after the
  // posted ones when the peer has a receiving end of this side's message QP (or one is building).
  void say_bye(PeerRdma& peer);
  // The lane's fenced-route sweep: an idle message QP on a fenced rail (here, or the peer's NIC)
  // is retired at both ends without a replacement (the next frame builds one on an active
  // rail). Returns whether it is still there (building, or frames in flight).
  bool retire_if_fenced(PeerRdma& peer);
  // recovery.cpp: this side's message QP `q` was destroyed with its CQ set; with no frame in
  // flight (a frame in flight failed the link already) it moves: the next frame builds another.
  void lost_qp(PeerRdma& peer, Qp& q);
  // The peer's receiving end of this side's message QP was destroyed with its CQ set, after
  // taking m.frames frames: the QP moves when that is every frame it carried, else the link fails.
  void on_qp_lost(PeerRdma& peer, const QpLost& m);

 private:
  void build_qp(PeerRdma& peer);
  // The message QP's rail paused (here, or the peer's NIC in its NicTable): with no frame in
  // flight the QP is retired and the next frame builds one on an active rail. Returns whether
  // frames must wait (a move is due, or under way).
  bool move_if_paused(PeerRdma& peer, Qp& q);
  [[nodiscard]] static bool on_fenced_rail(const PeerRdma& peer, const Qp& q);
  // Retires the message QP at both ends and empties the channel's slot (frames not posted stay).
  void retire(PeerRdma& peer, Qp& q);
  // Posts the next waiting frame on q; false when that failed (and the endpoint with it).
  bool post_next(PeerRdma& peer, Qp& q);
  void failed(PeerRdma& peer, const Status& why);
  // This side's frame payload (rdma.eager_limit): its receives' and its staging slots' size.
  [[nodiscard]] std::uint64_t frame_payload() const {
    return lane_.engine().config().rdma.eager_limit;
  }

  LaneServices& lane_;
  // An inline frame, assembled (frames up to the QP's max_inline, never more than this).
  std::array<std::byte, kFrameHeaderBytes + kMinFramePayload> stage_{};
};

}  // namespace orbite::rdma
