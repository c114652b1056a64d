// RdmaLane's QP table: creating a QP for a peer (and its budget), posting its receives from the
// receipt or frame pool, retiring it to ERR and destroying it once every WR has completed.
#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "p2p/rdma/lane.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

namespace {
constexpr std::uint32_t kReceiptSlots = 32;  // receives posted on every grant QP's source end
}  // namespace

// ---- QPs ----------------------------------------------------------------------------------

Qp* RdmaLane::qp(std::uint16_t handle) {
  return handle < qps_.size() ? qps_[handle].get() : nullptr;
}

Result<Qp*> RdmaLane::new_qp(std::size_t context, QpRole role, PeerRdma& peer, std::uint32_t slot) {
  CqSet* cqs = context < cqs_.size() ? cqs_[context].get() : nullptr;
  if (cqs == nullptr) {
    return Status::error(Errc::Unavailable,
                         "RDMA context " + std::to_string(context) + " is not usable on this lane");
  }
  ORBITE_RETURN_IF_ERROR(engine_->endpoints().take(1, engine_->counters().budget_exhausted));
  const bool message = slot == kMessageSlot;
  QpCaps caps;
  caps.send_depth = cfg_.max_send_wr;
  caps.recv_depth = role == QpRole::Source ? (message ? kMessageSlots : kReceiptSlots) : 1;
  std::uint32_t max_inline = 0;
  auto made = create_rc_qp(cqs->ctx, *cqs, caps, role, &max_inline);
  if (!made.ok()) {
    engine_->endpoints().give(1);
    if (made.status().code() == Errc::ResourceExhausted) add(engine_->counters().budget_exhausted);
    return made.status();
  }
  std::uint16_t handle = 0;
  if (!free_handles_.empty()) {
    handle = free_handles_.back();
    free_handles_.pop_back();
  } else {
    handle = static_cast<std::uint16_t>(qps_.size());
    qps_.emplace_back();
    qp_generations_.push_back(0);
    qp_peer_.push_back(nullptr);
  }
  auto q = std::make_unique<Qp>(caps.send_depth);
  q->qp = *made;
  q->cqs = cqs;
  q->ctx = &cqs->ctx;
  q->role = role;
  q->handle = handle;
  q->generation = ++qp_generations_[handle];
  q->incarnation = next_qp_incarnation_++;
  q->slot = slot;
  q->max_inline = max_inline;
  q->recv_depth = caps.recv_depth;
  q->message = message;
  q->last_used = Clock::now();
  if (message && role == QpRole::Source) ++message_sources_;
  qps_[handle] = std::move(q);
  qp_peer_[handle] = &peer;
  peer.qps.push_back(handle);
  add(engine_->counters().qps_created);
  return qps_[handle].get();
}

