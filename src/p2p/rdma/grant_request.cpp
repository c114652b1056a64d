// The owner's answer to a GrantRequest, phase by phase: the protocol checks (a violation fails
// the link), the target (a registered region, or a posted receive for a rendezvous), the QPs
// (anything stale is a cache miss: no authority ever existed), the registration and receipt room
// (waiting rather than failing where grants in flight will free them), the owned reservations
// (slot, bytes, exact range lock, pin), then one window bound per segment. A refusal before
// authority is a GrantNack; a rendezvous is deferred rather than refused for want of resources.
#include <algorithm>
#include <array>
#include <csignal>

#include "common/log.h"
#include "p2p/rdma/source.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

namespace {
// How long a kOpToMessage GrantRequest waits for its message's announcement (sent before it, on
// another channel): far beyond a frame's way, so only a request naming no message is refused.
constexpr std::chrono::milliseconds kAnnouncementBound{3000};

// Whether connection `q` lacks `need` free receipt slots or SQ places for a grant's segments now
// (held by grants and binds in flight, which end on their own).
bool short_of_room(const Qp& q, std::uint32_t need) {
  return q.recv_posted < q.receipts_reserved + need || q.sq.room() < need;
}
}  // namespace

void GrantSource::refuse_grant(PeerRdma& peer, const GrantRequest& m, const GrantPlan& plan,
                               const Status& why, bool cache_miss) {
  if (plan.awaits_message || (plan.receive_matched && why.code() == Errc::ResourceExhausted)) {
    // A message is not refused for want of slots or budget, as a put would be: it waits here
    // (FIFO) until grants end, so back-pressure slows the sender instead of failing it. One
    // announced as RtsRma also waits here for its receive.
    return defer(peer, m, plan.awaits_receive);
  }
  if (plan.receive_matched && !cache_miss) {  // a cache miss is retried: the receive waits
    lane_.handler().rendezvous_done(
        *peer.link, plan.receive_id, 0,
        Status::error(why.code(), "the RDMA rendezvous was refused here: " + why.message()));
  }
  add(engine_->counters().grant_nacks);
  lane_.send(peer, ControlKind::GrantNack,
             encode(GrantNack{m.parent, static_cast<std::uint32_t>(why.code()),
                              static_cast<std::uint8_t>(cache_miss ? 1 : 0), why.message()}));
}

bool GrantSource::grant_request_valid(PeerRdma& peer, const GrantRequest& m) {
  std::string bad;
  if (m.link_incarnation != peer.my_link_incarnation) {
    bad = "GrantRequest for link incarnation " + std::to_string(m.link_incarnation) +
          ", this link is " + std::to_string(peer.my_link_incarnation);
  }
  if (bad.empty() && peer.grants.has_parent(m.parent)) {
    bad = "a second GrantRequest for parent " + std::to_string(m.parent);
  }
  if (Status st = check_tiling(m); bad.empty() && !st.ok()) bad = st.message();
  for (const SegmentRequest& s : m.segments) {
    if (bad.empty() && s.slot == kMessageSlot) bad = "GrantRequest names the message QP's slot";
    if (bad.empty() && (s.slot == kPrivateSlot) != m.private_path) {
      bad = m.private_path ? "a private GrantRequest names a slot of the QP arrays"
                           : "GrantRequest names the private slot without the private path";
    }
  }
  if (bad.empty() && m.private_path &&
      (m.segments.size() > 1 || (m.op & kOpToReceive) != 0 ||
       (!m.segments.empty() && m.segments.front().requester_qpn != m.private_qp.qpn))) {
    bad =
        "a private GrantRequest with more than one segment, a rendezvous op or a segment "
        "naming another QP than its private QP";
  }
  if (bad.empty()) return true;
  lane_.protocol_error(peer, bad);
  return false;
}

