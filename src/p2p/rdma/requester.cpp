// The requester's parents: admission, QP slots (cold builders), the grant request, the Grant,
// refusals and the GrantAck, and failure after drain (payload.cpp posts the WRs and receipts).
// A parent reports to its job only once no WR of it can run any more.
#include <algorithm>
#include <csignal>
#include <cstring>
#include <random>

#include "common/log.h"
#include "p2p/rdma/requester.h"
#include "p2p/rdma/verbs.h"
#include "p2p/request.h"

namespace orbite::rdma {

using detail::PeerLink;

Requester::Requester(LaneServices& lane, std::shared_ptr<RdmaEngine> engine,
                     std::shared_ptr<MrCache> cache, TestHooks& hooks)
    : lane_(lane),
      engine_(std::move(engine)),
      cfg_(engine_->config().rdma),
      cache_(std::move(cache)),
      hooks_(hooks),
      sched_(SchedulerConfig{cfg_.deadline_bw_arbitration, cfg_.priority_promotion_timeout,
                             cfg_.priority_promotion_per_entry},
             engine_->counters().tiers),
      slots_(engine_->shared_slots()) {}

void Requester::link_failed(PeerRdma& peer, const Status& why) {
  peer.parents.reset_window();
  for (auto& [id, p] : peer.parents) {
    if (p.failure.ok()) p.failure = why;
    if (p.state != ParentState::Draining) p.state = ParentState::Draining;
    peer.parents.start_draining(p, Clock::now());
  }
  std::vector<std::uint64_t> ids;
  peer.parents.ids(ids);
  for (std::uint64_t id : ids) maybe_finish_parent(peer, id);
}

void Requester::shutdown(PeerRdma& peer) {
  for (auto& [id, p] : peer.parents) p.wrs_outstanding = 0;
  std::vector<std::uint64_t> ids;
  peer.parents.ids(ids);
  for (std::uint64_t id : ids) maybe_finish_parent(peer, id);
  peer.parents.clear();
}

Status Requester::plan_segments(PeerRdma& peer, Parent& p, const MrSet& local) {
  const std::size_t slices = p.plan.lengths.size();
  if (slices == 0) return {};
  topo::SelectionRequest req;
  // The bytes' NUMA node (or rdma.preferred_numa_node) picks the row: that node's NICs are tier 0,
  // and strict_local_numa keeps known cross-NUMA NICs out.
  req.location = topo::selection_location(local.location(), cfg_.preferred_numa_node);
  req.mask = cfg_.device_mask.value_or(~0ULL);
  req.compatible = lane_.compatible_nics(peer);
  ORBITE_RETURN_IF_ERROR(apply_rail_health(peer, p, req));
  if (p.job->private_path && slices > 1) {
    // A private grant is one segment on one QP pair, so its slices share one NIC: the one a
    // single selection of the parent picks.
    auto one = engine_->selector().select(req, p.length);
    if (!one.ok()) return one.status().with_context("nothing moved");
    req.mask = 1ULL << one->nic(0);
    one->abandon();
  }
  // Every NIC of the lease holds one contiguous run of slices (probe parents included), so a
  // rail's run spreads over its array's slots at one segment per connection (a private grant's
  // run is one segment).
  auto lease = slices == 1
                   ? engine_->selector().select(req, p.plan.lengths[0])
                   : engine_->selector().select_multi(
                         req, std::span<const std::uint64_t>(p.plan.lengths.data(), slices));
  if (!lease.ok()) return lease.status().with_context("nothing moved");
  p.lease = std::move(*lease);
  const auto& contexts = engine_->contexts();
  // Each maximal run of slices on one NIC is a rail; a rail's run is cut into min(W, m)
  // contiguous segments over its array's slots, from the parent's id so parents spread.
  std::size_t first = 0;
  while (first < slices) {
    const int nic = p.lease.nic(first);
    std::size_t end = first + 1;
    while (end < slices && p.lease.nic(end) == nic) ++end;
    std::size_t context = contexts.size();
    for (std::size_t c = 0; c < contexts.size(); ++c) {
      if (contexts[c]->nic_id == nic) context = c;
    }
    const MrSet::Copy* copy = context < contexts.size() ? local.on(context) : nullptr;
    if (copy == nullptr || copy->local == nullptr) {
      return Status::error(Errc::Unavailable, "the local memory is not registered on RDMA NIC " +
                                                  std::to_string(nic) + " (nothing moved)");
    }
    ORBITE_ASSIGN_OR_RETURN(std::size_t array, lane_.array_to(peer, context));
    const std::size_t m = end - first;
    const std::size_t runs = p.job->private_path ? 1 : std::min<std::size_t>(peer.width, m);
    std::size_t at = first;
    for (std::size_t r = 0; r < runs; ++r) {
      const std::size_t count = m / runs + (r < m % runs ? 1 : 0);
      Segment s;
      s.first_slice = static_cast<std::uint8_t>(at);
      s.slices = static_cast<std::uint8_t>(count);
      s.array = array;
      s.nic = nic;
      s.lkey = copy->local->lkey;
      s.slot = static_cast<std::uint32_t>((p.id + r) % peer.width);
      s.offset = at * p.plan.block;
      for (std::size_t k = at; k < at + count; ++k) s.length += p.plan.lengths[k];
      p.segments.push_back(s);
      at += count;
    }
    if (cfg_.log_slice_affinity) {
      const NicRecord* remote = peer.nic(peer.arrays[array].remote_nic);
      for (std::size_t k = first; k < end; ++k) {
        ORBITE_LOG(Debug, Rdma) << "slice " << k << " of parent " << p.id << ": "
                                << contexts[context]->name << " -> "
                                << (remote != nullptr ? remote->name : "?") << ", "
                                << p.plan.lengths[k] << " bytes";
      }
    }
    first = end;
  }
  return {};
}

Status Requester::apply_rail_health(PeerRdma& peer, Parent& p, topo::SelectionRequest& req) {
  const std::uint64_t allowed = req.mask & req.compatible;
  if (allowed == 0) return {};  // the selection names what is missing
  RailHealth& health = engine_->rail_health();
  const auto& contexts = engine_->contexts();
  const auto now = Clock::now();
  std::uint64_t healthy = 0;
  std::string paused;
  for (std::size_t c = 0; c < contexts.size(); ++c) {
    const int nic = contexts[c]->nic_id;
    if (nic < 0 || nic >= static_cast<int>(kMaxNics) || ((allowed >> nic) & 1) == 0) continue;
    auto array = lane_.array_to(peer, c);
    if (!array.ok()) continue;  // no rail there: the selection's errors say so
    const RailPair pair{peer.my_link_incarnation, nic, peer.arrays[*array].remote_nic};
    if (health.usable(pair)) {
      healthy |= 1ULL << nic;
      continue;
    }
    // Looking up stops at `usable`: only a parent that will be planned on it arms a trial.
    if (!p.trial.running()) {
      const RailHealth::Admission a = health.admit(pair, now);
      if (a.verdict == RailHealth::Verdict::Trial) p.trial = RailTrial(health, pair, a.trial);
    }
    const NicRecord* remote = peer.nic(pair.remote_nic);
    paused += (paused.empty() ? "" : ", ") + contexts[c]->name + " -> " +
              (remote != nullptr ? remote->name : "NIC " + std::to_string(pair.remote_nic));
  }
  if (p.trial.running()) {
    // The whole parent is the trial: its verdict is the pair's alone.
    req.mask = 1ULL << p.trial.pair().local_nic;
    ORBITE_LOG(Info, Rdma) << "parent " << p.id
                           << " is the half-open trial of a paused rail to peer "
                           << p2p::short_id(peer.link->ep.id);
    return {};
  }
  if (healthy == 0 && !paused.empty()) {
    return Status::error(Errc::Unavailable,
                         "every RDMA rail to peer " + p2p::short_id(peer.link->ep.id) +
                             " this request may use is paused by rail health (" + paused +
                             "; rdma.rail_error_threshold errors inside rdma.rail_error_window, "
                             "until rdma.rail_cooldown admits a trial) (nothing moved)");
  }
  if (!paused.empty()) req.mask = healthy;
  return {};
}

RailPair Requester::pair_of(const PeerRdma& peer, const Segment& s) {
  return RailPair{peer.my_link_incarnation, s.nic, peer.arrays[s.array].remote_nic};
}

void Requester::note_rail_error(PeerRdma& peer, Parent& p, const Segment& s) {
  if (peer.failed) return;  // its pairs were forgotten with its connection
  const RailPair pair = pair_of(peer, s);
  const auto now = Clock::now();
  const Status st = p.trial.running() && p.trial.pair() == pair
                        ? p.trial.failed(now)
                        : engine_->rail_health().record_error(pair, now);
  if (!st.ok()) {
    ORBITE_LOG(Warn, Rdma) << st.message();
  }
}

Status Requester::register_send_buffer(p2p::RmaOp& op, RmaJob& job) {
  // Engine-owned memory (collective scratch) uses the MR cache. A user's buffer up to
  // rdma.bounce_limit is copied into a bounce chunk, whose registration the cache keeps; a larger
  // one (or one finding no chunk) is registered on every usable context for this job only (the
  // selector may pick any rail): a cached MR could outlive the user's mapping, and freed and
  // re-mapped memory would be reached through the stale MR.
  if (op.local_buffer == nullptr) {
    return Status::error(Errc::Internal, "an RDMA op without a local region or buffer");
  }
  const std::byte* at = op.local_buffer + op.local_offset;
  bool owned = false;
  auto cached = cache_->find(at, op.length, &owned);
  std::optional<MrCache::Bounce> bounce;
  // Only a write's source can be copied in before the WR: a read lands in the user's buffer.
  if (!owned && op.write && cache_->bounces(op.length)) {
    bounce = cache_->take_bounce(op.length);
    cache_->count_bounce(true, bounce.has_value());
  }
  if (bounce) {
    std::memcpy(bounce->chunk->data(), at, op.length);
    op.local_offset = bounce->offset;
    job.transient = std::move(bounce->record);
    job.bounce = std::move(bounce->chunk);
  } else if (cached != nullptr) {
    op.local_offset = static_cast<std::uint64_t>(at - cached->base);
    job.transient = std::move(cached);
  } else {
    auto record = std::make_shared<detail::RegionRecord>();
    record->base = const_cast<std::byte*>(op.local_buffer);
    record->length = op.local_offset + op.length;
    auto mrs = std::make_unique<MrSet>(engine_);
    ORBITE_RETURN_IF_ERROR(mrs->prepare(record->base + op.local_offset, op.length, false));
    record->registrations[static_cast<std::size_t>(p2p::TransportId::Rdma)] = std::move(mrs);
    job.transient = std::move(record);
  }
  op.local_region = job.transient.get();
  return {};
}

Status Requester::start_rma(PeerRdma& peer, p2p::RmaOp op) {
  if (lane_.compatible_nics(peer) == 0) {
    return Status::error(Errc::Unavailable,
                         "no active RDMA context here reaches an active NIC of peer " +
                             p2p::short_id(peer.link->ep.id));
  }
  auto job = std::make_shared<RmaJob>();
  if (op.local_region == nullptr && op.length > 0) {
    ORBITE_RETURN_IF_ERROR(register_send_buffer(op, *job));
  }
  const MrSet* set = op.local_region != nullptr ? mr_set_of(*op.local_region) : nullptr;
  if (op.length > 0 && set == nullptr) {
    return Status::error(Errc::Unavailable, "the local region is not registered on RDMA");
  }
  job->op = std::move(op);
  const p2p::RmaOp& o = job->op;
  const bool to_message = o.remote_message != 0;
  if (o.remote_receive != 0 || to_message) {
    job->wire_op = kOpWrite | kOpToReceive | (to_message ? kOpToMessage : 0);
    job->target =
        (to_message ? o.remote_message : o.remote_receive) + (hooks_.forge_rendezvous ? 1000 : 0);
  } else {
    job->wire_op = o.write ? kOpWrite : kOpRead;
    job->target = o.remote_region;
    job->target_generation = o.remote_generation;
    job->private_path = o.remote_device != hooks_.flip_private_path;
  }
  // Parents of at most max_direct_bytes, one grant each; every parent's rails are chosen (and
  // charged) before any is queued, so a refusal leaves nothing behind.
  const std::uint64_t cap = cfg_.max_direct_bytes;
  const std::uint64_t n = o.length == 0 ? 1 : (o.length + cap - 1) / cap;
  const Priority priority = o.req != nullptr ? o.req->options.priority : Priority::High;
  // A rendezvous's receiver matched it already: once announced, a message is not dropped here.
  const Clock::time_point deadline =
      o.req != nullptr && o.req->options.deadline && o.remote_receive == 0 && !to_message
          ? *o.req->options.deadline
          : kNoDeadline;
  std::vector<Parent> planned;
  for (std::uint64_t i = 0; i < n; ++i) {
    Parent p;
    p.id = next_parent_++;
    p.job = job;
    p.write = o.write;
    p.priority = priority;
    p.deadline = deadline;
    p.local = o.local_region != nullptr ? o.local_region->base + o.local_offset + i * cap : nullptr;
    p.remote_offset = o.remote_offset + i * cap;
    p.length = std::min(cap, o.length - std::min(o.length, i * cap));
    p.plan = plan_slices(p.length, cfg_.block_size, p.write ? kMaxWriteSlices : kMaxReadSlices);
    if (p.length > 0) ORBITE_RETURN_IF_ERROR(plan_segments(peer, p, *set));
    if (job->private_path && !p.segments.empty()) p.segments.front().slot = kPrivateSlot;
    planned.push_back(std::move(p));
  }
  job->parents_left = n;
  const Clock::time_point now = Clock::now();
  for (Parent& p : planned) {
    add(engine_->counters().parents);
    sched_.push(&peer, p.id, priority, now, deadline);  // one batch: its parents keep their order
    peer.parents.insert(std::move(p));
  }
  dispatch_due_ = true;
  return {};
}

void Requester::connect_parent(PeerRdma& peer, Parent& p) {
  p.state = ParentState::Connecting;
  if (p.job->private_path) {
    if (!p.private_qp) connect_private(peer, p);
    return;
  }
  bool all_ready = true;
  for (Segment& s : p.segments) {
    QpArray& arr = peer.arrays[s.array];
    QpSlot& slot = arr.slots[s.slot];
    if (slot.state == QpSlot::State::Ready) {
      s.qp_handle = slot.qp_handle;
      continue;
    }
    all_ready = false;
    if (std::find(slot.waiters.begin(), slot.waiters.end(), p.id) == slot.waiters.end()) {
      slot.waiters.push_back(p.id);
    }
    if (slot.state == QpSlot::State::Building) continue;
    // A cold builder reserves the slot (and its budget) before anything else.
    auto made = lane_.new_qp(arr.context, QpRole::Requester, peer, s.slot);
    if (!made.ok()) {
      slot.waiters.clear();
      return fail_parent(peer, p, made.status().with_context("nothing moved"));
    }
    Qp& q = **made;
    q.psn = random_psn();
    const DeviceLimits& lim = q.ctx->limits;
    q.rd_atomic = clamp_rd_depth(cfg_.max_rd_atomic, lim.max_qp_init_rd_atom);
    q.dest_rd_atomic = clamp_rd_depth(cfg_.max_dest_rd_atomic, lim.max_qp_rd_atom);
    slot.state = QpSlot::State::Building;
    slot.qp_handle = q.handle;
    slot.incarnation = q.incarnation;
    slot.builder = lane_.next_builder();
    QpConnect m;
    m.builder = slot.builder;
    m.slot = s.slot + (hooks_.forge_connect_slot ? peer.width : 0);
    m.qp_incarnation = q.incarnation;
    m.qp = QpEndpointInfo{q.qp->qp_num,
                          q.psn,
                          static_cast<std::uint8_t>(engine_->contexts()[arr.context]->nic_id),
                          arr.remote_nic,
                          q.rd_atomic,
                          q.dest_rd_atomic};
    lane_.send(peer, ControlKind::QpConnect, encode(m));
  }
  if (all_ready) request_grant(peer, p);
}

void Requester::on_qp_accept(PeerRdma& peer, const QpAccept& m) {
  QpArray* arr = nullptr;
  QpSlot* slot = nullptr;
  for (auto& a : peer.arrays) {
    for (auto& s : a.slots) {
      if (s.state == QpSlot::State::Building && s.builder == m.builder) {
        arr = &a;
        slot = &s;
      }
    }
  }
  if (slot == nullptr) {
    return lane_.protocol_error(
        peer, "QpAccept for builder " + std::to_string(m.builder) + ", which is not building");
  }
  Qp* q = lane_.qp(slot->qp_handle);
  Status st;
  if (q != nullptr && q->incarnation != slot->incarnation) q = nullptr;  // lost; handle reused
  if (m.errc == 0 && q == nullptr) {
    // This end was lost with its CQ set while it was building: the source's new end goes too,
    // and the parents waiting build the slot again on the new set.
    const auto index = static_cast<std::uint32_t>(slot - arr->slots.data());
    lane_.send(peer, ControlKind::QpRetire, encode(QpRetire{index, m.qp_incarnation}));
    slot->state = QpSlot::State::Empty;
    std::vector<std::uint64_t> waiters = std::move(slot->waiters);
    slot->waiters.clear();
    for (std::uint64_t id : waiters) {
      Parent* p = peer.parents.find(id);
      if (p != nullptr && p->state == ParentState::Connecting) connect_parent(peer, *p);
    }
    return;
  }
  if (m.errc != 0) {
    st = Status::error(static_cast<Errc>(m.errc), "the peer refused the connection: " + m.reason);
  } else if (q == nullptr || m.qp.nic_id != arr->remote_nic) {
    st = Status::error(Errc::Protocol, "QpAccept names another NIC or a retired QP");
  } else {
    if (const NicRecord* nic = peer.nic(m.qp.nic_id); nic == nullptr) {
      st = Status::error(Errc::Protocol, "QpAccept names an unknown NIC");
    } else {
      // Never more READs in flight than the responder accepts.
      q->rd_atomic = std::min(q->rd_atomic, m.qp.dest_rd_atomic);
      st = connect_rc_qp(*q->ctx, q->qp, remote_end(*nic, m.qp.qpn, m.qp.psn), q->psn, q->rd_atomic,
                         q->dest_rd_atomic);
    }
  }
  std::vector<std::uint64_t> waiters = std::move(slot->waiters);
  slot->waiters.clear();
  if (!st.ok()) {
    slot->state = QpSlot::State::Empty;
    if (q != nullptr) lane_.retire_qp(q->handle);
    for (std::uint64_t id : waiters) {
      if (Parent* p = peer.parents.find(id))
        fail_parent(peer, *p, st.with_context("nothing moved"));
    }
    return;
  }
  q->ready = true;
  q->remote_qpn = m.qp.qpn;
  q->remote_incarnation = m.qp_incarnation;
  slot->state = QpSlot::State::Ready;
  ORBITE_LOG(Debug, Rdma) << q->ctx->name << ": QP " << q->qp->qp_num << " (slot " << q->slot
                          << ") connected to the peer's QP " << m.qp.qpn;
  {
    std::lock_guard lock(engine_->counters().last_qp_mu);
    RdmaQpLimits& l = engine_->counters().last_connected_qp;
    l.valid = true;
    l.hca_max_qp_rd_atom = q->ctx->limits.max_qp_rd_atom;
    l.hca_max_qp_init_rd_atom = q->ctx->limits.max_qp_init_rd_atom;
    l.max_rd_atomic = q->rd_atomic;
    l.max_dest_rd_atomic = q->dest_rd_atomic;
    l.max_inline_data = q->max_inline;
  }
  for (std::uint64_t id : waiters) {
    Parent* p = peer.parents.find(id);
    if (p != nullptr && p->state == ParentState::Connecting) connect_parent(peer, *p);
  }
}

void Requester::request_grant(PeerRdma& peer, Parent& p) {
  if (peer.parents.window_full() && !hooks_.flood_grant_requests) {
    peer.parents.hold(p);
    return;  // still Connecting: its QPs are ready, its request waits for an answer to another
  }
  p.request_waiting = false;
  peer.parents.requested();
  p.state = ParentState::Requesting;
  GrantRequest m;
  m.parent = p.id;
  m.target = p.job->target;
  m.target_generation = p.job->target_generation;
  m.offset = p.remote_offset;
  m.length = p.length;
  m.op = p.job->wire_op;
  m.slices = static_cast<std::uint8_t>(p.plan.lengths.size());
  m.link_incarnation = peer.info.link_incarnation;
  m.priority = static_cast<std::uint8_t>(p.priority);
  if (p.job->private_path && !p.segments.empty()) {
    const Segment& s = p.segments.front();
    if (const Qp* q = own_qp(p)) {
      m.private_path = true;
      m.private_qp = QpEndpointInfo{q->qp->qp_num,
                                    q->psn,
                                    static_cast<std::uint8_t>(q->ctx->nic_id),
                                    peer.arrays[s.array].remote_nic,
                                    q->rd_atomic,
                                    q->dest_rd_atomic};
    }
  }
  if (p.deadline != kNoDeadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(p.deadline - Clock::now());
    m.deadline_us = static_cast<std::uint64_t>(std::max<std::int64_t>(1, left.count()));
  }
  for (Segment& s : p.segments) {
    Qp* q = lane_.qp(s.qp_handle);
    SegmentRequest r;
    r.first_slice = s.first_slice;
    r.slices = s.slices;
    r.slot = s.slot;
    r.offset = p.remote_offset + s.offset;
    r.length = s.length;
    r.qp_incarnation = q != nullptr ? q->remote_incarnation : 0;
    r.requester_qpn = q != nullptr ? q->qp->qp_num : 0;
    m.segments.push_back(r);
  }
  lane_.send(peer, ControlKind::GrantRequest, encode(m));
}

void Requester::send_waiting_requests(PeerRdma& peer) {
  while (Parent* p = peer.parents.next_held()) request_grant(peer, *p);
}

void Requester::on_grant(PeerRdma& peer, const Grant& m) {
  Parent* found = peer.parents.find(m.parent);
  if (found == nullptr || found->state != ParentState::Requesting ||
      m.segments.size() != found->segments.size()) {
    return lane_.protocol_error(peer, "Grant for parent " + std::to_string(m.parent) +
                                          " that asked for none (or for another segment count)");
  }
  Parent& p = *found;
  if (m.private_path != p.job->private_path) {
    return lane_.protocol_error(peer,
                                "Grant for parent " + std::to_string(m.parent) +
                                    (m.private_path ? " on the private path, which it did "
                                                      "not ask for"
                                                    : " without the private path it asked for"));
  }
  peer.parents.answered();
  p.grant = m.grant;
  p.grant_generation = m.generation;
  p.grant_nonce = m.nonce;
  for (std::size_t i = 0; i < m.segments.size(); ++i) {
    p.segments[i].rkey = m.segments[i].rkey;
    p.segments[i].remote_address = m.segments[i].address;
  }
  if (m.private_path) {
    Status st = connect_private_grant(peer, p, m);
    if (st.ok() && std::exchange(hooks_.fail_private_connect, false)) {
      st = Status::error(Errc::Unavailable,
                         "test hook fail_private_connect: connecting the "
                         "private QP to its Grant failed");
    }
    if (!st.ok()) {
      // The grant exists: it goes back (the source tears its objects down and acknowledges).
      resume(p);
      p.failure = st.with_context("nothing moved");
      p.state = ParentState::Canceling;
      return lane_.send(peer, ControlKind::GrantCancel,
                        encode(GrantCancel{p.id, p.grant, p.grant_generation}));
    }
  }
  p.state = ParentState::Granted;
  resume(p);
  dispatch_due_ = true;  // it posts in the scheduler's order, next pass
}

void Requester::resume(Parent& p) {
  if (p.parked.parent == 0) return;  // still in the scheduler (no pass saw it Requesting yet)
  sched_.resume(p.parked);
  p.parked.parent = 0;
}

void Requester::on_grant_nack(PeerRdma& peer, const GrantNack& m) {
  Parent* found = peer.parents.find(m.parent);
  if (found == nullptr || found->state != ParentState::Requesting) {
    return lane_.protocol_error(
        peer, "GrantNack for parent " + std::to_string(m.parent) + " that is not requesting");
  }
  Parent& p = *found;
  peer.parents.answered();
  if (m.cache_miss != 0 && !p.reconnected && !p.job->private_path) {
    // The only case that may reconnect: no authority ever existed for this parent.
    p.reconnected = true;
    add(engine_->counters().reconnects);
    for (const Segment& s : p.segments) {
      QpSlot& slot = peer.arrays[s.array].slots[s.slot];
      if (slot.state == QpSlot::State::Ready) {
        if (Qp* q = lane_.qp(slot.qp_handle)) lane_.retire_qp(q->handle);
        slot.state = QpSlot::State::Empty;
      }
    }
    resume(p);  // Connecting again: its deadline is watched by the passes
    return connect_parent(peer, p);
  }
  // The source's reason says so already when it comes from a grant it closed unpublished.
  const char* tail = m.reason.ends_with("(nothing moved)") ? "" : " (nothing moved)";
  fail_parent(peer, p,
              Status::error(static_cast<Errc>(m.errc),
                            "peer " + p2p::short_id(peer.link->ep.id) + ": " + m.reason + tail));
}

void Requester::on_grant_ack(PeerRdma& peer, const GrantAck& m) {
  Parent* found = peer.parents.find(m.parent);
  if (found == nullptr || found->acked ||
      (found->state == ParentState::Requesting && !found->segments.empty()) ||
      found->state == ParentState::Connecting || found->state == ParentState::Admission) {
    return lane_.protocol_error(
        peer, "GrantAck for parent " + std::to_string(m.parent) + " that has no grant");
  }
  Parent& p = *found;
  if (m.errc == 0 && (m.bytes != p.length || m.grant != p.grant)) {
    return lane_.protocol_error(peer, "GrantAck for " + std::to_string(m.bytes) +
                                          " bytes of grant " + std::to_string(m.grant) +
                                          " does not match the parent");
  }
  if (m.errc == 0 && !p.released.ok()) {
    return lane_.protocol_error(peer, "GrantAck Ok for grant " + std::to_string(m.grant) +
                                          " although segments of it were released unwritten");
  }
  p.acked = true;
  if (m.errc != 0) {
    p.ack_status = Status::error(static_cast<Errc>(m.errc),
                                 "peer " + p2p::short_id(peer.link->ep.id) + ": " + m.reason);
    // A parent that gave segments back reports why (the source only saw status-1 receipts).
    if (p.failure.ok()) p.failure = p.released.ok() ? p.ack_status : p.released;
    p.state = ParentState::Draining;
  }
  maybe_finish_parent(peer, p.id);
}

void Requester::fail_parent(PeerRdma& peer, Parent& p, const Status& why) {
  if (p.failure.ok()) p.failure = why;
  p.state = ParentState::Draining;
  peer.parents.start_draining(p, Clock::now());
  maybe_finish_parent(peer, p.id);
}

void Requester::expire_drains(PeerRdma& peer) {
  peer.parents.take_draining(drain_scratch_);
  if (drain_scratch_.empty()) return;
  const auto now = Clock::now();
  for (std::uint64_t id : drain_scratch_) {
    Parent* found = peer.parents.find(id);
    if (found == nullptr || found->reported) continue;  // ended, or told already: off the list
    Parent& p = *found;
    if (p.wrs_outstanding == 0 || now - *p.draining_since < cfg_.destroy_timeout) {
      peer.parents.keep_draining(id);
      continue;
    }
    // A timeout proves nothing: the WRs may still run, so the loan stays charged for good and
    // the caller must keep the buffer.
    engine_->retain("a parent's WRs did not drain within rdma.destroy_timeout");
    p.direct.keep();
    report(p, Status::error(Errc::Unquiesced,
                            "the RDMA work of this request did not drain within "
                            "rdma.destroy_timeout; its buffer may still be accessed (" +
                                p.failure.message() + ")"));
    if (const Qp* q = own_qp(p)) lane_.retire_qp(q->handle);
    peer.parents.erase(id);
  }
}

void Requester::report(Parent& p, const Status& st) {
  if (p.reported) return;
  p.reported = true;
  p.lease.abandon();  // the charges of slices that never completed
  p.direct.reset();
  p.trial.end();  // no verdict came: cancelled if nothing was posted, else abandoned
  RmaJob& job = *p.job;
  if (!st.ok()) {
    add(engine_->counters().parents_failed);
    if (job.first_error.ok()) job.first_error = st;
  }
  if (--job.parents_left == 0) {
    // No WR of the job can run any more: its own registration goes first.
    job.transient.reset();
    if (job.op.done) {
      auto done = std::move(job.op.done);
      done(job.first_error);
    }
  }
}

void Requester::maybe_finish_parent(PeerRdma& peer, std::uint64_t id) {
  Parent* found = peer.parents.find(id);
  if (found == nullptr) return;
  Parent& p = *found;
  const bool granted = p.grant != 0;
  if (!p.failure.ok() || p.state == ParentState::Draining) {
    // Reported only once no WR of the parent can run any more.
    if (p.wrs_outstanding > 0) return;
    bool posted = false;
    for (const Segment& s : p.segments) posted = posted || s.posted > 0;
    std::string tail;
    if (posted) tail = p.write ? "; effect unknown (the WRITE is not replayed)" : "; replayable";
    report(p, p.failure.ok() ? Status::error(Errc::ConnectionLost, "the parent failed" + tail)
                             : Status::error(p.failure.code(), p.failure.message() + tail));
    // A grant that exists is closed by the source's GrantAck (or the link's loss).
    if (!granted || p.acked || peer.failed) {
      for (auto& arr : peer.arrays) {
        for (auto& slot : arr.slots) std::erase(slot.waiters, id);
      }
      erase_parent(peer, id);
    }
    return;
  }
  if (!p.acked) return;
  const bool receipts = std::all_of(p.segments.begin(), p.segments.end(),
                                    [](const Segment& s) { return s.receipt_done; });
  if (!receipts || p.wrs_outstanding > 0) return;
  report(p, {});
  erase_parent(peer, id);
}

void Requester::erase_parent(PeerRdma& peer, std::uint64_t id) {
  Parent* p = peer.parents.find(id);
  if (p == nullptr) return;
  // A private grant's QP serves this parent alone: it goes with it (to ERR, destroyed once
  // drained; the source destroyed its end before its GrantAck).
  if (const Qp* q = own_qp(*p)) lane_.retire_qp(q->handle);
  peer.parents.erase(id);
}

}  // namespace orbite::rdma
