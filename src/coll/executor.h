// The collective executor of one communicator: it starts collectives (running each coroutine to
// its first co_await), resumes them as their messages complete, completes their Requests, and
// turns a failure anywhere into a broken communicator that every rank hears about.
//
// Failure detection: at the first collective every rank posts, towards every other rank, a
// zero-byte "hello" (which opens the connections, so a rank that dies is a lost link wherever a
// collective waits on it) and a receive on the abort tag. A rank whose collective fails sends a
// zero-byte abort message to every other rank; the others fail their collectives with
// ConnectionLost when they see it. An orderly exit of a rank that has finished its part aborts
// nothing.
#pragma once

#include <orbite/collectives.h>
#include <orbite/transfer.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "coll/task.h"
#include "common/clock.h"
#include "p2p/request.h"

namespace orbite::coll {

// Posts one point-to-point message of the collectives' traffic (their own communicator id).
// A passive receive may never be matched and does not keep the engine busy. `device`: the
// message's buffer is device memory (the collective moves its device buffers directly).
using Poster = std::function<Result<Request>(bool send, void* data, std::uint64_t bytes, int peer,
                                             std::int32_t tag, bool passive, bool device)>;

// Told of each scratch block after it is allocated and before it is freed: the transports may
// keep what they prepared for such engine-owned memory (RDMA's MR cache). Either may be empty.
struct ScratchHooks {
  std::function<void(std::byte* base, std::uint64_t bytes)> allocated;
  std::function<void(std::byte* base)> freeing;
};

// How a collective treats its device buffers (comm/device_buffers.cpp), one of:
// - host stand-ins: `stand_ins` kept as long as the collective's messages may touch them, and
//   `before_complete` copies the result back to the device before it is seen complete;
// - direct: the algorithm works on the device buffers themselves; its messages are device
//   messages and `copy` makes its local copies device to device.
// Empty for host buffers.
struct DeviceBuffers {
  std::shared_ptr<void> stand_ins;
  std::function<Status()> before_complete;
  bool direct = false;
  std::function<Status(void* dst, const void* src, std::uint64_t bytes)> copy;
};

class Executor : public detail::ProgressDriver, public std::enable_shared_from_this<Executor> {
 public:
  Executor(int rank, int size, Poster post, ScratchHooks hooks = {});
  ~Executor() override;

  // Starts a collective: the algorithm's coroutine over the op's Ctx and `args` (no closure to
  // allocate, so that a small one costs little more than its steps); `result_bytes` is what
  // Request::bytes() reports once it succeeded. `first`, when set, may begin the collective on
  // the caller's thread where its buffers are host memory, and finish it there where no other
  // collective of the communicator is in flight (`alone`): a finished one costs no op, coroutine
  // or request of its own.
  using Algorithm = Task (*)(Ctx&, Args);
  using InlineStart = Inline (*)(Args&, int rank, int size, bool alone);
  Result<Request> start(std::string_view kind, Algorithm run, Args args, std::uint64_t result_bytes,
                        DeviceBuffers device = {}, InlineStart first = nullptr);

  void poll() override;
  void wait(const std::atomic<int>& phase, Duration timeout) override;

  // A thread polling the shared segment yields the core at once (this host's ranks outnumber
  // the CPUs they may run on) instead of spinning a while first. Set before the first collective.
  void set_yield_when_idle(bool yield) { yield_when_idle_.store(yield, std::memory_order_relaxed); }

  // Called now and then while a thread polls the shared segment (every few microseconds): the
  // engine's workers then stay in their short sleeps, as while a user thread drives them, instead
  // of spinning on the cores the polling ranks need. Set before the first collective.
  void set_polling_hint(std::function<void()> hint) { polling_hint_ = std::move(hint); }

  // The error that broke the communicator's collectives, or OK.
  Status broken();

  // executor_report.cpp: appends the collectives in flight to the state report: each one's
  // name, tag, age and step, and what it waits for (messages by peer rank, or a rank's flag in
  // the shared segment). Waits at most about half a second for the executor's lock.
  void report(std::string& out);

 private:
  // Lifetime: in scratch_, or in a failed op's own_scratch until its last message is done (on
  // whichever thread completes it); `freeing` runs before the memory goes.
  struct Scratch {
    std::unique_ptr<std::byte[]> data;
    std::uint64_t bytes = 0;
    bool in_use = false;
    std::function<void(std::byte*)> freeing;
    Scratch() = default;
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() {
      if (freeing && data) freeing(data.get());
    }
  };
  // Lifetime: in active_ while it runs; a finished one goes back to free_ops_ (its Ctx reset,
  // kept for the next collective), a failed one is retired.
  struct Op {
    std::string_view kind;  // a collective's name (static)
    std::uint64_t sequence = 0;
    std::int32_t tag = 0;  // its messages' tag
    bool direct = false;   // its messages carry device buffers
    std::string name() const { return std::string(kind) + " #" + std::to_string(sequence); }
    Clock::time_point started{};  // for the state report
    std::uint64_t steps = 0;      // resumptions of its coroutine so far
    std::unique_ptr<Ctx> ctx;
    Task task;
    std::shared_ptr<detail::RequestState> state;
    std::uint64_t result_bytes = 0;
    // Scratch this op took out of the pool when it failed with messages in flight.
    std::vector<std::unique_ptr<Scratch>> own_scratch;
    std::shared_ptr<void> stand_ins;  // host stand-ins of device buffers, as long as the op
  };

  // Caller holds mu_.
  // The error a new collective gets once the communicator's collectives broke, else OK.
  Status refuse_when_broken(std::string_view kind) const;
  // An Op ready for a collective (from free_ops_ when one is there), and the one that ran it
  // started (the coroutine is created by the caller on op->ctx).
  std::unique_ptr<Op> take_op(std::string_view kind, std::uint64_t result_bytes,
                              DeviceBuffers& device);
  Result<Request> run_op(std::unique_ptr<Op> op);
  // A finished collective's Request: one completed state shared by every such Request of the
  // same result size (immutable once complete).
  Request completed(std::uint64_t result_bytes);
  void recycle(std::unique_ptr<Op> op);
  void poll_locked();
  bool advance(Op& op);  // true when the op finished (successfully or not)
  void finish(Op& op, Status status);
  // A failed op: freed now if none of its messages is in flight, else handed (with its scratch)
  // to those messages' requests, which free it when the last of them is done.
  void retire(std::unique_ptr<Op> op);
  // A failed op's receives still in flight become passive (close() does not wait for them).
  void abandon_receives(Op& op);
  void break_all(const Status& why);
  void check_liveness();
  void start_watch();
  std::byte* take_scratch(std::uint64_t bytes);
  void give_back(Ctx& ctx);
  Request blocker();

  const int rank_;
  const int size_;
  Poster post_;
  const ScratchHooks hooks_;
  std::atomic<bool> yield_when_idle_{false};
  std::function<void()> polling_hint_;  // set before the first collective, then only read
  std::mutex mu_;
  std::vector<std::unique_ptr<Op>> active_;          // in start order (a few at most)
  std::vector<std::unique_ptr<Op>> free_ops_;        // finished ops kept for reuse (a few)
  std::shared_ptr<detail::RequestState> completed_;  // see completed()
  std::vector<std::unique_ptr<Scratch>> scratch_;
  std::uint64_t sequence_ = 0;
  Status broken_;
  bool watching_ = false;
  std::vector<Request> abort_watch_;  // index = rank
  std::vector<Request> hellos_;
};

}  // namespace orbite::coll
