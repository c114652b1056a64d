// The state report (docs/hangs.md): EngineCore::report, the collectives' reporters, and the
// process-wide SIGUSR1 path (proxy/report.h).
#include "proxy/report.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/lock_within.h"
#include "common/log.h"
#include "common/strings.h"
#include "p2p/endpoint.h"
#include "proxy/engine_core.h"

namespace orbite::detail {

namespace {

// How long the report waits for a lane's mutex: a lane whose holder keeps it longer is itself
// the finding (a progress pass that does not return).
constexpr auto kLaneLockBound = std::chrono::milliseconds(500);

}  // namespace

void EngineCore::report(std::string& out) {
  const std::int64_t now = Lane::coarse_now_ns();
  out += "engine " + p2p::short_id(self.id) + " (" + self.id + "), pid " +
         std::to_string(self.pid) + ", control " + self.address + ", " +
         std::to_string(lanes.size()) + " lane(s), " + std::to_string(submitted.load()) +
         " request(s) submitted" + (closed.load() ? ", closed" : "") + "\n";
  for (auto& lane : lanes) {
    std::unique_lock lock(lane->mu, std::defer_lock);
    if (!lock_within(lock, kLaneLockBound)) {
      out += "lane " + std::to_string(lane->index) + ": its mutex stayed held for " +
             format_seconds(std::chrono::nanoseconds(kLaneLockBound).count()) +
             ": a progress pass (the worker's, or a user thread's in wait()) does not return; "
             "its thread's stack shows where\n";
      continue;
    }
    const std::int64_t left_ns = lane->driver_left_ns.load(std::memory_order_relaxed);
    std::string driven = "never driven by a user thread";
    if (lane->drivers.load() > 0) {
      driven = "a user thread drives it";
    } else if (left_ns != 0) {
      driven = "last driven by a user thread " + format_seconds(now - left_ns) + " ago";
    }
    out += "lane " + std::to_string(lane->index) + ": " + std::to_string(lane->passes) +
           " pass(es), " + std::to_string(lane->idle_sleeps.load()) + " sleep(s), " + driven +
           (lane->queue.maybe_nonempty() || !lane->ready.empty() ? ", submissions queued" : "") +
           "\n";
    lane->protocol->report(out, now);
  }
  std::lock_guard lock(reporters_mu);
  for (const auto& [id, fn] : reporters) fn(out);
}

std::uint64_t EngineCore::add_reporter(std::function<void(std::string&)> fn) {
  std::lock_guard lock(reporters_mu);
  const std::uint64_t id = next_reporter++;
  reporters.emplace(id, std::move(fn));
  return id;
}

void EngineCore::remove_reporter(std::uint64_t id) {
  std::lock_guard lock(reporters_mu);
  reporters.erase(id);
}

namespace state_report {

namespace {

// Lock order: g_mu before any engine's lane mutexes and reporters_mu (a report holds it while it
// reads the engines). Engines enroll and withdraw under it, so a report never reads one that is
// being torn down.
std::mutex g_mu;
std::vector<EngineCore*> g_engines;  // in enrollment order
// The request count the last report answered: written under g_mu, peeked at without it.
std::atomic<std::uint64_t> g_served{0};
// Written by the signal handler: lock-free, so async-signal-safe.
std::atomic<std::uint64_t> g_requests{0};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
// Created once, never closed: a handler may run at any time, and must never write to an fd
// number that was closed and reused.
std::atomic<int> g_fd{-1};
std::once_flag g_fd_once;
bool g_handler_installed = false;  // under g_mu

extern "C" void on_report_signal(int) {
  const int saved = errno;
  g_requests.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t one = 1;
  const int fd = g_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    // Nothing to do on failure: a full counter means a wake-up is pending anyway.
    [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
  }
  errno = saved;
}

void install_handler_locked() {
  if (g_handler_installed) return;
  struct sigaction old {};
  if (::sigaction(SIGUSR1, nullptr, &old) != 0) {
    ORBITE_LOG(Warn, Proxy) << "sigaction(SIGUSR1) failed (" << std::strerror(errno)
                            << "); the state report is available through state_report() only";
    return;
  }
  if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) {
    ORBITE_LOG(Info, Proxy) << "SIGUSR1 has a handler already; the state report is not hooked "
                               "to it (diagnostics.dump_on_signal)";
    g_handler_installed = true;  // the application's: leave it, and do not look again
    return;
  }
  struct sigaction act {};
  act.sa_handler = on_report_signal;
  ::sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  if (::sigaction(SIGUSR1, &act, nullptr) != 0) {
    ORBITE_LOG(Warn, Proxy) << "installing the SIGUSR1 handler failed: " << std::strerror(errno);
    return;
  }
  g_handler_installed = true;
}

Status write_report(const std::string& dir, const std::string& text) {
  if (dir == "-") {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
    return {};
  }
  const std::string base = dir.empty() ? std::string("/tmp") : dir;
  const std::string path = base + "/orbite-dump." + std::to_string(::getpid()) + ".txt";
  const std::string tmp = path + ".part";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::error(Errc::Unavailable, "open(" + tmp + ") failed: " + std::strerror(errno));
  }
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::error(Errc::Unavailable, "write(" + tmp + ") failed: " + why);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::error(Errc::Unavailable, "writing " + path + " failed: " + why);
  }
  ORBITE_LOG(Warn, Proxy) << "state report written to " << path;
  return {};
}

std::string report_locked() {
  std::string out = "OrbiTE state report, pid " + std::to_string(::getpid()) + ", " +
                    std::to_string(g_engines.size()) + " engine(s)\n";
  for (EngineCore* e : g_engines) {
    out += "\n";
    e->report(out);
  }
  out += "\nend of report\n";
  return out;
}

}  // namespace

void enroll(EngineCore& core) {
  std::call_once(g_fd_once, [] {
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
      ORBITE_LOG(Warn, Proxy) << "eventfd for the state report failed (" << std::strerror(errno)
                              << "); SIGUSR1 reports only at the monitor's next tick";
    }
    g_fd.store(fd, std::memory_order_release);
  });
  std::lock_guard lock(g_mu);
  g_engines.push_back(&core);
  if (core.config.diagnostics.dump_on_signal) install_handler_locked();
}

void withdraw(EngineCore& core) {
  std::lock_guard lock(g_mu);
  std::erase(g_engines, &core);
}

int request_fd() {
  return g_fd.load(std::memory_order_acquire);
}

void serve_requests() {
  if (g_requests.load(std::memory_order_relaxed) == g_served.load(std::memory_order_relaxed)) {
    return;  // a peek: rechecked under the lock
  }
  std::lock_guard lock(g_mu);
  if (const int fd = g_fd.load(std::memory_order_acquire); fd >= 0) {
    std::uint64_t drained = 0;
    // EAGAIN: another monitor drained it already.
    [[maybe_unused]] const ssize_t n = ::read(fd, &drained, sizeof drained);
  }
  const std::uint64_t asked = g_requests.load(std::memory_order_relaxed);
  if (asked == g_served.load(std::memory_order_relaxed) || g_engines.empty()) return;
  g_served.store(asked, std::memory_order_relaxed);
  const std::string dir = g_engines.front()->config.diagnostics.dump_dir;
  if (Status st = write_report(dir, report_locked()); !st.ok()) {
    ORBITE_LOG(Error, Proxy) << "the state report was not written: " << st.message();
  }
}

std::string process_report() {
  std::lock_guard lock(g_mu);
  return report_locked();
}

}  // namespace state_report
}  // namespace orbite::detail
