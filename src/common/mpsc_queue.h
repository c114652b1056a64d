// An intrusive multi-producer, single-consumer queue (Vyukov's design): push is one atomic
// exchange and never blocks, so user threads hand requests to a proxy worker without a lock.
// Only the thread holding the consumer's role may pop.
#pragma once

#include <atomic>

namespace orbite {

struct MpscNode {
  std::atomic<MpscNode*> mpsc_next{nullptr};
};

class MpscQueue {
 public:
  MpscQueue() : head_(&stub_), tail_(&stub_) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  void push(MpscNode* node) {
    node->mpsc_next.store(nullptr, std::memory_order_relaxed);
    MpscNode* prev = head_.exchange(node, std::memory_order_acq_rel);
    prev->mpsc_next.store(node, std::memory_order_release);
  }

  // Null when empty, or when a producer is between its exchange and its link (the node then
  // appears on a later pop).
  MpscNode* pop() {
    MpscNode* tail = tail_;
    MpscNode* next = tail->mpsc_next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->mpsc_next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;
    push(&stub_);
    next = tail->mpsc_next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    return nullptr;
  }

  // A hint for sleepers: whether anything was pushed and not yet popped.
  [[nodiscard]] bool maybe_nonempty() const {
    return head_.load(std::memory_order_acquire) != tail_ ||
           tail_->mpsc_next.load(std::memory_order_acquire) != nullptr;
  }

 private:
  alignas(64) std::atomic<MpscNode*> head_;
  alignas(64) MpscNode* tail_;
  MpscNode stub_;
};

}  // namespace orbite
