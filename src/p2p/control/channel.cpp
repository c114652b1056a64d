#include "p2p/control/channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace orbite::p2p {

using detail::PeerLink;
using Clock = std::chrono::steady_clock;

// How long the listener rests after accept found no file descriptor.
constexpr auto kListenerRest = std::chrono::milliseconds(100);

class ControlPlane::ListenWatch final : public Watcher {
 public:
  explicit ListenWatch(ControlPlane& c) : channel_(c) {}
  void on_ready(std::uint32_t) override { channel_.accept_ready(); }

 private:
  ControlPlane& channel_;
};

// An accepted connection whose Hello is still being read (bounded by tcp.connect_timeout).
class ControlPlane::PendingAccept final : public Watcher {
 public:
  explicit PendingAccept(ControlPlane& c) : channel_(c) {}
  void on_ready(std::uint32_t) override { channel_.pending_ready_ = true; }
  net::Fd fd;
  std::vector<std::byte> bytes;
  Clock::time_point deadline;

 private:
  ControlPlane& channel_;
};

ControlPlane::ControlPlane(const EngineConfig& config, const detail::Identity& self, Poller& poller,
                           ControlHost& host, Counters& counters)
    : config_(config), self_(self), poller_(poller), host_(host), counters_(counters) {}

ControlPlane::~ControlPlane() {
  shutdown();
  if (listen_fd_ >= 0) poller_.remove(listen_fd_);
}

Status ControlPlane::set_listener(int fd, std::function<void(Accepted)> route) {
  listen_watch_ = std::make_unique<ListenWatch>(*this);
  ORBITE_RETURN_IF_ERROR(poller_.add(fd, EPOLLIN, listen_watch_.get()));
  listen_fd_ = fd;
  route_ = std::move(route);
  return {};
}

Handshake ControlPlane::mine() const {
  Handshake h;
  h.engine_id = self_.id;
  h.host_id = self_.host_id;
  h.pid = self_.pid;
  h.eager_credit = config_.eager_credit_bytes;
  return h;
}

void ControlPlane::connect(PeerLink& link) {
  if (link.ep.address.empty()) {
    return host_.fail_link(link,
                           Status::error(Errc::Unavailable, "peer " + short_id(link.ep.id) +
                                                                " has no known control address"),
                           false);
  }
  Handshake hello = mine();
  hello.transports = host_.offers(link);
  auto fd = start_connect(link.ep.address, config_.tcp);
  if (!fd.ok()) {
    return host_.fail_link(link,
                           Status::error(fd.status().code(), "peer " + short_id(link.ep.id) + ": " +
                                                                 fd.status().message()),
                           false);
  }
  link.control = std::make_unique<FramedSocket>(poller_, *this, std::move(*fd), true, &link, 0);
  if (Status st = link.control->watch(); !st.ok()) return host_.fail_link(link, st, false);
  link.state = PeerLink::State::Connecting;
  if (!link.connect_deadline) link.connect_deadline = Clock::now() + config_.tcp.connect_timeout;
  detail::SendItem item;
  item.header.type = FrameType::Hello;
  item.owned = encode_handshake(hello);
  item.header.payload_len = static_cast<std::uint32_t>(item.owned.size());
  link.control->queue(std::move(item));
}

void ControlPlane::send_control(PeerLink& link, const FrameHeader& h, std::string payload) {
  if (!link.control || !link.control->open()) return;
  detail::SendItem item;
  item.header = h;
  item.header.payload_len = static_cast<std::uint32_t>(payload.size());
  item.owned = std::move(payload);
  link.control->queue(std::move(item));
}

void ControlPlane::say_bye(PeerLink& link) {
  if (link.control && link.control->handshaken) link.control->send_bye();
}

Result<detail::Sink> ControlPlane::stream_frame_begins(FramedSocket& s, const FrameHeader& h) {
  detail::Sink sink;
  if (!s.handshaken) {
    if (h.type != FrameType::HelloAck && h.type != FrameType::HelloNack) {
      return Status::error(Errc::Protocol, std::string("expected a handshake reply, got ") +
                                               frame_type_name(h.type));
    }
    return sink;
  }
  if (h.type == FrameType::TransportControl) return sink;  // a Buffer: its body
  if (h.type != FrameType::Bye && h.type != FrameType::Doorbell) {
    return Status::error(Errc::Protocol,
                         std::string(frame_type_name(h.type)) + " frame on the control connection");
  }
  if (h.payload_len != 0) {
    return Status::error(Errc::Protocol, std::string(frame_type_name(h.type)) +
                                             " frame with a payload of " +
                                             std::to_string(h.payload_len) + " bytes");
  }
  // A doorbell only wakes the sleeper; a Bye makes the coming end of stream orderly.
  if (h.type == FrameType::Bye && s.link != nullptr) s.link->peer_closing = true;
  sink.kind = detail::Sink::Discard;
  return sink;
}

