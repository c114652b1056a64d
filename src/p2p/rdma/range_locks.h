// Process-wide locks on exact address ranges: a grant takes its range shared (READ: the peer
// reads the memory) or exclusive (WRITE); a conflicting put or get grant is refused, a
// conflicting rendezvous into a receive waits (source.cpp). Keyed by address, so two regions
// that alias the same memory conflict too. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

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

// One held lock of range_locks(), released when destroyed or reset (the owner of a grant's
// range). Move-only. keep() leaves it held for good (a grant whose window could not be revoked).
class RangeLock {
 public:
  RangeLock() = default;
  // The lock, or an empty one when the range conflicts.
  static RangeLock try_lock(std::uintptr_t begin, std::uint64_t length, bool exclusive) {
    return RangeLock(range_locks().try_lock(begin, length, exclusive));
  }
  RangeLock(RangeLock&& other) noexcept : token_(std::exchange(other.token_, 0)) {}
  RangeLock& operator=(RangeLock&& other) noexcept {
    if (this != &other) {
      reset();
      token_ = std::exchange(other.token_, 0);
    }
    return *this;
  }
  RangeLock(const RangeLock&) = delete;
  RangeLock& operator=(const RangeLock&) = delete;
  ~RangeLock() { reset(); }

  void reset() {
    if (token_ != 0) range_locks().unlock(std::exchange(token_, 0));
  }
  void keep() { token_ = 0; }
  explicit operator bool() const { return token_ != 0; }

 private:
  explicit RangeLock(RangeLocks::Token token) : token_(token) {}
  RangeLocks::Token token_ = 0;
};

}  // namespace orbite::rdma
