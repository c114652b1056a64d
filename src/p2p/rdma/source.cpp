// The source's grants: the source-role end of a requester's slot, the checks of a grant request,
// the reservations (budgets, receipt slots, the exact range lock, windows), the binds, the
// publication, the receipts checked field by field, and the close (READY) or revocation.
#include <algorithm>
#include <csignal>
#include <cstring>
#include <random>

#include "common/log.h"
#include "p2p/rdma/lane.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

namespace {

std::uint64_t random_u64() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

}  // namespace

void RdmaLane::on_qp_connect(PeerRdma& peer, const QpConnect& m) {
  QpAccept reply;
  reply.builder = m.builder;
  auto refuse = [&](const Status& st) {
    reply.errc = static_cast<std::uint32_t>(st.code());
    reply.reason = st.message();
    send(peer, ControlKind::QpAccept, encode(reply));
  };
  const auto& contexts = engine_->contexts();
  std::size_t context = contexts.size();
  for (std::size_t c = 0; c < contexts.size(); ++c) {
    if (contexts[c]->nic_id == m.qp.remote_nic && cqs_[c]) context = c;
  }
  // The link's width bounds the slots a peer may open here: every one charges the engine-wide
  // endpoint and CQ budgets, which one peer must not spend for everyone.
  if (m.slot >= peer.width && m.slot != kMessageSlot) {
    return refuse(Status::error(Errc::InvalidArgument,
                                "QpConnect slot " + std::to_string(m.slot) +
                                    " is beyond this link's " + std::to_string(peer.width) +
                                    " QP slots (the smaller rdma.num_lanes of the two engines) and "
                                    "is not the message slot " +
                                    std::to_string(kMessageSlot)));
  }
  const NicRecord* nic = peer.nic(m.qp.nic_id);
  if (context == contexts.size() || nic == nullptr) {
    return refuse(Status::error(
        Errc::Unavailable, "no usable RDMA context with NIC id " + std::to_string(m.qp.remote_nic) +
                               " (or the requester's NIC " + std::to_string(m.qp.nic_id) +
                               " is unknown)"));
  }
  const auto key = std::make_tuple(static_cast<std::uint8_t>(m.qp.nic_id),
                                   static_cast<std::uint8_t>(m.qp.remote_nic), m.slot);
  if (auto old = peer.sources.find(key); old != peer.sources.end()) {
    // The requester rebuilt the slot: the old end goes, with whatever was granted through it.
    on_qp_retire(peer, QpRetire{m.slot, old->second.incarnation});
  }
  auto made = new_qp(context, QpRole::Source, peer, m.slot);
  if (!made.ok()) return refuse(made.status());
  Qp& q = **made;
  q.psn = static_cast<std::uint32_t>(random_u64() & 0xffffff);
  if (q.message) {
    // The peer's frames arrive here: no READ in either direction.
    q.dest_rd_atomic = 0;
    q.rd_atomic = 0;
  } else {
    q.dest_rd_atomic = clamp_rd_depth(cfg_.max_dest_rd_atomic, q.ctx->limits.max_qp_rd_atom);
    q.rd_atomic = clamp_rd_depth(cfg_.max_rd_atomic, q.ctx->limits.max_qp_init_rd_atom);
  }
  Status st = post_receives(q);
  if (st.ok()) {
    st = connect_rc_qp(*q.ctx, q.qp, remote_end(*nic, m.qp.qpn, m.qp.psn), q.psn, q.rd_atomic,
                       q.dest_rd_atomic);
  }
  if (!st.ok()) {
    retire_qp(q.handle);
    return refuse(st);
  }
  q.ready = true;
  q.remote_qpn = m.qp.qpn;
  q.remote_incarnation = m.qp_incarnation;
  peer.sources[key] = SourceSlot{q.handle, q.incarnation};
  ORBITE_LOG(Debug, Rdma) << q.ctx->name << ": QP " << q.qp->qp_num << " (slot " << m.slot
                          << ", source) connected to the peer's QP " << m.qp.qpn;
  reply.qp_incarnation = q.incarnation;
  reply.qp = QpEndpointInfo{q.qp->qp_num, q.psn,       m.qp.remote_nic,
                            m.qp.nic_id,  q.rd_atomic, q.dest_rd_atomic};
  send(peer, ControlKind::QpAccept, encode(reply));
}

