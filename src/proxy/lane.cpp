#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/cpu_relax.h"
#include "common/log.h"
#include "proxy/engine_core.h"

namespace orbite::detail {

namespace {
// Idle passes a polling worker spins (yielding) before it sleeps.
constexpr int kPollingSpinPasses = 256;
// Socket polls are syscalls: a pass without recent TCP traffic polls them every Nth time.
constexpr std::uint64_t kSocketPollPeriod = 256;
// How long after a user thread's last wait() the worker still leaves progress to user threads.
constexpr std::int64_t kUserDrivingWindowNs = 2'000'000;

// A nap while device copies are in flight: a chunk's copy takes tens of microseconds, and its
// end wakes nothing.
constexpr long kCopyNapNs = 20'000;

// A worker's sleep; a failed wait (other than a signal) is logged and ends the sleep early.
// Returns whether an fd was ready.
bool sleep_on(int epfd, epoll_event* ev, int timeout_ms) {
  const int n = ::epoll_wait(epfd, ev, 1, timeout_ms);
  if (n < 0 && errno != EINTR) {
    ORBITE_LOG(Error, Proxy) << "epoll_wait failed: " << std::strerror(errno);
  }
  return n > 0;
}

// The same with a timeout below a millisecond (epoll_pwait2, Linux 5.11); where the kernel lacks
// it, a yield and a poll that does not block.
bool nap_on(int epfd, epoll_event* ev, long timeout_ns) {
  const timespec timeout{0, timeout_ns};
  const int n = ::epoll_pwait2(epfd, ev, 1, &timeout, nullptr);
  if (n < 0 && errno == ENOSYS) {
    ::sched_yield();
    return sleep_on(epfd, ev, 0);
  }
  if (n < 0 && errno != EINTR) {
    ORBITE_LOG(Error, Proxy) << "epoll_pwait2 failed: " << std::strerror(errno);
  }
  return n > 0;
}

}  // namespace

std::int64_t Lane::coarse_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int Lane::start_submitted() {
  int work = 0;
  while (MpscNode* node = queue.pop()) {
    auto* raw = static_cast<RequestState*>(node);
    std::shared_ptr<RequestState> req = std::move(raw->queued_self);
    const Priority priority = req->options.priority;
    ready.push(priority, std::move(req));
    ++work;
  }
  while (auto req = ready.pop()) {
    protocol->start(std::move(*req));
    ++work;
  }
  if (work > 0) protocol->flush_dirty();
  return work;
}

int Lane::progress_once() {
  int work = 0;
  if (has_adopts.load(std::memory_order_acquire)) {
    std::vector<p2p::AcceptedConnection> taken;
    {
      std::lock_guard lock(adopt_mu);
      taken.swap(adopts);
      has_adopts.store(false, std::memory_order_release);
    }
    for (auto& a : taken) protocol->adopt(std::move(a));
    work += static_cast<int>(taken.size());
  }
  // Two loads tell whether anything was submitted: an idle pass skips the queues.
  if (queue.maybe_nonempty() || !ready.empty()) work += start_submitted();
  // The pass after a wake-up by an fd polls the sockets: what woke the worker (a doorbell on a
  // control connection, which the hot path does not read) is consumed at once instead of
  // keeping the fd readable, and every later sleep short, until the next periodic poll.
  const bool woken = socket_woke.load(std::memory_order_relaxed) &&
                     socket_woke.exchange(false, std::memory_order_relaxed);
  work += protocol->progress(woken || ++passes % kSocketPollPeriod == 0);
  return work;
}

void Lane::submit(const std::shared_ptr<RequestState>& req) {
  req->queued_self = req;
  queue.push(req.get());
  if (sleeping.load(std::memory_order_seq_cst)) wake();
}

void Lane::wake() {
  std::uint64_t one = 1;
  // EAGAIN: the counter is saturated, so a wake-up is pending anyway.
  if (::write(wake_fd.get(), &one, sizeof(one)) < 0 && errno != EAGAIN) {
    ORBITE_LOG(Error, Proxy) << "lane " << index
                             << ": write(eventfd) failed: " << std::strerror(errno);
  }
}

bool Lane::user_driving_recently() const {
  if (drivers.load(std::memory_order_acquire) > 0) return true;
  return coarse_now_ns() - driver_left_ns.load(std::memory_order_relaxed) < kUserDrivingWindowNs;
}

bool Lane::memory_polled_recently() const {
  return coarse_now_ns() - memory_polled_ns.load(std::memory_order_relaxed) < kUserDrivingWindowNs;
}

void Lane::sleep_once() {
  bump(idle_sleeps);
  epoll_event ev[1];
  if (user_driving_recently()) {
    // A user thread is progressing the lane: stay out of its way, but not for long.
    sleep_on(driver_epfd.get(), ev, 1);
  } else {
    int timeout_ms = -1;
    bool nap = false;
    {
      std::unique_lock lock(mu, std::try_to_lock);
      if (!lock.owns_lock()) return;
      sleeping.store(true, std::memory_order_seq_cst);
      if (queue.maybe_nonempty() || has_adopts.load() || !protocol->prepare_sleep()) {
        sleeping.store(false, std::memory_order_relaxed);
        protocol->end_sleep();
        return;
      }
      const bool busy = protocol->busy();
      nap = protocol->copies_pending();
      if (core->config.progress_mode == ProgressMode::Polling)
        timeout_ms = 1;
      else if (busy)
        timeout_ms = 100;  // connection deadlines and the like
      else
        timeout_ms = protocol->next_timer_ms();  // an idle connection to reap, or none (-1)
    }
    if (nap ? nap_on(protocol->epoll_fd(), ev, kCopyNapNs)
            : sleep_on(protocol->epoll_fd(), ev, timeout_ms)) {
      socket_woke.store(true, std::memory_order_relaxed);
    }
    sleeping.store(false, std::memory_order_relaxed);
    std::lock_guard lock(mu);
    protocol->end_sleep();
  }
  std::uint64_t drained = 0;
  // EAGAIN: nobody rang; the sleep ended on a socket, a ring's doorbell or its timeout.
  if (::read(wake_fd.get(), &drained, sizeof(drained)) < 0 && errno != EAGAIN) {
    ORBITE_LOG(Error, Proxy) << "lane " << index
                             << ": read(eventfd) failed: " << std::strerror(errno);
  }
}

void Lane::poll() {
  if (mu.try_lock()) {
    progress_once();
    mu.unlock();
  }
}

void Lane::wait(const std::atomic<int>& phase, Duration timeout) {
  core->drive_until(*this, phase, timeout);
}

void Lane::run() {
  // The naps while device copies run are tens of microseconds: the default timer slack (50 us)
  // would more than double them.
  if (::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL) != 0) {
    ORBITE_LOG(Warn, Proxy) << "lane " << index
                            << ": prctl(PR_SET_TIMERSLACK) failed: " << std::strerror(errno);
  }
  int idle = 0;
  const bool polling = core->config.progress_mode == ProgressMode::Polling;
  while (!core->stopping.load(std::memory_order_acquire)) {
    int work = 0;
    if (drivers.load(std::memory_order_relaxed) == 0) {
      std::unique_lock lock(mu, std::try_to_lock);
      if (lock.owns_lock()) work = progress_once();
    }
    if (work > 0) {
      idle = 0;
      continue;
    }
    ++idle;
    if (polling && idle < kPollingSpinPasses && !user_driving_recently() &&
        !memory_polled_recently()) {
      if (idle % 8 == 0)
        ::sched_yield();
      else
        cpu_relax();
      continue;
    }
    sleep_once();
    idle = polling ? kPollingSpinPasses / 2 : 0;
  }
}

}  // namespace orbite::detail
