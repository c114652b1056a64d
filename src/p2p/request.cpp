#include "p2p/request.h"

#include "p2p/registry.h"

namespace orbite::detail {

void complete_request(RequestState& req, Status status) {
  if (req.phase.load(std::memory_order_relaxed) != 0) return;
  if (req.local_pinned) {
    req.local->unpin();
    req.local_pinned = false;
  }
  const bool ok = status.ok();
  req.final_status = std::move(status);
  if (req.counters != nullptr) {
    bump(ok ? req.counters->completed : req.counters->failed);
  }
  req.phase.store(ok ? 1 : 2, std::memory_order_release);
}

}  // namespace orbite::detail