Status GrantSource::resolve_target(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan) {
  if (!plan.to_receive) {
    ORBITE_ASSIGN_OR_RETURN(plan.region,
                            regions_.authorize(m.target, m.target_generation, m.offset, m.length,
                                               plan.write, p2p::TransportId::Rdma));
    return {};
  }
  // A rendezvous: the target is a receive the protocol matched to this peer's message (named by
  // the receive, after a Cts; or by the message, announced as RtsRma).
  p2p::FrameHandler& handler = lane_.handler();
  ORBITE_ASSIGN_OR_RETURN(
      auto target, (m.op & kOpToMessage) != 0
                       ? handler.message_target(*peer.link, m.target, m.offset, m.length)
                       : handler.rendezvous_target(*peer.link, m.target, m.offset, m.length));
  if (target.waiting) {
    if (!target.announced && Clock::now() - m.arrived > kAnnouncementBound) {
      // The sender announces before it asks: a request that outlives the announcement's way
      // here names a message that was never announced.
      return Status::error(Errc::InvalidArgument,
                           "message " + std::to_string(m.target) +
                               " of this peer awaits no rendezvous write: it was not announced "
                               "within " +
                               std::to_string(kAnnouncementBound.count()) + " ms of the request");
    }
    plan.awaits_message = true;
    plan.awaits_receive = target.announced;
    return Status::error(Errc::ResourceExhausted, "its message matched no receive yet");
  }
  plan.receive_matched = true;
  plan.receive_id = target.receive_id;
  if (m.target_generation != 0) {
    return Status::error(Errc::InvalidArgument,
                         "a rendezvous GrantRequest with a target generation");
  }
  auto record = std::make_shared<detail::RegionRecord>();
  record->id = target.receive_id;
  record->base = target.buffer;
  record->length = target.length;
  record->access = Access{false, true};
  std::byte* const at = target.buffer + m.offset;
  constexpr auto kRdma = static_cast<std::size_t>(p2p::TransportId::Rdma);
  // Engine-owned memory (collective scratch) uses the MR cache's registration. A message up to
  // rdma.bounce_limit into a user's buffer lands in a bounce chunk (registered once, kept by the
  // cache) and is copied into the receive on READY: the user's buffer is neither registered nor
  // range-locked, so receives posted into one buffer take their writes side by side. The record
  // is placed so that its granted range [offset, offset + length) is the chunk. Anything else is
  // registered for this grant alone (prepare_memory).
  bool owned = false;
  if (auto cached = cache_->find(at, m.length, &owned)) {
    record->registrations[kRdma] = MrSet::view_of(std::move(cached));
  } else if (!owned && cache_->bounces(m.length)) {
    plan.may_bounce = true;
    if (auto bounce = cache_->take_bounce(m.length)) {
      const auto chunk = reinterpret_cast<std::uintptr_t>(bounce->chunk->data());
      record->base = reinterpret_cast<std::byte*>(chunk - m.offset);
      record->registrations[kRdma] = MrSet::view_of(std::move(bounce->record));
      plan.bounce = std::move(bounce->chunk);
      plan.bounce_to = at;
    }
  }
  plan.region = std::move(record);
  plan.receive = std::move(target.keepalive);
  return {};
}

Status GrantSource::resolve_qps(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan) {
  // Every segment's QP: the current incarnation of a ready source-role end, connected to the QP
  // the requester names. Anything else happened before authority existed: a cache miss.
  for (const SegmentRequest& s : m.segments) {
    Qp* q = source_qp(peer, s);
    if (q == nullptr) {
      return Status::error(Errc::Unavailable, "the connection of slot " + std::to_string(s.slot) +
                                                  " is not (or no longer) established here");
    }
    plan.qps.push_back(q);
    plan.contexts.push_back(lane_.context_of(*q->cqs));  // a grant may span rails
  }
  return {};
}

Qp* GrantSource::source_qp(PeerRdma& peer, const SegmentRequest& s) const {
  Qp* q = nullptr;
  for (const auto& [key, src] : peer.sources) {
    if (std::get<2>(key) == s.slot && src.incarnation == s.qp_incarnation)
      q = lane_.qp(src.qp_handle);
  }
  if (q == nullptr || !q->ready || q->broken || q->remote_qpn != s.requester_qpn) return nullptr;
  return q;
}

