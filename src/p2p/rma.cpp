// put and get: the requester's parts, and the owner's side, which checks every access against its
// registry before a byte moves. With one-sided access (single copy on shm) the owner copies
// straight between the requester's memory and the region; otherwise the bytes travel as Data.
#include "common/strings.h"
#include "p2p/protocol.h"

namespace orbite::p2p {

using detail::Inflight;
using detail::OpKind;
using detail::PeerLink;

void Protocol::issue_put_get(Link& link, const ReqPtr& req) {
  auto routed = route(link, *req);
  if (!routed.ok()) return detail::complete_request(*req, routed.status());
  PeerEndpoint& ep = **routed;
  req->endpoint = &ep;
  if (ep.caps().rma) return issue_rma(link, req, ep);
  const bool single = ep.one_sided_usable();
  // Small ranges travel inline: two small copies beat a syscall.
  const std::uint64_t inline_max = ep.caps().eager_limit;
  req->parts_left = req->ranges.size();
  if (req->ranges.empty()) return detail::complete_request(*req, {});
  for (const TransferRange& r : req->ranges) {
    issue_part(link, req, r, single && r.length > inline_max);
    if (link.state == PeerLink::State::Failed) return;
  }
}

void Protocol::issue_rma(Link& link, const ReqPtr& req, PeerEndpoint& ep) {
  req->parts_left = req->ranges.size();
  if (req->ranges.empty()) return detail::complete_request(*req, {});
  const bool put = req->kind == OpKind::Put;
  const TransportId id = ep.id();
  // A copy: a range that completes at once may complete the request and free its ranges.
  const std::vector<TransferRange> ranges = req->ranges;
  for (const TransferRange& r : ranges) {
    RmaOp op;
    op.write = put;
    op.req = req;
    op.local_region = req->local.get();
    op.local_offset = r.local_offset;
    op.remote_region = req->remote_region;
    op.remote_generation = req->remote_generation;
    op.remote_offset = r.remote_offset;
    op.length = r.length;
    Req* raw = req.get();
    op.done = [this, raw, id, put, len = r.length](const Status& st) {
      if (st.ok()) {
        raw->bytes_done.fetch_add(len);
        TransportCounters& tc = counters_.of(id);
        bump(put ? tc.bytes_sent : tc.bytes_received, len);
      } else if (raw->first_error.ok()) {
        raw->first_error = st;
      }
      if (--raw->parts_left == 0) detail::complete_request(*raw, raw->first_error);
    };
    auto done = op.done;
    if (Status st = ep.start_rma(std::move(op)); !st.ok()) done(st);
    if (link.state == PeerLink::State::Failed) return;
  }
}

void Protocol::issue_part(Link& link, const ReqPtr& req, const TransferRange& r, bool by_address) {
  const bool put = req->kind == OpKind::Put;
  PeerEndpoint& ep = *req->endpoint;
  const std::uint64_t wire_id = next_wire_id_++;
  std::byte* local = req->local->base + r.local_offset;
  Inflight f{req, r.local_offset, r.length};
  f.remote_offset = r.remote_offset;
  f.by_address = by_address;
  link.inflight[wire_id] = std::move(f);
  send_control(ep, put ? FrameType::Put : FrameType::Get, wire_id, req->remote_region,
               req->remote_generation, r.remote_offset, r.length,
               by_address ? addr_bytes(reinterpret_cast<std::uint64_t>(local)) : std::string());
  if (link.state == PeerLink::State::Failed) return;
  if (put && !by_address && r.length > 0) {
    send_data(link, ep, DataTarget::PutSession, wire_id, local, r.length, nullptr, nullptr);
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
  if (it == link.inflight.end() ||
      (it->second.req->kind != OpKind::Put && it->second.req->kind != OpKind::Get)) {
    return protocol_error(link,
                          "Ack for request " + std::to_string(h.id) + " matches no put or get");
  }
  if (it->second.by_address && errc_from_wire(h.a) == Errc::Unavailable) {
    // The owner's kernel refused single copy: the same range again, as frames.
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

void Protocol::maybe_complete_part(Link& link, std::uint64_t wire_id) {
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
  if (--req->parts_left == 0) detail::complete_request(*req, req->first_error);
}

}  // namespace orbite::p2p
