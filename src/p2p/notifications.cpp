#include "p2p/notifications.h"

#include "common/clock.h"

namespace orbite::p2p {

Status NotificationBox::push(Notification n) {
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return Status::error(Errc::Cancelled, "the engine is closing; it takes no notification");
    }
    if (queue_.size() >= max_count_ || bytes_ + n.message.size() > max_bytes_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return Status::error(Errc::ResourceExhausted,
                           "the engine holds " + std::to_string(queue_.size()) +
                               " untaken notifications (" + std::to_string(bytes_) +
                               " bytes), its bound is " + std::to_string(max_count_) + " or " +
                               std::to_string(max_bytes_) +
                               " bytes: its application does not take them (notifications())");
    }
    bytes_ += n.message.size();
    queue_.push_back(std::move(n));
    received_.fetch_add(1, std::memory_order_relaxed);
    // A lane's worker pushes: the futex wake is skipped when nobody waits (an application that
    // polls with no wait).
    if (waiters_ == 0) return {};
  }
  arrived_.notify_all();
  return {};
}

std::vector<Notification> NotificationBox::take(Duration wait) {
  const Deadline until = Deadline::after(wait);
  std::unique_lock lock(mu_);
  auto ready = [&] { return closed_ || !queue_.empty(); };
  if (!ready() && wait > Duration::zero()) {
    ++waiters_;
    if (until.time_point() == Clock::time_point::max()) {
      arrived_.wait(lock, ready);  // no deadline to convert (and overflow) for the wait
    } else {
      arrived_.wait_until(lock, until.time_point(), ready);
    }
    --waiters_;
  }
  std::vector<Notification> out;
  out.reserve(queue_.size());
  for (auto& n : queue_) out.push_back(std::move(n));
  queue_.clear();
  bytes_ = 0;
  return out;
}

void NotificationBox::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  arrived_.notify_all();
}

std::size_t NotificationBox::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

}  // namespace orbite::p2p
