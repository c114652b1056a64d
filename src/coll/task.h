// A collective algorithm is a C++20 coroutine over a Ctx: it posts the communicator's sends and
// receives, suspends until the ones it needs are done (co_await), computes, and goes on. The
// executor resumes it; nothing in an algorithm blocks a thread or knows which transport carries
// the messages.
#pragma once

#include <orbite/transfer.h>

#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace orbite::coll {

// A collective's coroutine. The executor runs the top one; an algorithm may also co_await
// another Task (a step of a hierarchical collective): the child runs at once, on the same Ctx or a
// sub-group's, and when it finishes its parent goes on.
class Task {
 public:
  struct promise_type {
    Task get_return_object() {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    // Created suspended: the executor (or the awaiting parent) runs it to its first co_await.
    std::suspend_always initial_suspend() noexcept { return {}; }
    // A child hands control straight back to its parent; the top task stops for the executor.
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        if (auto parent = h.promise().parent) return parent;
        return std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void return_void() {}
    // Algorithms do not throw; a bad_alloc in one is not recoverable here.
    void unhandled_exception() { std::terminate(); }
    std::coroutine_handle<> parent;  // the coroutine awaiting this one, if any
  };

  // co_await child: runs the child now; the awaiting coroutine resumes when it finished. While
  // the child waits (on messages or memory), the executor resumes the child, not the top task
  // (Ctx::Await records the suspended coroutine).
  struct Awaiter {
    std::coroutine_handle<promise_type> child;
    bool await_ready() const noexcept { return !child || child.done(); }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> parent) noexcept {
      child.promise().parent = parent;
      return child;
    }
    void await_resume() const noexcept {}
  };
  Awaiter operator co_await() const& noexcept { return Awaiter{h_}; }

  Task() = default;
  explicit Task(std::coroutine_handle<promise_type> h) : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  [[nodiscard]] bool valid() const { return static_cast<bool>(h_); }
  [[nodiscard]] bool done() const { return !h_ || h_.done(); }
  void resume() { h_.resume(); }

 private:
  std::coroutine_handle<promise_type> h_;
};

