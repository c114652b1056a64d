#include "p2p/stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace orbite::p2p {

namespace {
constexpr int kMaxIov = 64;
constexpr std::size_t kDirectReadMin = 32 * 1024;

Status set_option(int fd, int level, int name, const void* value, socklen_t len, const char* what) {
  if (::setsockopt(fd, level, name, value, len) == 0) return {};
  return Status::error(Errc::Unavailable,
                       std::string("setsockopt(") + what + ") failed: " + std::strerror(errno));
}
}  // namespace

Status tune_socket(int fd, const TcpConfig& tcp) {
  const int one = 1;
  if (tcp.nodelay) {
    ORBITE_RETURN_IF_ERROR(
        set_option(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one), "TCP_NODELAY"));
  }
  if (tcp.keepalive) {
    // Keepalive probes bound how long a silent dead peer goes unnoticed: idle, interval and
    // count derived from peer_timeout; TCP_USER_TIMEOUT bounds unacknowledged sends likewise.
    const auto secs = std::max<std::int64_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(tcp.peer_timeout).count());
    const int idle = static_cast<int>(std::max<std::int64_t>(1, secs / 2));
    const int intvl = static_cast<int>(std::max<std::int64_t>(1, secs / 6));
    const int cnt = 3;
    ORBITE_RETURN_IF_ERROR(
        set_option(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one), "SO_KEEPALIVE"));
    ORBITE_RETURN_IF_ERROR(
        set_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle), "TCP_KEEPIDLE"));
    ORBITE_RETURN_IF_ERROR(
        set_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl), "TCP_KEEPINTVL"));
    ORBITE_RETURN_IF_ERROR(
        set_option(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt), "TCP_KEEPCNT"));
  }
  // Unacknowledged data older than peer_timeout fails the connection, keepalive or not.
  const auto user_timeout = static_cast<unsigned>(
      std::chrono::duration_cast<std::chrono::milliseconds>(tcp.peer_timeout).count());
  ORBITE_RETURN_IF_ERROR(set_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
                                    sizeof(user_timeout), "TCP_USER_TIMEOUT"));
  if (tcp.send_buffer_bytes != 0) {
    const int v = static_cast<int>(tcp.send_buffer_bytes);
    ORBITE_RETURN_IF_ERROR(set_option(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v), "SO_SNDBUF"));
  }
  if (tcp.recv_buffer_bytes != 0) {
    const int v = static_cast<int>(tcp.recv_buffer_bytes);
    ORBITE_RETURN_IF_ERROR(set_option(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v), "SO_RCVBUF"));
  }
  return {};
}

Result<net::Fd> start_connect(const std::string& address, const TcpConfig& tcp) {
  ORBITE_ASSIGN_OR_RETURN(net::HostPort hp, net::parse_host_port(address));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(hp.port);
  const int parsed = ::inet_pton(AF_INET, hp.host.c_str(), &addr.sin_addr);
  if (parsed != 1) {
    return Status::error(Errc::InvalidArgument,
                         "peer address " + address + " is not IPv4 host:port" +
                             (parsed < 0 ? std::string(": ") + std::strerror(errno) : ""));
  }
  net::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return Status::error(Errc::ResourceExhausted,
                         std::string("socket() failed: ") + std::strerror(errno));
  }
  ORBITE_RETURN_IF_ERROR(tune_socket(fd.get(), tcp));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
      errno != EINPROGRESS) {
    return Status::error(Errc::Unavailable,
                         "connecting to " + address + " failed: " + std::strerror(errno));
  }
  return fd;
}

Result<int> connect_result(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
    return Status::error(Errc::Unavailable,
                         std::string("getsockopt(SO_ERROR) failed: ") + std::strerror(errno));
  }
  return err;
}

FramedSocket::FramedSocket(Poller& poller, StreamOwner& owner, net::Fd fd, bool connecting,
                           detail::PeerLink* l, std::uint32_t i)
    : link(l),
      index(i),
      poller_(poller),
      owner_(owner),
      fd_(std::move(fd)),
      connecting_(connecting) {}

