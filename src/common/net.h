// Socket helpers shared by the bootstrap store and the TCP transports: address parsing,
// interface selection, and bounded (deadline-driven) reads and writes on nonblocking sockets.
#pragma once

#include <orbite/status.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/clock.h"

namespace orbite::net {

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

// "host:port", "1.2.3.4:80", "[::1]:80". Errors name the text.
Result<HostPort> parse_host_port(std::string_view text);
// Brackets IPv6 literals.
std::string format_host_port(std::string_view host, std::uint16_t port);
bool is_loopback_host(std::string_view host);

// Listening socket (SO_REUSEADDR, nonblocking, CLOEXEC). Port 0 picks a free port.
Result<Fd> listen_tcp(const HostPort& where, int backlog = 128);
// The address a socket is bound to, as host:port.
Result<HostPort> local_endpoint(int fd);
// Accepts one pending connection as a nonblocking socket; an invalid Fd when none is pending.
Result<Fd> accept_nonblocking(int listen_fd);

// One connection attempt, bounded by the deadline. The socket is nonblocking with TCP_NODELAY.
Result<Fd> connect_tcp(const HostPort& where, Deadline deadline);
// Retries refused or unreachable connections with backoff until the deadline.
Result<Fd> connect_tcp_retry(const HostPort& where, Deadline deadline);

// Bounded I/O on a nonblocking socket. A closed or reset peer is ConnectionLost; an expired
// deadline is Timeout. `what` names the operation in error messages.
Status write_all(int fd, std::span<const std::byte> data, Deadline deadline, std::string_view what);
Status read_exact(int fd, std::span<std::byte> data, Deadline deadline, std::string_view what);

void set_nonblocking(int fd);

// Picks a local IP address according to an NCCL_SOCKET_IFNAME-style spec: comma-separated
// interface name prefixes, "^" to exclude, "=" for exact names. An empty spec prefers any
// interface except lo, docker*, virbr*; `prefer_loopback` returns 127.0.0.1 for local-only jobs.
// Returns "ifname address".
struct InterfaceAddress {
  std::string interface;
  std::string address;
};
Result<InterfaceAddress> select_interface(std::string_view spec, bool prefer_loopback);

}  // namespace orbite::net
