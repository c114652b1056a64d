// A token bucket for a device's egress rate: bytes accumulate at the configured rate up to a
// burst, and the NIC sends only what the bucket grants. Header-only and clock-free (the caller
// passes the time), so tests drive it with made-up times.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace softverbs {

class TokenBucket {
 public:
  // rate in bytes per second (> 0); the burst is what may go at once after an idle time:
  // 1 ms of traffic, at least 256 KiB so that small rates still send whole messages quickly.
  void set_rate(double bytes_per_s, uint64_t now_ns) {
    std::lock_guard lock(mu_);
    refill(now_ns);
    rate_ = bytes_per_s;
    burst_ = std::max(256.0 * 1024, bytes_per_s * 1e-3);
    tokens_ = std::min(tokens_, burst_);
  }

  double rate() const {
    std::lock_guard lock(mu_);
    return rate_;
  }

  // Takes up to want bytes; returns how many may be sent now (possibly 0).
  size_t take(uint64_t now_ns, size_t want) {
    std::lock_guard lock(mu_);
    refill(now_ns);
    const auto n = static_cast<size_t>(std::min(tokens_, static_cast<double>(want)));
    tokens_ -= static_cast<double>(n);
    return n;
  }

  // Gives back bytes taken but not sent (a short write).
  void give_back(size_t n) {
    std::lock_guard lock(mu_);
    tokens_ = std::min(burst_, tokens_ + static_cast<double>(n));
  }

  // Nanoseconds until min(want, burst) bytes will be available; 0 if they are now.
  uint64_t wait_ns(uint64_t now_ns, size_t want) {
    std::lock_guard lock(mu_);
    refill(now_ns);
    const double need = std::min(static_cast<double>(want), burst_) - tokens_;
    if (need <= 0) return 0;
    return static_cast<uint64_t>(need / rate_ * 1e9) + 1;
  }

 private:
  void refill(uint64_t now_ns) {
    if (now_ns > last_ns_) {
      tokens_ = std::min(burst_, tokens_ + static_cast<double>(now_ns - last_ns_) * 1e-9 * rate_);
    }
    last_ns_ = std::max(last_ns_, now_ns);
  }

  mutable std::mutex mu_;
  double rate_ = 12.5e9;
  double burst_ = 12.5e6;
  double tokens_ = 12.5e6;
  uint64_t last_ns_ = 0;
};

}  // namespace softverbs
