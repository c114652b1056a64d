// The data path's shared state: requests, registered regions, peer links with their TCP streams
// and shared-memory rings, and the lanes that own them. Every PeerLink belongs to one lane, and
// only the thread holding that lane's mutex touches it (the lane's worker, or a user thread
// progressing inside Request::wait()).
#pragma once

#include <orbite/transfer.h>

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mpsc_queue.h"
#include "common/net.h"
#include "p2p/frame.h"
#include "p2p/shm/shm_ring.h"
#include "proxy/tiered_queue.h"

namespace orbite::detail {

using p2p::FrameHeader;
using p2p::FrameType;
using p2p::kFrameHeaderBytes;

struct Lane;
struct PeerLink;

// Where a peer lives: enough to connect to it and to decide whether it shares this host.
struct Endpoint {
  std::string id;
  std::string address;
  std::string host_id;
  std::int64_t pid = 0;
};

// An endpoint as requests carry it: shared, with the lane's link cached after the first use so
// that the hot path skips the lookup by engine ID. Links live as long as their lane.
struct PeerRef {
  Endpoint ep;
  mutable std::atomic<PeerLink*> link{nullptr};
};

struct RegionRecord {
  std::weak_ptr<EngineCore> engine;
  std::uint64_t id = 0;
  std::uint64_t generation = 0;
  std::byte* base = nullptr;
  std::uint64_t length = 0;
  Access access{};
  MemoryKind kind = MemoryKind::Host;
  // Set by unregister: no new access starts. pins counts accesses in progress; unregister
  // returns only once it drops to zero, so nothing touches the memory afterwards.
  std::atomic<bool> dead{false};
  std::atomic<std::int64_t> pins{0};

  // n pins at once, or none: a reply split in n chunks is either fully covered or refused.
  bool pin_many(std::int64_t n) {
    pins.fetch_add(n, std::memory_order_seq_cst);
    if (dead.load(std::memory_order_seq_cst)) {
      pins.fetch_sub(n, std::memory_order_seq_cst);
      return false;
    }
    return true;
  }
  bool pin() {
    pins.fetch_add(1, std::memory_order_seq_cst);
    if (dead.load(std::memory_order_seq_cst)) {
      pins.fetch_sub(1, std::memory_order_seq_cst);
      return false;
    }
    return true;
  }
  void unpin() { pins.fetch_sub(1, std::memory_order_seq_cst); }
};

enum class OpKind : std::uint8_t { Send, Recv, Put, Get };
enum class Channel : std::uint8_t { Tcp, Ring };

// Progress of requests that no lane owns (collectives): Request::test() calls poll() and
// Request::wait() calls wait() instead of driving a lane.
struct ExternalProgress {
  virtual ~ExternalProgress() = default;
  virtual void poll() = 0;
  virtual void wait(const std::atomic<int>& phase, Duration timeout) = 0;
};

struct RequestState : MpscNode {
  // Keeps the state alive while it sits in a lane's submission queue.
  std::shared_ptr<RequestState> queued_self;
  std::shared_ptr<EngineCore> core;
  Lane* lane = nullptr;

  std::shared_ptr<ExternalProgress> external;  // set for requests no lane owns
  // A receive that may never be matched (a collective's abort watch): it does not keep the
  // engine busy, and close() cancels it without waiting.
  bool passive = false;
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
  std::int32_t tag = 0;

  // put/get
  std::shared_ptr<RegionRecord> local;  // pinned while the request runs
  bool local_pinned = false;
  std::uint64_t remote_region = 0;
  std::uint64_t remote_generation = 0;
  std::vector<TransferRange> ranges;

  // Lane-owned progress.
  Channel channel = Channel::Tcp;
  PeerLink* lane_link = nullptr;
  std::uint64_t parts_left = 0;
  Status first_error;  // of a batch's parts; reported once every part is done
};

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
  std::uint64_t written = 0;  // of encoded + owned + data (TCP only)
  // On full write: the request whose bulk bytes these were (send progress), and a region pin.
  std::shared_ptr<RequestState> req;
  RegionRecord* pinned = nullptr;
  enum OnWritten : std::uint8_t { Nothing, FinishEager, SendProgress } on_written = Nothing;

