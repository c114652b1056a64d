// FrameMessenger (frames.h). The sender holds one credit per free receive and gets them back in
// FrameCredit messages once a quarter is owed (no RNR). The receiver hands each frame to the
// protocol (matching, ordering, truncation, unexpected messages are the protocol's) and reposts
// the slot before crediting it.
#include "p2p/rdma/frames.h"

#include <cstring>

#include "common/log.h"
#include "p2p/rdma/engine.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

using detail::PeerLink;
using detail::SendItem;

static_assert(kFrameHeaderBytes == p2p::kFrameHeaderBytes);
static_assert(kMinFramePayload >= p2p::kMaxControlPayload, "a Reject's reason must fit a frame");

void FrameMessenger::send(PeerLink& link, PeerRdma* peer, SendItem item) {
  const std::uint64_t payload = item.owned.size() + item.data_len;
  // The peer's receives and this side's staging slots both hold it (the endpoint's eager_limit).
  const std::uint64_t limit =
      peer == nullptr ? 0 : std::min<std::uint64_t>(peer->info.frame_payload, frame_payload());
  if (peer == nullptr || payload > limit || payload != item.header.payload_len) {
    MessageChannel::release(item);
    lane_.handler().endpoint_failed(
        link, peer == nullptr
                  ? Status::error(Errc::ConnectionLost, "the RDMA endpoint to the peer has failed")
                  : Status::error(Errc::Internal, "a frame of " + std::to_string(payload) +
                                                      " bytes does not fit an RDMA frame slot"));
    return;
  }
  peer->frames.queue(std::move(item));
  pump(*peer);
}

void FrameMessenger::failed(PeerRdma& peer, const Status& why) {
  if (peer.failed) return;
  lane_.handler().endpoint_failed(*peer.link, why);  // forget() drops the queues (fail_peer)
}

void FrameMessenger::build_qp(PeerRdma& peer) {
  auto array = lane_.array_for(peer);
  if (!array.ok()) return failed(peer, array.status());
  const QpArray& arr = peer.arrays[*array];
  auto made = lane_.new_qp(arr.context, QpRole::Requester, peer, kMessageSlot);
  if (!made.ok()) return failed(peer, made.status().with_context("the RDMA message QP"));
  Qp& q = **made;
  q.message = true;
  q.psn = random_psn();
  peer.frames.qp.state = QpSlot::State::Building;
  peer.frames.remote_nic = arr.remote_nic;
  peer.frames.qp.qp_handle = q.handle;
  peer.frames.qp.incarnation = q.incarnation;
  peer.frames.qp.builder = lane_.next_builder();
  QpConnect m;
  m.builder = peer.frames.qp.builder;
  m.slot = kMessageSlot;
  m.qp_incarnation = q.incarnation;
  // Frames need no READ: both depths 0.
  m.qp = QpEndpointInfo{q.qp->qp_num,
                        q.psn,
                        static_cast<std::uint8_t>(lane_.engine().contexts()[arr.context]->nic_id),
                        arr.remote_nic,
                        0,
                        0};
  lane_.send(peer, ControlKind::QpConnect, encode(m));
}

void FrameMessenger::on_accept(PeerRdma& peer, const QpAccept& m) {
  Qp* q = lane_.qp(peer.frames.qp.qp_handle);
  if (m.errc == 0 && (q == nullptr || q->incarnation != peer.frames.qp.incarnation)) {
    // The QP was lost with its CQ set while building: the peer's new end goes, and the frames
    // waiting build another.
    lane_.send(peer, ControlKind::QpRetire, encode(QpRetire{kMessageSlot, m.qp_incarnation}));
    peer.frames.qp = QpSlot{};
    return pump(peer);
  }
  Status st;
  if (m.errc != 0) {
    st = Status::error(static_cast<Errc>(m.errc),
                       "the peer refused the RDMA message connection: " + m.reason);
  } else if (q == nullptr) {
    st = Status::error(Errc::Protocol, "QpAccept for a retired message QP");
  } else if (const NicRecord* nic = peer.nic(m.qp.nic_id); nic == nullptr) {
    st = Status::error(Errc::Protocol, "QpAccept names an unknown NIC");
  } else {
    st = connect_rc_qp(*q->ctx, q->qp, remote_end(*nic, m.qp.qpn, m.qp.psn), q->psn, 0, 0);
  }
  if (!st.ok()) {
    peer.frames.qp.state = QpSlot::State::Empty;
    if (q != nullptr) lane_.retire_qp(q->handle);
    return failed(peer, st);
  }
  q->ready = true;
  q->remote_qpn = m.qp.qpn;
  q->remote_incarnation = m.qp_incarnation;
  q->credits = kMessageSlots;
  peer.frames.qp.state = QpSlot::State::Ready;
  pump(peer);
}

