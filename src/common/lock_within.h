// A bounded wait for a plain mutex.
#pragma once

#include <chrono>
#include <thread>

#include "common/clock.h"

namespace orbite {

// Takes `lock` (deferred, on a plain mutex) if it comes free within `bound`, polling every
// millisecond: for a reader that must not wait on a holder that may never let go (the state
// report). Returns whether it holds the lock.
template <class Lock>
bool lock_within(Lock& lock, Duration bound) {
  const auto deadline = Clock::now() + bound;
  while (!lock.try_lock()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace orbite