  [[nodiscard]] std::uint64_t total() const { return kFrameHeaderBytes + owned.size() + data_len; }
};

struct TcpStream {
  net::Fd fd;
  bool connecting = false;  // nonblocking connect in progress
  bool handshaken = false;
  bool want_write = false;
  bool dirty = false;  // queued output not yet offered to the socket
  std::deque<SendItem> out;
  // Receive side: a staging buffer for headers and small payloads; large payloads are read
  // straight into their destination.
  std::vector<std::byte> rx = std::vector<std::byte>(256 * 1024);
  std::size_t rx_begin = 0;
  std::size_t rx_end = 0;
  bool in_payload = false;
  FrameHeader cur;
  std::uint64_t got = 0;
  Sink sink;
  std::string buf;
  std::uint32_t index = 0;
  std::uint64_t last_payload = 0;  // of the previous frame: picks how much to read ahead
  PeerLink* link = nullptr;
};

// An EAGER or RTS that arrived before its receive was posted (or out of sequence).
struct Arrival {
  FrameType type = FrameType::Eager;
  Channel channel = Channel::Tcp;
  std::uint32_t comm = 0;
  std::int32_t tag = 0;
  std::uint64_t seq = 0;
  std::uint64_t sender_id = 0;
  std::uint64_t length = 0;
  std::uint64_t sender_addr = 0;
  std::string data;
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
  bool by_address = false;  // the owner copies with process_vm_readv/writev
  Status ack_status;
};

// Owner side of a put arriving in DATA frames.
struct PutSession {
  std::shared_ptr<RegionRecord> region;  // null when rejected: the data is discarded
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t received = 0;
  Status error;
  Channel channel = Channel::Tcp;
};

struct PeerLink {
  enum class State : std::uint8_t { Idle, Connecting, AwaitingPeer, Established, Failed };

  Lane* lane = nullptr;
  Endpoint ep;
  State state = State::Idle;
  bool is_self = false;
  bool same_host = false;
  bool rx_accepted = false;   // the peer opened the connection (so it opens the extra streams)
  bool peer_closing = false;  // the peer sent Bye
  // Eager bytes (with headers) the peer sent that this side has not consumed yet: never more
  // than the credit granted, or the peer is broken.
  std::uint64_t eager_outstanding = 0;
  std::vector<std::unique_ptr<TcpStream>> streams;  // [0] carries the handshake
  std::unique_ptr<p2p::ShmRing> rx;                 // the peer writes, we read
  std::unique_ptr<p2p::ShmRing> tx;                 // we write, the peer reads
  p2p::ShmRing* tx_ring = nullptr;                  // tx, or rx for the self link
  std::deque<SendItem> ring_out;                    // frames waiting for ring space
  std::optional<std::chrono::steady_clock::time_point> connect_deadline;
  std::deque<std::shared_ptr<RequestState>> waiting;  // started before the link was up
  Status failure;

  std::uint64_t send_seq = 0;
  std::uint64_t recv_seq = 0;
  std::map<std::uint64_t, Arrival> reorder;
  std::deque<std::shared_ptr<RequestState>> posted;
  std::deque<Arrival> unexpected;
  std::unordered_map<std::uint64_t, Inflight> inflight;
  std::unordered_map<std::uint64_t, PutSession> sessions;

  std::uint64_t credit = 0;         // eager bytes we may still send
  std::uint64_t credit_window = 0;  // what we granted the peer
  std::uint64_t credit_owed = 0;    // consumed eager bytes not yet returned

  [[nodiscard]] bool has_ring() const { return tx_ring != nullptr; }
  [[nodiscard]] bool up() const { return state == State::Established; }
};

}  // namespace orbite::detail