void FrameMessenger::pump(PeerRdma& peer) {
  if (peer.failed || !peer.frames.waiting()) return;
  if (peer.frames.qp.state != QpSlot::State::Ready) {
    if (peer.frames.qp.state == QpSlot::State::Empty) build_qp(peer);
    return;
  }
  Qp* q = lane_.qp(peer.frames.qp.qp_handle);
  if (q == nullptr || q->broken) {
    return failed(peer, Status::error(Errc::ConnectionLost, "the RDMA message QP has failed"));
  }
  if (move_if_paused(peer, *q)) return;
  while (peer.frames.waiting() && q->credits > 0 && q->sq.room() > 0) {
    if (!post_next(peer, *q)) return;
  }
}

bool FrameMessenger::post_next(PeerRdma& peer, Qp& q) {
  SendItem& item = peer.frames.next();
  const std::uint32_t payload = item.header.payload_len;
  const std::uint32_t total = static_cast<std::uint32_t>(p2p::kFrameHeaderBytes) + payload;
  // Inline frames are copied at post time; larger ones into a registered staging slot.
  const bool inline_ok = total <= q.max_inline && total <= stage_.size();
  std::int64_t staging = -1;
  std::byte* at = stage_.data();
  if (!inline_ok) {
    auto slot = q.cqs->frames.take();
    if (!slot.ok()) {
      failed(peer, slot.status());
      return false;
    }
    staging = *slot;
    at = q.cqs->frames.at(*slot);
  }
  p2p::encode_header(item.header, at);
  std::byte* body = at + p2p::kFrameHeaderBytes;
  if (!item.owned.empty()) std::memcpy(body, item.owned.data(), item.owned.size());
  if (item.data_len != 0) std::memcpy(body + item.owned.size(), item.data, item.data_len);
  WrRecord rec;
  rec.kind = WrKind::Frame;
  rec.owner = staging < 0 ? 0 : static_cast<std::uint64_t>(staging) + 1;
  rec.bytes = payload;
  rec.signaled = true;
  const std::uint32_t seq = q.sq.push(rec);
  ibv_sge sge{reinterpret_cast<std::uint64_t>(at), total,
              staging < 0 ? 0 : q.cqs->frames.lkey(static_cast<std::uint32_t>(staging))};
  ibv_send_wr wr{};
  wr.wr_id = q.id(WrKind::Frame, seq).pack();
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (inline_ok ? IBV_SEND_INLINE : 0);
  ibv_send_wr* bad = nullptr;
  if (const int rc = verbs::post_send(q.qp, &wr, &bad); rc != 0) {
    if (bad == &wr) {
      q.sq.unpost_from(seq);
      if (staging >= 0) q.cqs->frames.give(static_cast<std::uint32_t>(staging));
    }
    q.broken = true;
    lane_.retire_qp(q.handle);
    failed(peer, verbs::errno_status(Errc::ConnectionLost,
                                     q.ctx->name + ": ibv_post_send of a frame", rc));
    return false;
  }
  --q.credits;
  peer.frames.posted();
  return true;
}

bool FrameMessenger::on_fenced_rail(const PeerRdma& peer, const Qp& q) {
  const NicRecord* remote = peer.nic(peer.frames.remote_nic);
  return q.ctx->state != ContextState::Active || remote == nullptr || remote->active == 0;
}

bool FrameMessenger::move_if_paused(PeerRdma& peer, Qp& q) {
  if (!on_fenced_rail(peer, q)) return false;
  // Frames already posted finish (or fail, and the link with them: whether they arrived is
  // unknown, so none is sent again); only then can the next go elsewhere, in order.
  if (peer.frames.in_flight()) return true;
  retire(peer, q);
  build_qp(peer);
  return true;
}

bool FrameMessenger::retire_if_fenced(PeerRdma& peer) {
  if (peer.frames.qp.state == QpSlot::State::Empty) return false;
  Qp* q = lane_.qp(peer.frames.qp.qp_handle);
  if (q == nullptr) return false;
  if (!on_fenced_rail(peer, *q)) return false;
  if (peer.frames.qp.state != QpSlot::State::Ready || peer.frames.in_flight()) return true;
  retire(peer, *q);
  return false;
}

void FrameMessenger::retire(PeerRdma& peer, Qp& q) {
  ORBITE_LOG(Info, Rdma) << q.ctx->name << ": the message QP to peer "
                         << p2p::short_id(peer.link->ep.id) << " moves off a paused rail";
  if (!peer.failed) {
    lane_.send(peer, ControlKind::QpRetire, encode(QpRetire{q.slot, q.remote_incarnation}));
  }
  lane_.retire_qp(q.handle);
  peer.frames.qp = QpSlot{};
  add(lane_.engine().counters().message_qp_moves);
}