bool GrantSource::room_still_short(PeerRdma& peer, const GrantRequest& m) {
  // receipt_room()'s test on the same connections; anything else about them (gone, broken) is
  // for the full answer to find. The connections are looked up once per pass (qp_memo_).
  std::array<const Qp*, kMaxSegments> qps{};
  const std::size_t n = std::min(m.segments.size(), qps.size());
  for (std::size_t i = 0; i < n; ++i) {
    const SegmentRequest& s = m.segments[i];
    auto known = std::find_if(qp_memo_.begin(), qp_memo_.end(), [&](const QpMemo& e) {
      return e.slot == s.slot && e.incarnation == s.qp_incarnation &&
             e.requester_qpn == s.requester_qpn;
    });
    if (known == qp_memo_.end()) {
      qp_memo_.push_back(QpMemo{s.slot, s.qp_incarnation, s.requester_qpn, source_qp(peer, s)});
      known = std::prev(qp_memo_.end());
    }
    qps[i] = known->qp;
    if (qps[i] == nullptr) return false;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Qp* q = qps[i];
    const auto need = static_cast<std::uint32_t>(std::count(qps.begin(), qps.begin() + n, q));
    if (short_of_room(*q, need)) return true;
  }
  return false;
}

Status GrantSource::prepare_memory(const GrantRequest& m, GrantPlan& plan) {
  detail::RegionRecord& r = *plan.region;
  constexpr auto kRdma = static_cast<std::size_t>(p2p::TransportId::Rdma);
  if (plan.to_receive && r.registrations[kRdma] == nullptr) {
    // Neither cached nor bounced (resolve_target): the posted buffer is registered for this grant
    // alone, over exactly the granted range: on the one rail its segments use, or on every usable
    // context when they span rails.
    const auto& contexts = plan.contexts;
    const bool one_rail = std::all_of(contexts.begin(), contexts.end(),
                                      [&](std::size_t c) { return c == contexts.front(); });
    auto mrs = std::make_unique<MrSet>(engine_);
    ORBITE_RETURN_IF_ERROR(one_rail
                               ? mrs->prepare(r.base + m.offset, m.length, true, contexts.front())
                               : mrs->prepare(r.base + m.offset, m.length, true));
    r.registrations[kRdma] = std::move(mrs);
  }
  if (r.kind == MemoryKind::Cuda) {
    // Its GPU MRs are local-only, and an ordinary memory window is never bound to a GPU MR: a
    // GPU range is granted on the private grant path only.
    return Status::error(Errc::Unavailable,
                         "region " + std::to_string(m.target) +
                             " is device memory, which is granted on the private grant path "
                             "only; this GrantRequest asked for an ordinary grant");
  }
  plan.set = mr_set_of(r);
  for (std::size_t context : plan.contexts) {
    const MrSet::Copy* copy = plan.set != nullptr ? plan.set->on(context) : nullptr;
    if (copy == nullptr || copy->parent == nullptr) {
      return Status::error(Errc::Unavailable,
                           "region " + std::to_string(m.target) +
                               " is not published with remote access on RDMA context " +
                               engine_->contexts()[context]->name);
    }
  }
  return {};
}

void GrantSource::refuse_or_wait_for_own(PeerRdma& peer, const GrantRequest& m,
                                         const GrantPlan& plan, const Status& why) {
  // max_grants or max_direct_bytes is spent. While this peer holds grants of its own, its request
  // waits for them: they end by themselves (their receipts, or rdma.grant_timeout), so a batch
  // larger than the budget is paced rather than failed by its own earlier ranges. Spent by others
  // alone, the budget refuses it (ResourceExhausted naming it), as docs/rdma.md's budgets say.
  if (!peer.grants.empty()) return defer(peer, m, false, false, true);
  refuse_grant(peer, m, plan, why);
}

Result<bool> GrantSource::receipt_room(const GrantPlan& plan) {
  for (Qp* q : plan.qps) {
    const auto need = static_cast<std::uint32_t>(std::count(plan.qps.begin(), plan.qps.end(), q));
    if (need > q->recv_depth || need > cfg_.max_send_wr) {
      add(engine_->counters().budget_exhausted);
      return Status::error(Errc::ResourceExhausted,
                           std::to_string(need) + " segments on one connection exceed its " +
                               std::to_string(q->recv_depth) + " receipt slots or " +
                               std::to_string(cfg_.max_send_wr) + " send WRs");
    }
    // Held by grants and binds in flight on this connection, which end on their own: the
    // request waits (false) rather than failing.
    if (short_of_room(*q, need)) return false;
  }
  return true;
}

