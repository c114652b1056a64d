// The rendezvous over a transport that runs it itself (caps().rma: RDMA): the sender's endpoint
// writes the payload into the receiver's posted buffer. Two flows:
// - after the Cts (Rts, Cts, then the write's request naming the receive), for large messages
//   and when too many announced ones are outstanding;
// - announced (RtsRma): the write's request leaves with the announcement and names the message;
//   the receiver's transport asks message_target, which answers once a receive matched it, so
//   one control round trip (the transport's request and grant) precedes the payload.
// Either way the receiver's transport proves the bytes before rendezvous_done.
#include <algorithm>

#include "common/log.h"
#include "common/strings.h"
#include "p2p/protocol.h"

namespace orbite::p2p {

using detail::Inflight;
using detail::OpKind;
using detail::PeerLink;

namespace {
// A sender's announced messages per link whose writes have not ended. Each holds its send
// buffer's registration and the transport's charges while it waits for its receive, and a
// request slot at the peer's source; past this the Cts flow, which holds nothing, is used.
constexpr std::size_t kMaxRmaAnnounced = 16;
// Why a receiver refuses an announced write it will read itself (a device receive): the sender's
// send goes on (its ExposeRequest comes, or came, from the receiver).
constexpr const char* kDeclined = "the receive reads this message from the sender's buffer";

bool declined(const Status& st) {
  return st.code() == Errc::Cancelled && st.message().find(kDeclined) != std::string::npos;
}
}  // namespace

bool Protocol::announce_rma(const Link& link, const PeerEndpoint& ep, const Req& req) const {
  return ep.caps().rma && req.length > 0 && req.length <= ep.caps().rma_message_limit &&
         !link.is_self && link.rma_announced_out < kMaxRmaAnnounced;
}

void Protocol::rendezvous_rma(Link& link, const ReqPtr& req, PeerEndpoint& ep,
                              std::uint64_t recv_id, bool announced, std::uint64_t offset,
                              std::uint64_t count) {
  RmaOp op;
  op.write = true;
  op.req = req;
  op.local_buffer = req->src;
  op.local_offset = offset;
  op.remote_receive = announced ? 0 : recv_id;
  op.remote_message = announced ? req->id : 0;
  op.remote_offset = offset;
  op.length = count;
  Req* raw = req.get();
  const TransportId id = ep.id();
  Link* at = &link;
  if (announced) ++link.rma_announced_out;
  op.done = [this, raw, at, id, count, recv_id, announced](const Status& st) {
    if (announced) {
      --at->rma_announced_out;
      // No grant was ever made for it; the receiver's read completes the send.
      if (declined(st)) return;
    }
    if (st.ok()) {
      bump(counters_.of(id).bytes_sent, count);
      bump(counters_.bytes_sent, count);
    } else if (at->state == PeerLink::State::Established && at->endpoint(id) != nullptr) {
      // The receiver may never have heard of the write (it failed before the grant): its
      // receive fails too, with the reason. No WR of the write can run any more.
      const std::string why = "the sender's RDMA write failed: " + st.message();
      if (announced) {
        send_control(*at->endpoint(id), FrameType::Abandon, raw->id,
                     static_cast<std::uint64_t>(st.code()), 0, 0, 0, why);
      } else {
        send_control(*at->endpoint(id), FrameType::Reject, recv_id,
                     static_cast<std::uint64_t>(st.code()), 0, 0, 0, why);
      }
    }
    // The send ends with the receiver's proof (its GrantAck), or with the failure.
    add_received(*at, raw->id, count, st);
  };
  auto done = op.done;
  if (Status st = ep.start_rma(std::move(op)); !st.ok()) done(st);
}

void Protocol::match_rts_rma(Link& link, const ReqPtr& recv, const detail::Arrival& a) {
  // Its sender gave up before this receive came: no request for the write will come.
  if (!a.abandoned.ok()) return detail::complete_request(*recv, a.abandoned);
  if (a.length > recv->length) {
    // The sender learns it from the refusal of its write's request (no Reject frame).
    Status trunc = truncation(link, *recv, a);
    link.announced[a.sender_id] = detail::Announced{0, trunc};
    return detail::complete_request(*recv, trunc);
  }
  if (needs_exposure(*recv, *a.endpoint)) {
    // A device receive reads the sender's buffer instead, as after a plain Rts (GPUDirect or
    // staged): the sender's write is declined, which its send survives (rendezvous_rma).
    link.announced[a.sender_id] = detail::Announced{0, Status::error(Errc::Cancelled, kDeclined)};
    return ask_exposure(link, recv, a);
  }
  recv->endpoint = a.endpoint;
  Inflight f(recv, 0, a.length);
  f.announced_by = a.sender_id;
  link.inflight[recv->id] = std::move(f);
  link.announced[a.sender_id] = detail::Announced{recv->id, {}};
}

void Protocol::settle_announced(Link& link, const Inflight& f, const Status& result) {
  auto it = link.announced.find(f.announced_by);
  if (it == link.announced.end()) return;
  if (result.ok()) {
    link.announced.erase(it);
    return;
  }
  // The sender's write fails too and says so (Abandon), which removes the entry; meanwhile a
  // request for it is refused with the receive's reason rather than left waiting.
  it->second = detail::Announced{0, result};
}

void Protocol::on_abandon(Link& link, const FrameHeader& h, PeerEndpoint& from,
                          std::string_view body) {
  const Status why =
      Status::error(errc_from_wire(h.a),
                    "peer " + short_id(link.ep.id) + " gave up its message: " + quote(body, 300));
  if (auto it = link.announced.find(h.id); it != link.announced.end()) {
    const std::uint64_t recv_id = it->second.receive_id;
    link.announced.erase(it);
    auto f = link.inflight.find(recv_id);
    if (recv_id == 0 || f == link.inflight.end() || f->second.announced_by != h.id) return;
    ReqPtr req = f->second.req;
    link.inflight.erase(f);
    return detail::complete_request(*req, why);
  }
  // Not matched yet: the announcement waits for its receive (or its turn in sequence), and the
  // receive that matches it fails. It came before this frame on the same endpoint.
  auto mark = [&](detail::Arrival& a) {
    if (a.type != FrameType::RtsRma || a.sender_id != h.id || a.endpoint != &from) return false;
    a.abandoned = why;
    return true;
  };
  for (detail::Arrival& a : link.unexpected) {
    if (mark(a)) return;
  }
  for (auto& [seq, a] : link.reorder) {
    if (mark(a)) return;
  }
  // Otherwise its receive already ended (the refusal that made the sender give up was ours).
}

Result<FrameHandler::ReceiveTarget> Protocol::rendezvous_target(Link& link, std::uint64_t recv_id,
                                                                std::uint64_t offset,
                                                                std::uint64_t length) {
  auto it = link.inflight.find(recv_id);
  if (it == link.inflight.end() || it->second.part || it->second.req->kind != OpKind::Recv ||
      it->second.req->device || it->second.announced_by != 0 ||
      it->second.req->endpoint == nullptr || !it->second.req->endpoint->caps().rma || length == 0 ||
      !range_inside(offset, length, it->second.length)) {
    return Status::error(Errc::InvalidArgument, "receive " + std::to_string(recv_id) +
                                                    " awaits no rendezvous write of [" +
                                                    std::to_string(offset) + ", +" +
                                                    std::to_string(length) + ") from this peer");
  }
  return ReceiveTarget{it->second.req->dst, it->second.length, it->second.req, recv_id, false};
}

Result<FrameHandler::ReceiveTarget> Protocol::message_target(Link& link, std::uint64_t sender_id,
                                                             std::uint64_t offset,
                                                             std::uint64_t length) {
  auto entry = link.announced.find(sender_id);
  if (entry == link.announced.end()) {
    ReceiveTarget later;
    later.waiting = true;
    auto is_it = [&](const detail::Arrival& a) {
      return a.type == FrameType::RtsRma && a.sender_id == sender_id;
    };
    later.announced = std::any_of(link.unexpected.begin(), link.unexpected.end(), is_it) ||
                      std::any_of(link.reorder.begin(), link.reorder.end(),
                                  [&](const auto& kv) { return is_it(kv.second); });
    return later;
  }
  if (entry->second.receive_id == 0) {
    // The message's one request (it fits one grant) is refused with the reason: the entry ends.
    Status refused = std::move(entry->second.refused);
    link.announced.erase(entry);
    return refused;
  }
  auto it = link.inflight.find(entry->second.receive_id);
  if (it == link.inflight.end() || it->second.announced_by != sender_id || length == 0 ||
      !range_inside(offset, length, it->second.length)) {
    return Status::error(Errc::InvalidArgument, "message " + std::to_string(sender_id) +
                                                    " of this peer awaits no write of [" +
                                                    std::to_string(offset) + ", +" +
                                                    std::to_string(length) + ")");
  }
  Inflight& f = it->second;
  return ReceiveTarget{f.req->dst, f.length, f.req, entry->second.receive_id, false};
}

void Protocol::rendezvous_done(Link& link, std::uint64_t recv_id, std::uint64_t bytes,
                               const Status& outcome) {
  auto it = link.inflight.find(recv_id);
  if (it == link.inflight.end()) return;  // already failed with its link
  if (!outcome.ok()) {
    ReqPtr req = it->second.req;
    settle_announced(link, it->second, outcome);
    link.inflight.erase(it);
    return detail::complete_request(*req, outcome);
  }
  TransportCounters& tc = counters_.of(it->second.req->endpoint->id());
  bump(tc.bytes_received, bytes);
  bump(counters_.bytes_received, bytes);
  add_received(link, recv_id, bytes);
}

}  // namespace orbite::p2p