void RdmaLane::on_qp_retire(PeerRdma& peer, const QpRetire& m) {
  for (auto it = peer.sources.begin(); it != peer.sources.end(); ++it) {
    if (std::get<2>(it->first) != m.slot || it->second.incarnation != m.qp_incarnation) continue;
    const std::uint16_t handle = it->second.qp_handle;
    std::vector<std::uint64_t> hit;
    for (const auto& [id, g] : peer.grants) {
      for (const auto& s : g.segments) {
        if (s.qp_handle == handle) {
          hit.push_back(id);
          break;
        }
      }
    }
    for (std::uint64_t id : hit) {
      close_grant(peer, id,
                  Status::error(Errc::ConnectionLost,
                                "the requester retired the connection; effect unknown"),
                  true);
    }
    retire_qp(handle);
    peer.sources.erase(it);
    return;
  }
  // Already gone (both sides may retire a failed pair): nothing to do.
}

void RdmaLane::on_grant_cancel(PeerRdma& peer, const GrantCancel& m) {
  auto it = peer.grants.find(m.grant);
  if (it == peer.grants.end() || it->second.generation != m.generation ||
      it->second.parent != m.parent) {
    return;  // closed already (expired, or its connection failed): its GrantAck went that way
  }
  for (const GrantSegment& s : it->second.segments) {
    if (s.receipted) {
      return protocol_error(peer, "GrantCancel for grant " + std::to_string(m.grant) +
                                      " after a receipt of its payload");
    }
  }
  close_grant(peer, m.grant,
              Status::error(Errc::Timeout,
                            "the requester's deadline passed before its payload; the grant was "
                            "released without payload"),
              true);
}

void RdmaLane::defer(PeerRdma& peer, const GrantRequest& m) {
  if (peer.deferred.size() >= kMaxPendingGrantRequests) {
    // A conforming requester never has that many unanswered (see kMaxPendingGrantRequests):
    // the queue, and the passes that retry it, stay bounded.
    return protocol_error(peer, "more than " + std::to_string(kMaxPendingGrantRequests) +
                                    " GrantRequests of this peer waiting (parent " +
                                    std::to_string(m.parent) + ")");
  }
  // Counted once however often it waits, by its own mark (a pass may also take new requests).
  if (!m.deferred) add(engine_->counters().grant_requests_deferred);
  peer.deferred.push_back(m);
  peer.deferred.back().deferred = true;
}

