#include "p2p/request.h"

#include <cstddef>
#include <new>
#include <vector>

#include "p2p/registry.h"

namespace orbite::detail {

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif
// Blocks a thread keeps: enough for a window of outstanding requests, bounded so that a thread
// that once freed many does not hold them forever.
constexpr std::size_t kMaxFree = 256;

// One thread's free blocks, all of one size (the control block with its RequestState).
struct FreeBlocks {
  std::vector<void*> blocks;
  std::size_t size = 0;
  ~FreeBlocks() {
    for (void* b : blocks) ::operator delete(b);
  }
};
thread_local FreeBlocks t_free;

template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  explicit PoolAllocator(const PoolAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (kPooled && n == 1 && t_free.size == sizeof(T) && !t_free.blocks.empty()) {
      void* b = t_free.blocks.back();
      t_free.blocks.pop_back();
      return static_cast<T*>(b);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (kPooled && n == 1 && (t_free.size == 0 || t_free.size == sizeof(T)) &&
        t_free.blocks.size() < kMaxFree) {
      t_free.size = sizeof(T);
      // reserve() up front: a push_back here must not allocate (or throw) while freeing.
      if (t_free.blocks.capacity() < kMaxFree) t_free.blocks.reserve(kMaxFree);
      t_free.blocks.push_back(p);
      return;
    }
    ::operator delete(p);
  }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace

std::shared_ptr<RequestState> make_request_state() {
  return std::allocate_shared<RequestState>(PoolAllocator<RequestState>());
}

void complete_request(RequestState& req, Status status) {
  if (req.phase.load(std::memory_order_relaxed) != 0) return;
  if (req.before_complete) {
    auto finish = std::move(req.before_complete);
    req.before_complete = nullptr;
    if (status.ok()) status = finish();
  }
  if (req.local_pinned) {
    req.local->unpin_local();
    req.local_pinned = false;
  }
  const bool ok = status.ok();
  if (req.counters != nullptr) {
    bump(ok ? req.counters->completed : req.counters->failed);
    if (!ok) bump(req.counters->failed_by_code[static_cast<std::size_t>(status.code())]);
  }
  req.final_status = std::move(status);
  req.phase.store(ok ? 1 : 2, std::memory_order_release);
}

}  // namespace orbite::detail