void FrameMessenger::on_sent(PeerRdma& peer, Qp& q, const WrRecord& r, bool ok, const ibv_wc* wc) {
  if (r.owner != 0) q.cqs->frames.give(static_cast<std::uint32_t>(r.owner - 1));
  if (peer.failed) return;
  // RC completes a QP's sends in order: this is the oldest posted frame.
  std::optional<SendItem> done = peer.frames.completed();
  if (!done) return lane_.protocol_error(peer, "a frame completion without a posted frame");
  SendItem& item = *done;
  if (!ok) {
    MessageChannel::release(item);
    return failed(peer, Status::error(Errc::ConnectionLost,
                                      q.ctx->name + ": a frame's SEND completed with " +
                                          verbs::wc_status_name(wc != nullptr ? wc->status : 0)));
  }
  ++q.frames;
  if (p2p::PeerEndpoint* ep = peer.link->endpoint(p2p::TransportId::Rdma)) {
    lane_.handler().frame_written(*ep, item);
  } else {
    MessageChannel::release(item);
  }
  pump(peer);
}

void FrameMessenger::on_received(PeerRdma& peer, Qp& q, CqSet& cqs, std::uint32_t slot,
                                 const ibv_wc& wc) {
  std::byte* at = cqs.frames.at(slot);
  auto refuse = [&](const std::string& why) {
    cqs.frames.give(slot);
    lane_.protocol_error(peer, "a frame on QP " + std::to_string(q.qp->qp_num) + ": " + why);
  };
  if (wc.opcode != IBV_WC_RECV || (wc.wc_flags & IBV_WC_WITH_INV) != 0 ||
      wc.byte_len < p2p::kFrameHeaderBytes || wc.byte_len > cqs.frames.slot_bytes()) {
    return refuse(std::string("not a SEND of a frame (") + verbs::wc_opcode_name(wc.opcode) + ", " +
                  std::to_string(wc.byte_len) + " bytes)");
  }
  auto h = p2p::decode_header(at);
  if (!h.ok()) return refuse(h.status().message());
  if (h->type == p2p::FrameType::Bye) peer.bye_received = true;
  const std::uint32_t len = wc.byte_len - static_cast<std::uint32_t>(p2p::kFrameHeaderBytes);
  if (h->payload_len != len) {
    return refuse("its header announces " + std::to_string(h->payload_len) +
                  " payload bytes, the SEND carried " + std::to_string(len));
  }
  p2p::PeerEndpoint* ep = peer.link->endpoint(p2p::TransportId::Rdma);
  if (ep == nullptr) {
    cqs.frames.give(slot);
    return;
  }
  p2p::FrameHandler& handler = lane_.handler();
  auto sink = handler.begin_frame(*peer.link, *h, *ep);
  if (!sink.ok()) {
    cqs.frames.give(slot);
    return handler.protocol_error(*peer.link, sink.status().message());
  }
  const std::byte* body = at + p2p::kFrameHeaderBytes;
  std::string buffer;
  if (sink->kind == detail::Sink::Direct && len != 0) {
    std::memcpy(sink->dst, body, len);
  } else if (sink->kind == detail::Sink::Buffer) {
    buffer = handler.take_buffer();
    buffer.assign(reinterpret_cast<const char*>(body), len);
  }
  // The slot's bytes are copied out: it may take the next frame (and a send staged by what
  // end_frame answers must not overwrite a frame still being read).
  cqs.frames.give(slot);
  handler.end_frame(*peer.link, *h, *ep, *sink, std::move(buffer));
  if (peer.failed || q.broken) return;
  if (Status st = lane_.post_receives(q); !st.ok()) {
    return failed(peer, st.with_context("reposting a frame receive"));
  }
  if (++q.owed >= kMessageSlots / 4) {
    lane_.send(peer, ControlKind::FrameCredit, encode(FrameCredit{q.remote_incarnation, q.owed}));
    q.owed = 0;
  }
}

void FrameMessenger::say_bye(PeerRdma& peer) {
  if (peer.failed || peer.frames.qp.state == QpSlot::State::Empty) return;
  SendItem bye;
  bye.header.type = p2p::FrameType::Bye;
  peer.frames.queue(std::move(bye));
  pump(peer);
}

void FrameMessenger::on_credit(PeerRdma& peer, const FrameCredit& m) {
  Qp* q =
      peer.frames.qp.state == QpSlot::State::Ready ? lane_.qp(peer.frames.qp.qp_handle) : nullptr;
  if (q == nullptr || q->incarnation != m.qp_incarnation) return;  // for a QP already gone
  if (q->credits + m.credits > kMessageSlots) {
    return lane_.protocol_error(peer, "FrameCredit returns " + std::to_string(m.credits) +
                                          " receives while " + std::to_string(q->credits) + " of " +
                                          std::to_string(kMessageSlots) + " are still free");
  }
  q->credits += m.credits;
  pump(peer);
}

}  // namespace orbite::rdma
