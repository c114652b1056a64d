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

class Task {
 public:
  struct promise_type {
    Task get_return_object() {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    // Created suspended: the executor runs it to its first co_await under its own lock.
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() {}
    // Algorithms do not throw; a bad_alloc in one is not recoverable here.
    void unhandled_exception() { std::terminate(); }
  };

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
class Ctx {
 public:
  using PostFn =
      std::function<Result<Request>(bool send, void* data, std::uint64_t bytes, int peer)>;
  Ctx(int rank, int size, PostFn post) : rank_(rank), size_(size), post_(std::move(post)) {}

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }

  // Post a message of this collective to/from `peer` (never this rank). The returned Request is
  // also kept so that all() covers it. A failed post fails the collective at the next co_await.
  Request send(const void* data, std::uint64_t bytes, int peer) {
    return post(true, const_cast<void*>(data), bytes, peer);
  }
  Request recv(void* data, std::uint64_t bytes, int peer) { return post(false, data, bytes, peer); }

  // Copies within this rank's buffers (its own block into place): a memcpy, or the device copy
  // the executor was given when the buffers are device memory. A failed copy fails the
  // collective at the next co_await.
  void copy(void* dst, const void* src, std::uint64_t bytes);

  // co_await c.all(): every message posted so far is done.
  // co_await c.done(r): that one is (the others keep going).
  struct Await {
    Ctx* ctx;
    bool await_ready() { return ctx->ready(); }
    void await_suspend(std::coroutine_handle<>) {}
    void await_resume() {}
  };
  Await all() {
    waiting_ = pending_;
    return Await{this};
  }
  Await done(const Request& r) {
    waiting_.assign(1, r);
    return Await{this};
  }
  // co_await c.until(pred): for memory another rank writes (the shared segment of a single-host
  // communicator). `pred` answers kReady once the wait is over, else the rank it still waits for
  // (so that a lost rank fails the wait with ConnectionLost instead of spinning on its flag), or
  // kNoRank when it waits on nothing another rank does. Checked by whichever thread progresses the
  // collective; the predicate must stay valid until the co_await resumes.
  static constexpr int kReady = -1;
  static constexpr int kNoRank = -2;
  using Until = std::function<int()>;
  Await until(Until pred) {
    until_ = std::move(pred);
    return Await{this};
  }

  // Memory that lives as long as the collective (and longer if it failed with messages in
  // flight). Page-touching large buffers is expensive, so the executor keeps them across calls.
  std::byte* scratch(std::uint64_t bytes);

  // For the executor.
  [[nodiscard]] const Status& error() const { return error_; }
  void fail(Status s) {
    if (error_.ok()) error_ = std::move(s);
  }
  std::vector<Request>& waiting() { return waiting_; }
  std::vector<Request>& pending() { return pending_; }
  // True when every awaited message is done and the awaited predicate holds (any failure is
  // recorded in error()).
  bool ready();
  // The rank an unfinished until() waits for: kReady when there is no such wait, else as the
  // predicate answers.
  int until_rank() { return until_ ? until_() : kReady; }
  [[nodiscard]] bool waits_on_memory() const { return static_cast<bool>(until_); }
  std::function<std::byte*(std::uint64_t)> scratch_source;
  std::function<Status(void* dst, const void* src, std::uint64_t bytes)> device_copy;
  std::vector<std::byte*> scratch_taken;

 private:
  Request post(bool send, void* data, std::uint64_t bytes, int peer);

  int rank_;
  int size_;
  PostFn post_;
  Status error_;
  std::vector<Request> pending_;
  std::vector<Request> waiting_;
  Until until_;
};

}  // namespace orbite::coll