void GrantSource::on_grant_request(PeerRdma& peer, const GrantRequest& m) {
  if (hooks_.kill_on_grant_request) ::raise(SIGKILL);  // test hook: dies before the grant
  if (hooks_.retire_source_once && !m.segments.empty()) {
    // Test hook: the slot's QP went away between the connect and this request.
    hooks_.retire_source_once = false;
    for (auto& [key, src] : peer.sources) {
      if (std::get<2>(key) == m.segments.front().slot) lane_.retire_qp(src.qp_handle);
    }
  }
  if (!grant_request_valid(peer, m)) return;
  GrantPlan plan;
  plan.to_receive = (m.op & kOpToReceive) != 0;
  plan.write = (m.op & kOpWrite) != 0;  // kOpToReceive and kOpToMessage come with kOpWrite only
  if (!plan.to_receive && Clock::now() >= m.local_deadline) {
    // Deferred past the requester's deadline (a rendezvous has none: its receive matched it).
    return refuse_grant(peer, m, plan,
                        Status::error(Errc::Timeout,
                                      "the request's deadline passed while it waited at the "
                                      "source; nothing was granted"));
  }
  if (hooks_.defer_deadlined && !plan.to_receive && m.deadline_us != 0) return defer(peer, m);
  ORBITE_LOG(Debug, Rdma) << "GrantRequest: parent " << m.parent
                          << (plan.to_receive ? ", receive " : ", region ") << m.target << " ["
                          << m.offset << ", +" << m.length << ") "
                          << (plan.write ? "WRITE" : "READ") << ", " << m.segments.size()
                          << " segment(s)";
  if (Status st = resolve_target(peer, m, plan); !st.ok()) return refuse_grant(peer, m, plan, st);
  if (m.length == 0) {
    // Nothing to move: the checks above are the whole answer.
    return lane_.send(peer, ControlKind::GrantAck, encode(GrantAck{m.parent, 0, 0, 0, 0, {}}));
  }
  if (m.private_path) return grant_private(peer, m, plan);
  if (Status st = resolve_qps(peer, m, plan); !st.ok()) {
    return refuse_grant(peer, m, plan, st, true);
  }
  if (plan.to_receive &&
      range_locks().would_conflict(reinterpret_cast<std::uintptr_t>(plan.region->base + m.offset),
                                   m.length, true)) {
    // Another access holds the receive's range (receives posted into one buffer): wait before
    // registering anything, so that each retry costs a lookup, not an MR.
    return defer(peer, m);
  }
  if (Status st = prepare_memory(m, plan); !st.ok()) return refuse_grant(peer, m, plan, st);
  auto room = receipt_room(plan);
  if (!room.ok()) return refuse_grant(peer, m, plan, room.status());
  if (!*room) return defer(peer, m, false, true);
  std::optional<std::uint64_t> id = reserve_grant(peer, m, plan);
  if (id) bind_windows(peer, *id, plan);
}

std::optional<std::uint64_t> GrantSource::reserve_grant(PeerRdma& peer, const GrantRequest& m,
                                                        GrantPlan& plan) {
  std::optional<Reservations> res = reserve(peer, m, plan);
  if (!res) return std::nullopt;
  return record_grant(peer, m, plan, std::move(*res));
}

std::optional<GrantSource::Reservations> GrantSource::reserve(PeerRdma& peer, const GrantRequest& m,
                                                              GrantPlan& plan) {
  detail::RegionRecord& r = *plan.region;
  // Reservations, owned: each goes back by itself if a later one fails.
  auto slot = charge(engine_->grants(), 1, engine_->counters().budget_exhausted);
  if (!slot.ok()) {
    refuse_or_wait_for_own(peer, m, plan, slot.status());
    return std::nullopt;
  }
  auto bytes = charge(engine_->granted_bytes(), m.length, engine_->counters().budget_exhausted);
  if (!bytes.ok()) {
    refuse_or_wait_for_own(peer, m, plan, bytes.status());
    return std::nullopt;
  }
  RangeLock lock = RangeLock::try_lock(reinterpret_cast<std::uintptr_t>(r.base + m.offset),
                                       m.length, plan.write);
  if (!lock) {
    if (plan.to_receive) {
      // Receives posted into one buffer (osu_bw's window does this) take their writes one after
      // another: the grant waits here (FIFO, retried every pass) until the other access ends,
      // never two DMA writers on one range at once.
      defer(peer, m);
      return std::nullopt;
    }
    add(engine_->counters().range_conflicts);
    refuse_grant(peer, m, plan,
                 Status::error(Errc::Unavailable, "range busy: [" + std::to_string(m.offset) +
                                                      ", " + std::to_string(m.offset + m.length) +
                                                      ") of region " + std::to_string(m.target) +
                                                      " is locked by a conflicting access"));
    return std::nullopt;
  }
  std::optional<RegionPin> pin = RegionPin::take(plan.region);
  if (!pin) {
    refuse_grant(peer, m, plan,
                 Status::error(Errc::InvalidArgument,
                               "region " + std::to_string(m.target) + " is being unregistered"));
    return std::nullopt;
  }
  return Reservations{std::move(*slot), std::move(*bytes), std::move(lock), std::move(*pin)};
}

