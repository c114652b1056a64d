// The collectives' part of the state report (docs/hangs.md).
#include <chrono>
#include <mutex>

#include "coll/executor.h"
#include "common/lock_within.h"
#include "common/strings.h"

namespace orbite::coll {

namespace {

constexpr auto kLockBound = std::chrono::milliseconds(500);

}  // namespace

void Executor::report(std::string& out) {
  std::unique_lock lock(mu_, std::defer_lock);
  if (!lock_within(lock, kLockBound)) {
    out +=
        "  collectives: the executor's lock stayed held for half a second (a thread runs a "
        "collective's step and does not return)\n";
    return;
  }
  out += "  collectives: " + std::to_string(sequence_) + " started, " +
         std::to_string(active_.size()) + " in flight" +
         (broken_.ok() ? std::string() : ", broken: " + broken_.message()) + "\n";
  for (const auto& owned : active_) {
    const Op& op = *owned;
    out += "  collective " + op.name() + " (tag " + std::to_string(op.tag) + "): running for " +
           format_seconds(std::chrono::nanoseconds(Clock::now() - op.started).count()) + ", step " +
           std::to_string(op.steps) + "\n";
    if (!op.ctx->error().ok()) out += "    failed: " + op.ctx->error().message() + "\n";
    if (op.ctx->waits_on_memory()) {
      const int r = op.ctx->until_rank();
      out += r >= 0 ? "    waits for rank " + std::to_string(r) + " in the shared segment\n"
                    : std::string("    waits on the shared segment\n");
    }
    for (const Request& q : op.ctx->waiting()) {
      const auto& st = detail::RequestAccess::state(q);
      if (!st || st->phase.load(std::memory_order_acquire) != 0) continue;
      out += std::string("    waits for its ") +
             (st->kind == detail::OpKind::Send ? "send to" : "receive from") + " rank " +
             std::to_string(st->peer_rank) + ": " + std::to_string(st->length) + " B, " +
             std::to_string(st->bytes_done.load(std::memory_order_relaxed)) + " B done\n";
    }
  }
}

}  // namespace orbite::coll
