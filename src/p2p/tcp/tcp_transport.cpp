#include "p2p/tcp/tcp_transport.h"

#include <algorithm>

#include "common/log.h"
#include "p2p/control/handshake.h"

namespace orbite::p2p {

using detail::PeerLink;

namespace {
// The largest Data frame: big enough that per-frame costs vanish, small enough that a few
// streams share a large message.
constexpr std::uint64_t kTcpChunk = 4 * 1024 * 1024;

}  // namespace

TcpEndpoint::TcpEndpoint(TcpLane& lane, PeerLink& link, bool initiator)
    : lane_(lane), link_(link), initiator_(initiator) {}

TcpEndpoint::~TcpEndpoint() {
  close(false);
}

const Capabilities& TcpEndpoint::caps() const {
  return lane_.caps();
}

void TcpEndpoint::send(detail::SendItem item) {
  if (closed_) {
    if (item.pinned != nullptr) item.pinned->unpin();
    return;
  }
  if (ready_ == 0) {
    pending_.push_back(std::move(item));
    // The first frame for tcp brings its streams up: links that never use tcp open none.
    if (!opened_) {
      opened_ = true;
      if (!initiator_) return lane_.ask_for_streams(link_);
      if (Status st = open(); !st.ok()) lane_.handler().endpoint_failed(link_, st);
    }
    return;
  }
  FramedSocket* s = ready_list_[item.path % ready_];
  s->queue(std::move(item));
}

Status TcpEndpoint::read_peer(std::byte*, std::uint64_t, std::uint64_t) {
  return Status::error(Errc::Unavailable, "the tcp transport has no one-sided access");
}

Status TcpEndpoint::write_peer(const std::byte*, std::uint64_t, std::uint64_t) {
  return Status::error(Errc::Unavailable, "the tcp transport has no one-sided access");
}

Status TcpEndpoint::open() {
  opened_ = true;
  return lane_.open_streams(link_, *this);
}

bool TcpEndpoint::busy() const {
  if (!pending_.empty()) return true;
  for (const auto& s : streams_) {
    if (s->busy() || (s->open() && !s->handshaken)) return true;
  }
  return false;
}

void TcpEndpoint::stream_ready(FramedSocket& s) {
  s.handshaken = true;
  ready_list_.push_back(&s);
  ready_ = ready_list_.size();
  // Frames queued before the first stream was up leave on it, in order.
  while (!pending_.empty()) {
    detail::SendItem item = std::move(pending_.front());
    pending_.pop_front();
    s.queue(std::move(item));
  }
}

void TcpEndpoint::add_stream(std::unique_ptr<FramedSocket> s) {
  FramedSocket& ref = *s;
  streams_.push_back(std::move(s));
  if (ref.handshaken) stream_ready(ref);
}

void TcpEndpoint::drop_stream(FramedSocket& s) {
  std::erase(ready_list_, &s);
  ready_ = ready_list_.size();
  for (auto& owned : streams_) {
    if (owned.get() == &s) {
      owned->close();
      lane_.poller().retire(std::move(owned));
    }
  }
  std::erase(streams_, nullptr);
}

void TcpEndpoint::close(bool orderly) {
  closed_ = true;
  for (auto& s : streams_) {
    if (orderly && s->handshaken) s->send_bye();
    s->close();
    lane_.poller().retire(std::move(s));
  }
  streams_.clear();
  ready_list_.clear();
  ready_ = 0;
  for (auto& item : pending_) {
    if (item.pinned != nullptr) item.pinned->unpin();
  }
  pending_.clear();
}

TcpLane::TcpLane(const EngineConfig& config, const detail::Identity& self, Poller& poller,
                 FrameHandler& handler, ControlSender& control)
    : config_(config), self_(self), poller_(poller), handler_(handler), control_(control) {
  caps_.id = TransportId::Tcp;
  caps_.reach = kReachSameHost | kReachRemote;
  caps_.eager_limit = config.tcp.eager_limit;
  caps_.max_frame_payload = kTcpChunk;
}

std::optional<std::string> TcpLane::offer(PeerLink& link) {
  if (link.is_self) return std::nullopt;
  return std::string();
}

Result<std::string> TcpLane::accept(PeerLink& link, std::string_view) {
  // The initiator opens the streams; frames wait in the endpoint until the first joins.
  link.endpoints[static_cast<std::size_t>(TransportId::Tcp)] =
      std::make_unique<TcpEndpoint>(*this, link, /*initiator=*/false);
  return std::string();
}

Status TcpLane::complete(PeerLink& link, std::optional<std::string_view> blob) {
  if (!blob) return {};
  // No stream yet: the first frame for tcp opens them (TcpEndpoint::send).
  link.endpoints[static_cast<std::size_t>(TransportId::Tcp)] =
      std::make_unique<TcpEndpoint>(*this, link, /*initiator=*/true);
  return {};
}

Status TcpLane::open_streams(PeerLink& link, TcpEndpoint& ep) {
  const std::uint32_t streams = std::max<std::uint32_t>(1, config_.tcp.streams_per_peer);
  for (std::uint32_t i = 0; i < streams; ++i) {
    auto fd = start_connect(link.ep.address, config_.tcp);
    if (!fd.ok()) {
      if (i > 0) break;  // extra streams are an optimization; the first is not
      return Status::error(fd.status().code(), "tcp data stream to peer " + short_id(link.ep.id) +
                                                   ": " + fd.status().message());
    }
    auto s = std::make_unique<FramedSocket>(poller_, *this, std::move(*fd), true, &link, i);
    ORBITE_RETURN_IF_ERROR(s->watch());
    Handshake join;
    join.engine_id = self_.id;
    join.host_id = self_.host_id;
    join.pid = self_.pid;
    join.eager_credit = config_.eager_credit_bytes;
    join.join = TransportId::Tcp;
    join.join_index = i;
    detail::SendItem item;
    item.header.type = FrameType::Hello;
    item.owned = encode_handshake(join);
    item.header.payload_len = static_cast<std::uint32_t>(item.owned.size());
    s->queue(std::move(item));
    ep.add_stream(std::move(s));
  }
  return {};
}

void TcpLane::ask_for_streams(PeerLink& link) {
  FrameHeader h;
  h.type = FrameType::TransportControl;
  h.a = static_cast<std::uint64_t>(TransportId::Tcp);
  h.b = kOpenStreams;
  control_.send_control(link, h);
}

Status TcpLane::on_control(PeerLink& link, std::uint64_t kind, std::string_view body) {
  auto* ep = static_cast<TcpEndpoint*>(link.endpoint(TransportId::Tcp));
  if (kind != kOpenStreams || !body.empty()) {
    return Status::error(Errc::Protocol, "tcp control message " + std::to_string(kind) + " with " +
                                             std::to_string(body.size()) + " bytes is unknown");
  }
  if (ep == nullptr || link.accepted) {
    return Status::error(Errc::Protocol, "peer " + short_id(link.ep.id) +
                                             " asked for tcp streams this side does not open");
  }
  if (ep->streams() > 0) return {};  // already opening or open
  return ep->open();
}

Status TcpLane::open_self(PeerLink&) {
  return Status::error(Errc::Unavailable, "the tcp transport does not reach this engine itself");
}

Status TcpLane::adopt_connection(PeerLink& link, int fd, std::uint32_t index) {
  net::Fd owned(fd);
  TcpEndpoint* ep = static_cast<TcpEndpoint*>(link.endpoint(TransportId::Tcp));
  if (ep == nullptr) {
    return Status::error(Errc::Protocol,
                         "peer " + short_id(link.ep.id) + " opened a tcp stream it did not offer");
  }
  auto s = std::make_unique<FramedSocket>(poller_, *this, std::move(owned), false, &link, index);
  s->handshaken = true;
  ORBITE_RETURN_IF_ERROR(s->watch());
  ep->add_stream(std::move(s));
  return {};
}

TcpEndpoint* TcpLane::endpoint_of(const FramedSocket& s) const {
  return static_cast<TcpEndpoint*>(s.link->endpoint(TransportId::Tcp));
}

Result<detail::Sink> TcpLane::stream_frame_begins(FramedSocket& s, const FrameHeader& h) {
  if (!s.handshaken) {
    if (h.type != FrameType::HelloAck && h.type != FrameType::HelloNack) {
      return Status::error(Errc::Protocol, std::string("expected a stream handshake reply, got ") +
                                               frame_type_name(h.type));
    }
    return detail::Sink{};
  }
  TcpEndpoint* ep = endpoint_of(s);
  if (ep == nullptr) return Status::error(Errc::Protocol, "a frame on a closed tcp stream");
  return handler_.begin_frame(*s.link, h, *ep);
}

void TcpLane::stream_frame_ends(FramedSocket& s, const FrameHeader& h, detail::Sink& sink,
                                std::string&& body) {
  if (!s.handshaken) return on_join_reply(s, h, body);
  TcpEndpoint* ep = endpoint_of(s);
  if (ep != nullptr) handler_.end_frame(*s.link, h, *ep, sink, std::move(body));
}

void TcpLane::on_join_reply(FramedSocket& s, const FrameHeader& h, std::string_view body) {
  PeerLink& link = *s.link;
  TcpEndpoint* ep = endpoint_of(s);
  if (ep == nullptr) return;
  if (h.type == FrameType::HelloNack) {
    ep->drop_stream(s);
    if (ep->streams() == 0) {
      handler_.endpoint_failed(
          link, Status::error(Errc::ConnectionLost,
                              "peer " + short_id(link.ep.id) + " refused every tcp data stream"));
    }
    return;
  }
  auto peer = decode_handshake(body);
  if (!peer.ok()) return handler_.protocol_error(link, peer.status().message());
  if (peer->engine_id != link.ep.id || peer->join != TransportId::Tcp) {
    return handler_.protocol_error(link, "tcp stream reply from engine " +
                                             short_id(peer->engine_id) + " for peer " +
                                             short_id(link.ep.id));
  }
  ep->stream_ready(s);
}

void TcpLane::stream_written(FramedSocket& s, detail::SendItem& item) {
  // Before its handshake a stream carries only its own Hello: nothing of the protocol's.
  if (!s.handshaken) return;
  TcpEndpoint* ep = endpoint_of(s);
  if (ep != nullptr) handler_.frame_written(*ep, item);
}

void TcpLane::stream_failed(FramedSocket& s, const Status& why) {
  if (why.code() == Errc::Protocol) return handler_.protocol_error(*s.link, why.message());
  handler_.endpoint_failed(*s.link, why);
}

}  // namespace orbite::p2p
