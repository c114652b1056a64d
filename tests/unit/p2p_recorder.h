// A recording stand-in for the protocol above a lane transport (FrameHandler and ControlSender),
// shared by the transport contract suite and the shm peer-proof tests.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "p2p/peer.h"
#include "p2p/transport.h"

namespace orbite::p2p::testing {

struct Arrived {
  FrameType type;
  std::uint64_t id;
  std::string payload;
};

// The protocol's side of the contract, recorded. Data frames land in `direct` when it is set.
class Recorder final : public FrameHandler, public ControlSender {
 public:
  Result<detail::Sink> begin_frame(detail::PeerLink&, const FrameHeader& h,
                                   PeerEndpoint&) override {
    detail::Sink s;
    if (h.type == FrameType::Data && direct != nullptr) {
      s.kind = detail::Sink::Direct;
      s.dst = direct + h.b;
    }
    return s;
  }
  void end_frame(detail::PeerLink&, const FrameHeader& h, PeerEndpoint&, detail::Sink& sink,
                 std::string&& body) override {
    arrived.push_back(
        Arrived{h.type, h.id, sink.kind == detail::Sink::Direct ? "" : std::move(body)});
  }
  void frame_written(PeerEndpoint&, detail::SendItem& item) override {
    ++written;
    if (item.pinned != nullptr) item.pinned->unpin();
  }
  void endpoint_failed(detail::PeerLink&, const Status& why) override { failures.push_back(why); }
  void protocol_error(detail::PeerLink&, const std::string& what) override {
    failures.push_back(Status::error(Errc::Protocol, what));
  }
  Result<ReceiveTarget> rendezvous_target(detail::PeerLink&, std::uint64_t, std::uint64_t,
                                          std::uint64_t) override {
    return Status::error(Errc::Unavailable, "no rendezvous in the contract suite");
  }
  Result<ReceiveTarget> message_target(detail::PeerLink&, std::uint64_t, std::uint64_t,
                                       std::uint64_t) override {
    return Status::error(Errc::Unavailable, "no rendezvous in the contract suite");
  }
  void rendezvous_done(detail::PeerLink&, std::uint64_t, std::uint64_t, const Status&) override {}
  std::string take_buffer() override { return {}; }
  void give_buffer(std::string&&) override {}
  void send_control(detail::PeerLink&, const FrameHeader& h, std::string body) override {
    controls.push_back(h.type);
    // The peer's protocol would hand a transport's own control message to its lane.
    if (h.type == FrameType::TransportControl && to_peer != nullptr) {
      to_peer->emplace_back(h.b, std::move(body));
    }
  }

  std::vector<Arrived> arrived;
  std::vector<Status> failures;
  std::vector<FrameType> controls;
  std::uint64_t written = 0;
  std::byte* direct = nullptr;
  // Where this side's TransportControl messages go: the other side's inbox (rdma only).
  std::deque<std::pair<std::uint64_t, std::string>>* to_peer = nullptr;
};

}  // namespace orbite::p2p::testing