void RdmaLane::on_grant_request(PeerRdma& peer, const GrantRequest& m) {
  bool receive_matched = false;  // a rendezvous target was found: a refusal fails it too
  auto nack = [&](Errc code, const std::string& why, bool cache_miss = false) {
    if (receive_matched && code == Errc::ResourceExhausted) {
      // A message is not refused for want of slots or budget, as a put would be: it waits here
      // (FIFO) until grants end, so back-pressure slows the sender instead of failing it.
      defer(peer, m);
      return;
    }
    if (receive_matched && !cache_miss) {  // a cache miss is retried: the receive waits
      handler_.rendezvous_done(*peer.link, m.target, 0,
                               Status::error(code, "the RDMA rendezvous was refused here: " + why));
    }
    add(engine_->counters().grant_nacks);
    send(peer, ControlKind::GrantNack,
         encode(GrantNack{m.parent, static_cast<std::uint32_t>(code),
                          static_cast<std::uint8_t>(cache_miss ? 1 : 0), why}));
  };
  if (hooks_.kill_on_grant_request) ::raise(SIGKILL);  // test hook: dies before the grant
  if (hooks_.retire_source_once && !m.segments.empty()) {
    // Test hook: the slot's QP went away between the connect and this request.
    hooks_.retire_source_once = false;
    for (auto& [key, src] : peer.sources) {
      if (std::get<2>(key) == m.segments.front().slot) retire_qp(src.qp_handle);
    }
  }
  if (m.link_incarnation != peer.my_link_incarnation) {
    return protocol_error(peer, "GrantRequest for link incarnation " +
                                    std::to_string(m.link_incarnation) + ", this link is " +
                                    std::to_string(peer.my_link_incarnation));
  }
  for (const auto& [id, g] : peer.grants) {
    if (g.parent == m.parent) {
      return protocol_error(peer, "a second GrantRequest for parent " + std::to_string(m.parent));
    }
  }
  if (Status st = check_tiling(m); !st.ok()) return protocol_error(peer, st.message());
  const bool to_receive = (m.op & kOpToReceive) != 0;
  const bool write = (m.op & ~kOpToReceive) == kOpWrite;
  if (!to_receive && Clock::now() >= m.local_deadline) {
    // Deferred past the requester's deadline (a rendezvous has none: its receive matched it).
    return nack(Errc::Timeout,
                "the request's deadline passed while it waited at the source; "
                "nothing was granted");
  }
  if (hooks_.defer_deadlined && !to_receive && m.deadline_us != 0) return defer(peer, m);
  ORBITE_LOG(Debug, Rdma) << "GrantRequest: parent " << m.parent
                          << (to_receive ? ", receive " : ", region ") << m.target << " ["
                          << m.offset << ", +" << m.length << ") " << (write ? "WRITE" : "READ")
                          << ", " << m.segments.size() << " segment(s)";
  for (const SegmentRequest& s : m.segments) {
    if (s.slot == kMessageSlot) {
      return protocol_error(peer, "GrantRequest names the message QP's slot");
    }
  }
  Result<std::shared_ptr<detail::RegionRecord>> region = std::shared_ptr<detail::RegionRecord>();
  std::shared_ptr<detail::RequestState> receive;
  if (to_receive) {
    // A rendezvous: the target is a receive the protocol matched to this peer's message.
    auto target = handler_.rendezvous_target(*peer.link, m.target, m.offset, m.length);
    if (!target.ok()) return nack(target.status().code(), target.status().message());
    receive_matched = true;
    if (m.target_generation != 0) {
      return nack(Errc::InvalidArgument, "a rendezvous GrantRequest with a target generation");
    }
    auto record = std::make_shared<detail::RegionRecord>();
    record->id = m.target;
    record->base = target->buffer;
    record->length = target->length;
    record->access = Access{false, true};
    region = std::move(record);
    receive = std::move(target->keepalive);
  } else {
    region = regions_.authorize(m.target, m.target_generation, m.offset, m.length, write,
                                p2p::TransportId::Rdma);
  }
  if (!region.ok()) return nack(region.status().code(), region.status().message());
  if (m.length == 0) {
    // Nothing to move: the checks above are the whole answer.
    send(peer, ControlKind::GrantAck, encode(GrantAck{m.parent, 0, 0, 0, 0, {}}));
    return;
  }
  // Every segment's QP: the current incarnation of a ready source-role end, connected to the
  // QP the requester names. Anything else happened before authority existed: a cache miss.
  std::vector<Qp*> qps;
  std::vector<std::size_t> contexts;  // each segment's (its QP's), so a grant may span rails
  for (const SegmentRequest& s : m.segments) {
    Qp* q = nullptr;
    for (const auto& [key, src] : peer.sources) {
      if (std::get<2>(key) == s.slot && src.incarnation == s.qp_incarnation) q = qp(src.qp_handle);
    }
    if (q == nullptr || !q->ready || q->broken || q->remote_qpn != s.requester_qpn) {
      return nack(Errc::Unavailable,
                  "the connection of slot " + std::to_string(s.slot) +
                      " is not (or no longer) established here",
                  true);
    }
    std::size_t context = 0;
    for (std::size_t c = 0; c < cqs_.size(); ++c) {
      if (cqs_[c].get() == q->cqs) context = c;
    }
    qps.push_back(q);
    contexts.push_back(context);
  }
  detail::RegionRecord& r = **region;
  if (to_receive && range_locks().would_conflict(
                        reinterpret_cast<std::uintptr_t>(r.base + m.offset), m.length, true)) {
    // Another access holds the receive's range (receives posted into one buffer): wait before
    // registering anything, so that each retry costs a lookup, not an MR.
    defer(peer, m);
    return;
  }
  if (to_receive) {
    // Engine-owned memory (collective scratch) uses the MR cache's registration. A user's posted
    // buffer is registered for this grant alone, over exactly the granted range: on the one rail
    // its segments use, or on every usable context when they span rails.
    std::unique_ptr<MrSet> mrs;
    if (auto cached = cache_->find(r.base + m.offset, m.length)) {
      mrs = MrSet::view_of(std::move(cached));
    } else {
      const bool one_rail = std::all_of(contexts.begin(), contexts.end(),
                                        [&](std::size_t c) { return c == contexts.front(); });
      mrs = std::make_unique<MrSet>(engine_);
      Status st = one_rail ? mrs->prepare(r.base + m.offset, m.length, true, contexts.front())
                           : mrs->prepare(r.base + m.offset, m.length, true);
      if (!st.ok()) return nack(st.code(), st.message());
    }
    r.registrations[static_cast<std::size_t>(p2p::TransportId::Rdma)] = std::move(mrs);
  }
  const MrSet* set = mr_set_of(r);
  for (std::size_t context : contexts) {
    const MrSet::Copy* copy = set != nullptr ? set->on(context) : nullptr;
    if (copy == nullptr || copy->parent == nullptr) {
      return nack(Errc::Unavailable, "region " + std::to_string(m.target) +
                                         " is not published with remote access on RDMA context " +
                                         engine_->contexts()[context]->name);
    }
  }
  for (Qp* q : qps) {
    const auto need = static_cast<std::uint32_t>(std::count(qps.begin(), qps.end(), q));
    if (need > q->recv_depth || need > cfg_.max_send_wr) {
      add(engine_->counters().budget_exhausted);
      return nack(Errc::ResourceExhausted,
                  std::to_string(need) + " segments on one connection exceed its " +
                      std::to_string(q->recv_depth) + " receipt slots or " +
                      std::to_string(cfg_.max_send_wr) + " send WRs");
    }
    if (q->recv_posted < q->receipts_reserved + need || q->sq.room() < need) {
      // Held by grants and binds in flight on this connection, which end on their own: the
      // request waits here (FIFO, retried every pass) rather than failing.
      defer(peer, m);
      return;
    }
  }
  // Reservations, owned: each goes back by itself if a later one fails.
  auto slot = charge(engine_->grants(), 1, engine_->counters().budget_exhausted);
  if (!slot.ok()) return nack(slot.status().code(), slot.status().message());
  auto bytes = charge(engine_->granted_bytes(), m.length, engine_->counters().budget_exhausted);
  if (!bytes.ok()) return nack(bytes.status().code(), bytes.status().message());
  RangeLock lock =
      RangeLock::try_lock(reinterpret_cast<std::uintptr_t>(r.base + m.offset), m.length, write);
  if (!lock) {
    if (to_receive) {
      // Receives posted into one buffer (osu_bw's window does this) take their writes one after
      // another: the grant waits here (FIFO, retried every pass) until the other access ends,
      // never two DMA writers on one range at once.
      defer(peer, m);
      return;
    }
    add(engine_->counters().range_conflicts);
    return nack(Errc::Unavailable, "range busy: [" + std::to_string(m.offset) + ", " +
                                       std::to_string(m.offset + m.length) + ") of region " +
                                       std::to_string(m.target) +
                                       " is locked by a conflicting access");
  }
  std::optional<RegionPin> pin = RegionPin::take(*region);
  if (!pin) {
    return nack(Errc::InvalidArgument,
                "region " + std::to_string(m.target) + " is being unregistered");
  }
  GrantState g;
  g.id = engine_->next_grant_id();
  g.generation = g.id;
  g.nonce = random_u64();
  g.parent = m.parent;
  g.op = m.op;
  g.target = m.target;
  g.target_generation = m.target_generation;
  g.offset = m.offset;
  g.length = m.length;
  g.region = *region;
  g.to_receive = to_receive;
  g.receive = std::move(receive);
  g.pin = std::move(*pin);
  g.lock = std::move(lock);
  g.slot = std::move(*slot);
  g.bytes = std::move(*bytes);
  g.started = Clock::now();
  for (std::size_t i = 0; i < m.segments.size(); ++i) {
    const SegmentRequest& s = m.segments[i];
    GrantSegment gs;
    gs.context = contexts[i];
    gs.qp_handle = qps[i]->handle;
    gs.qp_incarnation = qps[i]->incarnation;
    gs.offset = s.offset;
    gs.length = s.length;
    gs.first_slice = s.first_slice;
    gs.slices = s.slices;
    gs.requester_qpn = s.requester_qpn;
    g.segments.push_back(gs);
    ++qps[i]->receipts_reserved;
  }
  const std::uint64_t id = g.id;
  peer.grants.emplace(id, std::move(g));
  GrantState& live = peer.grants.at(id);
  add(engine_->counters().grants_active);
  const auto active = engine_->counters().grants_active.load();
  if (active > engine_->counters().grants_peak.load()) engine_->counters().grants_peak = active;
  // One window per segment, bound to exactly its range and direction through its QP.
  for (std::size_t i = 0; i < live.segments.size(); ++i) {
    GrantSegment& s = live.segments[i];
    Qp& q = *qps[i];
    const std::size_t context = s.context;
    auto window = windows_.take(context);
    if (!window.ok()) return close_grant(peer, id, window.status(), true);
    s.mw = window->first;
    s.rkey = window->second;
    WrRecord rec;
    rec.kind = WrKind::Bind;
    rec.owner = id;
    rec.segment = static_cast<std::uint16_t>(i);
    rec.signaled = true;
    const std::uint32_t seq = q.sq.push(rec);
    ibv_send_wr wr{};
    wr.wr_id = q.id(WrKind::Bind, seq).pack();
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = s.mw;
    wr.bind_mw.rkey = s.rkey;
    wr.bind_mw.bind_info.mr = set->on(context)->parent;
    wr.bind_mw.bind_info.addr = reinterpret_cast<std::uint64_t>(r.base + s.offset);
    wr.bind_mw.bind_info.length = s.length;
    wr.bind_mw.bind_info.mw_access_flags = write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
    ibv_send_wr* bad = nullptr;
    if (const int rc = verbs::post_send(q.qp, &wr, &bad); rc != 0) {
      if (bad == &wr) q.sq.unpost_from(seq);
      s.bind_failed = true;
      retire_qp(q.handle);
      return close_grant(
          peer, id, verbs::errno_status(Errc::Unavailable, q.ctx->name + ": bind of a window", rc),
          true);
    }
    add(engine_->counters().windows);
  }
}