FramedSocket::~FramedSocket() {
  close();
}

Status FramedSocket::watch(bool hot) {
  want_write_ = connecting_;
  ORBITE_RETURN_IF_ERROR(
      poller_.add(fd_.get(), EPOLLIN | (connecting_ ? EPOLLOUT : 0u), this, hot));
  poller_.set_write_interest(fd_.get(), want_write_);
  return {};
}

void FramedSocket::close() {
  if (!fd_.valid()) return;
  poller_.remove(fd_.get());
  if (dirty_) {
    poller_.cancel_flush(this);
    dirty_ = false;
  }
  for (auto& item : out_) {
    if (item.pinned != nullptr) item.pinned->unpin();
  }
  if (in_payload_ && sink_.pinned != nullptr) sink_.pinned->unpin();
  in_payload_ = false;
  out_.clear();
  fd_.reset();
}

void FramedSocket::fail(const Status& why) {
  owner_.stream_failed(*this, why);
}

void FramedSocket::set_write(bool want) {
  if (want == want_write_) return;
  Status st = poller_.modify(fd_.get(), EPOLLIN | (want ? EPOLLOUT : 0u));
  if (!st.ok()) return fail(st);
  poller_.set_write_interest(fd_.get(), want);
  want_write_ = want;
}

void FramedSocket::queue(detail::SendItem item) {
  encode_header(item.header, item.encoded.data());
  out_.push_back(std::move(item));
  // Written at the end of the pass: frames queued together leave in one sendmsg.
  if (!dirty_) {
    dirty_ = true;
    poller_.defer_flush(this);
  }
}

void FramedSocket::flush() {
  dirty_ = false;
  if (fd_.valid() && !connecting_) write_out();
}

void FramedSocket::send_bye() {
  if (!fd_.valid() || connecting_ || !out_.empty()) return;
  FrameHeader h;
  h.type = FrameType::Bye;
  std::byte hdr[kFrameHeaderBytes];
  encode_header(h, hdr);
  // Best effort: a full socket buffer means the peer sees a plain end of stream.
  (void)::send(fd_.get(), hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void FramedSocket::write_out() {
  while (!out_.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = out_.begin(); it != out_.end() && n + 3 <= kMaxIov; ++it) {
      std::uint64_t skip = it->written;
      auto add = [&](const void* p, std::uint64_t len) {
        if (skip >= len) {
          skip -= len;
          return;
        }
        iov[n++] = {const_cast<char*>(static_cast<const char*>(p)) + skip, len - skip};
        skip = 0;
      };
      add(it->encoded.data(), kFrameHeaderBytes);
      if (!it->owned.empty()) add(it->owned.data(), it->owned.size());
      if (it->data_len != 0) add(it->data, it->data_len);
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    const ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return fail(
          Status::error(Errc::ConnectionLost, std::string("send failed: ") + std::strerror(errno)));
    }
    auto left = static_cast<std::uint64_t>(w);
    while (left > 0 && !out_.empty()) {
      detail::SendItem& front = out_.front();
      const std::uint64_t need = front.total() - front.written;
      if (left >= need) {
        left -= need;
        detail::SendItem done = std::move(front);
        out_.pop_front();
        owner_.stream_written(*this, done);
        if (!fd_.valid()) return;  // the owner failed the link
      } else {
        front.written += left;
        left = 0;
      }
    }
  }
  set_write(!out_.empty() || connecting_);
}

void FramedSocket::on_ready(std::uint32_t events) {
  if (!fd_.valid()) return;
  if ((events & EPOLLOUT) != 0 && connecting_) {
    auto err = connect_result(fd_.get());
    if (!err.ok()) return fail(err.status());
    if (*err != 0) {
      return fail(
          Status::error(Errc::Unavailable, std::string("connect failed: ") + std::strerror(*err)));
    }
    connecting_ = false;
    write_out();
  } else if ((events & EPOLLOUT) != 0) {
    write_out();
  }
  if (!fd_.valid()) return;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !connecting_) read();
}

