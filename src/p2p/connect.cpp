// Connections between engines. Either side may open the connection when it first needs the peer;
// when both open at once, the one opened by the engine with the smaller ID wins (the other side
// answers HelloNack), so every pair ends up with exactly one connection. Same-host peers add a
// shared-memory ring per direction, named in the handshake and unlinked once both sides mapped it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "p2p/transports.h"

namespace orbite::p2p {

using detail::PeerLink;
using detail::TcpStream;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<std::uint64_t> g_ring_counter{0};

void tune_socket(int fd, const TcpConfig& tcp) {
  int one = 1;
  if (tcp.nodelay) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (tcp.keepalive) {
    // Keepalive probes bound how long a silent dead peer goes unnoticed: idle, interval and
    // count derived from peer_timeout; TCP_USER_TIMEOUT bounds unacknowledged sends likewise.
    const auto secs = std::max<std::int64_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(tcp.peer_timeout).count());
    int idle = static_cast<int>(std::max<std::int64_t>(1, secs / 2));
    int intvl = static_cast<int>(std::max<std::int64_t>(1, secs / 6));
    int cnt = 3;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  }
  // Unacknowledged data older than peer_timeout fails the connection, keepalive or not.
  unsigned user_timeout = static_cast<unsigned>(
      std::chrono::duration_cast<std::chrono::milliseconds>(tcp.peer_timeout).count());
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
  if (tcp.send_buffer_bytes != 0) {
    int v = static_cast<int>(tcp.send_buffer_bytes);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  }
  if (tcp.recv_buffer_bytes != 0) {
    int v = static_cast<int>(tcp.recv_buffer_bytes);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
  }
}

std::string short_id(const std::string& id) {
  return id.substr(0, 8);
}

}  // namespace

Transports::Transports(const EngineConfig& config, const Identity& self, RegionRegistry& regions,
                       Counters& counters, int lane_index)
    : config_(config),
      self_(self),
      regions_(regions),
      counters_(counters),
      lane_index_(lane_index) {}

Transports::~Transports() {
  shutdown(Status::error(Errc::Cancelled, "the engine closed"));
}

Status Transports::init() {
  epfd_ = net::Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_.valid()) {
    return Status::error(Errc::ResourceExhausted,
                         std::string("epoll_create1 failed: ") + std::strerror(errno));
  }
  return {};
}

void Transports::set_listener(int fd, std::function<void(Accepted)> route) {
  listen_fd_ = fd;
  route_ = std::move(route);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev);
}

void Transports::set_wake_fd(int fd) {
  wake_fd_ = fd;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev);
}

void Transports::watch(TcpStream& s, bool write) {
  epoll_event ev{};
  ev.events = EPOLLIN | (write ? EPOLLOUT : 0u);
  ev.data.fd = s.fd.get();
  if (stream_fds_.emplace(s.fd.get(), &s).second) {
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, s.fd.get(), &ev);
  } else {
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, s.fd.get(), &ev);
  }
  if (write != s.want_write) writers_ += write ? 1 : -1;
  s.want_write = write;
}

void Transports::unwatch(TcpStream& s) {
  if (!s.fd.valid()) return;
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
  stream_fds_.erase(s.fd.get());
  if (s.want_write) --writers_;
  s.want_write = false;
}

void Transports::bury_stream(Link& link, std::size_t index) {
  auto& s = link.streams[index];
  if (!s) return;
  unwatch(*s);
  for (auto& item : s->out) {
    if (item.pinned != nullptr) item.pinned->unpin();
  }
  if (s->in_payload && s->sink.pinned != nullptr) s->sink.pinned->unpin();
  if (s->dirty) {
    std::erase(dirty_, s.get());
    s->dirty = false;
  }
  s->in_payload = false;
  s->out.clear();
  s->fd.reset();
  graveyard_.push_back(std::move(s));
}

