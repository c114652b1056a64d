// Frame handlers: where each arriving frame's payload lands, and what its arrival completes.
// Every field a peer sent is checked against this engine's own records before it is used.
#include <cstring>

#include "common/log.h"
#include "common/strings.h"
#include "p2p/shm/vm_copy.h"
#include "p2p/transports.h"

namespace orbite::p2p {

using detail::Inflight;
using detail::OpKind;
using detail::PeerLink;

namespace {

std::string short_id(const std::string& id) {
  return id.substr(0, 8);
}

std::string addr_bytes(std::uint64_t addr) {
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((addr >> (8 * i)) & 0xff);
  return out;
}

std::uint64_t addr_from(std::string_view body) {
  std::uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(body[i])) << (8 * i);
  }
  return v;
}

// An Eager or Rts frame as the matching queues keep it (Eager's payload is added by the caller).
detail::Arrival arrival_of(const FrameHeader& h, Channel ch) {
  detail::Arrival a;
  a.type = h.type;
  a.channel = ch;
  a.comm = static_cast<std::uint32_t>(h.a >> 32);
  a.tag = static_cast<std::int32_t>(h.a & 0xffffffffu);
  a.seq = h.b;
  a.sender_id = h.id;
  a.length = h.type == FrameType::Eager ? h.payload_len : h.c;
  a.sender_addr = h.type == FrameType::Rts ? h.d : 0;
  return a;
}

Errc errc_from_wire(std::uint64_t v) {
  if (v == 0 || v > static_cast<std::uint64_t>(Errc::Protocol)) return Errc::Internal;
  return static_cast<Errc>(v);
}

}  // namespace

Result<Sink> Transports::begin_frame(Link& link, const FrameHeader& h, Channel ch) {
  Sink sink;
  switch (h.type) {
    case FrameType::Hello:
    case FrameType::HelloAck:
    case FrameType::HelloNack:
      return Status::error(Errc::Protocol,
                           std::string(frame_type_name(h.type)) + " on an established connection");
    case FrameType::Bye: link.peer_closing = true; [[fallthrough]];
    case FrameType::Doorbell:
    case FrameType::Rts:
    case FrameType::Fin:
    case FrameType::Cts:
    case FrameType::Credit:
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
      sink.kind = Sink::Discard;
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
        for (auto it = link.posted.begin(); it != link.posted.end(); ++it) {
          if ((*it)->comm == comm && (*it)->tag == tag) {
            sink.req = std::move(*it);
            link.posted.erase(it);
            link.recv_seq++;
            sink.kind = h.payload_len <= sink.req->length ? Sink::Direct : Sink::Discard;
            sink.dst = sink.req->dst;
            return sink;
          }
        }
      }
      sink.kind = Sink::Buffer;
      return sink;
    }
    case FrameType::Reject:
    case FrameType::Ack:
    case FrameType::Share:
    case FrameType::ShareDone: sink.kind = Sink::Buffer; return sink;
    case FrameType::Put:
    case FrameType::Get:
      if (h.payload_len != 0 && h.payload_len != 8) {
        return Status::error(Errc::Protocol, std::string(frame_type_name(h.type)) +
                                                 " frame with a payload of " +
                                                 std::to_string(h.payload_len) + " bytes");
      }
      if (h.payload_len == 8 && ch != Channel::Ring) {
        return Status::error(Errc::Protocol, "single-copy request outside shared memory");
      }
      sink.kind = Sink::Buffer;
      return sink;
    case FrameType::Data: break;
  }
  const auto target = static_cast<DataTarget>(h.a);
  if (target == DataTarget::PutSession) {
    auto it = link.sessions.find(h.id);
    if (it == link.sessions.end() || !range_inside(h.b, h.payload_len, it->second.length)) {
      return Status::error(Errc::Protocol, "Data for put " + std::to_string(h.id) + " at offset " +
                                               std::to_string(h.b) + " matches no open put");
    }
    detail::PutSession& s = it->second;
    if (s.region && s.region->pin()) {
      sink.kind = Sink::Direct;
      sink.dst = s.region->base + s.offset + h.b;
      sink.pinned = s.region.get();
    } else {
      if (s.region && s.error.ok()) {
        s.error = Status::error(Errc::InvalidArgument,
                                "region " + std::to_string(s.region->id) +
                                    " was unregistered during the put; the rest was dropped");
      }
      sink.kind = Sink::Discard;
    }
    return sink;
  }
  if (target != DataTarget::Recv && target != DataTarget::GetReply) {
    return Status::error(Errc::Protocol, "Data target " + std::to_string(h.a) + " is unknown");
  }
  auto it = link.inflight.find(h.id);
  if (it == link.inflight.end() ||
      it->second.req->kind != (target == DataTarget::Recv ? OpKind::Recv : OpKind::Get) ||
      !range_inside(h.b, h.payload_len, it->second.length)) {
    return Status::error(Errc::Protocol, "Data for request " + std::to_string(h.id) +
                                             " at offset " + std::to_string(h.b) + " (" +
                                             std::to_string(h.payload_len) +
                                             " bytes) matches no request expecting it");
  }
  Inflight& f = it->second;
  sink.kind = Sink::Direct;
  sink.dst = (target == DataTarget::Recv ? f.req->dst : f.req->local->base + f.local_offset) + h.b;
  return sink;
}