void RdmaLane::on_source_wr(PeerRdma& peer, const WrRecord& r, bool ok) {
  if (r.kind != WrKind::Bind) return;
  auto it = peer.grants.find(r.owner);
  if (it == peer.grants.end()) return;
  GrantState& g = it->second;
  GrantSegment& s = g.segments[r.segment];
  if (!ok) {
    s.bind_failed = true;
    return close_grant(peer, g.id,
                       Status::error(Errc::Unavailable, "binding a memory window failed"), true);
  }
  s.bound = true;
  publish_if_bound(peer, g);
}

void RdmaLane::publish_if_bound(PeerRdma& peer, GrantState& g) {
  if (g.published || !std::all_of(g.segments.begin(), g.segments.end(),
                                  [](const GrantSegment& s) { return s.bound; })) {
    return;
  }
  // Every bind has completed: only now does authority leave this process.
  Grant m;
  m.parent = g.parent;
  m.grant = g.id;
  m.generation = g.generation;
  m.nonce = g.nonce;
  for (const GrantSegment& s : g.segments) {
    m.segments.push_back(
        SegmentGrant{s.rkey, reinterpret_cast<std::uint64_t>(g.region->base + s.offset)});
  }
  g.published = true;
  add(engine_->counters().grants);
  send(peer, ControlKind::Grant, encode(m));
  if (hooks_.kill_after_grant) {
    // Test hook: dies with the grant published (the frame is flushed at the end of a pass, so
    // give it one).
    kill_pending_ = true;
  }
}

