// The data-path protocol: send/recv matching with MPI ordering per (peer, tag), eager messages
// bounded by credits, rendezvous into the posted buffer (single copy on the same host), and
// put/get checked by the owner before a byte moves.
#include <cstring>

#include "common/log.h"
#include "p2p/shm/vm_copy.h"
#include "p2p/transports.h"

namespace orbite::p2p {

using detail::Inflight;
using detail::OpKind;
using detail::PeerLink;
using detail::SendItem;

namespace {
constexpr std::uint64_t kTcpChunk = 4 * 1024 * 1024;
// From this size on, a same-host rendezvous splits the copy between sender and receiver.
constexpr std::uint64_t kShareMin = 256 * 1024;

std::string addr_bytes(std::uint64_t addr) {
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((addr >> (8 * i)) & 0xff);
  return out;
}
constexpr std::size_t kMaxReorder = 1 << 16;

std::string short_id(const std::string& id) {
  return id.substr(0, 8);
}

}  // namespace

void finish_request(detail::RequestState& req, Status status, Counters& counters) {
  if (req.phase.load(std::memory_order_relaxed) != 0) return;
  if (req.local_pinned) {
    req.local->unpin();
    req.local_pinned = false;
  }
  const bool ok = status.ok();
  req.final_status = std::move(status);
  (ok ? counters.completed : counters.failed)++;
  req.phase.store(ok ? 1 : 2, std::memory_order_release);
}

std::uint64_t Transports::eager_limit(Channel ch) const {
  return ch == Channel::Ring ? config_.shm.eager_limit : config_.tcp.eager_limit;
}

std::uint64_t Transports::chunk_limit(const Link& link, Channel ch) const {
  if (ch == Channel::Ring) return link.tx_ring ? link.tx_ring->max_payload() : 65536;
  return kTcpChunk;
}

void Transports::protocol_error(Link& link, const std::string& what) {
  counters_.protocol_errors++;
  ORBITE_LOG(Error, Tcp) << "protocol error from peer " << short_id(link.ep.id) << " (pid "
                         << link.ep.pid << "): " << what << "; closing its connection";
  fail_link(link, Status::error(Errc::Protocol, "protocol error: " + what));
}

Channel Transports::pick_channel(const Link& link, const Req& req, Status& err) const {
  if (link.is_self) return Channel::Ring;
  switch (req.options.transport) {
    case Transport::Tcp: return Channel::Tcp;
    case Transport::Shm:
      if (!link.has_ring()) {
        err = Status::error(Errc::Unavailable,
                            "transport shm cannot reach peer " + short_id(link.ep.id) + " at " +
                                link.ep.address +
                                (link.same_host ? " (shared memory is disabled or failed)"
                                                : " (it is on another host)"));
      }
      return Channel::Ring;
    default: return link.has_ring() ? Channel::Ring : Channel::Tcp;
  }
}

void Transports::start(ReqPtr req) {
  if (req->options.deadline && std::chrono::steady_clock::now() > *req->options.deadline) {
    finish_request(*req,
                   Status::error(Errc::Timeout,
                                 "the request's deadline passed before it "
                                 "started; nothing moved"),
                   counters_);
    return;
  }
  Link* cached = req->peer->link.load(std::memory_order_acquire);
  if (cached == nullptr) {
    cached = &link_for(req->peer->ep);
    req->peer->link.store(cached, std::memory_order_release);
  }
  Link& link = *cached;
  req->lane_link = &link;
  switch (link.state) {
    case PeerLink::State::Failed:
      finish_request(*req,
                     Status::error(Errc::ConnectionLost,
                                   "peer " + short_id(link.ep.id) + ": " + link.failure.message()),
                     counters_);
      return;
    case PeerLink::State::Established: issue(link, req); return;
    case PeerLink::State::Idle:
      if (req->kind == OpKind::Recv) {
        issue_recv(link, req);  // the sender will connect
        return;
      }
      link.waiting.push_back(req);
      connect(link);
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

void Transports::issue(Link& link, const ReqPtr& req) {
  if (req->phase.load() != 0) return;
  if (req->kind != OpKind::Recv && req->options.deadline &&
      std::chrono::steady_clock::now() > *req->options.deadline) {
    return finish_request(*req,
                          Status::error(Errc::Timeout,
                                        "the request's deadline passed "
                                        "before it started; nothing moved"),
                          counters_);
  }
  if (link.state == PeerLink::State::Failed) {
    // An earlier request of the same batch (waiting for the connection) broke the link.
    return finish_request(*req,
                          Status::error(Errc::ConnectionLost, "peer " + short_id(link.ep.id) +
                                                                  ": " + link.failure.message()),
                          counters_);
  }
  switch (req->kind) {
    case OpKind::Send: return issue_send(link, req);
    case OpKind::Recv: return issue_recv(link, req);
    default: return issue_put_get(link, req);
  }
}

void Transports::send_control(Link& link, Channel ch, FrameType type, std::uint64_t id,
                              std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d,
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
  queue(link, ch, std::move(item), 0);
}

bool Transports::send_data(Link& link, Channel ch, DataTarget target, std::uint64_t id,
                           const std::byte* data, std::uint64_t len, const ReqPtr& req,
                           detail::RegionRecord* pin_each, std::uint64_t base) {
  std::size_t streams = 0;
  if (ch == Channel::Tcp) {
    for (const auto& s : link.streams) streams += (s && s->handshaken) ? 1 : 0;
  }
  std::uint64_t chunk = chunk_limit(link, ch);
  if (streams > 1) chunk = std::max<std::uint64_t>(256 * 1024, std::min(chunk, len / streams + 1));
  if (pin_each != nullptr && len > 0 &&
      !pin_each->pin_many(static_cast<std::int64_t>((len + chunk - 1) / chunk))) {
    return false;
  }
  std::size_t next_stream = 0;
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
    std::size_t stream = 0;
    if (streams > 1) {
      // Round-robin over the streams that completed their handshake.
      do {
        stream = next_stream++ % link.streams.size();
      } while (!link.streams[stream] || !link.streams[stream]->handshaken);
    }
    queue(link, ch, std::move(item), stream);
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

void Transports::issue_send(Link& link, const ReqPtr& req) {
  Status err;
  Channel ch = pick_channel(link, *req, err);
  if (!err.ok()) return finish_request(*req, err, counters_);
  req->channel = ch;
  req->id = next_wire_id_++;
  const std::uint64_t seq = link.send_seq++;
  const std::uint64_t charge = req->length + kFrameHeaderBytes;
  const std::uint64_t comm_tag = pack_comm_tag(req->comm, req->tag);
  if (req->length <= eager_limit(ch) && link.credit >= charge) {
    link.credit -= charge;
    counters_.eager++;
    if (ch == Channel::Ring && link.ring_out.empty()) {
      // The common small message: straight into the ring, complete at once.
      FrameHeader h;
      h.type = FrameType::Eager;
      h.payload_len = static_cast<std::uint32_t>(req->length);
      h.id = req->id;
      h.a = comm_tag;
      h.b = seq;
      h.c = req->length;
      iovec iov{const_cast<std::byte*>(req->src), req->length};
      if (link.tx_ring->try_push(h, std::span<const iovec>(&iov, req->length ? 1 : 0))) {
        counters_.bytes_sent += req->length;
        req->bytes_done.store(req->length, std::memory_order_relaxed);
        ring_doorbell(link);
        return finish_request(*req, {}, counters_);
      }
    }
    link.inflight[req->id] = Inflight{req};
    SendItem item;
    item.header.type = FrameType::Eager;
    item.header.payload_len = static_cast<std::uint32_t>(req->length);
    item.header.id = req->id;
    item.header.a = comm_tag;
    item.header.b = seq;
    item.header.c = req->length;
    item.data = req->src;
    item.data_len = req->length;
    item.req = req;
    item.on_written = SendItem::FinishEager;
    queue(link, ch, std::move(item), 0);
    return;
  }
  link.inflight[req->id] = Inflight{req};
  counters_.rendezvous++;
  const bool single = ch == Channel::Ring && config_.shm.single_copy && vm_copy_usable();
  send_control(link, ch, FrameType::Rts, req->id, comm_tag, seq, req->length,
               single ? reinterpret_cast<std::uint64_t>(req->src) : 0);
}

void Transports::issue_recv(Link& link, const ReqPtr& req) {
  req->id = next_wire_id_++;
  req->lane_link = &link;
  for (auto it = link.unexpected.begin(); it != link.unexpected.end(); ++it) {
    if (it->comm == req->comm && it->tag == req->tag) {
      detail::Arrival a = std::move(*it);
      link.unexpected.erase(it);
      if (a.type == FrameType::Eager)
        consume_eager(link, req, a);
      else
        match_rts(link, req, a);
      return;
    }
  }
  link.posted.push_back(req);
}

void Transports::reject_truncated(Link& link, const ReqPtr& recv, const detail::Arrival& a) {
  Status trunc =
      Status::error(Errc::InvalidArgument,
                    "message truncated: peer " + short_id(link.ep.id) + " sent " +
                        std::to_string(a.length) + " bytes with tag " + std::to_string(a.tag) +
                        " to a receive of " + std::to_string(recv->length) + " bytes");
  send_control(link, a.channel, FrameType::Reject, a.sender_id,
               static_cast<std::uint64_t>(Errc::InvalidArgument), 0, 0, 0, trunc.message());
  finish_request(*recv, trunc, counters_);
}

void Transports::consume_eager(Link& link, const ReqPtr& recv, detail::Arrival& a) {
  counters_.unexpected_bytes -= a.data.size();
  if (a.length > recv->length) {
    reject_truncated(link, recv, a);
  } else {
    if (a.length != 0) std::memcpy(recv->dst, a.data.data(), a.length);
    recv->bytes_done.store(a.length);
    finish_request(*recv, {}, counters_);
  }
  give_buffer(std::move(a.data));
  return_credit(link, a.length + kFrameHeaderBytes, a.channel);
}

void Transports::match_rts(Link& link, const ReqPtr& recv, const detail::Arrival& a) {
  if (a.length > recv->length) {
    reject_truncated(link, recv, a);
    return;
  }
  if (a.sender_addr != 0 && a.channel == Channel::Ring && a.length > 0 && vm_copy_usable()) {
    // Large messages are copied by both sides at once: the sender writes the tail into our
    // buffer while we read the head from its memory, each on its own core.
    std::uint64_t split = a.length;
    recv->channel = a.channel;
    link.inflight[recv->id] = Inflight{recv, 0, a.length};
    if (a.length >= kShareMin && !link.is_self) {
      split = (a.length / 2) & ~std::uint64_t{4095};
      send_control(link, a.channel, FrameType::Share, a.sender_id, recv->id, split, a.length, 0,
                   addr_bytes(reinterpret_cast<std::uint64_t>(recv->dst)));
    }
    Status copied = vm_read(link.ep.pid, recv->dst, a.sender_addr, split);
    if (copied.ok()) {
      counters_.single_copy_bytes += split;
      send_control(link, a.channel, FrameType::Fin, a.sender_id, 0, split);
      return add_received(link, recv->id, split);
    }
    if (copied.code() == Errc::Unavailable) {
      // Refused by the kernel (logged once): the sender sends our part through the ring.
      send_control(link, a.channel, FrameType::Cts, a.sender_id, recv->id, a.length, 0, split);
      return;
    }
    send_control(link, a.channel, FrameType::Reject, a.sender_id,
                 static_cast<std::uint64_t>(copied.code()), 0, 0, 0, copied.message());
    // With a split, the sender's ShareDone is still to come: the request ends with it.
    return add_received(link, recv->id, split, copied);
  }
  recv->channel = a.channel;
  send_control(link, a.channel, FrameType::Cts, a.sender_id, recv->id, a.length);
  if (a.length == 0) {
    recv->bytes_done.store(0);
    finish_request(*recv, {}, counters_);
    return;
  }
  link.inflight[recv->id] = Inflight{recv, 0, a.length};
}

void Transports::return_credit(Link& link, std::uint64_t bytes, Channel ch) {
  link.eager_outstanding -= std::min(link.eager_outstanding, bytes);
  link.credit_owed += bytes;
  if (link.credit_owed >= link.credit_window / 4 && link.state == PeerLink::State::Established) {
    if (!link.has_ring()) ch = Channel::Tcp;
    send_control(link, ch, FrameType::Credit, 0, link.credit_owed);
    link.credit_owed = 0;
  }
}

bool Transports::try_match_arrival(Link& link, detail::Arrival& a) {
  for (auto it = link.posted.begin(); it != link.posted.end(); ++it) {
    if ((*it)->comm == a.comm && (*it)->tag == a.tag) {
      ReqPtr recv = std::move(*it);
      link.posted.erase(it);
      if (a.type == FrameType::Eager)
        consume_eager(link, recv, a);
      else
        match_rts(link, recv, a);
      return true;
    }
  }
  return false;
}

void Transports::deliver_arrival(Link& link, detail::Arrival&& a) {
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
      if (a.type == FrameType::Eager) {
        const auto now = counters_.unexpected_bytes += a.data.size();
        if (now > counters_.unexpected_peak) counters_.unexpected_peak = now;
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

}  // namespace orbite::p2p
