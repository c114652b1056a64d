// The requester's payload: READ/WRITE WRs by SQ room with the signal interval, the proven-suffix
// rule of a failed post, the receipt (SEND_WITH_INV with the binding), and the completions of
// all of them.
#include <algorithm>
#include <csignal>
#include <cstring>

#include "p2p/rdma/requester.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

void Requester::learn_rail(Parent& p, const Segment& last, Clock::time_point now) {
  // One sample per (parent, NIC), once the NIC's last segment of the parent has completed: its
  // payload bytes over first post to last payload completion (TENT's), given to each slice in
  // proportion to its length. Segments of one NIC share its QPs, so a per-segment time would
  // count the others' service too.
  std::optional<Clock::time_point> first;
  std::uint64_t bytes = 0;
  for (const Segment& s : p.segments) {
    if (s.nic != last.nic) continue;
    if (&s != &last && s.completed < s.slices) return;  // not the NIC's last
    if (s.first_post && (!first || *s.first_post < *first)) first = s.first_post;
    bytes += s.length;
  }
  if (!first || bytes == 0) return;
  const double total = static_cast<double>((now - *first).count());
  for (const Segment& s : p.segments) {
    if (s.nic != last.nic) continue;
    for (std::size_t k = s.first_slice; k < std::size_t{s.first_slice} + s.slices; ++k) {
      const double share = static_cast<double>(p.plan.lengths[k]) / static_cast<double>(bytes);
      p.lease.complete(k, true, std::chrono::nanoseconds(static_cast<std::int64_t>(total * share)));
    }
  }
}

void Requester::note_posted(Segment& s, const ibv_send_wr* wrs, std::uint32_t count) {
  if (count == 0) return;
  const auto now = Clock::now();
  if (!s.first_post) s.first_post = now;
  std::uint64_t bytes = 0;
  for (std::uint32_t j = 0; j < count; ++j) bytes += wrs[j].sg_list->length;
  engine_->payload_posted(s.nic, posting_tier_, bytes, now);
}

void Requester::post_payload(PeerRdma& peer, Parent& p) {
  const std::uint64_t id = p.id;
  for (std::size_t si = 0; si < p.segments.size() && p.state == ParentState::Granted; ++si) {
    Segment& s = p.segments[si];
    if ((s.completed == s.slices || s.released) && !s.receipt_posted) {
      post_receipt(peer, p, s, s.released);    // one that found its SQ full earlier
      if (!peer.parents.contains(id)) return;  // it failed, and ended
      continue;
    }
    if (s.released) continue;
    Qp* q = p.private_qp ? own_qp(p) : lane_.qp(s.qp_handle);
    if (q == nullptr || q->broken) {
      return fail_parent(
          peer, p, Status::error(Errc::ConnectionLost, "the RDMA connection of a segment failed"));
    }
    if (s.posted == s.slices) continue;
    // Test hook: only the first segment posts before the deadline (release_unstarted then).
    if (hooks_.hold_later_segments && si > 0 && p.deadline != kNoDeadline) continue;
    if (hooks_.other_qp && peer.arrays[s.array].slots.size() > 1) {
      // Test hook: the segment's WRs on another QP of the array (the window is not bound there).
      const QpSlot& other = peer.arrays[s.array].slots[(s.slot + 1) % peer.width];
      if (other.state == QpSlot::State::Ready && lane_.qp(other.qp_handle) != nullptr) {
        q = lane_.qp(other.qp_handle);
      }
    }
    const std::uint32_t n = payload_room(p, s, *q);
    if (n == 0) continue;  // a full QP (or NIC window) waits without holding back the others
    if (!post_slices(peer, p, si, *q, n)) return;  // the parent failed
  }
}

