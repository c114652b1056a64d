// One monotonic clock domain for every timeout and deadline in OrbiTE.
#pragma once

#include <orbite/config.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace orbite {

using Clock = std::chrono::steady_clock;

// An absolute point on the monotonic clock after which a wait gives up.
class Deadline {
 public:
  static Deadline after(Duration d) {
    Deadline out;
    out.at_ = d >= Duration::max() / 2 ? Clock::time_point::max() : Clock::now() + d;
    return out;
  }
  static Deadline never() { return Deadline(); }

  [[nodiscard]] bool expired() const { return Clock::now() >= at_; }
  [[nodiscard]] Duration remaining() const {
    if (at_ == Clock::time_point::max()) return Duration::max();
    auto left = at_ - Clock::now();
    return left > Duration::zero() ? std::chrono::duration_cast<Duration>(left) : Duration::zero();
  }
  // For poll()/epoll_wait(): milliseconds rounded up, -1 for never, capped at cap_ms.
  [[nodiscard]] int poll_timeout_ms(int cap_ms = 1 << 30) const {
    if (at_ == Clock::time_point::max()) return cap_ms >= (1 << 30) ? -1 : cap_ms;
    auto left = remaining();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left +
                                                                    std::chrono::microseconds(999));
    return static_cast<int>(std::min<std::int64_t>(ms.count(), cap_ms));
  }
  [[nodiscard]] Clock::time_point time_point() const { return at_; }

 private:
  Clock::time_point at_ = Clock::time_point::max();
};

inline std::int64_t to_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace orbite
