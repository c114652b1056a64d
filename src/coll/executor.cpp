// Collective executor: start, resume, complete and fail collectives (see executor.h).
#include "coll/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/clock.h"
#include "common/cpu_relax.h"
#include "common/log.h"

namespace orbite::coll {

namespace {

// Tags of the collectives' communicator id: one per collective (cycling), plus two reserved.
constexpr std::int32_t kAbortTag = 0x7fffffff;
constexpr std::int32_t kHelloTag = 0x7ffffffe;
constexpr std::uint64_t kOpTagSpan = 0x7ffffff0;

// How long a waiting thread blocks on one message before it looks for aborts and failed sends.
constexpr Duration kLivenessSlice = std::chrono::milliseconds(10);
// How often a rank polling the segment tells the engine so (the engine's window is 2 ms): each
// hint writes every lane's stamp, a cache line the workers read, so not at every look.
constexpr Duration kHintSlice = std::chrono::microseconds(250);

// A thread polling the shared segment spins for this long (unless the host's ranks outnumber
// its cores: then it yields from the start, as Open MPI's mpi_yield_when_idle), then yields
// until kSpinBeforeSleep, then sleeps kPollSleep between looks.
constexpr Duration kSpinBeforeYield = std::chrono::microseconds(100);
constexpr Duration kSpinBeforeSleep = std::chrono::milliseconds(2);
constexpr Duration kPollSleep = std::chrono::microseconds(50);

// Pauses between two looks at the segment while spinning, and looks between two reads of the
// clock.
constexpr int kPausesPerLook = 4;
constexpr int kLooksPerClock = 16;

// Pending lists are pruned of finished messages once they grow past this.
constexpr std::size_t kPruneAt = 256;

}  // namespace

// ---- Ctx ----

Request Ctx::post(bool send, void* data, std::uint64_t bytes, int peer) {
  Result<Request> r = post_(send, data, bytes, peer);
  if (!r.ok()) {
    fail(r.status());
    return {};
  }
  if (pending_.size() >= kPruneAt) {
    std::erase_if(pending_, [](const Request& q) {
      auto st = q.status();
      return st && st->ok();
    });
  }
  pending_.push_back(*r);
  return *r;
}

std::unique_ptr<Ctx> Ctx::subgroup(const std::vector<int>& members) {
  std::vector<int> to_top;
  to_top.reserve(members.size());
  int mine = -1;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= size_ ||
        std::find(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(i), members[i]) !=
            members.begin() + static_cast<std::ptrdiff_t>(i)) {
      mine = -1;
      break;
    }
    to_top.push_back(top_rank(members[i]));
    if (members[i] == rank_) mine = static_cast<int>(i);
  }
  if (mine < 0) {
    // An algorithm's mistake: the collective fails, and the steps it still runs on the group
    // it asked for see this rank alone (they post nothing).
    std::string list;
    for (int m : members) list += (list.empty() ? "" : ",") + std::to_string(m);
    fail(Status::error(Errc::Internal, "a sub-group of ranks [" + list + "] of " +
                                           std::to_string(size_) + " without rank " +
                                           std::to_string(rank_) +
                                           " or with a rank outside or twice"));
    return std::unique_ptr<Ctx>(new Ctx(SubgroupTag{}, top_, 0, 1, {top_rank(rank_)}));
  }
  return std::unique_ptr<Ctx>(
      new Ctx(SubgroupTag{}, top_, mine, static_cast<int>(members.size()), std::move(to_top)));
}

bool Ctx::ready() {
  if (!error_.ok()) return false;
  if (until_) {
    if (until_() != kReady) return false;
    until_ = nullptr;
    until_to_top_ = nullptr;
  }
  bool tested = false;
  for (Request& r : waiting_) {
    if (!r.valid()) {
      fail(Status::error(Errc::Internal, "a message of this collective could not be posted"));
      return false;
    }
    if (!r.done()) {
      // One progress pass per check: the lanes' workers and waiters do the rest.
      if (tested || !r.test()) return false;
      tested = true;
    }
    if (auto st = r.status(); st && !st->ok()) {
      fail(*st);
      return false;
    }
  }
  waiting_.clear();
  return true;
}

