// Process-wide locks on exact address ranges: a grant takes its range shared (READ: the peer
// reads the memory) or exclusive (WRITE); a conflicting put or get grant is refused, a
// conflicting rendezvous into a receive waits (source.cpp). Keyed by address, so two regions
// that alias the same memory conflict too. Thread-safe.
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
  // Whether try_lock would refuse now (a hint: another thread may lock or unlock right after).
  [[nodiscard]] bool would_conflict(std::uintptr_t begin, std::uint64_t length,
                                    bool exclusive) const;
  [[nodiscard]] std::size_t held() const;

 private:
  bool conflicts_locked(std::uintptr_t begin, std::uint64_t length, bool exclusive) const;
  struct Held {
    std::uintptr_t begin = 0;
    std::uint64_t length = 0;
    bool exclusive = false;
  };
  // Order: a lane's mutex → mu_, a leaf (no other lock is taken under it; the window keys of a
  // grant's binds are taken after the range is locked, not under mu_).
  mutable std::mutex mu_;
  std::map<Token, Held> held_;  // few at a time (max_grants): a scan is cheaper than a tree
  Token next_ = 1;
};

// The one table of this process.
RangeLocks& range_locks();

}  // namespace orbite::rdma
