// The emulated NIC: one thread per opened context that owns a listening socket and every TCP
// connection of the context's QPs, reads requests and responses, and writes what the
// application threads queued. Sockets are non-blocking so two NICs writing large messages to
// each other never deadlock.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "internal.h"

namespace softverbs {
namespace {

constexpr size_t kReadBudget = 8 << 20;  // bytes per connection per loop turn
constexpr size_t kMaxIov = 64;           // iovecs per sendmsg
constexpr uint64_t kLinkCheckNs = 100'000'000;

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

#if SOFTVERBS_TSAN
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

OutMsg make_out(size_t head_len) {
  OutMsg m;
  m.head.reset(new char[head_len]);
  m.head_len = head_len;
  m.size = head_len;
  return m;
}

// The NIC reading registered memory for a WRITE or SEND payload (see dma_recv).
ssize_t dma_sendmsg(int fd, const msghdr* msg) {
#if SOFTVERBS_TSAN
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
#endif
  const ssize_t r = ::sendmsg(fd, msg, MSG_NOSIGNAL);
#if SOFTVERBS_TSAN
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
  return r;
}

ssize_t dma_recv(int fd, void* dst, size_t n) {
#if SOFTVERBS_TSAN
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  const ssize_t r = ::recv(fd, dst, n, 0);
#if SOFTVERBS_TSAN
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
  return r;
}

void Nic::stop() {
  stop_ = true;
  if (wake_fd_ >= 0) wake();
  if (thread_.joinable()) thread_.join();
}

Nic::~Nic() {
  stop();
  for (auto& c : conns_) {
    if (c->fd >= 0) ::close(c->fd);
  }
  for (auto& c : added_) {
    if (c->fd >= 0) ::close(c->fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

int Nic::start() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return errno;
  for (int slot = 0; slot < kSlots; ++slot) {
    const int fd = device_socket(*dev_->cfg, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return -fd;
    int one = 1;  // exclusive still (no SO_REUSEPORT), but not kept out by TIME_WAIT
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = dev_->cfg->bind_ip;
    a.sin_port = htons(static_cast<uint16_t>(dev_->cfg->port_base + slot));
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd, 128) == 0) {
      listen_fd_ = fd;
      slot_ = static_cast<uint32_t>(slot);
      break;
    }
    const int err = errno;
    ::close(fd);
    if (err != EADDRINUSE) return err;
  }
  if (listen_fd_ < 0) return EADDRINUSE;
  thread_ = std::thread([this] { run(); });
  return 0;
}

void Nic::wake() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // The counter is saturated only if the thread is far behind; it wakes anyway.
  }
}

int Nic::connect(const std::shared_ptr<Qp>& qp, std::shared_ptr<Conn>* out) {
  const int fd = device_socket(*dev_->cfg, SOCK_STREAM | SOCK_CLOEXEC);
  if (fd < 0) return -fd;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = qp->dest_ip;
  a.sin_port = htons(qp->dest_port);
  // Source address: this device's bind address, so a cut rail breaks only its own traffic.
  sockaddr_in src{};
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = dev_->cfg->bind_ip;
  // The port is chosen at connect, by the whole 4-tuple: a bind to port 0 would reserve a port
  // of its own, and with every QP a connection (a private grant makes two) the TIME_WAIT ones
  // would exhaust the range and make each bind a long search.
  // (A kernel without the option, before 4.2, binds the port as before.)
  const int one = 1;
  int err = 0;
  if (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) != 0 &&
      errno != ENOPROTOOPT) {
    err = errno;
  }
  if (err != 0 || bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    err = errno;
  }
  WireHdr h{};
  h.magic = kMagic;
  h.op = static_cast<uint8_t>(Op::kHello);
  h.qpn = qp->dest_qpn;
  h.imm = qp->ibv != nullptr ? qp->ibv->qp_num : 0;
  if (err == 0 && !write_all(fd, &h, sizeof(h))) err = errno != 0 ? errno : EPIPE;
  if (err != 0) {
    ::close(fd);
    return err;
  }
  tune(fd);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  auto c = std::make_shared<Conn>();
  c->fd = fd;
  c->qp = qp;
  {
    std::lock_guard lock(mu_);
    added_.push_back(c);
  }
  wake();
  *out = c;
  return 0;
}

void Nic::send(Conn& conn, OutMsg msg) {
  {
    std::lock_guard lock(mu_);
    if (conn.aborted) return;
    conn.pending.push_back(std::move(msg));
  }
  wake();
}

void Nic::abort(const std::shared_ptr<Conn>& conn) {
  {
    std::lock_guard lock(mu_);
    conn->aborted = true;
    conn->pending.clear();
    std::lock_guard io(io_mu_);  // waits for a sendmsg reading the bodies
    conn->out.clear();
    conn->out_off = 0;
  }
  wake();
}

void Nic::close(const std::shared_ptr<Conn>& conn) {
  {
    std::lock_guard lock(mu_);
    conn->closing = true;
  }
  wake();
}

