// EngineCore's closes: close() (fence, wait, then cancel or keep waiting) and the directional
// close_source() and close_requester(), which fence one role and wait for it without closing
// anything.
#include <chrono>
#include <string>
#include <thread>

#include "common/log.h"
#include "proxy/engine_core.h"

namespace orbite::detail {

namespace {

std::string ms_of(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

bool EngineCore::drive_while_busy(Deadline deadline, const std::function<bool()>& idle) {
  for (;;) {
    if (idle()) return true;
    if (deadline.expired()) return false;
    // The workers drive their lanes; a lane no worker holds now is driven here, so that a
    // close from a thread that also waits on requests still makes progress.
    for (auto& lane : lanes) {
      if (lane->mu.try_lock()) {
        lane->progress_once();
        lane->mu.unlock();
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

Status EngineCore::close(Duration timeout, CloseTimeout on_timeout) {
  std::lock_guard serial(close_mu);
  const bool first = !closed.exchange(true, std::memory_order_acq_rel);
  if (!first && !threads_started) return {};
  const Deadline deadline = Deadline::after(timeout);
  const bool quiet = drive_while_busy(deadline, [this] { return !any_busy(); });
  if (!quiet && on_timeout == CloseTimeout::KeepWaiting) {
    return Status::error(Errc::Unquiesced,
                         "close: work was still in flight after " + ms_of(timeout) +
                             "; nothing was cancelled: admission stays fenced and the work keeps "
                             "running (call close() again to keep waiting)");
  }
  stop_threads();
  std::size_t cancelled = 0;
  for (auto& lane : lanes) {
    std::lock_guard lock(lane->mu);
    lane->progress_once();
    const auto before = lane->counters.failed.load();
    while (MpscNode* node = lane->queue.pop()) {
      auto* raw = static_cast<RequestState*>(node);
      auto req = std::move(raw->queued_self);
      complete_request(*req, Status::error(Errc::Cancelled, "the engine closed"));
    }
    while (auto req = lane->ready.pop()) {
      complete_request(**req, Status::error(Errc::Cancelled, "the engine closed"));
    }
    lane->protocol->shutdown(Status::error(Errc::Cancelled, "the engine closed"));
    cancelled += lane->counters.failed.load() - before;
  }
  regions.kill_all();
  listener.reset();
  notifications.close();  // wakes a thread waiting in notifications()
  if (!quiet) {
    return Status::error(Errc::Unquiesced, "close: work was still in flight after " +
                                               ms_of(timeout) + "; " + std::to_string(cancelled) +
                                               " request(s) were cancelled and the connections "
                                               "closed");
  }
  // Native RDMA objects whose destroy failed (or whose work never drained) are kept for good:
  // the memory they may touch must stay valid.
  if (const std::uint64_t retained = p2p::report_of(domains, domain_notes).rdma.retained;
      retained > 0) {
    return Status::error(Errc::Unquiesced,
                         "close: " + std::to_string(retained) +
                             " RDMA resource(s) are retained (a destroy failed or work did not "
                             "drain); registered memory must stay valid");
  }
  return {};
}

Status EngineCore::close_source(Duration timeout) {
  std::lock_guard serial(close_mu);
  // Every application region refuses peers from here on: authorize() answers Cancelled (the
  // RDMA owner turns that into a GrantNack), and a pin racing the fence backs out.
  regions.fence_sources();
  if (drive_while_busy(Deadline::after(timeout),
                       [this] { return regions.role_load().served == 0; })) {
    return {};
  }
  return Status::error(Errc::Unquiesced,
                       "close_source: " + std::to_string(regions.role_load().served) +
                           " access(es) by peers of registered memory still in progress after " +
                           ms_of(timeout) +
                           "; new ones are refused (call close_source again to keep waiting, or "
                           "close() to cancel them)");
}

Status EngineCore::close_requester(Duration timeout) {
  std::lock_guard serial(close_mu);
  requester_closed.store(true, std::memory_order_seq_cst);
  if (drive_while_busy(Deadline::after(timeout),
                       [this] { return regions.role_load().requested == 0; })) {
    return {};
  }
  return Status::error(Errc::Unquiesced,
                       "close_requester: " + std::to_string(regions.role_load().requested) +
                           " put/get request(s) of this engine still running after " +
                           ms_of(timeout) +
                           "; new ones are refused (call close_requester again to keep waiting, "
                           "or close() to cancel them)");
}

}  // namespace orbite::detail
