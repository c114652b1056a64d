// Frame handlers: where each arriving frame's payload lands, and what its arrival completes.
// Every field a peer sent is checked against this engine's own records before it is used.
#include <cstring>

#include "common/log.h"
#include "common/strings.h"
#include "common/wire.h"
#include "p2p/protocol.h"

namespace orbite::p2p {

using detail::Inflight;
using detail::OpKind;
using detail::PeerLink;

namespace {

// An Eager or Rts frame as the matching queues keep it (Eager's payload is added by the caller;
// an exposed Rts's payload names the sender's region).
detail::Arrival arrival_of(const FrameHeader& h, PeerEndpoint& from, std::string_view body = {}) {
  detail::Arrival a;
  a.type = h.type;
  a.endpoint = &from;
  a.comm = static_cast<std::uint32_t>(h.a >> 32);
  a.tag = static_cast<std::int32_t>(h.a & 0xffffffffu);
  a.seq = h.b;
  a.sender_id = h.id;
  a.length = h.type == FrameType::Eager ? h.payload_len : h.c;
  a.sender_addr = h.type == FrameType::Rts ? h.d : 0;
  if (h.type == FrameType::Rts && body.size() == kExposedRtsBytes) {
    wire::Reader r(body);
    a.exposed_region = r.get<std::uint64_t>();
    a.exposed_generation = r.get<std::uint64_t>();
    a.exposed_staged = r.get<std::uint32_t>();
    a.exposed_chunk = r.get<std::uint64_t>();
  }
  return a;
}

}  // namespace

Errc errc_from_wire(std::uint64_t v) {
  if (v == 0 || v > static_cast<std::uint64_t>(Errc::Protocol)) return Errc::Internal;
  return static_cast<Errc>(v);
}

Result<detail::Sink> Protocol::begin_frame(Link& link, const FrameHeader& h, PeerEndpoint& from) {
  detail::Sink sink;
  TransportCounters& tc = counters_.of(from.id());
  bump(tc.frames_received, 1);
  bump(tc.bytes_received, h.payload_len);
  bump(counters_.bytes_received, h.payload_len);
  switch (h.type) {
    case FrameType::Hello:
    case FrameType::HelloAck:
    case FrameType::HelloNack:
      return Status::error(Errc::Protocol,
                           std::string(frame_type_name(h.type)) + " on an established connection");
    case FrameType::TransportControl:
      return Status::error(Errc::Protocol, "TransportControl outside the control connection");
    case FrameType::Rts:
      if (h.payload_len != 0 && h.payload_len != kExposedRtsBytes) {
        return Status::error(Errc::Protocol, "Rts frame with a payload of " +
                                                 std::to_string(h.payload_len) + " bytes");
      }
      if (h.payload_len != 0 && h.d != 0) {
        return Status::error(Errc::Protocol, "an exposed Rts with a single-copy address");
      }
      sink.kind = h.payload_len != 0 ? detail::Sink::Buffer : detail::Sink::Discard;
      return sink;
    case FrameType::RtsRma:
      if (h.payload_len != 0 || h.d != 0 || h.c == 0 || !from.caps().rma) {
        return Status::error(Errc::Protocol, "RtsRma frame of " + std::to_string(h.c) +
                                                 " bytes with a payload of " +
                                                 std::to_string(h.payload_len) + " bytes over " +
                                                 transport_name(from.id()));
      }
      sink.kind = detail::Sink::Discard;
      return sink;
    case FrameType::Bye: link.peer_closing = true; [[fallthrough]];
    case FrameType::Doorbell:
    case FrameType::Fin:
    case FrameType::Cts:
    case FrameType::Credit:
    case FrameType::StageClose:
    case FrameType::ExposeRequest:
    case FrameType::Exposed:
      if (h.payload_len != 0) {
        return Status::error(Errc::Protocol, std::string(frame_type_name(h.type)) +
                                                 " frame with a payload of " +
                                                 std::to_string(h.payload_len) + " bytes");
      }
      if (h.type == FrameType::Credit) {
        if (h.a > link.credit_window + (1ull << 40)) {
          return Status::error(Errc::Protocol, "credit of " + std::to_string(h.a) + " bytes");
        }
        link.credit += h.a;
      }
      sink.kind = detail::Sink::Discard;
      return sink;
    case FrameType::Eager: {
      if (h.c != h.payload_len) {
        return Status::error(Errc::Protocol, "Eager frame length " + std::to_string(h.c) +
                                                 " differs from its payload " +
                                                 std::to_string(h.payload_len));
      }
      link.eager_outstanding += h.payload_len + kFrameHeaderBytes;
      if (link.eager_outstanding > link.credit_window) {
        return Status::error(Errc::Protocol, "Eager message of " + std::to_string(h.payload_len) +
                                                 " bytes brings the unconsumed eager bytes to " +
                                                 std::to_string(link.eager_outstanding) +
                                                 ", over the credit of " +
                                                 std::to_string(link.credit_window));
      }
      if (h.b == link.recv_seq && link.reorder.empty()) {
        const auto comm = static_cast<std::uint32_t>(h.a >> 32);
        const auto tag = static_cast<std::int32_t>(h.a & 0xffffffffu);
        if (ReqPtr recv = take_receive(link, comm, tag)) {
          sink.req = std::move(recv);
          link.recv_seq++;
          sink.kind =
              h.payload_len <= sink.req->length ? detail::Sink::Direct : detail::Sink::Discard;
          // Device memory: the bytes land in a buffer, then the driver copies them.
          if (sink.kind == detail::Sink::Direct && sink.req->device) {
            sink.kind = detail::Sink::Buffer;
          } else {
            sink.dst = sink.req->dst;
          }
          return sink;
        }
      }
      sink.kind = detail::Sink::Buffer;
      return sink;
    }
    case FrameType::Reject:
    case FrameType::Abandon:
    case FrameType::Ack:
    case FrameType::Share:
    case FrameType::ShareDone:
    case FrameType::StageOpen:
    case FrameType::StageReady:
    case FrameType::StageDone:
    case FrameType::Notify: sink.kind = detail::Sink::Buffer; return sink;
    case FrameType::Put:
    case FrameType::Get:
      if (h.payload_len != 0 && h.payload_len != 8) {
        return Status::error(Errc::Protocol, std::string(frame_type_name(h.type)) +
                                                 " frame with a payload of " +
                                                 std::to_string(h.payload_len) + " bytes");
      }
      if (h.payload_len == 8 && !from.caps().one_sided) {
        return Status::error(Errc::Protocol, std::string("single-copy request over ") +
                                                 transport_name(from.id()) +
                                                 ", which has no one-sided access");
      }
      sink.kind = detail::Sink::Buffer;
      return sink;
    case FrameType::Data: break;
  }
  return data_sink(link, h);
}

Result<detail::Sink> Protocol::data_sink(Link& link, const FrameHeader& h) {
  detail::Sink sink;
  const auto target = static_cast<DataTarget>(h.a);
  if (target == DataTarget::PutSession) {
    auto it = link.sessions.find(h.id);
    if (it == link.sessions.end() || !range_inside(h.b, h.payload_len, it->second.length)) {
      return Status::error(Errc::Protocol, "Data for put " + std::to_string(h.id) + " at offset " +
                                               std::to_string(h.b) + " matches no open put");
    }
    detail::PutSession& s = it->second;
    if (s.region && s.region->pin()) {
      sink.kind = detail::Sink::Direct;
      sink.dst = s.region->base + s.offset + h.b;
      sink.pinned = s.region.get();
    } else {
      if (s.region && s.error.ok()) {
        s.error = Status::error(Errc::InvalidArgument,
                                "region " + std::to_string(s.region->id) +
                                    " was unregistered during the put; the rest was dropped");
      }
      sink.kind = detail::Sink::Discard;
    }
    return sink;
  }
  if (target != DataTarget::Recv && target != DataTarget::GetReply) {
    return Status::error(Errc::Protocol, "Data target " + std::to_string(h.a) + " is unknown");
  }
  auto it = link.inflight.find(h.id);
  const bool expected =
      it != link.inflight.end() &&
      (target == DataTarget::Recv
           ? !it->second.part && it->second.req->kind == OpKind::Recv && !it->second.req->device
           : it->second.part && !it->second.part_put) &&
      range_inside(h.b, h.payload_len, it->second.length);
  if (!expected) {
    return Status::error(Errc::Protocol, "Data for request " + std::to_string(h.id) +
                                             " at offset " + std::to_string(h.b) + " (" +
                                             std::to_string(h.payload_len) +
                                             " bytes) matches no request expecting it");
  }
  Inflight& f = it->second;
  sink.kind = detail::Sink::Direct;
  sink.dst = (target == DataTarget::Recv ? f.req->dst : f.local) + h.b;
  return sink;
}

void Protocol::end_frame(Link& link, const FrameHeader& h, PeerEndpoint& from, detail::Sink& sink,
                         std::string&& body) {
  if (sink.pinned != nullptr) {
    sink.pinned->unpin();
    sink.pinned = nullptr;
  }
  switch (h.type) {
    case FrameType::Eager: {
      detail::Arrival a = arrival_of(h, from);
      if (sink.req) {
        ReqPtr recv = std::move(sink.req);
        if (sink.kind == detail::Sink::Discard) {
          consume_eager(link, recv, a);  // reports the truncation
        } else if (sink.kind == detail::Sink::Buffer) {
          a.data = std::move(body);  // a receive into device memory
          consume_eager(link, recv, a);
        } else {
          recv->bytes_done.store(a.length);
          detail::complete_request(*recv, {});
          return_credit(link, a.length + kFrameHeaderBytes, from);
        }
        auto next = link.reorder.find(link.recv_seq);
        if (next != link.reorder.end()) {
          detail::Arrival pending = std::move(next->second);
          link.reorder.erase(next);
          deliver_arrival(link, std::move(pending));
        }
        return;
      }
      a.data = std::move(body);
      return deliver_arrival(link, std::move(a));
    }
    case FrameType::Rts:
    case FrameType::RtsRma: return deliver_arrival(link, arrival_of(h, from, body));
    case FrameType::Abandon: return on_abandon(link, h, from, body);
    case FrameType::Cts: return on_cts(link, h, from);
    case FrameType::Fin: {
      auto it = link.inflight.find(h.id);
      if (it == link.inflight.end() || it->second.req->kind != OpKind::Send) {
        return protocol_error(link, "Fin for request " + std::to_string(h.id) + " matches no send");
      }
      if (h.b == 0 || h.b > it->second.req->length ||
          (it->second.req->exposed && h.b != it->second.req->length)) {
        return protocol_error(link, "Fin for " + std::to_string(h.b) + " bytes of a " +
                                        std::to_string(it->second.req->length) + "-byte send");
      }
      return add_received(link, h.id, h.b);
    }
    case FrameType::Share: return on_share(link, h, from, body);
    case FrameType::ShareDone: {
      auto it = link.inflight.find(h.id);
      if (it == link.inflight.end() || it->second.part || it->second.req->kind != OpKind::Recv) {
        return protocol_error(
            link, "ShareDone for request " + std::to_string(h.id) + " matches no receive");
      }
      Status copied;
      if (h.a != 0) {
        copied = Status::error(errc_from_wire(h.a),
                               "peer " + short_id(link.ep.id) + ": " + quote(body, 200));
      }
      return add_received(link, h.id, h.b, copied);
    }
    case FrameType::Reject: {
      Status why = Status::error(errc_from_wire(h.a),
                                 "peer " + short_id(link.ep.id) + " rejected: " + quote(body, 300));
      auto it = link.inflight.find(h.id);
      if (it == link.inflight.end()) {
        // An eager send completes when its bytes leave; the receiver's verdict comes later.
        ORBITE_LOG(Warn, Proxy) << why.message();
        return;
      }
      ReqPtr req = it->second.req;
      link.inflight.erase(it);
      withdraw(req);
      return detail::complete_request(*req, why);
    }
    case FrameType::Data: return on_data(link, h);
    case FrameType::StageOpen: return on_stage_open(link, h, from, body);
    case FrameType::StageReady:
    case FrameType::StageDone: return on_stage_reply(link, h, body);
    case FrameType::StageClose: return on_stage_close(link, h);
    case FrameType::ExposeRequest: return on_expose_request(link, h, from);
    case FrameType::Exposed: return on_exposed(link, h, from);
    case FrameType::Put:
    case FrameType::Get: return on_put_or_get(link, h, from, body);
    case FrameType::Ack: return on_ack(link, h, body);
    case FrameType::Notify: return on_notify(link, h, from, std::move(body));
    default: return;
  }
}

void Protocol::on_cts(Link& link, const FrameHeader& h, PeerEndpoint& ep) {
  // Send [c, c + d) of the message as Data (d = 0: all of it).
  auto it = link.inflight.find(h.id);
  const std::uint64_t len = it == link.inflight.end() ? 0 : it->second.req->length;
  const std::uint64_t count = h.d == 0 ? len - std::min(len, h.c) : h.d;
  if (it == link.inflight.end() || it->second.req->kind != OpKind::Send || h.b != len ||
      !range_inside(h.c, count, len) || it->second.announced) {
    return protocol_error(link, "Cts for request " + std::to_string(h.id) + " matches no send of " +
                                    std::to_string(h.b) + " bytes");
  }
  ReqPtr req = it->second.req;
  if (req->length == 0) {
    link.inflight.erase(it);
    return detail::complete_request(*req, {});
  }
  if (ep.caps().rma) return rendezvous_rma(link, req, ep, h.a, false, h.c, count);
  send_data(link, ep, DataTarget::Recv, h.a, req->src, count, req, nullptr, h.c);
}

void Protocol::on_share(Link& link, const FrameHeader& h, PeerEndpoint& ep, std::string_view body) {
  auto it = link.inflight.find(h.id);
  if (it == link.inflight.end() || it->second.req->kind != OpKind::Send ||
      h.c != it->second.req->length || h.b >= h.c || body.size() != 8 || !ep.caps().one_sided) {
    return protocol_error(
        link, "Share for request " + std::to_string(h.id) + " matches no single-copy send");
  }
  ReqPtr req = it->second.req;
  const std::uint64_t part = h.c - h.b;
  Status copied = ep.write_peer(req->src + h.b, addr_from(body) + h.b, part);
  if (copied.code() == Errc::Unavailable) {
    // Single copy is refused: this part goes as frames after all.
    send_data(link, ep, DataTarget::Recv, h.a, req->src, part, req, nullptr, h.b);
    return;
  }
  send_control(ep, FrameType::ShareDone, h.a, static_cast<std::uint64_t>(copied.code()), part, 0, 0,
               copied.ok() ? std::string() : copied.message());
  if (copied.ok()) {
    bump(counters_.single_copy_bytes, part);
    bump(counters_.of(ep.id()).bytes_sent, part);
  }
  // The receiver's Fin or Reject follows Share on this endpoint: the request stays until then.
  add_received(link, h.id, part, copied);
}

void Protocol::on_data(Link& link, const FrameHeader& h) {
  const auto target = static_cast<DataTarget>(h.a);
  if (target == DataTarget::PutSession) {
    auto it = link.sessions.find(h.id);
    if (it == link.sessions.end()) return;
    it->second.received += h.payload_len;
    if (it->second.received == it->second.length) {
      detail::PutSession s = std::move(it->second);
      link.sessions.erase(it);
      send_control(*s.endpoint, FrameType::Ack, h.id, static_cast<std::uint64_t>(s.error.code()),
                   s.error.ok() ? s.length : 0, 0, 0,
                   s.error.ok() ? std::string() : s.error.message());
    }
    return;
  }
  if (target == DataTarget::Recv) return add_received(link, h.id, h.payload_len);
  auto it = link.inflight.find(h.id);
  if (it == link.inflight.end()) return;
  it->second.received += h.payload_len;
  maybe_complete_part(link, h.id);
}

}  // namespace orbite::p2p
