// RdmaLane's completions: polling the CQ sets (and replacing a set whose polls keep failing),
// and routing each completion by its WR identity to the requester, the source or the message
// channel.
#include <algorithm>
#include <string>

#include "common/log.h"
#include "p2p/rdma/lane.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

namespace {
// How long a CQ set's polls may keep failing before the set is replaced (progress recovery).
constexpr std::chrono::seconds kRecoverProgressAfter{1};
}  // namespace

int RdmaLane::poll_cqs() {
  int work = 0;
  for (std::size_t c = 0; c < cqs_.size(); ++c) {
    if (!cqs_[c]) continue;
    CqSet& set = *cqs_[c];
    for (int round = 0; round < 4; ++round) {
      // Each CQ is polled even when the other's poll failed: a failing send CQ must not starve
      // the receives (or the other way round).
      const int n = verbs::poll_cq(set.send_cq, kPollBatch, wcs_.data());
      if (n < 0) poll_failed(set, "send", n);
      for (int i = 0; i < n; ++i) on_send_cqe(wcs_[static_cast<std::size_t>(i)]);
      const int m = verbs::poll_cq(set.recv_cq, kPollBatch, wcs_.data());
      if (m < 0) poll_failed(set, "receive", m);
      for (int i = 0; i < m; ++i) on_recv_cqe(set, wcs_[static_cast<std::size_t>(i)]);
      if (n >= 0 && m >= 0 && set.poll_failures_in_row != 0) {
        ORBITE_LOG(Warn, Rdma) << set.ctx.name << ": ibv_poll_cq works again after "
                               << set.poll_failures_in_row << " failed polls";
        set.poll_failures_in_row = 0;
        set.next_poll_log = {};
      }
      work += std::max(n, 0) + std::max(m, 0);
      if (n < kPollBatch && m < kPollBatch) break;
    }
    // A run of failures that lasts a second: what the set holds is out of reach, and the lane's
    // progress on this context recovers on a new set.
    if (set.poll_failures_in_row != 0 &&
        Clock::now() - set.failing_since >= kRecoverProgressAfter) {
      recover_progress(c);
      ++work;
    }
  }
  return work;
}

void RdmaLane::poll_failed(CqSet& set, const char* which, int rc) {
  // What the CQ holds stays there and the next pass polls it again; the counter and a log line
  // a second (not one a pass: a lane polls thousands of times a second) make a run visible.
  add(engine_->counters().cq_poll_failures);
  const auto now = Clock::now();
  if (set.poll_failures_in_row++ == 0) set.failing_since = now;
  if (now < set.next_poll_log) return;
  set.next_poll_log = now + std::chrono::seconds(1);
  ORBITE_LOG(Error, Rdma) << set.ctx.name << ": ibv_poll_cq on the " << which << " CQ failed ("
                          << rc << "); " << set.poll_failures_in_row
                          << " failed polls in a row, polling again";
}

void RdmaLane::on_send_cqe(const ibv_wc& wc) {
  const WrId id = WrId::unpack(wc.wr_id);
  Qp* q = qp(id.handle);
  if (q == nullptr || (q->generation & 0xfff) != id.generation) {
    add(engine_->counters().stale_cqes);
    return;
  }
  // Reused, so that a completion costs no allocation. Handlers post WRs but never poll the CQs,
  // so the records are consumed before the next completion is applied.
  std::vector<std::pair<WrRecord, bool>>& resolved = resolved_;
  resolved.clear();
  const bool ok = wc.status == IBV_WC_SUCCESS;
  switch (q->sq.complete(id.seq, ok, resolved)) {
    case SqLedger::Apply::Duplicate: add(engine_->counters().duplicate_cqes); return;
    case SqLedger::Apply::Invalid:
      ORBITE_LOG(Error, Rdma) << q->ctx->name << ": a completion (seq " << id.seq
                              << ") outside the QP's window; the QP is fenced";
      retire_qp(q->handle);
      return;
    case SqLedger::Apply::Applied: break;
  }
  if (!ok && !q->broken) {
    ORBITE_LOG(Debug, Rdma) << q->ctx->name << ": QP " << q->qp->qp_num << " completion "
                            << verbs::wc_status_name(wc.status);
    q->broken = true;
  }
  // The physical completion of a payload WR (signaled, or flushed).
  if (resolved.back().first.kind == WrKind::Payload) add(engine_->counters().payload_send_cqes);
  PeerRdma* peer = qps_.peer(q->handle);
  const auto now = Clock::now();
  for (const auto& [rec, success] : resolved) {
    // Every payload WR is resolved here (or by QpTable::forget_wrs), whether or not its parent
    // is still there to hear of it.
    if (rec.kind == WrKind::Payload) {
      engine_->payload_resolved(rec.nic, rec.tier, rec.bytes, success, now);
    }
    if (rec.kind == WrKind::Frame) {
      messenger_.on_sent(*peer, *q, rec, success, success ? nullptr : &wc);
    } else if (q->role == QpRole::Requester) {
      requester_.on_wr(*peer, *q, rec, success, success ? nullptr : &wc);
    } else {
      source_.on_wr(*peer, rec, success);
    }
  }
  if (q->broken && !qps_.retired(q->handle)) retire_qp(q->handle);
}