PeerLink& Transports::link_for(const detail::Endpoint& ep) {
  auto it = links_.find(ep.id);
  if (it != links_.end()) {
    if (it->second->ep.address.empty()) it->second->ep.address = ep.address;
    return *it->second;
  }
  auto link = std::make_unique<PeerLink>();
  link->ep = ep;
  link->is_self = ep.id == self_.id;
  link->same_host = ep.host_id == self_.host_id;
  PeerLink& ref = *link;
  links_[ep.id] = std::move(link);
  if (ref.is_self) {
    // A rank talking to itself: one ring that it both writes and reads.
    auto ring = ShmRing::create(
        "/orbite-" + std::to_string(self_.pid) + "-self-" + std::to_string(g_ring_counter++),
        config_.shm.ring_bytes);
    if (!ring.ok()) {
      fail_link(ref, ring.status());
      return ref;
    }
    ring->unlink_name();
    ref.rx = std::make_unique<ShmRing>(std::move(*ring));
    ref.tx_ring = ref.rx.get();
    ref.credit = ref.credit_window = config_.eager_credit_bytes;
    ref.state = PeerLink::State::Established;
    ring_links_.push_back(&ref);
  }
  return ref;
}

Result<std::string> Transports::create_own_ring(Link& link) {
  if (link.rx) return link.rx->name();
  const std::string name = "/orbite-" + std::to_string(self_.pid) + "-" + short_id(self_.id) + "-" +
                           short_id(link.ep.id) + "-" + std::to_string(g_ring_counter++);
  ORBITE_ASSIGN_OR_RETURN(ShmRing ring, ShmRing::create(name, config_.shm.ring_bytes));
  link.rx = std::make_unique<ShmRing>(std::move(ring));
  return name;
}

Status Transports::open_peer_ring(Link& link, const Handshake& peer) {
  ORBITE_ASSIGN_OR_RETURN(ShmRing ring, ShmRing::open(peer.shm_name, peer.shm_bytes));
  link.tx = std::make_unique<ShmRing>(std::move(ring));
  link.tx->set_strict_wakeup(config_.progress_mode == ProgressMode::EventDriven);
  link.tx_ring = link.tx.get();
  return {};
}

