#include "p2p/shm/peer_proof.h"

#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "common/log.h"

namespace orbite::p2p {
namespace {

// A proof on the wire: these four bytes, then the nonce.
constexpr char kMagic[4] = {'O', 'P', 'R', 'F'};
constexpr std::size_t kProofBytes = sizeof kMagic + kProofNonceBytes;
// Connections taken per drain: a process flooding the listener cannot hold a pass for long.
constexpr int kDrainBudget = 64;

std::atomic<std::uint32_t> g_listener_index{0};

Result<sockaddr_un> abstract_address(std::string_view name, socklen_t& len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof addr.sun_path) {
    return Status::error(Errc::InvalidArgument,
                         "proof socket name of " + std::to_string(name.size()) + " bytes");
  }
  addr.sun_path[0] = '\0';  // the abstract namespace: nothing in the filesystem to clean up
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return addr;
}

Status sys_error(const std::string& what) {
  return Status::error(Errc::Unavailable, what + ": " + std::strerror(errno));
}

}  // namespace

std::string PeerProofs::socket_name(std::string_view engine_id, std::uint32_t index) {
  return "orbite-proof-" + std::string(engine_id) + "-" + std::to_string(index);
}

Status PeerProofs::open(std::string_view engine_id) {
  index_ = g_listener_index.fetch_add(1, std::memory_order_relaxed);
  const std::string name = socket_name(engine_id, index_);
  socklen_t len = 0;
  ORBITE_ASSIGN_OR_RETURN(sockaddr_un addr, abstract_address(name, len));
  net::Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return sys_error("socket(AF_UNIX) for the peer proofs");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    return sys_error("bind(@" + name + ")");
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) return sys_error("listen(@" + name + ")");
  listener_ = std::move(fd);
  return {};
}

std::string PeerProofs::issue(const void* key) {
  std::string nonce(kProofNonceBytes, '\0');
  std::size_t got = 0;
  while (got < nonce.size()) {
    const ssize_t n = ::getrandom(nonce.data() + got, nonce.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Without randomness no nonce is worth issuing: an all-zero one is never accepted.
      ORBITE_LOG(Warn, Shm) << "getrandom for a peer proof failed: " << std::strerror(errno);
      nonce.assign(kProofNonceBytes, '\0');
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  Entry& e = entries_[key];
  if (e.nonce.empty() || e.pid != 0) ++outstanding_;
  e.nonce = nonce;
  e.pid = 0;
  return nonce;
}

pid_t PeerProofs::proven(const void* key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return 0;
  if (it->second.pid == 0 && outstanding_ > 0) drain();
  return it->second.pid;
}

void PeerProofs::forget(const void* key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (it->second.pid == 0) --outstanding_;
  entries_.erase(it);
}

void PeerProofs::mark_self(const void* key) {
  forget(key);
  entries_[key] = Entry{std::string(), ::getpid()};
}

void PeerProofs::drain() {
  if (!listener_.valid()) return;
  for (int i = 0; i < kDrainBudget; ++i) {
    net::Fd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ORBITE_LOG(Debug, Shm) << "accept on the peer-proof socket: " << std::strerror(errno);
      }
      return;
    }
    ucred cred{};
    socklen_t cred_len = sizeof cred;
    if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
        cred_len != sizeof cred || cred.pid <= 0) {
      // No pid this process can name (the prover lives in a PID namespace hidden from ours).
      ++refused_;
      continue;
    }
    char buf[kProofBytes + 1];
    const ssize_t n = ::recv(c.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(kProofBytes) || std::memcmp(buf, kMagic, sizeof kMagic) != 0) {
      ++refused_;
      continue;
    }
    const std::string_view nonce(buf + sizeof kMagic, kProofNonceBytes);
    const bool blank = nonce.find_first_not_of('\0') == std::string_view::npos;
    bool matched = false;
    for (auto& [key, e] : entries_) {
      if (!blank && e.pid == 0 && e.nonce == nonce) {
        e.pid = cred.pid;
        --outstanding_;
        matched = true;
        break;
      }
    }
    if (matched) {
      ++accepted_;
    } else {
      ++refused_;
    }
  }
}

Status PeerProofs::prove(std::string_view peer_engine_id, std::uint32_t index,
                         std::string_view nonce) {
  if (nonce.size() != kProofNonceBytes) {
    return Status::error(Errc::InvalidArgument,
                         "a peer-proof nonce of " + std::to_string(nonce.size()) + " bytes");
  }
  const std::string name = socket_name(peer_engine_id, index);
  socklen_t len = 0;
  ORBITE_ASSIGN_OR_RETURN(sockaddr_un addr, abstract_address(name, len));
  net::Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return sys_error("socket(AF_UNIX) for a peer proof");
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return sys_error("connect(@" + name + ")");
  char buf[kProofBytes];
  std::memcpy(buf, kMagic, sizeof kMagic);
  std::memcpy(buf + sizeof kMagic, nonce.data(), kProofNonceBytes);
  ssize_t n;
  do {
    n = ::send(fd.get(), buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof buf)) {
    if (n >= 0) errno = EMSGSIZE;
    return sys_error("send to @" + name);
  }
  return {};
}

}  // namespace orbite::p2p