std::uint32_t Requester::payload_room(const Parent& p, const Segment& s, const Qp& q) {
  // RC serves a QP in order: lower-tier WRs posted now would go before the receipt that a
  // higher tier's outstanding payload is about to post, so they wait for it.
  if (q.sq.payload_above(posting_tier_)) return 0;
  const std::uint32_t room = q.sq.room();
  if (room <= 1) return 0;  // one WR stays free for the segment's receipt
  std::uint32_t n = std::min<std::uint32_t>(room - 1, s.slices - s.posted);
  if (!post_room_bounded_ || s.nic < 0 || static_cast<std::size_t>(s.nic) >= post_room_.size()) {
    return n;
  }
  // The NIC's share of rdma.post_queue_target for this tier: at least one WR, then what fits; the
  // rest stays in the scheduler's order for the next pass. What is posted counts against this tier
  // and the tiers below it in this pass too.
  auto& rooms = post_room_[static_cast<std::size_t>(s.nic)];
  const std::uint64_t left = rooms[posting_tier_];
  if (left == 0) return 0;
  std::uint32_t fit = 0;
  std::uint64_t bytes = 0;
  for (; fit < n; ++fit) {
    const std::uint64_t len = p.plan.lengths[s.first_slice + s.posted + fit];
    if (fit > 0 && bytes + len > left) break;
    bytes += len;
  }
  for (std::size_t t = posting_tier_; t < kTiers; ++t) {
    rooms[t] = bytes >= rooms[t] ? 0 : rooms[t] - bytes;
  }
  return fit;
}

bool Requester::post_slices(PeerRdma& peer, Parent& p, std::size_t si, Qp& q, std::uint32_t n) {
  Segment& s = p.segments[si];
  const std::uint32_t every = std::clamp<std::uint32_t>(
      cfg_.signal_interval, 1, std::max<std::uint32_t>(1, cfg_.max_send_wr / 2));
  // The lane's scratch (no allocation per post once grown).
  wr_scratch_.assign(n, ibv_send_wr{});
  sge_scratch_.assign(n, ibv_sge{});
  seq_scratch_.assign(n, 0);
  for (std::uint32_t j = 0; j < n; ++j) {
    const std::size_t slice = s.first_slice + s.posted + j;
    const std::uint64_t at = slice * p.plan.block;
    const std::uint64_t len = p.plan.lengths[slice];
    const bool signaled = (j + 1) % every == 0 || j + 1 == n;
    WrRecord rec;
    rec.kind = WrKind::Payload;
    rec.owner = p.id;
    rec.segment = static_cast<std::uint16_t>(si);
    rec.bytes = len;
    rec.read = !p.write;
    rec.signaled = signaled;
    rec.tier = static_cast<std::uint8_t>(posting_tier_);
    rec.nic = static_cast<std::int16_t>(s.nic);
    seq_scratch_[j] = q.sq.push(rec);
    sge_scratch_[j] = ibv_sge{reinterpret_cast<std::uint64_t>(p.local + at),
                              static_cast<std::uint32_t>(len), s.lkey};
    ibv_send_wr& wr = wr_scratch_[j];
    wr.wr_id = q.id(WrKind::Payload, seq_scratch_[j]).pack();
    wr.sg_list = &sge_scratch_[j];
    wr.num_sge = 1;
    wr.opcode = p.write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = s.remote_address + (at - s.offset);
    wr.wr.rdma.rkey = s.rkey;
    if (hooks_.replay_key && p.write && replay_rkey_ != 0) wr.wr.rdma.rkey = replay_rkey_;
    if (hooks_.widen_write && p.write && s.posted + j + 1 == s.slices) ++sge_scratch_[j].length;
    wr.next = j + 1 < n ? &wr_scratch_[j + 1] : nullptr;
  }
  q.last_used = Clock::now();
  ibv_send_wr* bad = nullptr;
  const int rc = verbs::post_send(q.qp, wr_scratch_.data(), &bad);
  std::uint32_t accepted = n;
  if (rc != 0) {
    const std::ptrdiff_t k = bad == nullptr ? -1 : bad - wr_scratch_.data();
    // A proven unaccepted suffix is forgotten exactly; an unknown result keeps every WR
    // charged until the QP is destroyed.
    const bool proven = k >= 0 && k < static_cast<std::ptrdiff_t>(n);
    if (proven) {
      accepted = static_cast<std::uint32_t>(k);
      q.sq.unpost_from(seq_scratch_[accepted]);
    }
  }
  note_posted(s, wr_scratch_.data(), accepted);
  if (accepted > 0 && p.trial.running() && p.trial.pair() == pair_of(peer, s)) p.trial.posted();
  s.posted = static_cast<std::uint8_t>(s.posted + accepted);
  p.wrs_outstanding += accepted;
  if (rc != 0) {
    note_rail_error(peer, p, s);
    slot_broken(peer, q);
    fail_parent(peer, p,
                verbs::errno_status(Errc::ConnectionLost,
                                    q.ctx->name + ": ibv_post_send of a payload WR", rc));
    return false;
  }
  if (hooks_.kill_after_payload) ::raise(SIGKILL);  // test hook: dies mid-payload
  return true;
}