void ControlPlane::stream_frame_ends(FramedSocket& s, const FrameHeader& h, detail::Sink&,
                                     std::string&& body) {
  if (s.link == nullptr) return;
  if (!s.handshaken) return on_reply(*s.link, h, body);
  if (h.type == FrameType::TransportControl) host_.transport_control(*s.link, h, body);
}

void ControlPlane::stream_written(FramedSocket&, detail::SendItem&) {}

void ControlPlane::stream_failed(FramedSocket& s, const Status& why) {
  PeerLink& link = *s.link;
  if (why.code() == Errc::Protocol) return host_.protocol_error(link, why.message());
  if (!s.handshaken && link.state == PeerLink::State::Connecting) {
    // An engine of another frame version closes the connection on our Hello.
    return host_.fail_link(
        link,
        Status::error(Errc::Unavailable,
                      "connecting to peer " + short_id(link.ep.id) + " at " + link.ep.address +
                          " failed: " + why.message() + " (before answering the handshake; " +
                          "an engine of another OrbiTE frame version closes it so, this one " +
                          "speaks version " + std::to_string(kFrameVersion) + ")"),
        false);
  }
  // A Bye came first: an orderly close. The peer's last frames on other transports (an RDMA
  // SEND's completion is already in this engine's CQ) may not have been read yet.
  if (s.handshaken && link.peer_closing && link.state == PeerLink::State::Established) {
    return host_.peer_closed(link, why);
  }
  host_.fail_link(link, why, false);
}

void ControlPlane::on_reply(PeerLink& link, const FrameHeader& h, std::string_view body) {
  if (h.type == FrameType::HelloNack) {
    // The peer keeps the connection it opened to us; wait for it (bounded by connect_timeout).
    if (link.state == PeerLink::State::Connecting) {
      link.control->close();
      poller_.retire(std::move(link.control));
      link.state = PeerLink::State::AwaitingPeer;
    }
    return;
  }
  auto peer = decode_handshake(body);
  if (!peer.ok()) return host_.protocol_error(link, peer.status().message());
  if (peer->engine_id != link.ep.id) {
    return host_.protocol_error(link, "HelloAck from engine " + short_id(peer->engine_id) +
                                          " at an address advertised by " + short_id(link.ep.id));
  }
  link.control->handshaken = true;
  // From here it carries only Bye and doorbells: epoll finds those, the hot path need not pay a
  // recv() for it on every pass.
  link.control->cool();
  if (Status st = host_.complete_offers(link, *peer); !st.ok()) {
    return host_.fail_link(link, st, false);
  }
  host_.established(link, *peer);
}

void ControlPlane::accept_ready() {
  for (;;) {
    if (pending_.size() >= config_.tcp.max_pending_handshakes) {
      // Rest only if a connection is waiting: the next one to arrive wakes us again.
      pollfd waiting{listen_fd_, POLLIN, 0};
      if (::poll(&waiting, 1, 0) > 0) {
        rest_listener(Clock::now(), std::to_string(pending_.size()) +
                                        " accepted connections are still to send their Hello "
                                        "(tcp.max_pending_handshakes)");
      }
      return;
    }
    auto fd = net::accept_nonblocking(listen_fd_);
    if (!fd.ok()) {
      if (fd.status().code() == Errc::ResourceExhausted) {
        return rest_listener(Clock::now() + kListenerRest, fd.status().message());
      }
      ORBITE_LOG(Warn, Tcp) << "accept on the control listener failed: " << fd.status().message();
      return;
    }
    if (!fd->valid()) return;
    if (Status st = tune_socket(fd->get(), config_.tcp); !st.ok()) {
      ORBITE_LOG(Warn, Tcp) << "control connection dropped: " << st.message();
      continue;
    }
    auto p = std::make_unique<PendingAccept>(*this);
    p->fd = std::move(*fd);
    p->deadline = Clock::now() + config_.tcp.connect_timeout;
    if (Status st = poller_.add(p->fd.get(), EPOLLIN, p.get()); !st.ok()) {
      ORBITE_LOG(Warn, Tcp) << "control connection dropped: " << st.message();
      continue;
    }
    pending_.push_back(std::move(p));
    pending_ready_ = true;
  }
}

void ControlPlane::rest_listener(Clock::time_point until, std::string_view why) {
  poller_.remove(listen_fd_);
  listener_resting_ = true;
  listener_rests_until_ = until;
  bump(counters_.listener_rests);
  // Once a second at most: a job short of descriptors would otherwise fill the log.
  const auto now = Clock::now();
  if (now - last_rest_log_ >= std::chrono::seconds(1)) {
    last_rest_log_ = now;
    ORBITE_LOG(Warn, Tcp) << "control listener resting: " << why;
  }
}