Binding RdmaLane::expected_binding(const PeerRdma& peer, const GrantState& g, const GrantSegment& s,
                                   const Qp& q) const {
  Binding b;
  b.op = g.op;
  b.first_slice = s.first_slice;
  b.slice_count = s.slices;
  b.source_engine = engine_->engine_key();
  b.requester_engine = peer.info.engine;
  b.link_incarnation = peer.my_link_incarnation;
  b.qp_incarnation = q.incarnation;
  b.grant_id = g.id;
  b.grant_generation = g.generation;
  b.grant_nonce = g.nonce;
  b.request_id = g.parent;
  b.target_id = g.target;
  b.target_generation = g.target_generation;
  b.offset = s.offset;
  b.length = s.length;
  b.rkey = s.rkey;
  b.source_qpn = q.qp->qp_num;
  b.requester_qpn = q.remote_qpn;
  b.payload_wrs = s.slices;
  b.status = 0;
  return b;
}

void RdmaLane::on_receipt(PeerRdma& peer, Qp& q, CqSet& cqs, std::uint32_t slot, const ibv_wc& wc) {
  auto mismatch = [&](const std::string& why) {
    add(engine_->counters().receipt_mismatches);
    protocol_error(peer,
                   "a receipt on QP " + std::to_string(q.qp->qp_num) + " was refused: " + why);
  };
  if (wc.opcode != IBV_WC_RECV || (wc.wc_flags & IBV_WC_WITH_INV) == 0 ||
      wc.byte_len != kBindingBytes) {
    return mismatch("not a SEND_WITH_INV of " + std::to_string(kBindingBytes) + " bytes (" +
                    verbs::wc_opcode_name(wc.opcode) + ", " + std::to_string(wc.byte_len) +
                    " bytes)");
  }
  auto decoded =
      decode_binding(reinterpret_cast<const std::uint8_t*>(cqs.receipts.at(slot)), wc.byte_len);
  if (!decoded.ok()) return mismatch(decoded.status().message());
  const Binding& b = *decoded;
  auto it = peer.grants.find(b.grant_id);
  if (it == peer.grants.end() || !it->second.published) {
    return mismatch("grant " + std::to_string(b.grant_id) + " is not published");
  }
  GrantState& g = it->second;
  GrantSegment* seg = nullptr;
  for (GrantSegment& s : g.segments) {
    if (s.first_slice == b.first_slice && !s.receipted) seg = &s;
  }
  if (seg == nullptr)
    return mismatch("no open segment starts at slice " + std::to_string(b.first_slice));
  if (seg->qp_handle != q.handle) return mismatch("it arrived on another QP than the segment's");
  if (wc.invalidated_rkey != seg->rkey) return mismatch("it invalidated another key");
  if (wc.qp_num != q.qp->qp_num) return mismatch("the completion names another QP");
  if (const std::string field = binding_mismatch(expected_binding(peer, g, *seg, q), b);
      !field.empty()) {
    return mismatch("field " + field + " differs from the grant");
  }
  // The hardware invalidated the window: it is free for the next grant (with a new key).
  seg->receipted = true;
  if (q.receipts_reserved > 0) --q.receipts_reserved;
  windows_.give_back(seg->context, seg->mw);
  seg->mw = nullptr;
  add(engine_->counters().windows_invalidated);
  add(engine_->counters().receipts);
  if (Status st = post_receives(q); !st.ok()) {
    ORBITE_LOG(Warn, Rdma) << "reposting receipt slots failed: " << st.message();
  }
  if (std::all_of(g.segments.begin(), g.segments.end(),
                  [](const GrantSegment& s) { return s.receipted; })) {
    close_grant(peer, g.id, {}, true);
  }
}