std::uint64_t GrantSource::record_grant(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan,
                                        Reservations res) {
  GrantState g;
  g.id = engine_->next_grant_id();
  g.generation = g.id;
  g.nonce = random_u64();
  g.parent = m.parent;
  g.op = m.op;
  g.target = m.target;
  g.receive_id = plan.receive_id;
  g.target_generation = m.target_generation;
  g.offset = m.offset;
  g.length = m.length;
  g.region = plan.region;
  g.to_receive = plan.to_receive;
  g.receive = std::move(plan.receive);
  // Counted here, once: a request deferred after its target was resolved resolves it again.
  if (plan.may_bounce) cache_->count_bounce(false, plan.bounce != nullptr);
  g.bounce = std::move(plan.bounce);
  g.bounce_to = plan.bounce_to;
  g.pin = std::move(res.pin);
  g.lock = std::move(res.lock);
  g.slot = std::move(res.slot);
  g.bytes = std::move(res.bytes);
  g.started = Clock::now();
  next_grant_expiry_ = std::min(next_grant_expiry_, g.started + cfg_.grant_timeout);
  for (std::size_t i = 0; i < m.segments.size(); ++i) {
    const SegmentRequest& s = m.segments[i];
    GrantSegment gs;
    gs.context = plan.contexts[i];
    gs.qp_handle = plan.qps[i]->handle;
    gs.qp_incarnation = plan.qps[i]->incarnation;
    gs.offset = s.offset;
    gs.length = s.length;
    gs.first_slice = s.first_slice;
    gs.slices = s.slices;
    gs.requester_qpn = s.requester_qpn;
    g.segments.push_back(gs);
    ++plan.qps[i]->receipts_reserved;
  }
  const std::uint64_t id = g.id;
  peer.grants.insert(std::move(g));
  add(engine_->counters().grants_active);
  const auto active = engine_->counters().grants_active.load();
  if (active > engine_->counters().grants_peak.load()) engine_->counters().grants_peak = active;
  return id;
}

void GrantSource::bind_windows(PeerRdma& peer, std::uint64_t id, const GrantPlan& plan) {
  GrantState& live = *peer.grants.find(id);
  // One window per segment, bound to exactly its range and direction through its QP.
  for (std::size_t i = 0; i < live.segments.size(); ++i) {
    GrantSegment& s = live.segments[i];
    Qp& q = *plan.qps[i];
    auto window = windows_.take(s.context);
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
    wr.bind_mw.bind_info.mr = plan.set->on(s.context)->parent;
    wr.bind_mw.bind_info.addr = reinterpret_cast<std::uint64_t>(plan.region->base + s.offset);
    wr.bind_mw.bind_info.length = s.length;
    wr.bind_mw.bind_info.mw_access_flags =
        plan.write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
    ibv_send_wr* bad = nullptr;
    if (const int rc = verbs::post_send(q.qp, &wr, &bad); rc != 0) {
      if (bad == &wr) q.sq.unpost_from(seq);
      s.bind_failed = true;
      lane_.retire_qp(q.handle);
      return close_grant(
          peer, id, verbs::errno_status(Errc::Unavailable, q.ctx->name + ": bind of a window", rc),
          true);
    }
    add(engine_->counters().windows);
  }
}

}  // namespace orbite::rdma
