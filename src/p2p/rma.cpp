// put and get: the requester's parts, and the owner's side, which checks every access against its
// registry before a byte moves. With one-sided access (single copy on shm) the owner copies
// straight between the requester's memory and the region; otherwise the bytes travel as Data.
// A range whose local or remote memory a transport carries staged goes through staged.cpp.
#include "common/strings.h"
#include "p2p/protocol.h"
#include "p2p/staged.h"

namespace orbite::p2p {

using detail::Inflight;
using detail::OpKind;
using detail::PeerLink;

namespace {

// Counts one ended range of a put or get (its bytes, or the request's first error); true when
// it was the last.
bool count_part(detail::RequestState& req, std::uint64_t len, const Status& st) {
  if (st.ok()) {
    req.bytes_done.fetch_add(len);
  } else if (req.first_error.ok()) {
    req.first_error = st;
  }
  return --req.parts_left == 0;
}

}  // namespace

void Protocol::issue_put_get(Link& link, const ReqPtr& req) {
  auto routed = route(link, *req);
  if (!routed.ok()) return detail::complete_request(*req, routed.status());
  PeerEndpoint& ep = **routed;
  req->endpoint = &ep;
  req->parts_left = req->ranges.size();
  if (req->ranges.empty()) return finish_put_get(req, {});  // notify(): no bytes
  // Local pinned host memory: its producer's writes first (a wait made once).
  if (Status ready = consume_pinned_readiness(*req->local, Deadline::after(kProducerBound));
      !ready.ok()) {
    return detail::complete_request(*req, ready);
  }
  const auto via = static_cast<std::size_t>(ep.id());
  std::string why;
  const MemoryDomain* domain = domains_[via].get();
  const Backing local =
      domain != nullptr
          ? domain->backing(req->local->kind, &why)
          : (req->local->kind == MemoryKind::Host ? Backing::Native : Backing::Staged);
  if (local == Backing::Refused || local == Backing::Absent) {
    return detail::complete_request(
        *req, Status::error(Errc::Unavailable,
                            std::string(transport_name(ep.id())) + " cannot carry the local " +
                                (req->local->kind == MemoryKind::Cuda ? "CUDA" : "host") +
                                " memory: " + why));
  }
  const bool remote_staged = (req->remote_staged >> via & 1) != 0;
  if (local == Backing::Staged || remote_staged) {
    return issue_staged_put_get(link, req, ep, local == Backing::Staged, remote_staged);
  }
  const bool put = req->kind == OpKind::Put;
  // A copy: a range that completes at once may complete the request and free its ranges.
  const std::vector<TransferRange> ranges = req->ranges;
  for (const TransferRange& r : ranges) {
    HostPart part;
    part.put = put;
    part.req = req;
    part.local = req->local->base + r.local_offset;
    part.local_region = req->local.get();
    part.local_offset = r.local_offset;
    part.remote_region = req->remote_region;
    part.remote_generation = req->remote_generation;
    part.remote_offset = r.remote_offset;
    part.remote_device = req->remote_kind == MemoryKind::Cuda;
    part.length = r.length;
    // Without a notification the callback holds two words, which std::function keeps inline:
    // no allocation per range on the common path. With one it holds the request for the
    // notification that follows the last range.
    if (!req->options.notification) {
      part.done = [raw = req.get(), len = r.length](const Status& st) {
        if (count_part(*raw, len, st)) detail::complete_request(*raw, raw->first_error);
      };
    } else {
      part.done = [this, req, len = r.length](const Status& st) {
        if (count_part(*req, len, st)) finish_put_get(req, req->first_error);
      };
    }
    issue_host_part(link, ep, std::move(part));
    if (link.state == PeerLink::State::Failed) return;
  }
}

void Protocol::issue_host_part(Link& link, PeerEndpoint& ep, HostPart part) {
  if (ep.caps().rma) {
    RmaOp op;
    op.write = part.put;
    op.req = part.req;
    op.local_region = part.local_region;
    op.local_buffer = part.local_region == nullptr ? part.local : nullptr;
    op.local_offset = part.local_region != nullptr ? part.local_offset : 0;
    op.remote_region = part.remote_region;
    op.remote_generation = part.remote_generation;
    op.remote_offset = part.remote_offset;
    op.remote_device = part.remote_device;
    op.length = part.length;
    const TransportId id = ep.id();
    op.done = [this, id, put = part.put, len = part.length,
               done = std::move(part.done)](const Status& st) {
      if (st.ok()) {
        TransportCounters& tc = counters_.of(id);
        bump(put ? tc.bytes_sent : tc.bytes_received, len);
      }
      done(st);
    };
    auto done = op.done;
    if (Status st = ep.start_rma(std::move(op)); !st.ok()) done(st);
    return;
  }
  // Small ranges travel inline: two small copies beat a syscall.
  const bool by_address = ep.one_sided_usable() && part.length > ep.caps().eager_limit;
  issue_part(link, ep, std::move(part), by_address);
}

void Protocol::issue_part(Link& link, PeerEndpoint& ep, HostPart part, bool by_address) {
  const std::uint64_t wire_id = next_wire_id_++;
  Inflight f{part.req, part.local_offset, part.length};
  f.remote_offset = part.remote_offset;
  f.by_address = by_address;
  f.part = true;
  f.part_put = part.put;
  f.local = part.local;
  f.remote_region = part.remote_region;
  f.remote_generation = part.remote_generation;
  f.part_done = std::move(part.done);
  link.inflight[wire_id] = std::move(f);
  send_control(
      ep, part.put ? FrameType::Put : FrameType::Get, wire_id, part.remote_region,
      part.remote_generation, part.remote_offset, part.length,
      by_address ? addr_bytes(reinterpret_cast<std::uint64_t>(part.local)) : std::string());
  if (link.state == PeerLink::State::Failed) return;
  if (part.put && !by_address && part.length > 0) {
    send_data(link, ep, DataTarget::PutSession, wire_id, part.local, part.length, nullptr, nullptr);
  }
}

void Protocol::on_put_or_get(Link& link, const FrameHeader& h, PeerEndpoint& ep,
                             std::string_view body) {
  const bool put = h.type == FrameType::Put;
  const std::uint64_t addr = body.size() == 8 ? addr_from(body) : 0;
  auto ack = [&](const Status& st, std::uint64_t bytes) {
    send_control(ep, FrameType::Ack, h.id, static_cast<std::uint64_t>(st.code()),
                 st.ok() ? bytes : 0, 0, 0, st.ok() ? std::string() : st.message());
  };
  auto region = regions_.authorize(h.a, h.b, h.c, h.d, put, ep.id());
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
    s.endpoint = &ep;
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
    Status copied = put ? ep.read_peer(at, addr, h.d) : ep.write_peer(at, addr, h.d);
    r.unpin();
    if (copied.ok()) {
      bump(counters_.single_copy_bytes, h.d);
      TransportCounters& tc = counters_.of(ep.id());
      bump((put ? tc.bytes_received : tc.bytes_sent), h.d);
    }
    return ack(copied, h.d);
  }
  // A get answered with Data frames sent straight from the region, pinned until written.
  if (!send_data(link, ep, DataTarget::GetReply, h.id, at, h.d, nullptr, &r)) {
    if (link.state == PeerLink::State::Failed) return;
    return ack(Status::error(Errc::InvalidArgument,
                             "region " + std::to_string(h.a) + " is being unregistered"),
               0);
  }
  ack({}, h.d);
}

