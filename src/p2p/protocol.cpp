// The data-path protocol: routes, send/recv matching with MPI ordering per (peer, tag), eager
// messages bounded by credits, and rendezvous into the posted buffer (single copy where the
// endpoint has one-sided access). Every frame goes through a PeerEndpoint.
#include "p2p/protocol.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "p2p/select.h"
#include "p2p/stream.h"
#include "p2p/transports.h"

namespace orbite::p2p {

using detail::Inflight;
using detail::OpKind;
using detail::PeerLink;
using detail::SendItem;

namespace {
// From this size on, a rendezvous with one-sided access splits the copy between both sides.
constexpr std::uint64_t kShareMin = 256 * 1024;
constexpr std::size_t kMaxReorder = 1 << 16;

}  // namespace

Result<PeerEndpoint*> Protocol::route(Link& link, const Req& req) {
  const bool host = (!req.local || req.local->kind == MemoryKind::Host) && !req.device;
  const bool rma = req.kind == OpKind::Put || req.kind == OpKind::Get;
  if (!rma && req.options.transport == Transport::Nvlink) return nvlink_message_route(link);
  const auto wanted = static_cast<std::size_t>(req.options.transport);
  if (host && !rma && link.host_routes[wanted] != nullptr) return link.host_routes[wanted];
  if (host && rma && link.rma_routes[wanted].endpoint != nullptr &&
      link.rma_routes[wanted].target_transports == req.remote_transports) {
    return link.rma_routes[wanted].endpoint;
  }
  RouteQuery q;
  q.rma = rma;
  q.target_transports = req.remote_transports;
  q.requested = req.options.transport;
  q.memory = (req.local && req.local->kind == MemoryKind::Cuda) || req.device ? MemoryKind::Cuda
                                                                              : MemoryKind::Host;
  q.is_self = link.is_self;
  q.same_host = link.same_host;
  for (std::size_t i = 0; i < kTransportCount; ++i) {
    q.built[i] = transports_[i] != nullptr;
    q.open[i] = link.endpoints[i] ? &link.endpoints[i]->caps() : nullptr;
    for (MemoryKind k : {MemoryKind::Host, MemoryKind::Cuda}) {
      const Backing b = backing_on(static_cast<TransportId>(i), k);
      if (b != Backing::Refused && b != Backing::Absent) {
        q.carries[i] |= static_cast<std::uint8_t>(1u << static_cast<unsigned>(k));
      }
    }
  }
  q.peer_id = link.ep.id;
  q.peer_address = link.ep.address;
  ORBITE_ASSIGN_OR_RETURN(TransportId id, select_route(q));
  PeerEndpoint* ep = link.endpoint(id);
  if (host && link.up()) {
    if (rma) {
      link.rma_routes[wanted] = {req.remote_transports, ep};
    } else {
      link.host_routes[wanted] = ep;
    }
  }
  return ep;
}

void Protocol::count_sent(const PeerEndpoint& ep, std::uint64_t payload) {
  TransportCounters& c = counters_.of(ep.id());
  bump(c.frames_sent, 1);
  bump(c.bytes_sent, payload);
}

void Protocol::start(ReqPtr req) {
  if (req->ticket_of) return post_any_source(req->ticket_of);
  if (req->any_source) return post_any_source(req);
  if (req->options.deadline && std::chrono::steady_clock::now() > *req->options.deadline) {
    return detail::complete_request(
        *req, Status::error(Errc::Timeout,
                            "the request's deadline passed before it started; nothing moved"));
  }
  PeerLink* cached = req->peer->link.load(std::memory_order_acquire);
  if (cached == nullptr) {
    cached = &link_for(req->peer->ep);
    req->peer->link.store(cached, std::memory_order_release);
  }
  Link& link = *cached;
  req->lane_link = &link;
  switch (link.state) {
    case PeerLink::State::Failed:
      if (req->kind == OpKind::Recv) return recv_on_failed(link, req);
      return detail::complete_request(
          *req, Status::error(Errc::ConnectionLost,
                              "peer " + short_id(link.ep.id) + ": " + link.failure.message()));
    case PeerLink::State::Established: issue(link, req); return;
    case PeerLink::State::Idle:
      if (req->kind == OpKind::Recv) {
        // Matched when the sender's message arrives; connecting now as well means a peer that
        // died before it ever connected fails this receive (connection refused or the handshake
        // lost) instead of leaving it waiting with nothing to notice the death. Crossing
        // connections from both ends resolve as for two senders.
        issue_recv(link, req);
        if (link.state == PeerLink::State::Idle) control_->connect(link);
        return;
      }
      link.waiting.push_back(req);
      control_->connect(link);
      return;
    default:
      if (req->kind == OpKind::Recv) {
        issue_recv(link, req);
        return;
      }
      link.waiting.push_back(req);
      return;
  }
}

void Protocol::issue(Link& link, const ReqPtr& req) {
  if (req->phase.load() != 0) return;
  if (req->kind != OpKind::Recv && req->options.deadline &&
      std::chrono::steady_clock::now() > *req->options.deadline) {
    return detail::complete_request(
        *req, Status::error(Errc::Timeout,
                            "the request's deadline passed before it started; nothing moved"));
  }
  if (link.state == PeerLink::State::Failed) {
    // An earlier request of the same batch (waiting for the connection) broke the link.
    if (req->kind == OpKind::Recv) return recv_on_failed(link, req);
    return detail::complete_request(
        *req, Status::error(Errc::ConnectionLost,
                            "peer " + short_id(link.ep.id) + ": " + link.failure.message()));
  }
  switch (req->kind) {
    case OpKind::Send: return issue_send(link, req);
    case OpKind::Recv: return issue_recv(link, req);
    default: return issue_put_get(link, req);
  }
}

void Protocol::send_control(PeerEndpoint& ep, FrameType type, std::uint64_t id, std::uint64_t a,
                            std::uint64_t b, std::uint64_t c, std::uint64_t d,
                            std::string payload) {
  SendItem item;
  item.header.type = type;
  item.header.id = id;
  item.header.a = a;
  item.header.b = b;
  item.header.c = c;
  item.header.d = d;
  if (payload.size() > kMaxControlPayload) payload.resize(kMaxControlPayload);
  item.header.payload_len = static_cast<std::uint32_t>(payload.size());
  item.owned = std::move(payload);
  ep.send(std::move(item));
}

bool Protocol::send_data(Link& link, PeerEndpoint& ep, DataTarget target, std::uint64_t id,
                         const std::byte* data, std::uint64_t len, const ReqPtr& req,
                         detail::RegionRecord* pin_each, std::uint64_t base) {
  // A put session opens with its Put frame, on the endpoint's first path: its Data must not
  // overtake it on another stream. Receives and get replies are registered before their Data can
  // be asked for, so theirs may spread.
  const std::size_t paths = target == DataTarget::PutSession ? 1 : ep.paths();
  std::uint64_t chunk = ep.caps().max_frame_payload;
  if (paths > 1) chunk = std::max<std::uint64_t>(256 * 1024, std::min(chunk, len / paths + 1));
  if (pin_each != nullptr && len > 0 &&
      !pin_each->pin_many(static_cast<std::int64_t>((len + chunk - 1) / chunk))) {
    return false;
  }
  std::uint32_t path = 0;
  for (std::uint64_t off = 0; off < len; off += chunk) {
    const std::uint64_t n = std::min(chunk, len - off);
    SendItem item;
    item.header.type = FrameType::Data;
    item.header.id = id;
    item.header.a = static_cast<std::uint64_t>(target);
    item.header.b = base + off;
    item.header.payload_len = static_cast<std::uint32_t>(n);
    item.data = data + base + off;
    item.data_len = n;
    if (req) {
      item.req = req;
      item.on_written = SendItem::SendProgress;
    }
    item.pinned = pin_each;
    item.path = paths > 1 ? path++ : 0;  // spread over the endpoint's paths, round-robin
    ep.send(std::move(item));
    if (link.state == PeerLink::State::Failed) {
      // Items not yet queued still hold their pins.
      if (pin_each != nullptr) {
        for (std::uint64_t rest = off + n; rest < len; rest += chunk) pin_each->unpin();
      }
      return false;
    }
  }
  return true;
}

void Protocol::frame_written(PeerEndpoint& ep, SendItem& item) {
  count_sent(ep, item.header.payload_len);
  bump(counters_.bytes_sent, item.data_len);
  if (item.pinned != nullptr) {
    item.pinned->unpin();
    item.pinned = nullptr;
  }
  if (!item.req || item.on_written == SendItem::Nothing) return;
  Req& req = *item.req;
  if (req.phase.load() != 0) return;
  if (item.on_written == SendItem::FinishEager) {
    req.bytes_done.store(req.length);
    if (req.lane_link != nullptr) req.lane_link->inflight.erase(req.id);
    detail::complete_request(req, {});
  } else if (item.on_written == SendItem::SendProgress && req.lane_link != nullptr) {
    add_received(*req.lane_link, req.id, item.data_len);
  }
}

Result<PeerEndpoint*> Protocol::nvlink_message_route(Link& link) {
  // cuda_ipc carries no frames: a message forced onto nvlink sends its frames over shm, and its
  // payload (always exposed: device memory never goes eager) is read device to device over
  // cuda_ipc by the receiver (read_exposed_over_ipc).
  const std::string peer = "peer " + link.ep.id.substr(0, 8);
  if (link.endpoint(TransportId::CudaIpc) == nullptr) {
    return Status::error(Errc::Unavailable, "transport nvlink: no cuda_ipc endpoint to " + peer +
                                                (link.same_host ? "" : " (another host)"));
  }
  PeerEndpoint* frames = link.endpoint(TransportId::Shm);
  if (frames == nullptr) {
    return Status::error(Errc::Unavailable,
                         "transport nvlink: messages need shm for their "
                         "frames beside cuda_ipc, and there is none to " +
                             peer);
  }
  return frames;
}

void Protocol::issue_send(Link& link, const ReqPtr& req) {
  auto routed = route(link, *req);
  if (!routed.ok()) return detail::complete_request(*req, routed.status());
  PeerEndpoint& ep = **routed;
  req->endpoint = &ep;
  req->id = next_wire_id_++;
  const std::uint64_t seq = link.send_seq++;
  const std::uint64_t charge = req->length + kFrameHeaderBytes;
  const std::uint64_t comm_tag = pack_comm_tag(req->comm, req->tag);
  // Device memory never goes eager (no CPU copy reaches it): the receiver reads it, as a host
  // buffer too large for eager is read when the route carries host memory staged.
  if (!req->device && req->length <= ep.caps().eager_limit && link.credit >= charge) {
    link.credit -= charge;
    bump(counters_.eager);
    FrameHeader h;
    h.type = FrameType::Eager;
    h.payload_len = static_cast<std::uint32_t>(req->length);
    h.id = req->id;
    h.a = comm_tag;
    h.b = seq;
    h.c = req->length;
    // The common small message: handed over at once where the endpoint can, complete at once.
    iovec iov{const_cast<std::byte*>(req->src), req->length};
    if (ep.send_now(h, std::span<const iovec>(&iov, req->length ? 1 : 0))) {
      count_sent(ep, req->length);
      bump(counters_.bytes_sent, req->length);
      req->bytes_done.store(req->length, std::memory_order_relaxed);
      return detail::complete_request(*req, {});
    }
    link.inflight[req->id] = Inflight{req};
    SendItem item;
    item.header = h;
    item.data = req->src;
    item.data_len = req->length;
    item.req = req;
    item.on_written = SendItem::FinishEager;
    ep.send(std::move(item));
    return;
  }
  if (needs_exposure(*req, ep)) return send_exposed_rts(link, ep, req, comm_tag, seq);
  link.inflight[req->id] = Inflight{req};
  bump(counters_.rendezvous);
  if (announce_rma(link, ep, *req)) {
    // The write's request follows the announcement at once: the receiver sends no Cts.
    link.inflight[req->id].announced = true;
    send_control(ep, FrameType::RtsRma, req->id, comm_tag, seq, req->length);
    return rendezvous_rma(link, req, ep, 0, true, 0, req->length);
  }
  const bool single = ep.one_sided_usable();
  send_control(ep, FrameType::Rts, req->id, comm_tag, seq, req->length,
               single ? reinterpret_cast<std::uint64_t>(req->src) : 0);
}

void Protocol::issue_recv(Link& link, const ReqPtr& req) {
  req->id = next_wire_id_++;
  req->lane_link = &link;
  for (auto it = link.unexpected.begin(); it != link.unexpected.end(); ++it) {
    if (it->comm == req->comm && detail::tag_matches(req->tag, it->tag)) {
      detail::Arrival a = std::move(*it);
      link.unexpected.erase(it);
      if (a.type != FrameType::Eager) --link.unexpected_rts;
      return deliver_matched(link, req, a);
    }
  }
  req->post_order = ++post_order_;
  link.posted.push_back(req);
}

void Protocol::deliver_matched(Link& link, const ReqPtr& recv, detail::Arrival& a) {
  recv->matched_tag = a.tag;
  // Left from a connection that failed (its endpoint is gone): delivered as on a failed link.
  if (a.endpoint == nullptr) return deliver_after_failure(link, recv, a);
  if (a.type == FrameType::Eager) return consume_eager(link, recv, a);
  match_rts(link, recv, a);
}

Status Protocol::truncation(const Link& link, const Req& recv, const detail::Arrival& a) {
  return Status::error(Errc::InvalidArgument,
                       "message truncated: peer " + short_id(link.ep.id) + " sent " +
                           std::to_string(a.length) + " bytes with tag " + std::to_string(a.tag) +
                           " to a receive of " + std::to_string(recv.length) + " bytes");
}

void Protocol::reject_truncated(Link& link, const ReqPtr& recv, const detail::Arrival& a) {
  Status trunc = truncation(link, *recv, a);
  send_control(*a.endpoint, FrameType::Reject, a.sender_id,
               static_cast<std::uint64_t>(Errc::InvalidArgument), 0, 0, 0, trunc.message());
  detail::complete_request(*recv, trunc);
}

void Protocol::recv_on_failed(Link& link, const ReqPtr& req) {
  req->id = next_wire_id_++;
  for (auto it = link.unexpected.begin(); it != link.unexpected.end(); ++it) {
    if (it->comm != req->comm || !detail::tag_matches(req->tag, it->tag)) continue;
    detail::Arrival a = std::move(*it);
    link.unexpected.erase(it);
    if (a.type != FrameType::Eager) --link.unexpected_rts;
    req->matched_tag = a.tag;
    return deliver_after_failure(link, req, a);
  }
  detail::complete_request(
      *req, Status::error(Errc::ConnectionLost,
                          "peer " + short_id(link.ep.id) + ": " + link.failure.message()));
}

void Protocol::deliver_after_failure(Link& link, const ReqPtr& req, detail::Arrival& a) {
  const std::string peer = "peer " + short_id(link.ep.id) + ": ";
  drop(counters_.unexpected_bytes, a.data.size());
  Status result;
  if (a.type != FrameType::Eager) {
    result = Status::error(Errc::ConnectionLost,
                           peer + "its message of " + std::to_string(a.length) +
                               " bytes was announced, but the connection was lost before it "
                               "moved: " +
                               link.failure.message());
  } else if (a.length > req->length) {
    result = Status::error(Errc::InvalidArgument,
                           "message truncated: " + peer + "sent " + std::to_string(a.length) +
                               " bytes with tag " + std::to_string(a.tag) + " to a receive of " +
                               std::to_string(req->length) + " bytes");
  } else if (req->device) {
    result = copy_into_device(req, reinterpret_cast<const std::byte*>(a.data.data()), a.length);
    if (result.ok()) req->bytes_done.store(a.length);
  } else {
    if (a.length != 0) std::memcpy(req->dst, a.data.data(), a.length);
    req->bytes_done.store(a.length);
  }
  give_buffer(std::move(a.data));
  detail::complete_request(*req, result);
}

void Protocol::consume_eager(Link& link, const ReqPtr& recv, detail::Arrival& a) {
  drop(counters_.unexpected_bytes, a.data.size());
  if (a.length > recv->length) {
    reject_truncated(link, recv, a);
  } else if (recv->device) {
    Status copied =
        copy_into_device(recv, reinterpret_cast<const std::byte*>(a.data.data()), a.length);
    if (copied.ok()) recv->bytes_done.store(a.length);
    detail::complete_request(*recv, copied);
  } else {
    if (a.length != 0) std::memcpy(recv->dst, a.data.data(), a.length);
    recv->bytes_done.store(a.length);
    detail::complete_request(*recv, {});
  }
  give_buffer(std::move(a.data));
  return_credit(link, a.length + kFrameHeaderBytes, *a.endpoint);
}

void Protocol::match_rts(Link& link, const ReqPtr& recv, const detail::Arrival& a) {
  if (a.type == FrameType::RtsRma) return match_rts_rma(link, recv, a);
  if (a.length > recv->length) {
    reject_truncated(link, recv, a);
    return;
  }
  PeerEndpoint& ep = *a.endpoint;
  if (a.exposed_region != 0) {
    return read_exposed(link, ep, recv, a.sender_id, a.length, a.exposed_region,
                        a.exposed_generation, a.exposed_staged, a.exposed_chunk);
  }
  // Device memory (or host memory the route stages) is not written by the sender: the
  // receiver asks to read the sender's buffer instead.
  if (a.length > 0 && needs_exposure(*recv, ep)) return ask_exposure(link, recv, a);
  recv->endpoint = &ep;
  if (a.sender_addr != 0 && a.length > 0 && ep.one_sided_usable()) {
    // Large messages are copied by both sides at once: the sender writes the tail into our
    // buffer while we read the head from its memory, each on its own core.
    std::uint64_t split = a.length;
    link.inflight[recv->id] = Inflight{recv, 0, a.length};
    if (a.length >= kShareMin && !link.is_self) {
      split = (a.length / 2) & ~std::uint64_t{4095};
      send_control(ep, FrameType::Share, a.sender_id, recv->id, split, a.length, 0,
                   addr_bytes(reinterpret_cast<std::uint64_t>(recv->dst)));
    }
    Status copied = ep.read_peer(recv->dst, a.sender_addr, split);
    if (copied.ok()) {
      bump(counters_.single_copy_bytes, split);
      bump(counters_.of(ep.id()).bytes_received, split);
      send_control(ep, FrameType::Fin, a.sender_id, 0, split);
      return add_received(link, recv->id, split);
    }
    if (copied.code() == Errc::Unavailable) {
      // Refused by the kernel (logged once): the sender sends our part as frames.
      send_control(ep, FrameType::Cts, a.sender_id, recv->id, a.length, 0, split);
      return;
    }
    send_control(ep, FrameType::Reject, a.sender_id, static_cast<std::uint64_t>(copied.code()), 0,
                 0, 0, copied.message());
    // With a split, the sender's ShareDone is still to come: the request ends with it.
    return add_received(link, recv->id, split, copied);
  }
  if (a.length == 0) {
    send_control(ep, FrameType::Cts, a.sender_id, recv->id, a.length);
    recv->bytes_done.store(0);
    detail::complete_request(*recv, {});
    return;
  }
  // In flight before the Cts leaves: a transport that fails the link while sending it (a frame
  // post refused) fails this receive with the link's other requests (fail_inflight_of); entered
  // after, the receive would wait on a failed link for good (found by the fault campaign).
  link.inflight[recv->id] = Inflight{recv, 0, a.length};
  send_control(ep, FrameType::Cts, a.sender_id, recv->id, a.length);
}

void Protocol::return_credit(Link& link, std::uint64_t bytes, PeerEndpoint& ep) {
  link.eager_outstanding -= std::min(link.eager_outstanding, bytes);
  link.credit_owed += bytes;
  if (link.credit_owed >= link.credit_window / 4 && link.state == PeerLink::State::Established) {
    send_control(ep, FrameType::Credit, 0, link.credit_owed);
    link.credit_owed = 0;
  }
}

Protocol::ReqPtr Protocol::take_receive(Link& link, std::uint32_t comm, std::int32_t tag) {
  auto it = std::find_if(link.posted.begin(), link.posted.end(), [&](const ReqPtr& r) {
    return r->comm == comm && detail::tag_matches(r->tag, tag);
  });
  // A receive from any source posted before the first specific one that matches goes first.
  if (!wildcards_.empty()) {
    const std::uint64_t before = it == link.posted.end() ? ~std::uint64_t{0} : (*it)->post_order;
    if (ReqPtr recv = take_any_source(link, comm, tag, before)) return recv;
  }
  if (it == link.posted.end()) return nullptr;
  ReqPtr recv = std::move(*it);
  link.posted.erase(it);
  recv->matched_tag = tag;
  return recv;
}

bool Protocol::try_match_arrival(Link& link, detail::Arrival& a) {
  ReqPtr recv = take_receive(link, a.comm, a.tag);
  if (!recv) return false;
  deliver_matched(link, recv, a);
  return true;
}

void Protocol::deliver_arrival(Link& link, detail::Arrival&& a) {
  if (a.seq != link.recv_seq) {
    if (a.seq < link.recv_seq || link.reorder.size() >= kMaxReorder ||
        link.reorder.count(a.seq) != 0) {
      return protocol_error(link, "message sequence " + std::to_string(a.seq) +
                                      " while expecting " + std::to_string(link.recv_seq));
    }
    link.reorder.emplace(a.seq, std::move(a));
    return;
  }
  for (;;) {
    link.recv_seq++;
    if (!try_match_arrival(link, a)) {
      if (a.type != FrameType::Eager && link.unexpected_rts >= kMaxUnexpectedRts) {
        return protocol_error(link, "more than " + std::to_string(kMaxUnexpectedRts) +
                                        " rendezvous announcements (Rts) wait for receives: the "
                                        "peer exceeded the unmatched-Rts limit");
      }
      if (a.type != FrameType::Eager) ++link.unexpected_rts;
      if (a.type == FrameType::Eager) {
        const auto now = bump(counters_.unexpected_bytes, a.data.size());
        if (now > counters_.unexpected_peak.load(std::memory_order_relaxed)) {
          counters_.unexpected_peak.store(now, std::memory_order_relaxed);
        }
      }
      link.unexpected.push_back(std::move(a));
    }
    if (link.state != PeerLink::State::Established && link.state != PeerLink::State::Idle) return;
    auto next = link.reorder.find(link.recv_seq);
    if (next == link.reorder.end()) return;
    a = std::move(next->second);
    link.reorder.erase(next);
  }
}

void Protocol::add_received(Link& link, std::uint64_t id, std::uint64_t bytes,
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
  if (f.announced_by != 0) settle_announced(link, f, result);
  link.inflight.erase(it);
  if (result.ok()) req->bytes_done.store(total);
  withdraw(req);  // an exposed send's region goes before the send completes
  detail::complete_request(*req, result);
}

void Protocol::fail_inflight_of(Link& link, const Status& why) {
  auto inflight = std::move(link.inflight);
  link.inflight.clear();
  for (auto& [id, f] : inflight) {
    if (f.part) {
      if (f.part_done) f.part_done(why);  // a put/get part: its request (or chunk) decides
      continue;
    }
    withdraw(f.req);
    detail::complete_request(*f.req, why);
  }
  for (auto& req : link.waiting) detail::complete_request(*req, why);
  link.waiting.clear();
  for (auto& req : link.posted) detail::complete_request(*req, why);
  link.posted.clear();
  // Messages that arrived whole stay receivable (recv_on_failed), as do the announcements of the
  // others, so that a later receive never overtakes one of them; their endpoints are gone.
  for (auto& a : link.unexpected) a.endpoint = nullptr;
  link.reorder.clear();
  link.sessions.clear();
  link.announced.clear();
}

}  // namespace orbite::p2p