void Nic::forget_range(const char* lo, size_t len,
                       const std::vector<std::pair<const char*, size_t>>& still_registered) {
  auto covered = [&](const char* p, size_t n) {
    for (const auto& [base, length] : still_registered) {
      if (p >= base && p + n <= base + length) return true;
    }
    return false;
  };
  auto points_in = [&](const std::deque<OutMsg>& q) {
    for (const OutMsg& m : q) {
      for (const iovec& v : m.body) {
        const char* p = static_cast<const char*>(v.iov_base);
        if (p < lo + len && lo < p + v.iov_len && !covered(p, v.iov_len)) return true;
      }
    }
    return false;
  };
  bool any = false;
  {
    std::lock_guard lock(mu_);
    std::lock_guard io(io_mu_);
    for (const auto& list : {&added_, &conns_}) {
      for (const auto& c : *list) {
        if (c->aborted || !(points_in(c->pending) || points_in(c->out))) continue;
        c->aborted = true;  // the message may be half sent: the connection cannot go on
        c->pending.clear();
        c->out.clear();
        c->out_off = 0;
        any = true;
      }
    }
  }
  if (any) wake();
}

void Nic::accept_one() {
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  tune(fd);
  auto c = std::make_shared<Conn>();
  c->fd = fd;
  c->incoming = true;
  std::lock_guard lock(mu_);
  conns_.push_back(c);
}

void Nic::drop(const std::shared_ptr<Conn>& c) {
  if (c->fd >= 0) ::close(c->fd);
  c->fd = -1;
  connection_lost(*c);
}

// Reads what is available; false when the connection is finished.
bool Nic::read_some(const std::shared_ptr<Conn>& cp) {
  Conn& c = *cp;
  size_t budget = kReadBudget;
  char scratch[64 << 10];
  while (budget > 0) {
    if (c.blocked) {
      begin_message(*dev_, c);  // retry: a receive WR or RTR may have come
      if (c.blocked) return true;
      if (!c.in_body) end_message(*dev_, c);
      continue;
    }
    if (!c.in_body) {
      auto* h = reinterpret_cast<char*>(&c.hdr);
      const ssize_t n = ::recv(c.fd, h + c.hdr_got, sizeof(WireHdr) - c.hdr_got, 0);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      c.hdr_got += static_cast<size_t>(n);
      if (c.hdr_got < sizeof(WireHdr)) continue;
      c.hdr_got = 0;
      if (c.hdr.magic != kMagic) return false;
      if (c.incoming && !c.qp && c.hdr.op == static_cast<uint8_t>(Op::kHello)) {
        c.qp = dev_->find_qp(c.hdr.qpn);
        if (!c.qp) return false;
        continue;
      }
      if (!c.qp) return false;
      begin_message(*dev_, c);
      if (c.blocked) return true;
      if (!c.in_body) end_message(*dev_, c);
      continue;
    }
    // Body: into the destination iovecs, then whatever must be discarded.
    ssize_t n = 0;
    bool received = false;
    if (c.dst_i < c.dst.size()) {
      // The region cannot be deregistered during the recv; if it was since the message began,
      // the destination is checked again first.
      std::shared_lock dma(dev_->dma_mu);
      if (c.dst_gen != dev_->dereg_gen.load()) revalidate_dst(*dev_, c);
      if (c.dst_i < c.dst.size()) {
        iovec& v = c.dst[c.dst_i];
        const size_t want = std::min(v.iov_len, budget);
        n = dma_recv(c.fd, v.iov_base, want);
        received = true;
        if (n > 0) {
          v.iov_base = static_cast<char*>(v.iov_base) + n;
          v.iov_len -= static_cast<size_t>(n);
          if (v.iov_len == 0) ++c.dst_i;
        }
      }
    }
    if (!received && c.discard > 0) {
      n = ::recv(c.fd, scratch, std::min(c.discard, sizeof(scratch)), 0);
      if (n > 0) c.discard -= static_cast<size_t>(n);
    }
    if (n == 0 && (c.dst_i < c.dst.size() || c.discard > 0)) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    budget -= std::min(budget, static_cast<size_t>(n));
    if (c.dst_i >= c.dst.size() && c.discard == 0) {
      c.in_body = false;
      end_message(*dev_, c);
    }
  }
  return true;
}