void RdmaLane::expire_grants(PeerRdma& peer) {
  if (peer.grants.empty()) return;
  const auto now = Clock::now();
  expired_.clear();
  for (const auto& [id, g] : peer.grants) {
    if (now - g.started >= cfg_.grant_timeout) expired_.push_back(id);
  }
  for (std::uint64_t id : expired_) {
    add(engine_->counters().grants_expired);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.grant_timeout);
    close_grant(peer, id,
                Status::error(Errc::Timeout, "grant " + std::to_string(id) +
                                                 " revoked: its receipts did not arrive within "
                                                 "rdma.grant_timeout (" +
                                                 std::to_string(ms.count()) + " ms)"),
                true);
  }
}

void RdmaLane::close_grant(PeerRdma& peer, std::uint64_t id, const Status& outcome, bool send_ack) {
  auto it = peer.grants.find(id);
  if (it == peer.grants.end()) return;
  GrantState g = std::move(it->second);
  peer.grants.erase(it);
  bool retained = false;
  for (GrantSegment& s : g.segments) {
    Qp* q = qp(s.qp_handle);
    if (!s.receipted && q != nullptr && q->incarnation == s.qp_incarnation &&
        q->receipts_reserved > 0) {
      --q->receipts_reserved;
    }
    if (s.mw == nullptr) continue;
    // A window that may still be bound is deallocated: afterwards nothing can use its key.
    if (windows_.revoke(s.context, s.mw)) {
      add(engine_->counters().windows_revoked);
    } else {
      retained = true;
    }
    s.mw = nullptr;
  }
  const bool published = g.published;
  const bool to_receive = g.to_receive;
  const std::uint64_t target = g.target;
  const std::uint64_t parent = g.parent;
  const std::uint64_t length = g.length;
  const std::uint64_t generation = g.generation;
  engine_->counters().grants_active.fetch_sub(1);
  if (retained) {
    // A window that refused to go keeps its range lock, region pin and charges for good.
    engine_->retain("a memory window of grant " + std::to_string(id) + " could not be revoked");
    g.pin.keep();
    g.lock.keep();
    g.slot.keep();
    g.bytes.keep();
    retained_grants_.push_back(std::move(g));
  } else {
    // READY: the exact range is free for the next CPU or DMA access.
    g.lock.reset();
    g.pin.reset();
    g.slot.reset();
    g.bytes.reset();
  }
  if (to_receive) {
    // READY: every receipt is verified, so the bytes are in the receive (or it fails).
    Status result = outcome;
    if (retained) {
      result = Status::error(Errc::Unquiesced,
                             "a window over the receive buffer could not be revoked; the "
                             "buffer may still be written (" +
                                 outcome.message() + ")");
    }
    handler_.rendezvous_done(*peer.link, target, result.ok() ? length : 0, result);
    // The grant's own MR goes with its record (now, unless the grant is retained).
    g.region.reset();
  }
  if (!send_ack || peer.failed) return;
  if (published) {
    send(peer, ControlKind::GrantAck,
         encode(GrantAck{parent, static_cast<std::uint32_t>(outcome.code()),
                         outcome.ok() ? length : 0, id, generation, outcome.message()}));
  } else {
    add(engine_->counters().grant_nacks);
    send(peer, ControlKind::GrantNack,
         encode(GrantNack{
             parent, static_cast<std::uint32_t>(outcome.ok() ? Errc::Unavailable : outcome.code()),
             0, outcome.message() + " (nothing moved)"}));
  }
}

}  // namespace orbite::rdma
