// The lane's QP table (qp_table.h): creating a QP for a peer (and its budget), posting its
// receives from the receipt or frame pool, retiring it to ERR and destroying it once every WR has
// completed (or its destruction window ran out).
#include "p2p/rdma/qp_table.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

namespace {
constexpr std::uint32_t kReceiptSlots = 32;  // receives posted on every grant QP's source end
}  // namespace

// ---- QPs ----------------------------------------------------------------------------------

Result<Qp*> QpTable::create(CqSet& cqs, QpRole role, PeerRdma& peer, std::uint32_t slot,
                            ibv_pd* pd) {
  // Handles are 16 bits and kNoQpHandle is never one (whatever rdma.max_endpoints allows).
  if (free_handles_.empty() && qps_.size() >= kNoQpHandle) {
    add(engine_.counters().budget_exhausted);
    return Status::error(Errc::ResourceExhausted,
                         "a lane holds at most " + std::to_string(kNoQpHandle) + " QPs");
  }
  ORBITE_RETURN_IF_ERROR(engine_.endpoints().take(1, engine_.counters().budget_exhausted));
  const bool message = slot == kMessageSlot;
  const bool private_source = slot == kPrivateSlot && role == QpRole::Source;
  QpCaps caps;
  caps.send_depth = private_source ? 1 : cfg_.max_send_wr;
  caps.recv_depth = role == QpRole::Source ? (message          ? kMessageSlots
                                              : private_source ? 1
                                                               : kReceiptSlots)
                                           : 1;
  std::uint32_t max_inline = 0;
  auto made = create_rc_qp(cqs.ctx, cqs, caps, role, &max_inline, pd);
  if (!made.ok()) {
    engine_.endpoints().give(1);
    if (made.status().code() == Errc::ResourceExhausted) add(engine_.counters().budget_exhausted);
    return made.status();
  }
  std::uint16_t handle = 0;
  if (!free_handles_.empty()) {
    handle = free_handles_.back();
    free_handles_.pop_back();
  } else {
    handle = static_cast<std::uint16_t>(qps_.size());
    qps_.emplace_back();
    generations_.push_back(0);
    peers_.push_back(nullptr);
  }
  auto q = std::make_unique<Qp>(caps.send_depth);
  q->qp = *made;
  q->cqs = &cqs;
  q->ctx = &cqs.ctx;
  q->role = role;
  q->handle = handle;
  q->generation = ++generations_[handle];
  q->incarnation = next_incarnation_++;
  q->slot = slot;
  q->max_inline = max_inline;
  q->recv_depth = caps.recv_depth;
  q->message = message;
  q->last_used = Clock::now();
  if (message && role == QpRole::Source) ++message_sources_;
  qps_[handle] = std::move(q);
  peers_[handle] = &peer;
  add(engine_.counters().qps_created);
  cqs.ctx.live_qps.fetch_add(1, std::memory_order_acq_rel);  // the monitor's drain gate
  return qps_[handle].get();
}

Status QpTable::post_receives(Qp& q) {
  CqSet& cqs = *q.cqs;
  // A message QP takes frames, a grant QP receipts: each from its own pool, tagged in the wr_id.
  SlotPool& pool = q.message ? cqs.frames : cqs.receipts;
  const std::uint32_t tag = q.message ? CqSet::kFrameSlotBit : 0;
  while (q.recv_posted < q.recv_depth) {
    auto slot = pool.take();
    if (!slot.ok()) return slot.status();
    ibv_sge sge{reinterpret_cast<std::uint64_t>(pool.at(*slot)), pool.slot_bytes(),
                pool.lkey(*slot)};
    ibv_recv_wr wr{};
    wr.wr_id = q.id(WrKind::Recv, *slot | tag).pack();
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (const int rc = verbs::post_recv(q.qp, &wr, &bad); rc != 0) {
      pool.give(*slot);
      q.broken = true;
      return verbs::errno_status(Errc::Unavailable, q.ctx->name + ": ibv_post_recv", rc);
    }
    ++q.recv_posted;
  }
  return {};
}

bool QpTable::retired(std::uint16_t handle) const {
  return std::find(retired_.begin(), retired_.end(), handle) != retired_.end();
}

void QpTable::retire(std::uint16_t handle) {
  Qp* q = get(handle);
  if (q == nullptr || q->qp == nullptr || retired(handle)) return;
  q->broken = true;
  q->ready = false;
  q->retired_at = Clock::now();
  ORBITE_LOG(Debug, Rdma) << q->ctx->name << ": QP " << q->qp->qp_num << " (slot " << q->slot
                          << (q->role == QpRole::Source ? ", source" : ", requester")
                          << ") retired";
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  // ERR flushes whatever is outstanding, each WR with its own completion.
  if (const int rc = engine_.api().modify_qp(q->qp, &a, IBV_QP_STATE); rc != 0) {
    ORBITE_LOG(Warn, Rdma) << q->ctx->name
                           << ": ibv_modify_qp to ERR failed: " << std::strerror(rc);
  }
  retired_.push_back(handle);
}

