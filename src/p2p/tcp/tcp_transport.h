// The tcp transport: `tcp.streams_per_peer` data streams per peer, each announced by a Hello that
// joins the link. They are opened when the link first uses tcp, always by the side that opened
// the control connection (so that one side's streams keep their frames in order); the other side
// asks for them with a TransportControl frame. Frames wait in the endpoint until a stream is up;
// bulk data is spread over the streams. It reaches every peer but this engine itself, and has
// no one-sided access.
#pragma once

#include <orbite/config.h>

#include <deque>
#include <memory>
#include <vector>

#include "p2p/counters.h"
#include "p2p/poller.h"
#include "p2p/stream.h"
#include "p2p/transport.h"

namespace orbite::p2p {

class TcpLane;

class TcpEndpoint final : public PeerEndpoint {
 public:
  // `initiator`: this side opened the control connection, so it opens the streams.
  TcpEndpoint(TcpLane& lane, detail::PeerLink& link, bool initiator);
  ~TcpEndpoint() override;
  [[nodiscard]] const Capabilities& caps() const override;
  void send(detail::SendItem item) override;
  bool send_now(const FrameHeader&, std::span<const iovec>) override { return false; }
  [[nodiscard]] std::size_t paths() const override { return ready_; }
  Status read_peer(std::byte*, std::uint64_t, std::uint64_t) override;
  Status write_peer(const std::byte*, std::uint64_t, std::uint64_t) override;
  [[nodiscard]] bool one_sided_usable() const override { return false; }
  Status start_rma(RmaOp) override {
    return Status::error(Errc::Unavailable, "this transport has no one-sided protocol of its own");
  }
  [[nodiscard]] bool busy() const override;
  void close(bool orderly) override;

  // A stream finished its handshake: it carries frames from now on.
  void stream_ready(FramedSocket& s);
  void add_stream(std::unique_ptr<FramedSocket> s);
  void drop_stream(FramedSocket& s);
  [[nodiscard]] std::size_t streams() const { return streams_.size(); }
  // Opens the streams now (the initiator), once.
  Status open();

 private:
  TcpLane& lane_;
  detail::PeerLink& link_;
  // Lifetime: owned here; a closed stream is retired to the poller's graveyard.
  std::vector<std::unique_ptr<FramedSocket>> streams_;
  std::vector<FramedSocket*> ready_list_;  // handshaken streams, in order of readiness
  std::size_t ready_ = 0;
  std::deque<detail::SendItem> pending_;  // frames queued before any stream was up
  const bool initiator_;
  bool opened_ = false;  // initiator: streams opened; acceptor: asked for them
  bool closed_ = false;
};

class TcpLane final : public LaneTransport, public StreamOwner {
 public:
  TcpLane(const EngineConfig& config, const detail::Identity& self, Poller& poller,
          FrameHandler& handler, ControlSender& control);
  [[nodiscard]] const Capabilities& caps() const override { return caps_; }
  std::optional<std::string> offer(detail::PeerLink& link) override;
  Result<std::string> accept(detail::PeerLink& link, std::string_view blob) override;
  Status complete(detail::PeerLink& link, std::optional<std::string_view> blob) override;
  Status open_self(detail::PeerLink&) override;
  Status adopt_connection(detail::PeerLink& link, int fd, std::uint32_t index) override;
  // kOpenStreams from the acceptor: the initiator opens its streams.
  Status on_control(detail::PeerLink& link, std::uint64_t kind, std::string_view body) override;
  static constexpr std::uint64_t kOpenStreams = 1;
  int progress() override { return 0; }  // its streams are driven by the poller
  bool prepare_sleep() override { return true; }
  void end_sleep() override {}
  [[nodiscard]] bool busy() const override { return false; }  // endpoints report their own
  void forget(detail::PeerLink&) override {}
  void shutdown(const Status&) override {}

  Result<detail::Sink> stream_frame_begins(FramedSocket& s, const FrameHeader& h) override;
  void stream_frame_ends(FramedSocket& s, const FrameHeader& h, detail::Sink& sink,
                         std::string&& body) override;
  void stream_written(FramedSocket& s, detail::SendItem& item) override;
  void stream_failed(FramedSocket& s, const Status& why) override;
  std::string take_buffer() override { return handler_.take_buffer(); }
  void give_buffer(std::string&& b) override { handler_.give_buffer(std::move(b)); }

  Poller& poller() { return poller_; }
  // The initiator's streams for `link` (connect, then a Hello that joins the link).
  Status open_streams(detail::PeerLink& link, TcpEndpoint& ep);
  // The acceptor's request for them.
  void ask_for_streams(detail::PeerLink& link);
  FrameHandler& handler() { return handler_; }

 private:
  TcpEndpoint* endpoint_of(const FramedSocket& s) const;
  void on_join_reply(FramedSocket& s, const FrameHeader& h, std::string_view body);

  const EngineConfig& config_;
  const detail::Identity& self_;
  Poller& poller_;
  FrameHandler& handler_;
  ControlSender& control_;
  Capabilities caps_;
};

}  // namespace orbite::p2p