void FramedSocket::read() {
  // A short read means the socket is (very likely) empty: stop there instead of paying one more
  // recv() for EAGAIN. Level-triggered epoll reports anything that arrives later.
  bool drained = false;
  for (;;) {
    // A handler may have failed the link and closed this socket.
    if (!fd_.valid()) return;
    if (in_payload_) {
      const std::uint64_t remaining = cur_.payload_len - got_;
      const std::uint64_t staged = rx_end_ - rx_begin_;
      const std::uint64_t take = std::min<std::uint64_t>(staged, remaining);
      if (take > 0) {
        if (sink_.kind == detail::Sink::Direct) {
          std::memcpy(sink_.dst + got_, rx_.data() + rx_begin_, take);
        } else if (sink_.kind == detail::Sink::Buffer) {
          buf_.append(reinterpret_cast<const char*>(rx_.data() + rx_begin_), take);
        }
        rx_begin_ += take;
        got_ += take;
      }
      if (got_ == cur_.payload_len) {
        in_payload_ = false;
        last_payload_ = cur_.payload_len;
        std::string body = std::move(buf_);
        buf_ = owner_.take_buffer();
        owner_.stream_frame_ends(*this, cur_, sink_, std::move(body));
        owner_.give_buffer(std::move(body));
        continue;
      }
      if (sink_.kind == detail::Sink::Direct && remaining - take >= kDirectReadMin) {
        if (drained) return;
        const ssize_t n = ::recv(fd_.get(), sink_.dst + got_, remaining - take, MSG_DONTWAIT);
        if (n > 0) {
          drained = static_cast<std::uint64_t>(n) < remaining - take;
          got_ += static_cast<std::uint64_t>(n);
          ++poller_.activity;
          continue;
        }
        if (n == 0) {
          return fail(
              Status::error(Errc::ConnectionLost, "the peer closed the connection mid-frame"));
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        return fail(Status::error(Errc::ConnectionLost,
                                  std::string("recv failed: ") + std::strerror(errno)));
      }
    } else if (rx_end_ - rx_begin_ >= kFrameHeaderBytes) {
      auto h = decode_header(rx_.data() + rx_begin_);
      if (!h.ok()) return fail(Status::error(Errc::Protocol, h.status().message()));
      rx_begin_ += kFrameHeaderBytes;
      cur_ = *h;
      got_ = 0;
      buf_.clear();
      auto sink = owner_.stream_frame_begins(*this, *h);
      if (!sink.ok()) return fail(Status::error(Errc::Protocol, sink.status().message()));
      if (!fd_.valid()) return;
      sink_ = std::move(*sink);
      in_payload_ = true;
      continue;
    }
    // Refill the staging buffer.
    if (rx_begin_ > 0 && rx_begin_ == rx_end_) rx_begin_ = rx_end_ = 0;
    if (rx_end_ == rx_.size()) {
      std::memmove(rx_.data(), rx_.data() + rx_begin_, rx_end_ - rx_begin_);
      rx_end_ -= rx_begin_;
      rx_begin_ = 0;
    }
    if (drained) return;
    std::size_t room = rx_.size() - rx_end_;
    if (!in_payload_ && last_payload_ >= kDirectReadMin) {
      // After a large frame another is likely: read just its header, so that its payload goes
      // straight to its destination instead of through the staging buffer.
      room = std::min(room, kFrameHeaderBytes - (rx_end_ - rx_begin_));
    }
    const ssize_t n = ::recv(fd_.get(), rx_.data() + rx_end_, room, MSG_DONTWAIT);
    if (n > 0) {
      drained = static_cast<std::size_t>(n) < room;
      rx_end_ += static_cast<std::size_t>(n);
      ++poller_.activity;
      continue;
    }
    if (n == 0) return fail(Status::error(Errc::ConnectionLost, "the peer closed the connection"));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return fail(
        Status::error(Errc::ConnectionLost, std::string("recv failed: ") + std::strerror(errno)));
  }
}

}  // namespace orbite::p2p
