// A pin of a registered region (RegionRecord::pin), released when destroyed or reset: the owner
// of the pin a grant holds on its region so that unregister waits for it. Move-only. keep()
// leaves it pinned for good (a grant whose window could not be revoked).
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include "p2p/registry.h"

namespace orbite::rdma {

class RegionPin {
 public:
  RegionPin() = default;
  // The pin, or nullopt when the region is being unregistered (no pin taken).
  static std::optional<RegionPin> take(std::shared_ptr<detail::RegionRecord> region) {
    if (region == nullptr || !region->pin()) return std::nullopt;
    return RegionPin(std::move(region));
  }
  RegionPin(RegionPin&& other) noexcept = default;
  RegionPin& operator=(RegionPin&& other) noexcept {
    if (this != &other) {
      reset();
      region_ = std::move(other.region_);
    }
    return *this;
  }
  RegionPin(const RegionPin&) = delete;
  RegionPin& operator=(const RegionPin&) = delete;
  ~RegionPin() { reset(); }

  void reset() {
    if (region_ != nullptr) std::exchange(region_, nullptr)->unpin();
  }
  void keep() { region_.reset(); }  // the pin count stays up: never released

 private:
  explicit RegionPin(std::shared_ptr<detail::RegionRecord> region) : region_(std::move(region)) {}
  std::shared_ptr<detail::RegionRecord> region_;
};

}  // namespace orbite::rdma
