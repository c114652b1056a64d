// The memory-window key history of one protection domain. A window's rkey is a 24-bit index
// (fixed for the window) and an 8-bit tag that every bind advances (ibv_inc_rkey). An old key
// must never regain authority, so the history remembers, per index, which tags were used; an
// index whose 256 tags are spent is parked (its window is kept allocated and never bound again,
// so the HCA cannot hand the index out anew). Indices that come back after a dealloc continue
// from their recorded tags. At most max_window_key_indices indices are ever recorded: then new
// windows are ResourceExhausted. Not thread-safe: its owner's mutex guards it.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <optional>
#include <unordered_map>

namespace orbite::rdma {

class KeyHistory {
 public:
  explicit KeyHistory(std::uint32_t max_indices) : max_indices_(max_indices) {}

  // A window with initial key `rkey` was allocated: may it be used? ResourceExhausted when its
  // index is new and the history is full, or when the index is parked.
  Status admit(std::uint32_t rkey);
  // The key for the next bind of the window whose current key is `rkey`, or nullopt when the
  // index has used every tag (it is parked now and must not be bound again).
  std::optional<std::uint32_t> next_key(std::uint32_t rkey);

  [[nodiscard]] std::size_t indices() const { return tags_.size(); }
  [[nodiscard]] std::size_t parked() const { return parked_; }
  [[nodiscard]] std::uint64_t keys_used() const { return keys_used_; }

 private:
  struct Index {
    std::uint32_t used = 0;  // tags consumed (binds), 0..256
    std::uint8_t last_tag = 0;
    bool parked = false;
  };
  std::uint32_t max_indices_;
  std::unordered_map<std::uint32_t, Index> tags_;
  std::size_t parked_ = 0;
  std::uint64_t keys_used_ = 0;
};

}  // namespace orbite::rdma