void Transports::end_frame(Link& link, const FrameHeader& h, Channel ch, Sink& sink,
                           std::string&& body) {
  if (sink.pinned != nullptr) {
    sink.pinned->unpin();
    sink.pinned = nullptr;
  }
  switch (h.type) {
    case FrameType::Eager: {
      detail::Arrival a = arrival_of(h, ch);
      if (sink.req) {
        ReqPtr recv = std::move(sink.req);
        if (sink.kind == Sink::Discard) {
          consume_eager(link, recv, a);  // reports the truncation
        } else {
          recv->bytes_done.store(a.length);
          finish_request(*recv, {}, counters_);
          return_credit(link, a.length + kFrameHeaderBytes, ch);
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
    case FrameType::Rts: return deliver_arrival(link, arrival_of(h, ch));
    case FrameType::Cts: {
      // Send [c, c + d) of the message as Data (d = 0: all of it).
      auto it = link.inflight.find(h.id);
      const std::uint64_t len = it == link.inflight.end() ? 0 : it->second.req->length;
      const std::uint64_t count = h.d == 0 ? len - std::min(len, h.c) : h.d;
      if (it == link.inflight.end() || it->second.req->kind != OpKind::Send || h.b != len ||
          !range_inside(h.c, count, len)) {
        return protocol_error(link, "Cts for request " + std::to_string(h.id) +
                                        " matches no send of " + std::to_string(h.b) + " bytes");
      }
      ReqPtr req = it->second.req;
      if (req->length == 0) {
        link.inflight.erase(it);
        return finish_request(*req, {}, counters_);
      }
      send_data(link, ch, DataTarget::Recv, h.a, req->src, count, req, nullptr, h.c);
      return;
    }
    case FrameType::Fin: {
      auto it = link.inflight.find(h.id);
      if (it == link.inflight.end() || it->second.req->kind != OpKind::Send) {
        return protocol_error(link, "Fin for request " + std::to_string(h.id) + " matches no send");
      }
      if (h.b == 0 || h.b > it->second.req->length) {
        return protocol_error(link, "Fin for " + std::to_string(h.b) + " bytes of a " +
                                        std::to_string(it->second.req->length) + "-byte send");
      }
      return add_received(link, h.id, h.b);
    }
    case FrameType::Share: {
      auto it = link.inflight.find(h.id);
      if (it == link.inflight.end() || it->second.req->kind != OpKind::Send ||
          h.c != it->second.req->length || h.b >= h.c || body.size() != 8 || ch != Channel::Ring) {
        return protocol_error(
            link, "Share for request " + std::to_string(h.id) + " matches no single-copy send");
      }
      ReqPtr req = it->second.req;
      const std::uint64_t part = h.c - h.b;
      Status copied = vm_write(link.ep.pid, req->src + h.b, addr_from(body) + h.b, part);
      if (copied.code() == Errc::Unavailable) {
        // The kernel refuses single copy: this part goes through the ring after all.
        send_data(link, ch, DataTarget::Recv, h.a, req->src, part, req, nullptr, h.b);
        return;
      }
      send_control(link, ch, FrameType::ShareDone, h.a, static_cast<std::uint64_t>(copied.code()),
                   part, 0, 0, copied.ok() ? std::string() : copied.message());
      if (copied.ok()) counters_.single_copy_bytes += part;
      // The receiver's Fin or Reject follows Share on this ring: the request stays until then.
      return add_received(link, h.id, part, copied);
    }
    case FrameType::ShareDone: {
      auto it = link.inflight.find(h.id);
      if (it == link.inflight.end() || it->second.req->kind != OpKind::Recv) {
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
      return finish_request(*req, why, counters_);
    }
    case FrameType::Data: {
      const auto target = static_cast<DataTarget>(h.a);
      if (target == DataTarget::PutSession) {
        auto it = link.sessions.find(h.id);
        if (it == link.sessions.end()) return;
        it->second.received += h.payload_len;
        if (it->second.received == it->second.length) {
          detail::PutSession s = std::move(it->second);
          link.sessions.erase(it);
          send_control(link, s.channel, FrameType::Ack, h.id,
                       static_cast<std::uint64_t>(s.error.code()), s.error.ok() ? s.length : 0, 0,
                       0, s.error.ok() ? std::string() : s.error.message());
        }
        return;
      }
      if (target == DataTarget::Recv) return add_received(link, h.id, h.payload_len);
      auto it = link.inflight.find(h.id);
      if (it == link.inflight.end()) return;
      it->second.received += h.payload_len;
      {}
      return maybe_complete_part(link, h.id);
    }
    case FrameType::Put:
    case FrameType::Get: return on_put_or_get(link, h, ch, body);
    case FrameType::Ack: return on_ack(link, h, body);
    default: return;
  }
}

void Transports::issue_put_get(Link& link, const ReqPtr& req) {
  Status err;
  Channel ch = pick_channel(link, *req, err);
  if (!err.ok()) return finish_request(*req, err, counters_);
  req->channel = ch;
  const bool single = ch == Channel::Ring && config_.shm.single_copy && vm_copy_usable();
  // Small ranges travel inline through the ring: two small copies beat a syscall.
  const std::uint64_t inline_max = eager_limit(Channel::Ring);
  req->parts_left = req->ranges.size();
  if (req->ranges.empty()) return finish_request(*req, {}, counters_);
  for (const TransferRange& r : req->ranges) {
    issue_part(link, req, r, single && r.length > inline_max);
    if (link.state == PeerLink::State::Failed) return;
  }
}

void Transports::issue_part(Link& link, const ReqPtr& req, const TransferRange& r,
                            bool by_address) {
  const bool put = req->kind == OpKind::Put;
  const Channel ch = req->channel;
  const std::uint64_t wire_id = next_wire_id_++;
  std::byte* local = req->local->base + r.local_offset;
  Inflight f{req, r.local_offset, r.length};
  f.remote_offset = r.remote_offset;
  f.by_address = by_address;
  link.inflight[wire_id] = std::move(f);
  send_control(link, ch, put ? FrameType::Put : FrameType::Get, wire_id, req->remote_region,
               req->remote_generation, r.remote_offset, r.length,
               by_address ? addr_bytes(reinterpret_cast<std::uint64_t>(local)) : std::string());
  if (link.state == PeerLink::State::Failed) return;
  if (put && !by_address && r.length > 0) {
    send_data(link, ch, DataTarget::PutSession, wire_id, local, r.length, nullptr, nullptr);
  }
}

void Transports::on_put_or_get(Link& link, const FrameHeader& h, Channel ch,
                               std::string_view body) {
  const bool put = h.type == FrameType::Put;
  const std::uint64_t addr = body.size() == 8 ? addr_from(body) : 0;
  auto ack = [&](const Status& st, std::uint64_t bytes) {
    send_control(link, ch, FrameType::Ack, h.id, static_cast<std::uint64_t>(st.code()),
                 st.ok() ? bytes : 0, 0, 0, st.ok() ? std::string() : st.message());
  };
  auto region = regions_.authorize(h.a, h.b, h.c, h.d, put);
  if (put && addr == 0 && h.d > 0) {
    if (link.sessions.count(h.id) != 0) {
      return protocol_error(link, "put " + std::to_string(h.id) + " opened twice");
    }
    detail::PutSession s;
    if (region.ok())
      s.region = *region;
    else
      s.error = region.status();
    s.offset = h.c;
    s.length = h.d;
    s.channel = ch;
    link.sessions.emplace(h.id, std::move(s));
    return;
  }
  if (!region.ok()) return ack(region.status(), 0);
  if (h.d == 0) return ack({}, 0);
  detail::RegionRecord& r = **region;
  std::byte* at = r.base + h.c;
  if (addr != 0) {
    if (!r.pin()) {
      return ack(Status::error(Errc::InvalidArgument,
                               "region " + std::to_string(h.a) + " is being unregistered"),
                 0);
    }
    Status copied =
        put ? vm_read(link.ep.pid, at, addr, h.d) : vm_write(link.ep.pid, at, addr, h.d);
    r.unpin();
    if (copied.ok()) counters_.single_copy_bytes += h.d;
    return ack(copied, h.d);
  }
  // A get answered with Data frames sent straight from the region, pinned until written.
  if (!send_data(link, ch, DataTarget::GetReply, h.id, at, h.d, nullptr, &r)) {
    if (link.state == PeerLink::State::Failed) return;
    return ack(Status::error(Errc::InvalidArgument,
                             "region " + std::to_string(h.a) + " is being unregistered"),
               0);
  }
  ack({}, h.d);
}

void Transports::on_ack(Link& link, const FrameHeader& h, std::string_view body) {
  auto it = link.inflight.find(h.id);
  if (it == link.inflight.end() ||
      (it->second.req->kind != OpKind::Put && it->second.req->kind != OpKind::Get)) {
    return protocol_error(link,
                          "Ack for request " + std::to_string(h.id) + " matches no put or get");
  }
  if (it->second.by_address && errc_from_wire(h.a) == Errc::Unavailable) {
    // The owner's kernel refused single copy: the same range again, through the ring.
    ReqPtr req = it->second.req;
    const TransferRange range{it->second.local_offset, it->second.remote_offset, it->second.length};
    link.inflight.erase(it);
    return issue_part(link, req, range, false);
  }
  it->second.acked = true;
  if (h.a != 0) {
    it->second.ack_status = Status::error(errc_from_wire(h.a),
                                          "peer " + short_id(link.ep.id) + ": " + quote(body, 300));
  } else if (h.b != it->second.length) {
    return protocol_error(link, "Ack for " + std::to_string(h.b) + " bytes of a " +
                                    std::to_string(it->second.length) + "-byte transfer");
  } else if (it->second.by_address) {
    it->second.received = it->second.length;  // the owner copied it into our memory itself
  }
  maybe_complete_part(link, h.id);
}

void Transports::add_received(Link& link, std::uint64_t id, std::uint64_t bytes,
                              const Status& error) {
  auto it = link.inflight.find(id);
  if (it == link.inflight.end()) return;
  Inflight& f = it->second;
  const std::uint64_t total = f.req->kind == OpKind::Send ? f.req->length : f.length;
  if (bytes > total - f.received) {
    return protocol_error(link, "request " + std::to_string(id) + " received more bytes than " +
                                    std::to_string(total));
  }
  if (!error.ok() && f.ack_status.ok()) f.ack_status = error;
  f.received += bytes;
  if (f.received < total) return;
  ReqPtr req = f.req;
  Status result = f.ack_status;
  link.inflight.erase(it);
  if (result.ok()) req->bytes_done.store(total);
  finish_request(*req, result, counters_);
}

void Transports::maybe_complete_part(Link& link, std::uint64_t wire_id) {
  auto it = link.inflight.find(wire_id);
  if (it == link.inflight.end() || !it->second.acked) return;
  Inflight& f = it->second;
  if (f.ack_status.ok() && f.req->kind == OpKind::Get && f.received < f.length) return;
  ReqPtr req = f.req;
  if (f.ack_status.ok()) {
    req->bytes_done.fetch_add(f.length);
  } else if (req->first_error.ok()) {
    req->first_error = f.ack_status;
  }
  link.inflight.erase(it);
  if (--req->parts_left == 0) finish_request(*req, req->first_error, counters_);
}

void Transports::fail_inflight_of(Link& link, const Status& why) {
  auto inflight = std::move(link.inflight);
  link.inflight.clear();
  for (auto& [id, f] : inflight) finish_request(*f.req, why, counters_);
  for (auto& req : link.waiting) finish_request(*req, why, counters_);
  link.waiting.clear();
  for (auto& req : link.posted) finish_request(*req, why, counters_);
  link.posted.clear();
  for (auto& a : link.unexpected) counters_.unexpected_bytes -= a.data.size();
  link.unexpected.clear();
  link.reorder.clear();
  link.sessions.clear();
}

}  // namespace orbite::p2p