void Ctx::copy(void* dst, const void* src, std::uint64_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (!top_->device_copy) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (Status st = top_->device_copy(dst, src, bytes); !st.ok()) {
    fail(st.with_context("local copy"));
  }
}

std::byte* Ctx::scratch(std::uint64_t bytes) {
  std::byte* p = top_->scratch_source(bytes);
  top_->scratch_taken.push_back(p);
  return p;
}

// ---- Executor ----

Executor::Executor(int rank, int size, Poster post, ScratchHooks hooks)
    : rank_(rank), size_(size), post_(std::move(post)), hooks_(std::move(hooks)) {}

Executor::~Executor() = default;

Status Executor::broken() {
  std::lock_guard lock(mu_);
  return broken_;
}

Result<Request> Executor::start(std::string_view kind, Algorithm run, Args args,
                                std::uint64_t result_bytes, DeviceBuffers device,
                                InlineStart first) {
  std::lock_guard lock(mu_);
  ORBITE_RETURN_IF_ERROR(refuse_when_broken(kind));
  // A watch that cannot be posted breaks the collectives: then the op below fails at once.
  if (!watching_ && size_ > 1) start_watch();
  const bool host = !device.direct && !device.stand_ins && !device.before_complete;
  if (first != nullptr && host && broken_.ok() &&
      first(args, rank_, size_, active_.empty()) == Inline::Done) {
    ++sequence_;  // as take_op() does: every rank numbers (and tags) collectives alike
    return completed(result_bytes);
  }
  std::unique_ptr<Op> op = take_op(kind, result_bytes, device);
  op->task = run(*op->ctx, std::move(args));
  return run_op(std::move(op));
}

Status Executor::refuse_when_broken(std::string_view kind) const {
  if (broken_.ok()) return {};
  return Status::error(
      broken_.code(),
      std::string(kind) + ": this communicator's collectives stopped after " + broken_.message());
}

std::unique_ptr<Executor::Op> Executor::take_op(std::string_view kind, std::uint64_t result_bytes,
                                                DeviceBuffers& device) {
  std::unique_ptr<Op> op;
  if (!free_ops_.empty()) {
    op = std::move(free_ops_.back());
    free_ops_.pop_back();
  } else {
    op = std::make_unique<Op>();
    // The Op outlives every call of its Ctx's poster (a retired op's messages are posted
    // already), and a reused one carries the next collective's tag.
    op->ctx = std::make_unique<Ctx>(
        rank_, size_, [this, o = op.get()](bool send, void* data, std::uint64_t bytes, int peer) {
          return post_(send, data, bytes, peer, o->tag, false, o->direct);
        });
    op->ctx->scratch_source = [this](std::uint64_t bytes) { return take_scratch(bytes); };
  }
  op->kind = kind;
  op->started = Clock::now();
  op->steps = 0;
  op->sequence = sequence_;
  op->tag = static_cast<std::int32_t>(sequence_ % kOpTagSpan);
  op->direct = device.direct;
  ++sequence_;
  op->ctx->device_copy = std::move(device.copy);
  op->result_bytes = result_bytes;
  op->state = detail::make_request_state();
  op->state->driver = shared_from_this();
  op->state->before_complete = std::move(device.before_complete);
  op->stand_ins = std::move(device.stand_ins);
  return op;
}

Result<Request> Executor::run_op(std::unique_ptr<Op> op) {
  Request request = detail::RequestAccess::make(op->state);
  op->task.resume();
  active_.push_back(std::move(op));
  poll_locked();
  return request;
}