// What an algorithm sees: its rank and size, p2p posting, scratch memory and the awaitables.
// A sub-group's Ctx (subgroup()) numbers a subset of the ranks 0..k-1 and keeps every piece of
// state (messages, waits, scratch, errors) in the top Ctx, which the executor polls.
class Ctx {
 public:
  using PostFn =
      std::function<Result<Request>(bool send, void* data, std::uint64_t bytes, int peer)>;
  Ctx(int rank, int size, PostFn post) : rank_(rank), size_(size), post_(std::move(post)) {}
  Ctx(Ctx&&) = delete;
  Ctx& operator=(Ctx&&) = delete;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }

  // The ranks `members` (of this Ctx's numbering, ascending or not: their order is the
  // sub-group's) as a group of their own; this rank must be one of them. Lives in the calling
  // coroutine's frame, as long as the steps run on it.
  [[nodiscard]] std::unique_ptr<Ctx> subgroup(const std::vector<int>& members);
  // This Ctx's rank `r` in the top Ctx's numbering.
  [[nodiscard]] int top_rank(int r) const {
    return to_top_.empty() ? r : to_top_[static_cast<std::size_t>(r)];
  }

  // Post a message of this collective to/from `peer` (never this rank). The returned Request is
  // also kept so that all() covers it. A failed post fails the collective at the next co_await.
  Request send(const void* data, std::uint64_t bytes, int peer) {
    return top_->post(true, const_cast<void*>(data), bytes, top_rank(peer));
  }
  Request recv(void* data, std::uint64_t bytes, int peer) {
    return top_->post(false, data, bytes, top_rank(peer));
  }

  // Copies within this rank's buffers (its own block into place): a memcpy, or the device copy
  // the executor was given when the buffers are device memory. A failed copy fails the
  // collective at the next co_await.
  void copy(void* dst, const void* src, std::uint64_t bytes);

  // co_await c.all(): every message posted so far is done.
  // co_await c.done(r): that one is (the others keep going).
  struct Await {
    Ctx* ctx;  // the top Ctx
    bool await_ready() { return ctx->ready(); }
    // The suspended coroutine is the one the executor resumes next: the top task's, or that of
    // the child task it awaits (however deep).
    void await_suspend(std::coroutine_handle<> h) { ctx->suspended_ = h; }
    void await_resume() {}
  };
  Await all() {
    top_->waiting_ = top_->pending_;
    return Await{top_};
  }
  Await done(const Request& r) {
    top_->waiting_.assign(1, r);
    return Await{top_};
  }
  // co_await c.until(pred): for memory another rank writes (the shared segment of a single-host
  // communicator). `pred` answers kReady once the wait is over, else the rank it still waits for
  // (in this Ctx's numbering; so that a lost rank fails the wait with ConnectionLost instead of
  // spinning on its flag), or kNoRank when it waits on nothing another rank does. Checked by
  // whichever thread progresses the collective; the predicate must stay valid until the
  // co_await resumes.
  static constexpr int kReady = -1;
  static constexpr int kNoRank = -2;
  using Until = std::function<int()>;
  Await until(Until pred) {
    top_->until_ = std::move(pred);
    top_->until_to_top_ = to_top_.empty() ? nullptr : &to_top_;
    return Await{top_};
  }

  // Memory that lives as long as the collective (and longer if it failed with messages in
  // flight). Page-touching large buffers is expensive, so the executor keeps them across calls.
  std::byte* scratch(std::uint64_t bytes);

  // A top Ctx made ready for the next collective of a reused executor op: no messages, waits,
  // error, scratch or device copy (its vectors keep their capacity).
  void reset() {
    error_ = Status();
    pending_.clear();
    waiting_.clear();
    until_ = nullptr;
    until_to_top_ = nullptr;
    suspended_ = {};
    scratch_taken.clear();
    device_copy = nullptr;
  }

  [[nodiscard]] const Status& error() const { return top_->error_; }
  void fail(Status s) {
    if (top_->error_.ok()) top_->error_ = std::move(s);
  }

  // For the executor (on the top Ctx).
  std::vector<Request>& waiting() { return waiting_; }
  std::vector<Request>& pending() { return pending_; }
  // True when every awaited message is done and the awaited predicate holds (any failure is
  // recorded in error()).
  bool ready();
  // The rank an unfinished until() waits for, in the top numbering: kReady when there is no such
  // wait, else as the predicate answers.
  int until_rank() {
    if (!until_) return kReady;
    const int r = until_();
    return r >= 0 && until_to_top_ != nullptr ? (*until_to_top_)[static_cast<std::size_t>(r)] : r;
  }
  [[nodiscard]] bool waits_on_memory() const { return static_cast<bool>(until_); }
  // The coroutine to resume once ready(): the one that suspended last (null before the first
  // suspension: then the top task).
  [[nodiscard]] std::coroutine_handle<> suspended() const { return suspended_; }
  std::function<std::byte*(std::uint64_t)> scratch_source;
  std::function<Status(void* dst, const void* src, std::uint64_t bytes)> device_copy;
  std::vector<std::byte*> scratch_taken;

 private:
  struct SubgroupTag {};
  Ctx(SubgroupTag, Ctx* top, int rank, int size, std::vector<int> to_top)
      : rank_(rank), size_(size), top_(top), to_top_(std::move(to_top)) {}
  Request post(bool send, void* data, std::uint64_t bytes, int peer);

  int rank_;
  int size_;
  Ctx* top_ = this;          // where the state lives; this for the executor's Ctx
  std::vector<int> to_top_;  // a sub-group's ranks in the top numbering; empty for the top
  PostFn post_;
  Status error_;
  std::vector<Request> pending_;
  std::vector<Request> waiting_;
  Until until_;
  const std::vector<int>* until_to_top_ = nullptr;  // the waiting sub-group's numbering
  std::coroutine_handle<> suspended_;
};

}  // namespace orbite::coll
