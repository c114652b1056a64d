// The proxy's ready queue: High, then Medium, then Low, FIFO within a tier. It is the component
// the guide's full arbitration (promotion of aged entries, shared slots, deadline ordering) grows
// into; today it orders the start of requests a worker has accepted.
#pragma once

#include <orbite/transfer.h>

#include <array>
#include <cstddef>
#include <deque>
#include <optional>

namespace orbite::proxy {

template <class T>
class TieredQueue {
 public:
  void push(Priority p, T item) { tiers_[index(p)].push_back(std::move(item)); }

  std::optional<T> pop() {
    for (auto& tier : tiers_) {
      if (!tier.empty()) {
        T out = std::move(tier.front());
        tier.pop_front();
        return out;
      }
    }
    return std::nullopt;
  }

  [[nodiscard]] bool empty() const {
    return tiers_[0].empty() && tiers_[1].empty() && tiers_[2].empty();
  }
  [[nodiscard]] std::size_t size() const {
    return tiers_[0].size() + tiers_[1].size() + tiers_[2].size();
  }
  [[nodiscard]] std::size_t size(Priority p) const { return tiers_[index(p)].size(); }

 private:
  static std::size_t index(Priority p) {
    switch (p) {
      case Priority::High: return 0;
      case Priority::Medium: return 1;
      case Priority::Low: return 2;
    }
    return 0;
  }
  std::array<std::deque<T>, 3> tiers_;
};

}  // namespace orbite::proxy