Request Executor::completed(std::uint64_t result_bytes) {
  if (!completed_ || completed_->bytes_done.load(std::memory_order_relaxed) != result_bytes) {
    completed_ = detail::make_request_state();
    completed_->bytes_done.store(result_bytes, std::memory_order_relaxed);
    detail::complete_request(*completed_, {});
  }
  return detail::RequestAccess::make(completed_);
}

// Keeps a finished op for the next collective: the coroutine frame, the request and the
// stand-ins go now; the Op, its Ctx and their vectors' capacity stay.
void Executor::recycle(std::unique_ptr<Op> op) {
  constexpr std::size_t kKeptOps = 4;
  op->task = Task{};
  op->state.reset();
  op->stand_ins.reset();
  op->ctx->reset();
  if (free_ops_.size() < kKeptOps) free_ops_.push_back(std::move(op));
}

void Executor::start_watch() {
  watching_ = true;
  abort_watch_.resize(static_cast<std::size_t>(size_));
  // A watch that cannot be posted leaves a rank's failure unheard: the collectives stop with
  // the reason instead of waiting on a peer nobody watches.
  auto watched = [&](Result<Request> r, int p, const char* what) {
    if (r.ok()) return *r;
    break_all(Status::error(r.status().code(), std::string("posting the failure watch's ") + what +
                                                   " towards rank " + std::to_string(p) +
                                                   " failed: " + r.status().message()));
    return Request();
  };
  for (int p = 0; p < size_ && broken_.ok(); ++p) {
    if (p == rank_) continue;
    abort_watch_[static_cast<std::size_t>(p)] =
        watched(post_(false, nullptr, 0, p, kAbortTag, true, false), p, "abort receive");
    hellos_.push_back(
        watched(post_(true, nullptr, 0, p, kHelloTag, false, false), p, "hello send"));
    hellos_.push_back(
        watched(post_(false, nullptr, 0, p, kHelloTag, false, false), p, "hello receive"));
  }
  std::erase_if(hellos_, [](const Request& r) { return !r.valid(); });
}

bool Executor::advance(Op& op) {
  for (;;) {
    if (!op.ctx->error().ok()) return true;
    if (op.task.done()) return true;
    if (!op.ctx->ready()) {
      if (!op.ctx->error().ok()) continue;
      return false;
    }
    ++op.steps;
    // The coroutine that suspended: the top task's, or a child's it awaits.
    if (auto h = op.ctx->suspended()) {
      h.resume();
    } else {
      op.task.resume();
    }
  }
}

void Executor::finish(Op& op, Status status) {
  auto& s = *op.state;
  if (status.ok()) s.bytes_done.store(op.result_bytes, std::memory_order_relaxed);
  detail::complete_request(s, std::move(status));
}

void Executor::break_all(const Status& why) {
  if (!broken_.ok()) return;
  broken_ = why;
  ORBITE_LOG(Warn, Coll) << "collectives of rank " << rank_ << " stop: " << why.message();
}

void Executor::poll_locked() {
  for (std::size_t i = 0; i < active_.size();) {
    Op& op = *active_[i];
    if (!advance(op)) {
      ++i;
      continue;
    }
    std::unique_ptr<Op> owned = std::move(active_[i]);
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    if (owned->ctx->error().ok()) {
      finish(*owned, {});
      give_back(*owned->ctx);
      recycle(std::move(owned));
      continue;
    }
    const Status& e = owned->ctx->error();
    const bool first = broken_.ok();
    Status why = Status::error(e.code(), owned->name() + ": " + e.message());
    break_all(why);
    if (first) {
      // Tell every other rank, so that none waits for a message this rank will never send.
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        // Best effort: a rank that cannot be told hears of it when its own link fails.
        if (auto sent = post_(true, nullptr, 0, p, kAbortTag, false, false); !sent.ok()) {
          ORBITE_LOG(Warn, Coll) << "telling rank " << p
                                 << " of the failure: " << sent.status().message();
        }
      }
    }
    abandon_receives(*owned);
    finish(*owned, why);
    retire(std::move(owned));
  }
  if (!broken_.ok()) {
    while (!active_.empty()) {
      std::unique_ptr<Op> owned = std::move(active_.front());
      active_.erase(active_.begin());
      abandon_receives(*owned);
      finish(*owned,
             Status::error(broken_.code(), owned->name() + " failed because " + broken_.message()));
      retire(std::move(owned));
    }
  }
}