void ControlPlane::wake_listener() {
  if (!listener_resting_ || Clock::now() < listener_rests_until_ ||
      pending_.size() >= config_.tcp.max_pending_handshakes) {
    return;
  }
  if (Status st = poller_.add(listen_fd_, EPOLLIN, listen_watch_.get()); !st.ok()) {
    ORBITE_LOG(Warn, Tcp) << "control listener: " << st.message() << "; trying again";
    listener_rests_until_ = Clock::now() + kListenerRest;
    return;
  }
  listener_resting_ = false;
}

int ControlPlane::progress() {
  wake_listener();
  if (pending_.empty()) return 0;
  const std::size_t before = pending_.size();
  read_pending();
  return static_cast<int>(before - pending_.size());
}

void ControlPlane::read_pending() {
  pending_ready_ = false;
  const auto now = Clock::now();
  for (std::size_t i = 0; i < pending_.size();) {
    PendingAccept& p = *pending_[i];
    std::string problem;
    bool complete = false;
    for (;;) {
      std::byte chunk[4096];
      const ssize_t n = ::recv(p.fd.get(), chunk, sizeof(chunk), 0);
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
        if (!hs.ok()) {
          problem = hs.status().message();
        } else {
          hello = std::move(*hs);
          complete = true;
        }
      }
    }
    if (problem.empty() && !complete && now > p.deadline) problem = "no handshake in time";
    if (problem.empty() && !complete) {
      ++i;
      continue;
    }
    poller_.remove(p.fd.get());
    if (problem.starts_with("closed before")) {
      ORBITE_LOG(Debug, Tcp) << "control connection dropped: " << problem;
    } else if (!problem.empty()) {
      bump(counters_.protocol_errors);
      ORBITE_LOG(Warn, Tcp) << "control connection refused: " << problem;
    } else {
      Accepted a{std::move(p.fd), std::move(hello)};
      if (route_)
        route_(std::move(a));
      else
        adopt(std::move(a));
    }
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

bool ControlPlane::reply(int fd, FrameType type, const Handshake* hs) {
  FrameHeader h;
  h.type = type;
  const std::string body = hs ? encode_handshake(*hs) : std::string();
  h.payload_len = static_cast<std::uint32_t>(body.size());
  std::byte hdr[kFrameHeaderBytes];
  encode_header(h, hdr);
  std::string out(reinterpret_cast<const char*>(hdr), kFrameHeaderBytes);
  out += body;
  // A handshake reply is small and the socket is fresh: it fits the send buffer.
  return ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
}

void ControlPlane::adopt(Accepted a) {
  detail::Endpoint ep{a.hello.engine_id, "", a.hello.host_id, a.hello.pid};
  PeerLink& link = host_.link_for(ep);
  if (a.hello.join) {
    if (link.state != PeerLink::State::Established || link.is_self) {
      reply(a.fd.get(), FrameType::HelloNack, nullptr);
      return;
    }
    Handshake m = mine();
    m.join = a.hello.join;
    m.join_index = a.hello.join_index;
    if (!reply(a.fd.get(), FrameType::HelloAck, &m)) return;
    if (Status st = host_.adopt_join(link, std::move(a.fd), a.hello); !st.ok()) {
      host_.fail_link(link, st, false);
    }
    return;
  }
  const bool ours_wins = link.state == PeerLink::State::Connecting && self_.id < link.ep.id;
  if (link.is_self || link.state == PeerLink::State::Established ||
      link.state == PeerLink::State::Failed || ours_wins) {
    reply(a.fd.get(), FrameType::HelloNack, nullptr);
    if (!link.is_self) host_.decline_offers(link, a.hello);
    return;
  }
  if (link.control) {
    link.control->close();
    poller_.retire(std::move(link.control));
  }
  link.ep.pid = a.hello.pid;
  link.ep.host_id = a.hello.host_id;
  link.same_host = a.hello.host_id == self_.host_id;
  Handshake m = mine();
  m.transports = host_.accept_offers(link, a.hello);
  if (!reply(a.fd.get(), FrameType::HelloAck, &m)) {
    return host_.fail_link(
        link,
        Status::error(Errc::ConnectionLost,
                      "answering the handshake of peer " + short_id(link.ep.id) + " failed"),
        false);
  }
  link.control = std::make_unique<FramedSocket>(poller_, *this, std::move(a.fd), false, &link, 0);
  link.control->handshaken = true;
  link.accepted = true;
  if (Status st = link.control->watch(/*hot=*/false); !st.ok()) {
    return host_.fail_link(link, st, false);
  }
  host_.established(link, a.hello);
}

void ControlPlane::shutdown() {
  for (auto& p : pending_) poller_.remove(p->fd.get());
  pending_.clear();
}

}  // namespace orbite::p2p
