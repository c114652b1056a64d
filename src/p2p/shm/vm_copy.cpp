#include "p2p/shm/vm_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/log.h"

namespace orbite::p2p {
namespace {

std::atomic<bool> g_usable{true};
std::atomic<bool> g_simulate_refusal{false};

Status simulated_refusal(const char* what) {
  return Status::error(Errc::Unavailable, std::string(what) + " refused (simulated for a test)");
}

bool is_refusal(int e) {
  return e == EPERM || e == ENOSYS || e == EACCES;
}

template <class Fn>
Status copy_loop(const char* what, std::int64_t pid, std::uint64_t len, Fn fn) {
  std::uint64_t done = 0;
  while (done < len) {
    ssize_t n = fn(done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      if (is_refusal(e) && g_usable.exchange(false)) {
        ORBITE_LOG(Warn, Shm) << what << " refused by the kernel (" << std::strerror(e)
                              << "): using the two-copy shared-memory path from now on";
      }
      return Status::error(is_refusal(e) ? Errc::Unavailable : Errc::ConnectionLost,
                           std::string(what) + " of " + std::to_string(len - done) +
                               " bytes with pid " + std::to_string(pid) +
                               " failed: " + std::strerror(e));
    }
    if (n == 0) {
      return Status::error(Errc::Internal, std::string(what) + " made no progress");
    }
    done += static_cast<std::uint64_t>(n);
  }
  return {};
}

}  // namespace

Status vm_read(std::int64_t pid, std::byte* local, std::uint64_t remote, std::uint64_t len) {
  if (g_simulate_refusal.load(std::memory_order_relaxed)) return simulated_refusal("read");
  if (pid == ::getpid()) {
    std::memcpy(local, reinterpret_cast<const void*>(remote), len);
    return {};
  }
  return copy_loop("process_vm_readv", pid, len, [&](std::uint64_t done) {
    iovec l{local + done, len - done};
    iovec r{reinterpret_cast<void*>(remote + done), len - done};
    return ::process_vm_readv(static_cast<pid_t>(pid), &l, 1, &r, 1, 0);
  });
}

Status vm_write(std::int64_t pid, const std::byte* local, std::uint64_t remote, std::uint64_t len) {
  if (g_simulate_refusal.load(std::memory_order_relaxed)) return simulated_refusal("write");
  if (pid == ::getpid()) {
    std::memcpy(reinterpret_cast<void*>(remote), local, len);
    return {};
  }
  return copy_loop("process_vm_writev", pid, len, [&](std::uint64_t done) {
    iovec l{const_cast<std::byte*>(local) + done, len - done};
    iovec r{reinterpret_cast<void*>(remote + done), len - done};
    return ::process_vm_writev(static_cast<pid_t>(pid), &l, 1, &r, 1, 0);
  });
}

bool vm_copy_usable() {
  return g_usable.load(std::memory_order_relaxed);
}

void vm_copy_simulate_refusal(bool refuse) {
  g_simulate_refusal.store(refuse);
}

}  // namespace orbite::p2p
