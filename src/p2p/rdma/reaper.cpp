// The lane's QP reapers: requester payload QPs that carried nothing for rdma.idle_qp_timeout are
// retired at both ends, so that max_endpoints recovers; and QPs on a fenced route are, once idle,
// so that the monitor can publish the route again (docs/reliability.md, "Monitor recovery").
#include <algorithm>

#include "p2p/rdma/lane.h"

namespace orbite::rdma {

namespace {
// How often the reaper looks: a quarter of the timeout, within [10 ms, 1 s].
Duration reap_period(Duration timeout) {
  return std::clamp<Duration>(timeout / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
}
// How often a fenced route's busy QPs are looked at again.
constexpr std::chrono::milliseconds kFenceSweepPeriod{10};
}  // namespace

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
            peer->parents.uses_qp(q->handle)) {
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

void RdmaLane::retire_fenced_qps(Clock::time_point now) {
  if (!fence_sweep_ || now < next_fence_sweep_) return;
  next_fence_sweep_ = now + kFenceSweepPeriod;
  const auto& contexts = engine_->contexts();
  bool busy_left = false;
  for (auto& [link, peer] : peers_) {
    if (peer->failed) continue;
    for (QpArray& arr : peer->arrays) {
      const NicRecord* remote = peer->nic(arr.remote_nic);
      if (contexts[arr.context]->state == ContextState::Active && remote != nullptr &&
          remote->active != 0) {
        continue;
      }
      for (QpSlot& slot : arr.slots) {
        if (slot.state == QpSlot::State::Empty) continue;
        Qp* q = qp(slot.qp_handle);
        // A builder finishes first; a QP a parent still names drains with it.
        if (slot.state != QpSlot::State::Ready || !slot.waiters.empty() ||
            (q != nullptr && (q->sq.outstanding() != 0 || peer->parents.uses_qp(q->handle)))) {
          busy_left = true;
          continue;
        }
        slot.state = QpSlot::State::Empty;
        if (q == nullptr) continue;
        send(*peer, ControlKind::QpRetire, encode(QpRetire{q->slot, q->remote_incarnation}));
        retire_qp(q->handle);
        add(engine_->counters().route_qps_retired);
      }
    }
    if (messenger_.retire_if_fenced(*peer)) busy_left = true;
  }
  fence_sweep_ = busy_left;
}

int RdmaLane::next_timer_ms() const {
  if (fence_sweep_) return static_cast<int>(kFenceSweepPeriod.count());
  // A set whose polls fail: an armed CQ that cannot be polled may never wake the lane, and the
  // run must reach its bound (progress recovery) even so.
  for (const auto& set : cqs_) {
    if (set && set->poll_failures_in_row != 0) return static_cast<int>(kFenceSweepPeriod.count());
  }
  // A deferred GrantRequest waiting for its message's announcement must reach its bound even
  // if nothing else wakes the lane.
  for (const auto& [link, peer] : peers_) {
    if (peer->grants.has_deferred_work()) return 100;
  }
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