void Transports::connect(Link& link) {
  if (link.ep.address.empty()) {
    fail_link(link, Status::error(Errc::Unavailable, "peer " + short_id(link.ep.id) +
                                                         " has no known control address"));
    return;
  }
  auto hp = net::parse_host_port(link.ep.address);
  if (!hp.ok()) {
    fail_link(link, hp.status());
    return;
  }
  Handshake hello;
  hello.engine_id = self_.id;
  hello.host_id = self_.host_id;
  hello.pid = self_.pid;
  hello.eager_credit = config_.eager_credit_bytes;
  if (link.same_host && config_.shm.enable) {
    auto name = create_own_ring(link);
    if (name.ok()) {
      hello.shm_name = *name;
      hello.shm_bytes = config_.shm.ring_bytes;
    } else {
      ORBITE_LOG(Warn, Shm) << "no shared-memory ring for peer " << short_id(link.ep.id) << ": "
                            << name.status().message() << "; using TCP";
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(hp->port);
  if (::inet_pton(AF_INET, hp->host.c_str(), &addr.sin_addr) != 1) {
    fail_link(link, Status::error(Errc::InvalidArgument,
                                  "peer address " + link.ep.address + " is not IPv4 host:port"));
    return;
  }
  net::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    fail_link(link, Status::error(Errc::ResourceExhausted,
                                  std::string("socket() failed: ") + std::strerror(errno)));
    return;
  }
  tune_socket(fd.get(), config_.tcp);
  int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (rc != 0 && errno != EINPROGRESS) {
    fail_link(link, Status::error(Errc::Unavailable, "connecting to peer " + short_id(link.ep.id) +
                                                         " at " + link.ep.address +
                                                         " failed: " + std::strerror(errno)));
    return;
  }
  auto s = std::make_unique<TcpStream>();
  s->fd = std::move(fd);
  s->connecting = true;
  s->link = &link;
  s->index = 0;
  link.streams.clear();
  link.streams.push_back(std::move(s));
  link.state = PeerLink::State::Connecting;
  if (!link.connect_deadline) link.connect_deadline = Clock::now() + config_.tcp.connect_timeout;
  detail::SendItem item;
  item.header.type = FrameType::Hello;
  item.owned = encode_handshake(hello);
  item.header.payload_len = static_cast<std::uint32_t>(item.owned.size());
  queue(link, Channel::Tcp, std::move(item), 0);
  watch(*link.streams[0], true);
}

void Transports::on_connected(Link& link, TcpStream& s) {
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(s.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    fail_link(link, Status::error(Errc::Unavailable, "connecting to peer " + short_id(link.ep.id) +
                                                         " at " + link.ep.address +
                                                         " failed: " + std::strerror(err)));
    return;
  }
  s.connecting = false;
  flush_stream(link, s);
}

void Transports::on_hello_reply(Link& link, TcpStream& s, const FrameHeader& h,
                                std::string&& body) {
  if (h.type == FrameType::HelloNack) {
    // The peer keeps the connection it opened to us; wait for it (bounded by connect_timeout).
    if (s.index == 0 && link.state == PeerLink::State::Connecting) {
      bury_stream(link, 0);
      link.streams.clear();
      link.state = PeerLink::State::AwaitingPeer;
    } else {
      for (std::size_t i = 0; i < link.streams.size(); ++i) {
        if (link.streams[i].get() == &s) bury_stream(link, i);
      }
    }
    return;
  }
  auto peer = decode_handshake(body);
  if (!peer.ok()) return protocol_error(link, peer.status().message());
  if (peer->engine_id != link.ep.id) {
    return protocol_error(link, "HelloAck from engine " + short_id(peer->engine_id) +
                                    " at an address advertised by " + short_id(link.ep.id));
  }
  s.handshaken = true;
  if (s.index > 0) return;  // an extra stream joined an established link
  if (!peer->shm_name.empty() && link.rx) {
    Status opened = open_peer_ring(link, *peer);
    ::shm_unlink(peer->shm_name.c_str());
    if (!opened.ok()) return fail_link(link, opened);
  }
  if (link.rx) link.rx->unlink_name();
  if (!link.tx_ring && link.rx) link.rx.reset();  // the peer declined shared memory
  establish(link, *peer);
}

void Transports::establish(Link& link, const Handshake& peer) {
  link.state = PeerLink::State::Established;
  link.connect_deadline.reset();
  link.ep.pid = peer.pid;
  link.credit = peer.eager_credit;
  link.credit_window = config_.eager_credit_bytes;
  counters_.peers_connected++;
  if (link.tx_ring != nullptr) ring_links_.push_back(&link);
  ORBITE_LOG(Debug, Tcp) << "connected to peer " << short_id(link.ep.id) << " (pid " << peer.pid
                         << ")" << (link.tx_ring ? " with shared memory" : " over TCP only");
  // Extra TCP streams for bandwidth, opened by the side that opened the first one.
  if (link.streams.size() == 1 && link.streams[0]->connecting == false &&
      config_.tcp.streams_per_peer > 1 && !link.ep.address.empty() && link.streams[0]->handshaken &&
      link.streams[0]->index == 0 && !link.rx_accepted) {
    auto hp = net::parse_host_port(link.ep.address);
    for (std::uint32_t i = 1; hp.ok() && i < config_.tcp.streams_per_peer; ++i) {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(hp->port);
      ::inet_pton(AF_INET, hp->host.c_str(), &addr.sin_addr);
      net::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd.valid()) break;
      tune_socket(fd.get(), config_.tcp);
      if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
          errno != EINPROGRESS) {
        break;
      }
      auto s = std::make_unique<TcpStream>();
      s->fd = std::move(fd);
      s->connecting = true;
      s->link = &link;
      s->index = i;
      link.streams.push_back(std::move(s));
      Handshake extra;
      extra.engine_id = self_.id;
      extra.host_id = self_.host_id;
      extra.pid = self_.pid;
      extra.stream_index = i;
      extra.eager_credit = config_.eager_credit_bytes;
      detail::SendItem item;
      item.header.type = FrameType::Hello;
      item.owned = encode_handshake(extra);
      item.header.payload_len = static_cast<std::uint32_t>(item.owned.size());
      queue(link, Channel::Tcp, std::move(item), i);
      watch(*link.streams.back(), true);
    }
  }
  auto waiting = std::move(link.waiting);
  link.waiting.clear();
  for (auto& req : waiting) issue(link, req);
}

void Transports::accept_ready() {
  for (;;) {
    auto fd = net::accept_nonblocking(listen_fd_);
    if (!fd.ok() || !fd->valid()) return;
    tune_socket(fd->get(), config_.tcp);
    auto p = std::make_unique<PendingAccept>();
    p->fd = std::move(*fd);
    p->deadline = Clock::now() + config_.tcp.connect_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = p->fd.get();
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, p->fd.get(), &ev);
    pending_accepts_.push_back(std::move(p));
  }
}

