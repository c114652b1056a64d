// The lane's idle-QP reaper: requester payload QPs that carried nothing for rdma.idle_qp_timeout
// are retired at both ends, so that max_endpoints recovers.
#include <algorithm>

#include "p2p/rdma/lane.h"

namespace orbite::rdma {

namespace {
// How often the reaper looks: a quarter of the timeout, within [10 ms, 1 s].
Duration reap_period(Duration timeout) {
  return std::clamp<Duration>(timeout / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
}
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