void QpTable::destroy_retired(Clock::time_point now) {
  for (std::size_t i = 0; i < retired_.size();) {
    Qp* q = get(retired_[i]);
    // A QP goes once every WR it had has completed or flushed: then none of them can run. One
    // whose completions do not come within rdma.destroy_timeout is destroyed anyway (only the
    // destroy proves that none of its WRs runs again; the parents that waited for them reported
    // Unquiesced when their own window ran out). Receive slots it still held are not reused.
    if (q != nullptr && (q->sq.outstanding() != 0 || q->recv_posted != 0)) {
      if (!q->retired_at || now - *q->retired_at < cfg_.destroy_timeout) {
        ++i;
        continue;
      }
      add(engine_.counters().qps_destroyed_undrained);
      ORBITE_LOG(Warn, Rdma) << q->ctx->name << ": QP " << q->qp->qp_num << " did not drain within "
                             << "rdma.destroy_timeout (" << q->sq.outstanding()
                             << " WRs outstanding); destroying it";
      forget_wrs(*q);
    }
    if (q != nullptr) destroy(*q);
    retired_.erase(retired_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

bool QpTable::destroy(Qp& q) {
  const std::uint16_t handle = q.handle;
  if (!destroy_native(q)) return false;
  release(handle);
  return true;
}

void QpTable::release(std::uint16_t handle) {
  free_handles_.push_back(handle);
  peers_[handle] = nullptr;
  qps_[handle].reset();
}

bool QpTable::destroy_native(Qp& q) {
  if (q.message && q.role == QpRole::Source) --message_sources_;
  const std::uint16_t handle = q.handle;
  if (const int rc = engine_.api().destroy_qp(q.qp); rc != 0) {
    // The QP still exists: it keeps its endpoint charge, its CQ entries and its handle (a late
    // completion naming the handle finds no QP rather than another one), for good.
    engine_.retain(q.ctx->name + ": ibv_destroy_qp failed: " + std::strerror(rc));
    retained_.push_back(std::move(qps_[handle]));
    return false;
  }
  add(engine_.counters().qps_destroyed);
  q.ctx->live_qps.fetch_sub(1, std::memory_order_acq_rel);
  q.cqs->send_reserved -= static_cast<std::uint32_t>(q.sq.outstanding()) + q.sq.room();
  q.cqs->recv_reserved -= q.recv_depth;
  engine_.endpoints().give(1);
  q.qp = nullptr;
  return true;
}

void QpTable::on_set(const CqSet& cqs, std::vector<std::uint16_t>& out) const {
  out.clear();
  for (const auto& q : qps_) {
    if (q != nullptr && q->qp != nullptr && q->cqs == &cqs) out.push_back(q->handle);
  }
}

bool QpTable::retains(const CqSet& cqs) const {
  return std::any_of(retained_.begin(), retained_.end(),
                     [&](const std::unique_ptr<Qp>& q) { return q->cqs == &cqs; });
}

bool QpTable::kill(std::uint16_t handle, std::vector<WrRecord>& records) {
  records.clear();
  Qp* q = get(handle);
  if (q == nullptr || q->qp == nullptr) return true;
  std::erase(retired_, handle);
  q->broken = true;
  q->ready = false;
  records.assign(q->sq.records().begin(), q->sq.records().end());
  // The payload bytes leave the NIC's meters here, as for any QP destroyed undrained.
  forget_wrs(*q);
  if (!destroy_native(*q)) {
    records.clear();  // a retained QP's WRs may still run: nobody may hear they failed
    return false;
  }
  return true;
}

Status QpTable::destroy_now(std::uint16_t handle) {
  Qp* q = get(handle);
  if (q == nullptr || q->qp == nullptr) return {};  // absent, or killed with its CQ set
  std::erase(retired_, handle);
  q->broken = true;
  q->ready = false;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (const int rc = engine_.api().modify_qp(q->qp, &a, IBV_QP_STATE); rc != 0) {
    ORBITE_LOG(Warn, Rdma) << q->ctx->name
                           << ": ibv_modify_qp to ERR failed: " << std::strerror(rc);
  }
  forget_wrs(*q);
  const std::string name = q->ctx->name;
  if (!destroy(*q)) {
    return Status::error(Errc::Unquiesced,
                         name + ": ibv_destroy_qp of a private grant's QP failed; it is retained");
  }
  return {};
}

void QpTable::forget_wrs(Qp& q) {
  const auto now = Clock::now();
  for (const WrRecord& r : q.sq.records()) {
    if (r.kind == WrKind::Payload) engine_.payload_resolved(r.nic, r.tier, r.bytes, false, now);
  }
  q.sq.clear();
  q.recv_posted = 0;
}

void QpTable::abandon_retired() {
  for (std::uint16_t h : retired_) {
    if (Qp* q = get(h)) forget_wrs(*q);
  }
  destroy_retired(Clock::now());
}

}  // namespace orbite::rdma