void Transports::poll_pending_accepts() {
  const auto now = Clock::now();
  for (std::size_t i = 0; i < pending_accepts_.size();) {
    PendingAccept& p = *pending_accepts_[i];
    std::string problem;
    bool complete = false;
    for (;;) {
      std::byte chunk[4096];
      ssize_t n = ::recv(p.fd.get(), chunk, sizeof(chunk), 0);
      if (n > 0) {
        p.bytes.insert(p.bytes.end(), chunk, chunk + n);
        if (p.bytes.size() > kFrameHeaderBytes + kMaxControlPayload) break;
        continue;
      }
      if (n == 0)
        problem = "closed before its handshake";  // also a lost connection race
      else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        problem = std::string("read failed: ") + std::strerror(errno);
      break;
    }
    Handshake hello;
    if (problem.empty() && p.bytes.size() >= kFrameHeaderBytes) {
      auto h = decode_header(p.bytes.data());
      if (!h.ok()) {
        problem = h.status().message();
      } else if (h->type != FrameType::Hello) {
        problem = std::string("first frame is ") + frame_type_name(h->type) + ", not Hello";
      } else if (p.bytes.size() > kFrameHeaderBytes + h->payload_len) {
        problem = "bytes after the Hello before it was answered";
      } else if (p.bytes.size() == kFrameHeaderBytes + h->payload_len) {
        auto hs = decode_handshake(std::string_view(
            reinterpret_cast<const char*>(p.bytes.data()) + kFrameHeaderBytes, h->payload_len));
        if (!hs.ok())
          problem = hs.status().message();
        else {
          hello = std::move(*hs);
          complete = true;
        }
      }
    }
    if (problem.empty() && !complete && now > p.deadline) problem = "no handshake in time";
    if (!problem.empty() || complete) {
      ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
      if (problem.starts_with("closed before")) {
        ORBITE_LOG(Debug, Tcp) << "control connection dropped: " << problem;
      } else if (!problem.empty()) {
        counters_.protocol_errors++;
        ORBITE_LOG(Warn, Tcp) << "control connection refused: " << problem;
      } else {
        Accepted a{std::move(p.fd), std::move(hello)};
        if (route_)
          route_(std::move(a));
        else
          adopt(std::move(a));
      }
      pending_accepts_.erase(pending_accepts_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
}

void Transports::adopt(Accepted a) {
  detail::Endpoint ep{a.hello.engine_id, "", a.hello.host_id, a.hello.pid};
  Link& link = link_for(ep);
  auto reply = [&](FrameType type, const Handshake* hs) {
    FrameHeader h;
    h.type = type;
    std::string body = hs ? encode_handshake(*hs) : std::string();
    h.payload_len = static_cast<std::uint32_t>(body.size());
    std::byte hdr[kFrameHeaderBytes];
    encode_header(h, hdr);
    std::string out(reinterpret_cast<const char*>(hdr), kFrameHeaderBytes);
    out += body;
    // A handshake reply is small and the socket is fresh: it fits the send buffer.
    return ::send(a.fd.get(), out.data(), out.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(out.size());
  };
  Handshake mine;
  mine.engine_id = self_.id;
  mine.host_id = self_.host_id;
  mine.pid = self_.pid;
  mine.eager_credit = config_.eager_credit_bytes;
  if (a.hello.stream_index > 0) {
    if (link.state != PeerLink::State::Established || link.is_self) {
      reply(FrameType::HelloNack, nullptr);
      return;
    }
    mine.stream_index = a.hello.stream_index;
    if (!reply(FrameType::HelloAck, &mine)) return;
    auto s = std::make_unique<TcpStream>();
    s->fd = std::move(a.fd);
    s->handshaken = true;
    s->link = &link;
    s->index = static_cast<std::uint32_t>(link.streams.size());
    link.streams.push_back(std::move(s));
    watch(*link.streams.back(), false);
    return;
  }
  const bool ours_wins = link.state == PeerLink::State::Connecting && self_.id < link.ep.id;
  if (link.is_self || link.state == PeerLink::State::Established ||
      link.state == PeerLink::State::Failed || ours_wins) {
    reply(FrameType::HelloNack, nullptr);
    return;
  }
  if (link.state == PeerLink::State::Connecting) {
    bury_stream(link, 0);
    link.streams.clear();
  }
  link.ep.pid = a.hello.pid;
  link.ep.host_id = a.hello.host_id;
  link.same_host = a.hello.host_id == self_.host_id;
  if (!a.hello.shm_name.empty() && link.same_host && config_.shm.enable) {
    auto name = create_own_ring(link);
    Status opened = name.ok() ? open_peer_ring(link, a.hello) : name.status();
    if (opened.ok()) {
      mine.shm_name = *name;
      mine.shm_bytes = config_.shm.ring_bytes;
    } else {
      ORBITE_LOG(Warn, Shm) << "shared memory with peer " << short_id(link.ep.id) << " failed ("
                            << opened.message() << "); using TCP";
      link.tx.reset();
      link.tx_ring = nullptr;
      link.rx.reset();
    }
  } else {
    link.rx.reset();
  }
  if (!reply(FrameType::HelloAck, &mine)) {
    fail_link(link, Status::error(Errc::ConnectionLost, "answering the handshake of peer " +
                                                            short_id(link.ep.id) + " failed"));
    return;
  }
  auto s = std::make_unique<TcpStream>();
  s->fd = std::move(a.fd);
  s->handshaken = true;
  s->link = &link;
  s->index = 0;
  link.rx_accepted = true;
  link.streams.push_back(std::move(s));
  watch(*link.streams.back(), false);
  establish(link, a.hello);
}

void Transports::fail_link(Link& link, const Status& why, bool orderly) {
  if (link.state == PeerLink::State::Failed) return;
  const bool was_up = link.state == PeerLink::State::Established;
  orderly = orderly || link.peer_closing;
  link.state = PeerLink::State::Failed;
  link.failure = link.peer_closing
                     ? Status::error(Errc::ConnectionLost,
                                     "the peer closed its engine (" + why.message() + ")")
                     : why;
  if (was_up && !orderly) counters_.peers_lost++;
  if (orderly) {
    ORBITE_LOG(Debug, Tcp) << "connection to peer " << short_id(link.ep.id) << " (pid "
                           << link.ep.pid << ") closed: " << link.failure.message();
  } else {
    ORBITE_LOG(Warn, Tcp) << "peer " << short_id(link.ep.id) << " (pid " << link.ep.pid
                          << ") lost: " << why.message();
  }
  for (std::size_t i = 0; i < link.streams.size(); ++i) bury_stream(link, i);
  link.streams.clear();
  for (auto& item : link.ring_out) {
    if (item.pinned != nullptr) item.pinned->unpin();
  }
  link.ring_out.clear();
  std::erase(ring_links_, &link);
  if (link.rx) ring_graveyard_.push_back(std::move(link.rx));
  if (link.tx) ring_graveyard_.push_back(std::move(link.tx));
  link.tx_ring = nullptr;
  // A local close cancels; anything else is the peer's connection being lost.
  const Errc code = why.code() == Errc::Cancelled ? Errc::Cancelled : Errc::ConnectionLost;
  Status lost = Status::error(code, "peer " + short_id(link.ep.id) + " (pid " +
                                        std::to_string(link.ep.pid) + "): " + why.message());
  fail_inflight_of(link, lost);
}

void Transports::check_connect_deadlines() {
  const auto now = Clock::now();
  for (auto& [id, link] : links_) {
    if (link->connect_deadline && now > *link->connect_deadline &&
        (link->state == PeerLink::State::Connecting ||
         link->state == PeerLink::State::AwaitingPeer)) {
      fail_link(*link, Status::error(
                           Errc::Timeout,
                           "no connection to " + link->ep.address + " within " +
                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  config_.tcp.connect_timeout)
                                                  .count()) +
                               " ms (tcp.connect_timeout)"));
    }
  }
}

void Transports::shutdown(const Status& why) {
  for (auto& [id, link] : links_) {
    // Best effort: tell the peer the end of stream is orderly, when no frame is half written.
    if (link->state == PeerLink::State::Established && !link->streams.empty() && link->streams[0] &&
        link->streams[0]->out.empty()) {
      FrameHeader h;
      h.type = FrameType::Bye;
      std::byte hdr[kFrameHeaderBytes];
      encode_header(h, hdr);
      [[maybe_unused]] auto n =
          ::send(link->streams[0]->fd.get(), hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    fail_link(*link, why, true);
  }
  for (auto& p : pending_accepts_) ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, p->fd.get(), nullptr);
  pending_accepts_.clear();
  graveyard_.clear();
  ring_graveyard_.clear();
}

}  // namespace orbite::p2p