Binding Requester::receipt_binding(const PeerRdma& peer, const Parent& p, const Segment& s,
                                   const Qp& q, bool release) const {
  Binding b;
  b.op = p.job->wire_op;
  b.first_slice = s.first_slice;
  b.slice_count = s.slices;
  b.source_engine = peer.info.engine;
  b.requester_engine = engine_->engine_key();
  b.link_incarnation = peer.info.link_incarnation;
  b.qp_incarnation = q.remote_incarnation;
  b.grant_id = p.grant;
  b.grant_generation = p.grant_generation;
  b.grant_nonce = p.grant_nonce;
  b.request_id = p.id;
  b.target_id = p.job->target;
  b.target_generation = p.job->target_generation;
  b.offset = p.remote_offset + s.offset;
  b.length = s.length;
  b.rkey = s.rkey;
  b.source_qpn = q.remote_qpn;
  b.requester_qpn = q.qp->qp_num;
  b.payload_wrs = release ? 0 : s.slices;
  b.status = release ? 1 : 0;
  return b;
}

void Requester::post_receipt(PeerRdma& peer, Parent& p, Segment& s, bool release) {
  Qp* q = p.private_qp ? own_qp(p) : lane_.qp(s.qp_handle);
  if (q == nullptr || q->broken) {
    return fail_parent(
        peer, p,
        Status::error(Errc::ConnectionLost, "the RDMA connection failed before the receipt"));
  }
  if (!release) {
    if (hooks_.kill_before_receipt) ::raise(SIGKILL);  // test hook: dies before the receipt
    if (hooks_.withhold_receipt) {
      // Test hook: the first parent to get here stalls, alive, and never sends its receipts.
      if (withheld_parent_ == 0) withheld_parent_ = p.id;
      if (withheld_parent_ == p.id) return;
    }
    if (hooks_.flood_grant_requests) return;  // test hook: every grant stays open
  }
  if (q->sq.room() == 0) return;  // the SQ is full: posted on a later pass
  const auto bytes = encode(receipt_binding(peer, p, s, *q, release));
  ibv_sge sge{};
  const bool inline_ok = q->max_inline >= kBindingBytes;
  if (inline_ok) {
    sge = ibv_sge{reinterpret_cast<std::uint64_t>(bytes.data()), kBindingBytes, 0};
  } else {
    auto slot = q->cqs->receipts.take();
    if (!slot.ok()) return;  // retried on the next pass
    add(engine_->counters().receipt_slots_in_use);
    s.receipt_slot = static_cast<std::int32_t>(*slot);
    std::byte* at = q->cqs->receipts.at(*slot);
    std::memcpy(at, bytes.data(), kBindingBytes);
    sge = ibv_sge{reinterpret_cast<std::uint64_t>(at), kBindingBytes, q->cqs->receipts.lkey(*slot)};
  }
  WrRecord rec;
  rec.kind = WrKind::Receipt;
  rec.owner = p.id;
  rec.segment = static_cast<std::uint16_t>(&s - p.segments.data());
  rec.signaled = true;
  const std::uint32_t seq = q->sq.push(rec);
  ibv_send_wr wr{};
  wr.wr_id = q->id(WrKind::Receipt, seq).pack();
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (p.job->private_path) {
    // The grant's key is its private MR's, which only the teardown revokes: an ordinary SEND.
    wr.opcode = IBV_WR_SEND;
  } else {
    wr.opcode = IBV_WR_SEND_WITH_INV;
    wr.invalidate_rkey = s.rkey;
  }
  // The fence keeps the receipt behind every READ of the segment.
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE | (inline_ok ? IBV_SEND_INLINE : 0);
  q->last_used = Clock::now();
  ibv_send_wr* bad = nullptr;
  if (const int rc = verbs::post_send(q->qp, &wr, &bad); rc != 0) {
    if (bad == &wr) {
      q->sq.unpost_from(seq);
      release_receipt_slot(*q, s);  // proven unposted: the HCA never reads it
    } else {
      ++p.wrs_outstanding;  // its completion (or flush) gives the slot back
    }
    note_rail_error(peer, p, s);
    slot_broken(peer, *q);
    return fail_parent(peer, p,
                       verbs::errno_status(Errc::ConnectionLost,
                                           q->ctx->name + ": ibv_post_send of a receipt", rc));
  }
  s.receipt_posted = true;
  ++p.wrs_outstanding;
  if (std::all_of(p.segments.begin(), p.segments.end(),
                  [](const Segment& x) { return x.receipt_posted; })) {
    p.state = ParentState::AwaitAck;
  }
}

