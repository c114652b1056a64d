#include "p2p/rdma/range_locks.h"

namespace orbite::rdma {

bool RangeLocks::conflicts_locked(std::uintptr_t begin, std::uint64_t length,
                                  bool exclusive) const {
  if (length == 0) return false;
  for (const auto& [token, h] : held_) {
    if (h.length == 0 || (!exclusive && !h.exclusive)) continue;
    // Ends in 128 bits: a range that ends at the top of the address space must not wrap.
    using Wide = unsigned __int128;
    if (Wide{begin} < Wide{h.begin} + h.length && Wide{h.begin} < Wide{begin} + length) {
      return true;
    }
  }
  return false;
}

bool RangeLocks::would_conflict(std::uintptr_t begin, std::uint64_t length, bool exclusive) const {
  std::lock_guard lock(mu_);
  return conflicts_locked(begin, length, exclusive);
}

RangeLocks::Token RangeLocks::try_lock(std::uintptr_t begin, std::uint64_t length, bool exclusive) {
  std::lock_guard lock(mu_);
  if (conflicts_locked(begin, length, exclusive)) return 0;
  const Token t = next_++;
  held_.emplace(t, Held{begin, length, exclusive});
  return t;
}

void RangeLocks::unlock(Token token) {
  std::lock_guard lock(mu_);
  held_.erase(token);
}

std::size_t RangeLocks::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

RangeLocks& range_locks() {
  static RangeLocks* table = new RangeLocks();  // never destroyed: lanes may unlock at exit
  return *table;
}

}  // namespace orbite::rdma