void Protocol::on_ack(Link& link, const FrameHeader& h, std::string_view body) {
  auto it = link.inflight.find(h.id);
  if (it == link.inflight.end() || !it->second.part) {
    return protocol_error(link,
                          "Ack for request " + std::to_string(h.id) + " matches no put or get");
  }
  if (it->second.by_address && errc_from_wire(h.a) == Errc::Unavailable) {
    // The owner's kernel refused single copy: the same range again, as frames.
    Inflight f = std::move(it->second);
    link.inflight.erase(it);
    HostPart part;
    part.put = f.part_put;
    part.req = std::move(f.req);
    part.local = f.local;
    part.local_offset = f.local_offset;
    part.remote_region = f.remote_region;
    part.remote_generation = f.remote_generation;
    part.remote_offset = f.remote_offset;
    part.length = f.length;
    part.done = std::move(f.part_done);
    PeerEndpoint* ep = part.req->endpoint;
    if (ep == nullptr || link.state != PeerLink::State::Established) {
      return part.done(Status::error(Errc::ConnectionLost,
                                     "peer " + short_id(link.ep.id) + ": the link failed"));
    }
    return issue_part(link, *ep, std::move(part), false);
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

void Protocol::maybe_complete_part(Link& link, std::uint64_t wire_id) {
  auto it = link.inflight.find(wire_id);
  if (it == link.inflight.end() || !it->second.acked) return;
  Inflight& f = it->second;
  if (f.ack_status.ok() && !f.part_put && f.received < f.length) return;
  auto done = std::move(f.part_done);
  Status status = f.ack_status;
  link.inflight.erase(it);
  if (done) done(status);
}

}  // namespace orbite::p2p
