#include "common/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "common/strings.h"

namespace orbite::net {
namespace {

std::string errno_text(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head != nullptr) freeaddrinfo(head);
  }
};

Status resolve(const HostPort& where, bool passive, AddrInfoList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string port = std::to_string(where.port);
  const char* host = where.host.empty() ? nullptr : where.host.c_str();
  int rc = getaddrinfo(host, port.c_str(), &hints, &out.head);
  if (rc != 0) {
    return Status::error(Errc::InvalidArgument,
                         "cannot resolve host " + quote(where.host) + ": " + gai_strerror(rc));
  }
  return {};
}

std::string sockaddr_host(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

}  // namespace

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Result<HostPort> parse_host_port(std::string_view text) {
  std::string_view t = trim(text);
  HostPort out;
  std::string_view port_text;
  if (!t.empty() && t.front() == '[') {
    size_t close = t.find(']');
    if (close == std::string_view::npos || close + 1 >= t.size() || t[close + 1] != ':') {
      return Status::error(Errc::InvalidArgument,
                           "address " + quote(text) + " is not of the form [ipv6]:port");
    }
    out.host = std::string(t.substr(1, close - 1));
    port_text = t.substr(close + 2);
  } else {
    size_t colon = t.rfind(':');
    if (colon == std::string_view::npos || t.find(':') != colon) {
      return Status::error(Errc::InvalidArgument,
                           "address " + quote(text) + " is not of the form host:port");
    }
    out.host = std::string(t.substr(0, colon));
    port_text = t.substr(colon + 1);
  }
  auto port = parse_uint64(port_text);
  if (out.host.empty() || !port || *port > 65535) {
    return Status::error(Errc::InvalidArgument,
                         "address " + quote(text) + " needs a host and a port in 0..65535");
  }
  out.port = static_cast<std::uint16_t>(*port);
  return out;
}

std::string format_host_port(std::string_view host, std::uint16_t port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out = "[" + std::string(host) + "]";
  } else {
    out = std::string(host);
  }
  return out + ":" + std::to_string(port);
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

Result<Fd> listen_tcp(const HostPort& where, int backlog) {
  AddrInfoList list;
  ORBITE_RETURN_IF_ERROR(resolve(where, /*passive=*/true, list));
  int last_err = 0;
  for (addrinfo* ai = list.head; ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) {
      last_err = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      last_err = errno;
      continue;
    }
    return fd;
  }
  return Status::error(
      Errc::Unavailable,
      "cannot listen on " + format_host_port(where.host, where.port) + ": " + errno_text(last_err));
}

Result<HostPort> local_endpoint(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return Status::error(Errc::Internal, "getsockname failed: " + errno_text(errno));
  }
  HostPort out;
  out.host = sockaddr_host(reinterpret_cast<sockaddr*>(&ss));
  out.port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                     : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return out;
}

Result<Fd> accept_nonblocking(int listen_fd) {
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
      return Fd();
    }
    // Out of descriptors or kernel memory: the caller backs off rather than retrying at once
    // (the pending connection stays in the backlog and the listener stays readable).
    const bool exhausted =
        errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM;
    return Status::error(exhausted ? Errc::ResourceExhausted : Errc::Unavailable,
                         "accept failed: " + errno_text(errno));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return Fd(fd);
}

Result<Fd> connect_tcp(const HostPort& where, Deadline deadline) {
  AddrInfoList list;
  ORBITE_RETURN_IF_ERROR(resolve(where, /*passive=*/false, list));
  std::string target = format_host_port(where.host, where.port);
  int last_err = ECONNREFUSED;
  for (addrinfo* ai = list.head; ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) {
      last_err = errno;
      continue;
    }
    int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      last_err = errno;
      continue;
    }
    if (rc != 0) {
      pollfd pfd{fd.get(), POLLOUT, 0};
      int n = 0;
      do {
        n = ::poll(&pfd, 1, deadline.poll_timeout_ms());
      } while (n < 0 && errno == EINTR);
      if (n == 0) {
        return Status::error(Errc::Timeout, "connecting to " + target + " timed out");
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (n < 0 || err != 0) {
        last_err = n < 0 ? errno : err;
        continue;
      }
    }
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  Errc code = (last_err == ECONNREFUSED || last_err == ECONNRESET || last_err == EHOSTUNREACH ||
               last_err == ENETUNREACH)
                  ? Errc::ConnectionLost
                  : Errc::Unavailable;
  return Status::error(code, "cannot connect to " + target + ": " + errno_text(last_err));
}