void RdmaLane::on_recv_cqe(CqSet& cqs, const ibv_wc& wc) {
  const WrId id = WrId::unpack(wc.wr_id);
  const bool frame = (id.seq & CqSet::kFrameSlotBit) != 0;
  const std::uint32_t slot = id.seq & ~CqSet::kFrameSlotBit;
  Qp* q = qp(id.handle);
  if (id.kind == WrKind::Recv && id.seq == CqSet::kPrivateReceipt) {
    // A private grant's receipt (its buffer is the grant's, not the pool's).
    const bool live = q != nullptr && (q->generation & 0xfff) == id.generation &&
                      q->slot == kPrivateSlot && q->role == QpRole::Source;
    PeerRdma* peer = live ? qps_.peer(q->handle) : nullptr;
    if (!live) return add(engine_->counters().stale_cqes);
    if (q->recv_posted > 0) --q->recv_posted;
    if (peer == nullptr || peer->failed) return;
    return source_.on_private_receipt(*peer, *q, wc);
  }
  if (id.kind != WrKind::Recv ||
      !(frame ? cqs.frames.contains(slot) : cqs.receipts.contains(slot))) {
    ORBITE_LOG(Error, Rdma) << cqs.ctx.name << ": a receive completion with a foreign wr_id";
    return;
  }
  const bool live = q != nullptr && (q->generation & 0xfff) == id.generation;
  PeerRdma* peer = live ? qps_.peer(q->handle) : nullptr;
  if (live && q->recv_posted > 0) --q->recv_posted;
  if (frame) {
    // A frame's slot goes back once the frame is read (on_frame), or now.
    if (live && wc.status == IBV_WC_SUCCESS && peer != nullptr && !peer->failed) {
      ++q->frames;  // taken by this end (a QpLost reports the count)
      return messenger_.on_received(*peer, *q, cqs, slot, wc);
    }
    cqs.frames.give(slot);
    if (!live) add(engine_->counters().stale_cqes);
    if (live && wc.status != IBV_WC_SUCCESS && !q->broken) retire_qp(q->handle);
    return;
  }
  cqs.receipts.give(slot);  // the slot's bytes stay valid until the next receive is posted
  if (!live) {
    add(engine_->counters().stale_cqes);
    return;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    // A flush: the QP is in error; its grants are revoked.
    if (!q->broken) retire_qp(q->handle);
    if (peer != nullptr && !peer->failed) {
      source_.connection_failed(
          *peer, q->handle,
          Status::error(Errc::ConnectionLost, "the connection carrying the grant failed (" +
                                                  std::string(verbs::wc_status_name(wc.status)) +
                                                  "); effect unknown"));
    }
    return;
  }
  if (peer == nullptr || peer->failed) return;
  source_.on_receipt(*peer, *q, cqs, slot, wc);
}

std::size_t RdmaLane::context_of(const CqSet& cqs) const {
  for (std::size_t c = 0; c < cqs_.size(); ++c) {
    if (cqs_[c].get() == &cqs) return c;
  }
  return 0;  // every QP's CQ set is one of the lane's
}

}  // namespace orbite::rdma
