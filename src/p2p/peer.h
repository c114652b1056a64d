// The protocol's per-peer state: where a peer lives, the frames waiting to leave, the matching
// queues, the requests in flight and the endpoints (one per transport) that carry its frames.
// Every PeerLink belongs to one lane's Protocol, and only the thread holding that lane's mutex
// touches it (the lane's worker, or a user thread progressing inside Request::wait()).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "p2p/endpoint.h"
#include "p2p/frame.h"
#include "p2p/registry.h"
#include "p2p/request.h"
#include "p2p/transport.h"

namespace orbite::p2p {
class FramedSocket;
struct StagedChunk;
struct StageWindow;
}  // namespace orbite::p2p

namespace orbite::detail {

using p2p::FrameHeader;
using p2p::FrameType;
using p2p::kFrameHeaderBytes;

// Where a frame's payload goes on arrival.
struct Sink {
  enum Kind : std::uint8_t { Buffer, Direct, Discard } kind = Buffer;
  std::byte* dst = nullptr;
  RegionRecord* pinned = nullptr;     // unpinned when the frame ends
  std::shared_ptr<RequestState> req;  // a receive matched when the frame began
};

// A frame waiting to be written: header, an owned small payload and/or borrowed bulk bytes.
struct SendItem {
  FrameHeader header;
  std::array<std::byte, kFrameHeaderBytes> encoded{};
  std::string owned;
  const std::byte* data = nullptr;
  std::uint64_t data_len = 0;
  std::uint64_t written = 0;  // of encoded + owned + data (streams only)
  // On full write: the request whose bulk bytes these were (send progress), and a region pin.
  std::shared_ptr<RequestState> req;
  RegionRecord* pinned = nullptr;
  enum OnWritten : std::uint8_t { Nothing, FinishEager, SendProgress } on_written = Nothing;
  // Which of an endpoint's parallel paths (TCP streams) should carry it; a hint.
  std::uint32_t path = 0;

  [[nodiscard]] std::uint64_t total() const { return kFrameHeaderBytes + owned.size() + data_len; }
};

// An EAGER or RTS that arrived before its receive was posted (or out of sequence). `endpoint` is
// where it came from: the answers (Cts, Fin, Reject, Credit) go back the same way.
struct Arrival {
  FrameType type = FrameType::Eager;
  p2p::PeerEndpoint* endpoint = nullptr;
  std::uint32_t comm = 0;
  std::int32_t tag = 0;
  std::uint64_t seq = 0;
  std::uint64_t sender_id = 0;
  std::uint64_t length = 0;
  std::uint64_t sender_addr = 0;
  std::string data;
  // An exposed Rts: the sender's buffer as a region to read.
  std::uint64_t exposed_region = 0;
  std::uint64_t exposed_generation = 0;
  std::uint32_t exposed_staged = 0;
  std::uint64_t exposed_chunk = 0;
  // An RtsRma whose sender gave up its write (Abandon) before a receive matched it.
  Status abandoned;
};

// A message announced as RtsRma, once matched: the receive its write targets (or, refused, why
// not), until the receive ends, the sender abandons it, or the link fails.
struct Announced {
  std::uint64_t receive_id = 0;  // 0: refused
  Status refused;
};

// This engine's request awaiting frames from the peer (CTS, FIN, DATA, ACK).
struct Inflight {
  Inflight() = default;
  explicit Inflight(std::shared_ptr<RequestState> r, std::uint64_t offset = 0,
                    std::uint64_t len = 0)
      : req(std::move(r)), local_offset(offset), length(len) {}
  std::shared_ptr<RequestState> req;
  std::uint64_t local_offset = 0;   // of this part in the request's local buffer
  std::uint64_t remote_offset = 0;  // put/get: of this part in the remote region
  std::uint64_t length = 0;
  std::uint64_t received = 0;
  bool acked = false;
  bool by_address = false;  // the owner copies with the endpoint's one-sided access
  Status ack_status;
  // A put/get part of a staged transfer: what it is (its request may be a receive), where its
  // local bytes are (a staging chunk, or a buffer), and whom to tell when it ended.
  bool part = false;
  bool part_put = false;
  bool notify = false;  // a request's Notify, waiting for its Ack (p2p/notify.cpp)
  std::byte* local = nullptr;
  std::uint64_t remote_region = 0;
  std::uint64_t remote_generation = 0;
  std::function<void(const Status&)> part_done;
  // A receive matched to an RtsRma: the sender's wire id (its `announced` entry).
  std::uint64_t announced_by = 0;
  bool announced = false;  // a send announced as RtsRma: it takes no Cts
};

// Owner side of a put arriving in DATA frames.
struct PutSession {
  std::shared_ptr<RegionRecord> region;  // null when rejected: the data is discarded
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t received = 0;
  Status error;
  p2p::PeerEndpoint* endpoint = nullptr;  // the Ack goes back the way the data came
};

// Lifetime: created by its lane's Protocol on first use and destroyed with it (pointers to it in
// PeerRef caches, requests and endpoints stay valid that long). The endpoints and the control
// socket are destroyed (or parked until the end of a pass) when the link fails.
struct PeerLink {
  enum class State : std::uint8_t { Idle, Connecting, AwaitingPeer, Established, Failed };