void Executor::retire(std::unique_ptr<Op> op) {
  std::vector<Request> in_flight;
  for (const Request& r : op->ctx->pending()) {
    if (r.valid() && !r.done()) in_flight.push_back(r);
  }
  if (in_flight.empty()) {
    give_back(*op->ctx);
    return;
  }
  for (std::byte* p : op->ctx->scratch_taken) {
    for (auto& s : scratch_) {
      if (s && s->data.get() == p) op->own_scratch.push_back(std::move(s));
    }
  }
  std::erase(scratch_, nullptr);
  op->ctx->scratch_taken.clear();
  op->ctx->pending().clear();
  op->ctx->waiting().clear();
  op->state.reset();  // completed already; the user's Request keeps it
  // The frame's locals hold Requests too: destroying it now keeps the holder below acyclic.
  op->task = Task{};
  std::shared_ptr<Op> holder(std::move(op));
  for (Request& r : in_flight) detail::RequestAccess::state(r)->keepalive = holder;
}

void Executor::abandon_receives(Op& op) {
  // Nobody waits for the failed collective's receives any more, and the ranks they expected
  // messages from were told to stop (the abort message): an unmatched one must not hold the
  // engine's close() until its timeout. Marked before the failure is reported, so that a caller
  // that closes the engine as soon as it hears of it finds them passive.
  for (const Request& r : op.ctx->pending()) {
    const auto& s = detail::RequestAccess::state(r);
    if (s && s->kind == detail::OpKind::Recv) s->passive.store(true, std::memory_order_relaxed);
  }
}

void Executor::check_liveness() {
  if (!broken_.ok()) return;
  for (int p = 0; p < size_ && static_cast<std::size_t>(p) < abort_watch_.size(); ++p) {
    Request& w = abort_watch_[static_cast<std::size_t>(p)];
    if (!w.valid() || !w.done()) continue;
    if (auto st = w.status(); st && st->ok()) {
      break_all(Status::error(Errc::ConnectionLost,
                              "rank " + std::to_string(p) +
                                  " aborted the communicator's collectives (its log says why)"));
      return;
    }
  }
  // A rank whose flag a collective waits for in the shared segment, and whose link failed: it
  // will never write the flag. (A rank that finished its part and left in order wrote every
  // flag first, so a wait on it is already over and its closed link fails nothing.)
  for (auto& op : active_) {
    const int r = op->ctx->until_rank();
    if (r < 0 || r >= size_ || r == rank_ || static_cast<std::size_t>(r) >= abort_watch_.size()) {
      continue;
    }
    const Request& w = abort_watch_[static_cast<std::size_t>(r)];
    if (!w.valid() || !w.done()) continue;
    if (auto st = w.status(); st && !st->ok()) {
      op->ctx->fail(
          Status::error(Errc::ConnectionLost, "rank " + std::to_string(r) +
                                                  " was lost while this rank waited for it in the "
                                                  "communicator's shared segment (" +
                                                  st->message() + ")"));
    }
  }
  // A send that failed while the collective waits on something else.
  for (auto& op : active_) {
    for (const Request& r : op->ctx->pending()) {
      if (!r.valid() || !r.done()) continue;
      if (auto st = r.status(); st && !st->ok()) {
        op->ctx->fail(*st);
        break;
      }
    }
  }
}

Request Executor::blocker() {
  // A collective waiting on the shared segment is advanced by polling, not by a message.
  for (auto& op : active_) {
    if (op->ctx->waits_on_memory()) return {};
  }
  for (auto& op : active_) {
    for (Request& r : op->ctx->waiting()) {
      if (r.valid() && !r.done()) return r;
    }
  }
  return {};
}

