#include "p2p/rdma/key_history.h"

#include <string>

namespace orbite::rdma {

Status KeyHistory::admit(std::uint32_t rkey) {
  const std::uint32_t index = rkey >> 8;
  auto it = tags_.find(index);
  if (it == tags_.end()) {
    if (tags_.size() >= max_indices_) {
      return Status::error(Errc::ResourceExhausted,
                           "rdma.max_window_key_indices: the window key history of this PD is "
                           "full (" +
                               std::to_string(max_indices_) + " indices)");
    }
    Index fresh;
    fresh.last_tag = static_cast<std::uint8_t>(rkey & 0xff);
    tags_.emplace(index, fresh);
    return {};
  }
  if (it->second.parked) {
    return Status::error(Errc::ResourceExhausted,
                         "window index " + std::to_string(index) + " has used all 256 keys");
  }
  return {};
}

std::optional<std::uint32_t> KeyHistory::next_key(std::uint32_t rkey) {
  const std::uint32_t index = rkey >> 8;
  auto it = tags_.find(index);
  if (it == tags_.end() || it->second.parked) return std::nullopt;
  Index& e = it->second;
  if (e.used >= 255) {
    // The next tag would come back to one already used: park the index for good.
    e.parked = true;
    ++parked_;
    return std::nullopt;
  }
  ++e.used;
  e.last_tag = static_cast<std::uint8_t>(e.last_tag + 1);  // ibv_inc_rkey: the low 8 bits
  ++keys_used_;
  return index << 8 | e.last_tag;
}

}  // namespace orbite::rdma