void Requester::on_wr(PeerRdma& peer, Qp& q, const WrRecord& r, bool ok, const ibv_wc* wc) {
  Parent* found = peer.parents.find(r.owner);
  if (found == nullptr) return;
  Parent& p = *found;
  if (p.wrs_outstanding > 0) --p.wrs_outstanding;
  Segment& s = p.segments[r.segment];
  // A receipt's completion, successful, failed or flushed, ends the HCA's use of its slot.
  if (r.kind == WrKind::Receipt) release_receipt_slot(q, s);
  // (The lane drained the transmit meter and the tier backlog for a payload WR already.)
  if (r.kind == WrKind::Payload && ok && s.completed + 1 == s.slices) {
    learn_rail(p, s, Clock::now());
  }
  if (!ok) {
    // A rail error (not a flush, not an authority failure): is the port still up? A port that
    // went down pauses its context now, so the next parents take the other rails.
    if (wc != nullptr && wc->status != IBV_WC_WR_FLUSH_ERR && wc->status != IBV_WC_REM_ACCESS_ERR) {
      const auto& contexts = engine_->contexts();
      for (std::size_t c = 0; c < contexts.size(); ++c) {
        if (contexts[c].get() == q.ctx) engine_->refresh_port(c);
      }
      note_rail_error(peer, p, s);
    }
    slot_broken(peer, q);
    const std::string what = r.kind == WrKind::Receipt ? "the receipt" : "a payload WR";
    fail_parent(peer, p,
                Status::error(
                    Errc::ConnectionLost,
                    q.ctx->name + ": " + what + " of segment " + std::to_string(r.segment) +
                        " completed with " + verbs::wc_status_name(wc != nullptr ? wc->status : 0) +
                        (wc != nullptr ? " (vendor error " + std::to_string(wc->vendor_err) + ")"
                                       : std::string())));
    return;  // fail_parent finished it if it could (the parent may be gone now)
  }
  if (r.kind == WrKind::Payload) {
    ++s.completed;
    add(r.read ? engine_->counters().completed_reads : engine_->counters().completed_writes);
    add(r.read ? engine_->counters().bytes_read : engine_->counters().bytes_written, r.bytes);
    if (s.completed == s.slices && !s.receipt_posted && p.failure.ok()) {
      post_receipt(peer, p, s);  // may fail the parent, and so end it
      return maybe_finish_parent(peer, r.owner);
    }
  } else if (r.kind == WrKind::Receipt) {
    s.receipt_done = true;
    // A positive receipt: the pair carried the segment end to end.
    if (!s.released && p.trial.running() && p.trial.pair() == pair_of(peer, s)) {
      p.trial.succeeded();
    }
    replay_rkey_ = s.rkey;
    add(s.released ? engine_->counters().receipts_released : engine_->counters().receipts_sent);
  }
  maybe_finish_parent(peer, r.owner);
}

void Requester::release_receipt_slot(Qp& q, Segment& s) {
  if (s.receipt_slot < 0) return;
  q.cqs->receipts.give(static_cast<std::uint32_t>(s.receipt_slot));
  s.receipt_slot = -1;
  engine_->counters().receipt_slots_in_use.fetch_sub(1, std::memory_order_relaxed);
}

void Requester::slot_broken(PeerRdma& peer, Qp& q) {
  q.broken = true;
  for (auto& arr : peer.arrays) {
    for (auto& slot : arr.slots) {
      if (slot.state == QpSlot::State::Ready && slot.qp_handle == q.handle) {
        slot.state = QpSlot::State::Empty;
        // The source retires its end (and revokes what was granted through it).
        if (!peer.failed) {
          lane_.send(peer, ControlKind::QpRetire, encode(QpRetire{q.slot, q.remote_incarnation}));
        }
      }
    }
  }
  lane_.retire_qp(q.handle);
}

}  // namespace orbite::rdma