void Executor::poll() {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  poll_locked();
}

void Executor::wait(const std::atomic<int>& phase, Duration timeout) {
  // Read lazily: a small collective is often over before the first look at the clock.
  Clock::time_point deadline{};
  bool deadline_set = false;
  // Polling the shared segment: spin (or yield the core at once where the host's ranks
  // outnumber its CPUs), look for lost ranks every slice, and after a while sleep a little
  // between looks so that a rank waiting long on a slow peer does not take a core from it.
  // While spinning, the clock is read every kLooksPerClock looks only: a read costs more than a
  // look at the segment.
  Clock::time_point polling_since{};
  Clock::time_point last_liveness{};
  Clock::time_point last_hint{};
  bool polling = false;
  bool spinning = false;
  int looks = 0;
  while (phase.load(std::memory_order_acquire) == 0) {
    Request b;
    {
      std::lock_guard lock(mu_);
      poll_locked();
      if (phase.load(std::memory_order_acquire) != 0) return;
      b = blocker();
    }
    if (!b.valid() && spinning && ++looks < kLooksPerClock) {
      // A pause is 40-140 cycles depending on the CPU: a few between looks, so that a flag
      // that lands is seen within tens of nanoseconds, not microseconds.
      for (int i = 0; i < kPausesPerLook; ++i) cpu_relax();
      continue;
    }
    looks = 0;
    const auto now = Clock::now();
    if (!deadline_set) {
      deadline_set = true;
      deadline = timeout >= Duration::max() / 2 ? Clock::time_point::max() : now + timeout;
    }
    if (now >= deadline) return;
    if (!b.valid()) {
      if (!polling) {
        polling = true;
        polling_since = last_liveness = now;
      }
      if (now - last_liveness >= kLivenessSlice) {
        last_liveness = now;
        std::lock_guard lock(mu_);
        check_liveness();
      }
      if (polling_hint_ && (now == polling_since || now - last_hint >= kHintSlice)) {
        last_hint = now;
        polling_hint_();
      }
      const auto polled = now - polling_since;
      spinning = false;
      if (polled >= kSpinBeforeSleep) {
        std::this_thread::sleep_for(kPollSleep);
      } else if (yield_when_idle_.load(std::memory_order_relaxed) || polled >= kSpinBeforeYield) {
        std::this_thread::yield();
      } else {
        spinning = true;
        for (int i = 0; i < kPausesPerLook; ++i) cpu_relax();
      }
      continue;
    }
    polling = false;
    spinning = false;
    // Its status is the message's; the collective reads it through its own context.
    b.wait(std::min<Duration>(std::chrono::duration_cast<Duration>(deadline - now), kLivenessSlice))
        .ignore();
    if (!b.done()) {
      std::lock_guard lock(mu_);
      check_liveness();
    }
  }
}

std::byte* Executor::take_scratch(std::uint64_t bytes) {
  Scratch* best = nullptr;
  for (auto& s : scratch_) {
    if (!s->in_use && s->bytes >= bytes && (best == nullptr || s->bytes < best->bytes)) {
      best = s.get();
    }
  }
  if (best == nullptr) {
    auto s = std::make_unique<Scratch>();
    // Default-initialized: the pages are touched by the first collective that uses them, once.
    s->data.reset(new std::byte[std::max<std::uint64_t>(bytes, 64)]);
    s->bytes = bytes;
    if (hooks_.allocated) hooks_.allocated(s->data.get(), std::max<std::uint64_t>(bytes, 64));
    s->freeing = hooks_.freeing;
    best = s.get();
    scratch_.push_back(std::move(s));
  }
  best->in_use = true;
  return best->data.get();
}

void Executor::give_back(Ctx& ctx) {
  for (std::byte* p : ctx.scratch_taken) {
    for (auto& s : scratch_) {
      if (s->data.get() == p) s->in_use = false;
    }
  }
  ctx.scratch_taken.clear();
}

}  // namespace orbite::coll