// Writes what the token bucket allows, several messages per sendmsg; false when the
// connection is broken.
bool Nic::write_some(Conn& c, uint64_t now) {
  std::lock_guard io(io_mu_);
  TokenBucket& bucket = dev_->st->bucket;
  while (!c.out.empty()) {
    iovec iov[kMaxIov];
    size_t n_iov = 0;
    size_t want = 0;
    size_t skip = c.out_off;
    for (const OutMsg& m : c.out) {
      auto add = [&](void* base, size_t len) {
        if (skip >= len) {
          skip -= len;
          return;
        }
        if (n_iov < kMaxIov) {
          iov[n_iov++] = {static_cast<char*>(base) + skip, len - skip};
          want += len - skip;
        }
        skip = 0;
      };
      add(m.head.get(), m.head_len);
      for (const iovec& v : m.body) add(v.iov_base, v.iov_len);
      if (n_iov == kMaxIov) break;
    }
    const size_t grant = bucket.take(now, want);
    if (grant == 0) {
      throttled_until_ = now + bucket.wait_ns(now, want);
      return true;
    }
    size_t left = grant;  // trim the iovecs to the grant
    for (size_t i = 0; i < n_iov; ++i) {
      if (left < iov[i].iov_len) {
        iov[i].iov_len = left;
        n_iov = left > 0 ? i + 1 : i;
        break;
      }
      left -= iov[i].iov_len;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n_iov;
    const ssize_t w = dma_sendmsg(c.fd, &msg);
    if (w < 0) {
      bucket.give_back(grant);
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
    bucket.give_back(grant - static_cast<size_t>(w));
    size_t done = static_cast<size_t>(w) + c.out_off;
    while (!c.out.empty() && done >= c.out.front().size) {
      done -= c.out.front().size;
      c.out.pop_front();
    }
    c.out_off = done;
    if (static_cast<size_t>(w) < grant) return true;  // the socket is full
  }
  return true;
}

uint64_t Nic::housekeeping(uint64_t now) {
  uint64_t next = UINT64_MAX;
  if (now >= next_link_check_) {
    check_link(*dev_->st);
    next_link_check_ = now + kLinkCheckNs;
  }
  next = next_link_check_ - now;
  std::lock_guard lock(dev_->delay_mu);
  auto& cqs = dev_->delayed_cqs;
  for (size_t i = 0; i < cqs.size();) {
    uint64_t due = 0;
    {
      std::lock_guard cl(cqs[i]->mu);
      due = release_due(cqs[i], now);
    }
    if (due == 0) {
      cqs.erase(cqs.begin() + static_cast<ptrdiff_t>(i));
    } else {
      next = std::min(next, due > now ? due - now : 0);
      ++i;
    }
  }
  return next;
}

void Nic::run() {
  std::vector<pollfd> fds;
  while (!stop_) {
    {
      std::lock_guard lock(mu_);
      for (auto& c : added_) conns_.push_back(std::move(c));
      added_.clear();
      std::lock_guard io(io_mu_);
      for (auto& c : conns_) {
        while (!c->pending.empty()) {
          c->out.push_back(std::move(c->pending.front()));
          c->pending.pop_front();
        }
      }
    }
    // Close what the application closed once its output has gone out; drop what it aborted.
    for (size_t i = 0; i < conns_.size();) {
      std::shared_ptr<Conn> c = conns_[i];
      bool closing = false;
      bool aborted = false;
      bool idle = false;
      {
        std::lock_guard lock(mu_);
        closing = c->closing;
        aborted = c->aborted;
        std::lock_guard io(io_mu_);
        idle = c->out.empty();
      }
      if (c->fd >= 0 && aborted) drop(c);
      if (c->fd < 0 || (closing && idle)) {
        if (c->fd >= 0) ::close(c->fd);
        c->fd = -1;
        std::lock_guard lock(mu_);
        conns_.erase(conns_.begin() + static_cast<ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    uint64_t now = now_ns();
    uint64_t wait = housekeeping(now);
    const bool throttled = throttled_until_ > now;
    if (throttled) wait = std::min(wait, throttled_until_ - now);
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    {
      std::lock_guard io(io_mu_);
      for (auto& c : conns_) {
        short ev = c->blocked ? 0 : POLLIN;
        if (!c->out.empty() && !throttled) ev |= POLLOUT;
        // Blocked connections are retried on every wake-up; a short timeout covers races.
        if (c->blocked) wait = std::min<uint64_t>(wait, 1'000'000);
        fds.push_back({c->fd, ev, 0});
      }
    }
    timespec ts{static_cast<time_t>(wait / 1'000'000'000), static_cast<long>(wait % 1'000'000'000)};
    const int r = ppoll(fds.data(), fds.size(), &ts, nullptr);
    if (r < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      while (read(wake_fd_, &v, sizeof(v)) > 0) {
      }
    }
    if (fds[1].revents & POLLIN) accept_one();
    now = now_ns();
    const bool may_write = throttled_until_ <= now;
    const size_t n = conns_.size();
    for (size_t i = 0; i < n && i + 2 < fds.size(); ++i) {
      std::shared_ptr<Conn> c = conns_[i];
      const short re = fds[i + 2].revents;
      bool ok = true;
      if (c->blocked || (re & (POLLIN | POLLHUP | POLLERR))) ok = read_some(c);
      // POLLOUT was not asked while throttled: try once the bucket has refilled.
      if (ok && may_write && ((re & POLLOUT) || throttled)) ok = write_some(*c, now);
      if (!ok || (re & POLLNVAL)) drop(c);
    }
  }
}

}  // namespace softverbs