Result<Fd> connect_tcp_retry(const HostPort& where, Deadline deadline) {
  auto backoff = std::chrono::milliseconds(10);
  while (true) {
    auto fd = connect_tcp(where, deadline);
    if (fd.ok() || fd.status().code() == Errc::InvalidArgument || deadline.expired()) {
      if (!fd.ok() && fd.status().code() != Errc::InvalidArgument) {
        return Status::error(Errc::Timeout, fd.status().message() + " (gave up after retrying)");
      }
      return fd;
    }
    auto left = deadline.remaining();
    std::this_thread::sleep_for(std::min<Duration>(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

Status write_all(int fd, std::span<const std::byte> data, Deadline deadline,
                 std::string_view what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      int rc = ::poll(&pfd, 1, deadline.poll_timeout_ms());
      if (rc == 0) {
        return Status::error(Errc::Timeout, std::string(what) + ": write timed out");
      }
      continue;
    }
    return Status::error(
        Errc::ConnectionLost,
        std::string(what) + ": connection lost while writing: " + errno_text(errno));
  }
  return {};
}

Status read_exact(int fd, std::span<std::byte> data, Deadline deadline, std::string_view what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::recv(fd, data.data() + done, data.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return Status::error(Errc::ConnectionLost,
                           std::string(what) + ": peer closed the connection");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pfd{fd, POLLIN, 0};
      int rc = ::poll(&pfd, 1, deadline.poll_timeout_ms());
      if (rc == 0) {
        return Status::error(Errc::Timeout, std::string(what) + ": no reply before the deadline");
      }
      continue;
    }
    return Status::error(
        Errc::ConnectionLost,
        std::string(what) + ": connection lost while reading: " + errno_text(errno));
  }
  return {};
}

namespace {

struct IfSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};

IfSpec parse_if_spec(std::string_view spec) {
  IfSpec out;
  spec = trim(spec);
  if (!spec.empty() && spec.front() == '^') {
    out.exclude = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    out.exact = true;
    spec.remove_prefix(1);
  }
  for (auto& part : split(spec, ',')) {
    auto name = std::string(trim(part));
    if (!name.empty()) out.names.push_back(name);
  }
  return out;
}

bool if_matches(const IfSpec& spec, std::string_view name) {
  bool hit = false;
  for (const auto& n : spec.names) {
    if (spec.exact ? name == n : name.starts_with(n)) hit = true;
  }
  return spec.exclude ? !hit : hit;
}

}  // namespace

Result<InterfaceAddress> select_interface(std::string_view spec, bool prefer_loopback) {
  if (trim(spec).empty() && prefer_loopback) return InterfaceAddress{"lo", "127.0.0.1"};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return Status::error(Errc::Unavailable, "getifaddrs failed: " + errno_text(errno));
  }
  struct Candidate {
    std::string name;
    std::string addr;
    int rank;  // lower is better
  };
  std::vector<Candidate> found;
  IfSpec parsed = parse_if_spec(spec);
  bool explicit_spec = !parsed.names.empty();
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    std::string name = ifa->ifa_name;
    std::string addr = sockaddr_host(ifa->ifa_addr);
    if (family == AF_INET6 && addr.starts_with("fe80")) continue;  // link-local needs a scope
    int rank = 0;
    if (explicit_spec) {
      if (!if_matches(parsed, name)) continue;
    } else {
      bool loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
      bool virt = name.starts_with("docker") || name.starts_with("virbr");
      rank = loop ? 3 : (virt ? 2 : 0);
    }
    rank = rank * 2 + (family == AF_INET ? 0 : 1);  // IPv4 first within a class
    found.push_back({name, addr, rank});
  }
  freeifaddrs(list);
  if (found.empty()) {
    return Status::error(Errc::Unavailable,
                         explicit_spec ? "no up interface matches " + quote(spec)
                                       : std::string("no up network interface with an address"));
  }
  const Candidate* best = &found.front();
  for (const auto& c : found) {
    if (c.rank < best->rank) best = &c;
  }
  return InterfaceAddress{best->name, best->addr};
}

}  // namespace orbite::net
