// Process-wide locks on exact address ranges: a grant takes its range shared (READ: the peer
// reads the memory) or exclusive (WRITE), and a conflicting grant is refused, not queued. Keyed
// by address, so two regions that alias the same memory conflict too. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

namespace orbite::rdma {

class RangeLocks {
 public:
  // A held lock; 0 is none.
  using Token = std::uint64_t;
  // The lock, or 0 when [begin, begin + length) overlaps a lock it conflicts with (an empty
  // range conflicts with nothing).
  Token try_lock(std::uintptr_t begin, std::uint64_t length, bool exclusive);
  void unlock(Token token);
  [[nodiscard]] std::size_t held() const;

 private:
  struct Held {
    std::uintptr_t begin = 0;
    std::uint64_t length = 0;
    bool exclusive = false;
  };
  mutable std::mutex mu_;
  std::map<Token, Held> held_;  // few at a time (max_grants): a scan is cheaper than a tree
  Token next_ = 1;
};

// The one table of this process.
RangeLocks& range_locks();

}  // namespace orbite::rdma
