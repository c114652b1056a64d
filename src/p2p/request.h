// The state behind a Request handle, shared by every layer that completes requests (the p2p
// protocol, the collectives' executor, the proxy's close), and the one function that completes
// it. It names no proxy type: whoever can progress a request is a ProgressDriver.
#pragma once

#include <orbite/transfer.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mpsc_queue.h"

namespace orbite::p2p {
class PeerEndpoint;
}
namespace orbite::cuda {
class Allocation;
}

namespace orbite::detail {

struct RegionRecord;
struct PeerRef;
struct PeerLink;

enum class OpKind : std::uint8_t { Send, Recv, Put, Get };

// A receive's tag that matches any tag (the public kAnyTag).
inline constexpr std::int32_t kAnyTagWire = -1;
inline bool tag_matches(std::int32_t wanted, std::int32_t got) {
  return wanted == kAnyTagWire || wanted == got;
}

// Who makes a request progress when its owner calls Request::test() or wait(): a proxy lane for
// point-to-point requests, the communicator's collective executor for collectives.
struct ProgressDriver {
  virtual ~ProgressDriver() = default;
  // One pass of progress if it can be had without blocking (Request::test()).
  virtual void poll() = 0;
  // Progress (or sleep) until `phase` leaves 0 or the timeout passes (Request::wait()).
  virtual void wait(const std::atomic<int>& phase, Duration timeout) = 0;
};

// A counter with one writer at a time (the holder of its lane's mutex; the mutex orders the
// writers) and readers anywhere (stats()): a relaxed load and store, not a locked read-modify-
// write, since the small-message path bumps several per message. Returns the new value.
inline std::uint64_t bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
  const std::uint64_t v = c.load(std::memory_order_relaxed) + n;
  c.store(v, std::memory_order_relaxed);
  return v;
}
inline void drop(std::atomic<std::uint64_t>& c, std::uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
}

// The completion counters of the lane a request runs on (absent for a collective's own request).
struct CompletionCounters {
  std::atomic<std::uint64_t> completed{0}, failed{0};
  std::array<std::atomic<std::uint64_t>, kErrcCount> failed_by_code{};  // indexed by Errc
};

// Lifetime: shared by the user's Request copies, the lane queues and the protocol's tables; it
// lives until the last of them lets go. Fields below "lane-owned" are touched only by the holder
// of the owning lane's mutex; phase, final_status and bytes_done are published by the release
// store of phase (final_status is written before it and read only after an acquire load).
struct RequestState : MpscNode {
  // Keeps the state alive while it sits in a lane's submission queue.
  std::shared_ptr<RequestState> queued_self;
  // Progresses this request; for a lane it aliases the engine so the engine outlives the request.
  std::shared_ptr<ProgressDriver> driver;
  CompletionCounters* counters = nullptr;  // the engine's; null for collectives

  // A receive that may never be matched (a collective's abort watch, or a receive of a failed
  // collective that nobody waits for any more): unmatched, it does not keep the engine busy, and
  // close() cancels it without waiting. Set by the collective's thread while the lane reads it.
  std::atomic<bool> passive{false};
  // Memory this request may still write into after its owner gave up on it (a failed
  // collective's scratch): freed with the last request that holds it.
  std::shared_ptr<void> keepalive;
  std::atomic<int> phase{0};  // 0 running, 1 succeeded, 2 failed
  Status final_status;
  std::atomic<std::uint64_t> bytes_done{0};

  OpKind kind = OpKind::Send;
  TransferOptions options;
  std::shared_ptr<const PeerRef> peer;
  std::uint64_t id = 0;

  // send/recv
  const std::byte* src = nullptr;
  std::byte* dst = nullptr;
  std::uint64_t length = 0;
  std::uint32_t comm = 0;
  std::int32_t tag = 0;  // a receive's kAnyTagWire: any tag
  // The peer's rank in the communicator that posted the message (-1: not a communicator's, or
  // from any source), and when the request was submitted (coarse monotonic ns): for the state
  // report (proxy/report.cpp) only.
  std::int32_t peer_rank = -1;
  std::int64_t submitted_ns = 0;
  // A receive's match, published by phase (or by `claimed` for a receive from any source): the
  // sender's rank in its communicator and the message's tag; -1 until then.
  std::int32_t source = -1;
  std::int32_t matched_tag = -1;
  // A receive from any source (`any_source`; its `peer` is null). Each lane posts it: lane 0
  // gets the request itself, the others a ticket whose `ticket_of` names it. The lane whose
  // message matches it first takes it by setting `claimed`; only that lane touches its lane-owned
  // fields after. Before the claim the lanes only read comm, tag and `ranks` (set before it was
  // submitted). `ranks`: the rank of each peer engine of the communicator (its messages only).
  bool any_source = false;
  std::atomic<bool> claimed{false};
  std::shared_ptr<RequestState> ticket_of;
  std::shared_ptr<const std::unordered_map<std::string, int>> ranks;
  // Device memory behind src (a send) or dst (a receive): its allocation and the buffer's
  // offset in it. No transport touches it: the exposed rendezvous and staging move its bytes.
  std::shared_ptr<cuda::Allocation> device;
  std::uint64_t device_offset = 0;
  // A send's buffer as a region the receiver reads (the exposed rendezvous); withdrawn before
  // the send completes.
  std::shared_ptr<RegionRecord> exposed;
  // Runs once before a successful completion is published (a small device receive's copy out of
  // its host bounce); its error fails the request instead.
  std::function<Status()> before_complete;

  // put/get
  std::shared_ptr<RegionRecord> local;  // pinned while the request runs
  bool local_pinned = false;
  std::uint64_t remote_region = 0;
  std::uint64_t remote_generation = 0;
  MemoryKind remote_kind = MemoryKind::Host;  // of the remote region (its descriptor's)
  // The transports the remote region is published on, and those that reach it through its
  // owner's staging (bit i: TransportId i).
  std::uint32_t remote_transports = ~0u;
  std::uint32_t remote_staged = 0;
  std::uint64_t remote_chunk = 0;  // the owner's staging chunk (a staged access's most)
  std::vector<TransferRange> ranges;

  // Lane-owned progress: the protocol's per-request state (see p2p/peer.h).
  p2p::PeerEndpoint* endpoint = nullptr;  // the route chosen for the request
  PeerLink* lane_link = nullptr;          // the link of the lane that owns the request
  std::uint64_t post_order = 0;           // a posted receive's place among the lane's receives
  std::uint64_t parts_left = 0;
  Status first_error;  // of a batch's parts; reported once every part is done
};

// A fresh request state. States (with their shared_ptr control block) come from a free list of
// the calling thread: once warm, a small send or receive allocates nothing. The thread that
// drops the last reference keeps the block for its own next request (usually the thread that
// made it: the user's Request handle lets go last). Sanitizer builds allocate every time, so
// that a use after free is still caught.
std::shared_ptr<RequestState> make_request_state();

// Completes a request once (success when `status` is ok), releases the local region pin it holds,
// counts it, and publishes the result to waiters. A second call is ignored.
void complete_request(RequestState& req, Status status);

// Builds Request handles and reaches their state: the one door through the public class.
struct RequestAccess {
  static Request make(std::shared_ptr<RequestState> s) { return Request(std::move(s)); }
  static const std::shared_ptr<RequestState>& state(const Request& r) { return r.state_; }
};

}  // namespace orbite::detail
