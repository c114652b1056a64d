// The control channel between engines: the listener (lane 0), reading each accepted connection's
// Hello and routing it to the lane that owns the peer, the Hello / HelloAck / HelloNack / Bye
// exchange, and small control frames on the established connection (doorbells now, RDMA grants
// later). It is not a data transport: what the handshake offers and opens comes from the lane's
// transports through the ControlHost.
//
// Either side may open the connection when it first needs the peer; when both open at once, the
// one opened by the engine with the smaller ID wins (the other side answers HelloNack), so every
// pair ends up with exactly one control connection.
#pragma once

#include <orbite/config.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

#include "p2p/control/handshake.h"
#include "p2p/counters.h"
#include "p2p/peer.h"
#include "p2p/poller.h"
#include "p2p/stream.h"

namespace orbite::p2p {

// The lane's protocol as the control channel sees it.
class ControlHost {
 public:
  virtual ~ControlHost() = default;
  virtual detail::PeerLink& link_for(const detail::Endpoint& ep) = 0;
  // Initiator: the blobs of the transports offered to `link`.
  virtual std::vector<ConnectBlob> offers(detail::PeerLink& link) = 0;
  // Acceptor: opens endpoints for the peer's offers; returns the blobs of the HelloAck.
  virtual std::vector<ConnectBlob> accept_offers(detail::PeerLink& link, const Handshake& peer) = 0;
  // Acceptor: the peer's Hello was refused; its offers will never be accepted.
  virtual void decline_offers(detail::PeerLink& link, const Handshake& peer) = 0;
  // Initiator: the peer's HelloAck; opens the endpoints it accepted.
  virtual Status complete_offers(detail::PeerLink& link, const Handshake& peer) = 0;
  virtual void established(detail::PeerLink& link, const Handshake& peer) = 0;
  virtual void fail_link(detail::PeerLink& link, const Status& why, bool orderly) = 0;
  // The peer said Bye, then closed its control connection: the link fails once its transports
  // were polled again, so that what the peer sent on them before its Bye is still delivered.
  virtual void peer_closed(detail::PeerLink& link, const Status& why) = 0;
  // An extra connection for one transport of an established link.
  virtual Status adopt_join(detail::PeerLink& link, net::Fd fd, const Handshake& hello) = 0;
  virtual void protocol_error(detail::PeerLink& link, const std::string& what) = 0;
  // A TransportControl frame, for the transport it names.
  virtual void transport_control(detail::PeerLink& link, const FrameHeader& h,
                                 std::string_view body) = 0;
  virtual std::string take_buffer() = 0;
  virtual void give_buffer(std::string&& buffer) = 0;
};

class ControlPlane final : public StreamOwner, public ControlSender {
 public:
  ControlPlane(const EngineConfig& config, const detail::Identity& self, Poller& poller,
               ControlHost& host, Counters& counters);
  ~ControlPlane() override;

  // Lane 0 accepts; handshakes for peers of other lanes are routed to them by `route`.
  Status set_listener(int fd, std::function<void(Accepted)> route);
  // A connection whose Hello was read, on the lane that owns its peer.
  void adopt(Accepted accepted);
  // Opens the control connection to `link` and sends Hello.
  void connect(detail::PeerLink& link);
  // Reads pending accepts; returns work done.
  int progress();
  // A resting listener keeps the lane waking (at most 100 ms apart) to take it back.
  [[nodiscard]] bool busy() const { return !pending_.empty() || listener_resting_; }
  // Bye on every control connection that can take one now, then the pending accepts go.
  void say_bye(detail::PeerLink& link);
  void shutdown();

  void send_control(detail::PeerLink& link, const FrameHeader& h,
                    std::string payload = {}) override;

  // StreamOwner (the control connections).
  Result<detail::Sink> stream_frame_begins(FramedSocket& s, const FrameHeader& h) override;
  void stream_frame_ends(FramedSocket& s, const FrameHeader& h, detail::Sink& sink,
                         std::string&& body) override;
  void stream_written(FramedSocket& s, detail::SendItem& item) override;
  void stream_failed(FramedSocket& s, const Status& why) override;
  std::string take_buffer() override { return host_.take_buffer(); }
  void give_buffer(std::string&& b) override { host_.give_buffer(std::move(b)); }

 private:
  class ListenWatch;
  class PendingAccept;
  void accept_ready();
  // Takes the listener out of the poller: until `until` (accept found no descriptor) and until
  // fewer than tcp.max_pending_handshakes accepts wait for their Hello. Level-triggered, it
  // would otherwise be reported again at once and spin the lane.
  void rest_listener(Clock::time_point until, std::string_view why);
  void wake_listener();
  void read_pending();
  void on_reply(detail::PeerLink& link, const FrameHeader& h, std::string_view body);
  bool reply(int fd, FrameType type, const Handshake* hs);
  [[nodiscard]] Handshake mine() const;

  const EngineConfig& config_;
  const detail::Identity& self_;
  Poller& poller_;
  ControlHost& host_;
  Counters& counters_;
  int listen_fd_ = -1;
  std::unique_ptr<ListenWatch> listen_watch_;
  std::function<void(Accepted)> route_;
  std::vector<std::unique_ptr<PendingAccept>> pending_;
  bool pending_ready_ = false;
  bool listener_resting_ = false;
  Clock::time_point listener_rests_until_{};
  Clock::time_point last_rest_log_{};
};

}  // namespace orbite::p2p
