// The notifications peers delivered to an engine (TransferOptions::notification, notify()),
// kept until the application takes them.
#pragma once

#include <orbite/transfer.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace orbite::p2p {

// Bounds on untaken notifications: a peer cannot grow an engine whose application never takes
// them without limit; the request whose notification finds the box full fails instead.
inline constexpr std::size_t kMaxPendingNotifications = 65536;
inline constexpr std::uint64_t kMaxPendingNotificationBytes = 64ull << 20;

// Lifetime: owned by the engine core; outlives its lanes, which push into it. Thread-safe: its
// mutex is a leaf, taken under a lane's mutex and never held while taking another.
class NotificationBox {
 public:
  explicit NotificationBox(std::size_t max_count = kMaxPendingNotifications,
                           std::uint64_t max_bytes = kMaxPendingNotificationBytes)
      : max_count_(max_count), max_bytes_(max_bytes) {}

  // Keeps `n` for take(); ResourceExhausted naming the bound it would pass when full, and
  // Cancelled once the box is closed.
  Status push(Notification n);
  // What arrived, oldest first, waiting up to `wait` for the first when none is there. Empty
  // when none came in time or the box is closed.
  std::vector<Notification> take(Duration wait);
  // Wakes every waiter; later pushes are refused and take() returns what is left at once.
  void close();

  [[nodiscard]] std::uint64_t received() const { return received_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::size_t pending() const;

 private:
  const std::size_t max_count_;
  const std::uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  // guarded by mu_
  std::deque<Notification> queue_;
  std::uint64_t bytes_ = 0;  // of the queued messages
  bool closed_ = false;
  int waiters_ = 0;  // threads in take() waiting: a push wakes them only when there are some
  std::atomic<std::uint64_t> received_{0}, refused_{0};
};

}  // namespace orbite::p2p