  Endpoint ep;
  State state = State::Idle;
  bool is_self = false;
  bool same_host = false;
  bool accepted = false;      // the peer opened the connection (so it opens the extra paths)
  bool peer_closing = false;  // the peer sent Bye
  // Eager bytes (with headers) the peer sent that this side has not consumed yet: never more
  // than the credit granted, or the peer is broken.
  std::uint64_t eager_outstanding = 0;
  // The control channel's connection with the peer (none for the self link).
  std::unique_ptr<p2p::FramedSocket> control;
  // One endpoint per transport that reaches the peer, indexed by TransportId.
  std::array<std::unique_ptr<p2p::PeerEndpoint>, p2p::kTransportCount> endpoints;
  // The selection table's answer per requested Transport for host memory, once established: the
  // table is a pure function of the link's endpoints, which change only when it connects or
  // fails (both clear this).
  std::array<p2p::PeerEndpoint*, 5> host_routes{};
  // The same for put/get, whose answer also depends on the transports the target region is
  // published on: each entry remembers that set.
  struct RmaRoute {
    std::uint32_t target_transports = 0;
    p2p::PeerEndpoint* endpoint = nullptr;
  };
  std::array<RmaRoute, 5> rma_routes{};
  std::optional<std::chrono::steady_clock::time_point> connect_deadline;
  std::deque<std::shared_ptr<RequestState>> waiting;  // started before the link was up
  Status failure;

  std::uint64_t send_seq = 0;
  std::uint64_t recv_seq = 0;
  std::map<std::uint64_t, Arrival> reorder;
  std::deque<std::shared_ptr<RequestState>> posted;
  std::deque<Arrival> unexpected;
  std::size_t unexpected_rts = 0;  // the Rts among `unexpected`, at most kMaxUnexpectedRts
  std::unordered_map<std::uint64_t, Inflight> inflight;
  // RtsRma messages matched here, by the sender's wire id (the receiver side); and this side's
  // sends announced so whose writes have not ended (at most kMaxRmaAnnounced).
  std::unordered_map<std::uint64_t, Announced> announced;
  std::size_t rma_announced_out = 0;
  std::unordered_map<std::uint64_t, PutSession> sessions;
  // Staging (p2p/staged.h): the requester's chunks waiting for the peer's StageReady or
  // StageDone, by stage id; and the owner's windows the peer opened, by its stage id.
  std::unordered_map<std::uint64_t, std::weak_ptr<p2p::StagedChunk>> stage_waits;
  std::unordered_map<std::uint64_t, std::shared_ptr<p2p::StageWindow>> windows;

  std::uint64_t credit = 0;         // eager bytes we may still send
  std::uint64_t credit_window = 0;  // what we granted the peer
  std::uint64_t credit_owed = 0;    // consumed eager bytes not yet returned

  [[nodiscard]] bool up() const { return state == State::Established; }
  [[nodiscard]] p2p::PeerEndpoint* endpoint(p2p::TransportId id) const {
    return endpoints[static_cast<std::size_t>(id)].get();
  }
};

}  // namespace orbite::detail