Status RdmaLane::post_receives(Qp& q) {
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

void RdmaLane::retire_qp(std::uint16_t handle) {
  Qp* q = qp(handle);
  if (q == nullptr || std::find(retired_.begin(), retired_.end(), handle) != retired_.end()) {
    return;
  }
  q->broken = true;
  q->ready = false;
  q->retired_at = Clock::now();
  ORBITE_LOG(Debug, Rdma) << q->ctx->name << ": QP " << q->qp->qp_num << " (slot " << q->slot
                          << (q->role == QpRole::Source ? ", source" : ", requester")
                          << ") retired";
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  // ERR flushes whatever is outstanding, each WR with its own completion.
  if (const int rc = engine_->api().modify_qp(q->qp, &a, IBV_QP_STATE); rc != 0) {
    ORBITE_LOG(Warn, Rdma) << q->ctx->name
                           << ": ibv_modify_qp to ERR failed: " << std::strerror(rc);
  }
  retired_.push_back(handle);
}

void RdmaLane::destroy_retired() {
  const auto now = Clock::now();
  for (std::size_t i = 0; i < retired_.size();) {
    Qp* q = qp(retired_[i]);
    // A QP goes once every WR it had has completed or flushed: then none of them can run. One
    // whose completions do not come within rdma.destroy_timeout is destroyed anyway (only the
    // destroy proves that none of its WRs runs again; the parents that waited for them reported
    // Unquiesced when their own window ran out). Receive slots it still held are not reused.
    if (q != nullptr && (q->sq.outstanding() != 0 || q->recv_posted != 0)) {
      if (!q->retired_at || now - *q->retired_at < cfg_.destroy_timeout) {
        ++i;
        continue;
      }
      add(engine_->counters().qps_destroyed_undrained);
      ORBITE_LOG(Warn, Rdma) << q->ctx->name << ": QP " << q->qp->qp_num << " did not drain within "
                             << "rdma.destroy_timeout (" << q->sq.outstanding()
                             << " WRs outstanding); destroying it";
      q->sq.clear();
      q->recv_posted = 0;
    }
    if (q != nullptr) {
      if (q->message && q->role == QpRole::Source) --message_sources_;
      if (const int rc = engine_->api().destroy_qp(q->qp); rc != 0) {
        // The QP still exists: it keeps its endpoint charge, its CQ entries and its handle (a
        // late completion naming the handle finds no QP rather than another one), for good.
        engine_->retain(q->ctx->name + ": ibv_destroy_qp failed: " + std::strerror(rc));
        retained_qps_.push_back(std::move(qps_[q->handle]));
      } else {
        add(engine_->counters().qps_destroyed);
        q->cqs->send_reserved -= q->sq.outstanding() + q->sq.room();
        q->cqs->recv_reserved -= q->recv_depth;
        engine_->endpoints().give(1);
        free_handles_.push_back(q->handle);
        qps_[q->handle].reset();
      }
    }
    retired_.erase(retired_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// ---- the idle-QP reaper ---------------------------------------------------------------------

namespace {
// How often the reaper looks: a quarter of the timeout, within [10 ms, 1 s].
Duration reap_period(Duration timeout) {
  return std::clamp<Duration>(timeout / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
}
}  // namespace

bool RdmaLane::qp_in_use(const PeerRdma& peer, std::uint16_t handle) const {
  for (const auto& [id, p] : peer.parents) {
    for (const Segment& s : p.segments) {
      if (s.qp_handle == handle) return true;
    }
  }
  return false;
}

void RdmaLane::reap_idle_qps(Clock::time_point now) {
  if (cfg_.idle_qp_timeout == Duration::zero() || now < next_reap_) return;
  next_reap_ = now + reap_period(cfg_.idle_qp_timeout);
  for (auto& [link, peer] : peers_) {
    if (peer->failed) continue;
    for (QpArray& arr : peer->arrays) {
      for (QpSlot& slot : arr.slots) {
        if (slot.state != QpSlot::State::Ready || !slot.waiters.empty()) continue;
        Qp* q = qp(slot.qp_handle);
        if (q == nullptr || q->sq.outstanding() != 0 || now - q->last_used < cfg_.idle_qp_timeout ||
            qp_in_use(*peer, q->handle)) {
          continue;
        }
        // Both ends go: the source retires its end on the QpRetire (no grant names this QP,
        // since no parent does), and the endpoint budget recovers on both sides.
        slot.state = QpSlot::State::Empty;
        send(*peer, ControlKind::QpRetire, encode(QpRetire{q->slot, q->remote_incarnation}));
        retire_qp(q->handle);
        add(engine_->counters().qps_reaped);
      }
    }
  }
}

int RdmaLane::next_timer_ms() const {
  if (cfg_.idle_qp_timeout == Duration::zero()) return -1;
  for (const auto& [link, peer] : peers_) {
    for (const QpArray& arr : peer->arrays) {
      for (const QpSlot& slot : arr.slots) {
        if (slot.state != QpSlot::State::Ready) continue;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::max(next_reap_ - Clock::now(), Duration::zero()));
        return static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1000));
      }
    }
  }
  return -1;
}

}  // namespace orbite::rdma
