// The transport contract. A transport is one folder under src/p2p/ that implements three parts,
// split by lifetime as UCX splits md / iface / ep:
//
//   MemoryDomain   one per engine and transport: what a registration needs on this transport (an
//                  MR set on every RDMA context, a CUDA IPC handle; nothing for tcp and shm), its
//                  release (a failed release is retained, never retried), and this transport's
//                  part of the region descriptor.
//   LaneTransport  one per lane and transport: capabilities, the connect blob it contributes to
//                  the handshake, opening an endpoint from the peer's blob, progress, the fds it
//                  puts in the lane's epoll set (through the Poller), sleep arming, busy, shutdown.
//   PeerEndpoint   one per peer and transport: two-sided frames, and one-sided access where the
//                  transport has it natively.
//
// The protocol above (matching, credits, rendezvous, the owner's checks of put/get) talks to these
// interfaces only. An operation a transport lacks is a stub that returns Errc::Unavailable.
#pragma once

#include <orbite/status.h>
#include <orbite/transfer.h>

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "p2p/endpoint.h"
#include "p2p/frame.h"

namespace orbite {
struct EngineConfig;
}  // namespace orbite

namespace orbite::cuda {
class Allocation;
}  // namespace orbite::cuda

namespace orbite::detail {
struct PeerLink;
struct RegionRecord;
struct RequestState;
struct SendItem;
struct Sink;
}  // namespace orbite::detail

namespace orbite::p2p {

// Transport identities are known by value everywhere (counters, descriptors, the selection
// table); their implementations only inside their folders and the table in transports.cpp.
enum class TransportId : std::uint8_t { Shm = 0, CudaIpc = 1, Rdma = 2, Tcp = 3 };
inline constexpr std::size_t kTransportCount = 4;
const char* transport_name(TransportId id);
// The public Transport a TransportId answers to (CudaIpc is Transport::Nvlink).
Transport public_transport(TransportId id);
std::optional<TransportId> transport_id_of(Transport t);

// Which peers a transport can reach.
enum Reach : std::uint8_t { kReachSelf = 1, kReachSameHost = 2, kReachRemote = 4 };

struct Capabilities {
  TransportId id = TransportId::Tcp;
  std::uint8_t reach = 0;  // Reach bits
  bool host_memory = true;
  bool cuda_memory = false;
  // Native one-sided access to the peer's memory (single copy, RDMA READ/WRITE).
  bool one_sided = false;
  // The largest message sent eagerly, and the largest payload of one frame.
  std::uint64_t eager_limit = 0;
  std::uint64_t max_frame_payload = 0;
  // Carries the protocol's frames (send/recv, and put/get as frames).
  bool frames = true;
  // Runs put/get itself (start_rma): RDMA's grant protocol. With frames too, a rendezvous's
  // payload goes the same way: the sender writes into the receiver's posted buffer.
  bool rma = false;
  // With rma: a message up to this many bytes is announced as RtsRma and its write's request
  // goes out at once, so the receiver answers no Cts (0: every rendezvous waits for the Cts).
  std::uint64_t rma_message_limit = 0;
};

class LaneTransport;
class Poller;
class RegionRegistry;
class FrameHandler;
class ControlSender;

// What a lane offers the transports it makes (LaneTransport's construction); all outlive them.
struct LaneParts {
  const EngineConfig& config;
  const detail::Identity& self;
  Poller& poller;
  FrameHandler& handler;
  ControlSender& control;
  RegionRegistry& regions;
};

// What transports add to the engine's reports (TransferEngine::rdma_stats, nic_load_stats).
struct TransportReport {
  RdmaStats rdma;  // installed = false unless a domain fills it
  std::vector<NicLoad> nics;
};

// The per-transport part of one registration; none for tcp and shm.
struct DomainRegistration {
  virtual ~DomainRegistration() = default;
};

// How a transport carries memory of one kind: its own DMA or copies reach it (Native: the
// domain registers it), through the engine's staging pool (Staged: the protocol copies it in
// chunks to and from owned host buffers before the transport sees them), not at all and it is
// an error to ask (Refused, with the reason the domain gives: a registration of that kind
// fails), or not at all and other transports carry it (Absent: a region of that kind is not
// published on this transport, with no error). The memory kinds of the contract, as UCX's
// reg_mem_types/access_mem_types and NIXL's getSupportedMems().
enum class Backing : std::uint8_t { Native, Staged, Refused, Absent };

class MemoryDomain {
 public:
  virtual ~MemoryDomain() = default;
  [[nodiscard]] virtual TransportId id() const = 0;
  // How this transport carries memory of `kind` under the engine's policies; `why` says why
  // not when Refused.
  [[nodiscard]] virtual Backing backing(MemoryKind kind, std::string* why) const = 0;
  // The GPUDirect RDMA routes this registration's device memory was registered by (bits
  // kGpuDirectDmabuf, kGpuDirectPeermem): what the region's descriptor reports as observed
  // (RemoteRegion::gpu_direct_routes). 0 for everything but RDMA's GPU MRs.
  static constexpr std::uint8_t kGpuDirectDmabuf = 1, kGpuDirectPeermem = 2;
  [[nodiscard]] virtual std::uint8_t gpu_direct_routes(const DomainRegistration*) const {
    return 0;
  }
  // Prepares `region` (of a kind this domain backs Native) on this transport before it becomes
  // visible; null when nothing is needed. A kind it does not register is Unavailable naming it.
  virtual Result<std::unique_ptr<DomainRegistration>> register_region(
      const detail::RegionRecord& region) = 0;
  // A window [region.base, +length) inside `parent`, a region this domain registered: it shares
  // the parent's registration (the staging pool's slabs are registered once, and each chunk a
  // peer reaches through remote staging is such a window). Null when nothing is needed.
  virtual Result<std::unique_ptr<DomainRegistration>> register_within(
      const detail::RegionRecord& /*region*/,
      const std::shared_ptr<const detail::RegionRecord>& /*parent*/) {
    return std::unique_ptr<DomainRegistration>();
  }
  // Releases what register_region made. One that fails to release moves to the retained list
  // (never released twice) and the error is returned.
  virtual Status deregister(std::unique_ptr<DomainRegistration> registration) = 0;
  [[nodiscard]] virtual std::size_t retained() const = 0;
  // This transport's part of the region descriptor (empty: none needed), and the check of a
  // peer's part before a request relies on it.
  [[nodiscard]] virtual std::string pack(const detail::RegionRecord& region,
                                         const DomainRegistration* registration) const = 0;
  [[nodiscard]] virtual Status unpack(std::string_view blob) const = 0;
  // Whether `region`'s descriptor names this transport (a peer may reach the region through
  // it): every region of a kind it does not leave Absent, unless the domain knows better (a
  // registration that could not be exported).
  [[nodiscard]] virtual bool published(const detail::RegionRecord& region,
                                       const DomainRegistration* registration) const;
  // Engine-owned memory (collective scratch): stable from declare_owned until forget_owned, which
  // comes before it is freed, so a transport may keep what it prepared for it across requests.
  virtual void declare_owned(std::byte* /*base*/, std::uint64_t /*length*/) {}
  virtual void forget_owned(const std::byte* /*base*/) {}

  // The transport's factory: one lane's transport when this domain makes it (null: the table
  // makes the lane's transport itself, or there is none).
  virtual Result<std::unique_ptr<LaneTransport>> make_lane(const LaneParts& /*parts*/) const {
    return std::unique_ptr<LaneTransport>();
  }
  // The proxy's monitor thread, which names no transport: the fds it waits on for this domain
  // (device events), their events consumed without blocking, and the periodic scan.
  [[nodiscard]] virtual std::vector<int> monitor_fds() const { return {}; }
  virtual void drain_monitor_events() const {}
  virtual void monitor_scan() const {}
  // This domain's part of the engine's reports (any thread).
  virtual void report(TransportReport& /*out*/) const {}
};

// A domain for transports that need nothing per registration and no key in the descriptor.
// Host memory needs nothing (frames and single copy reach it); device memory is staged.
class KeylessDomain final : public MemoryDomain {
 public:
  explicit KeylessDomain(TransportId id) : id_(id) {}
  [[nodiscard]] TransportId id() const override { return id_; }
  [[nodiscard]] Backing backing(MemoryKind kind, std::string*) const override {
    return kind == MemoryKind::Host ? Backing::Native : Backing::Staged;
  }
  Result<std::unique_ptr<DomainRegistration>> register_region(
      const detail::RegionRecord& region) override;
  Status deregister(std::unique_ptr<DomainRegistration>) override { return {}; }
  [[nodiscard]] std::size_t retained() const override { return 0; }
  [[nodiscard]] std::string pack(const detail::RegionRecord&,
                                 const DomainRegistration*) const override {
    return {};
  }
  [[nodiscard]] Status unpack(std::string_view blob) const override;

 private:
  TransportId id_;
};

class PeerEndpoint;

// One range of a put or get that a transport with its own one-sided protocol (RDMA) carries.
struct RmaOp {
  bool write = false;  // put: local -> remote
  // Keeps the request (and with it the local region's pin) alive until `done`.
  std::shared_ptr<detail::RequestState> req;
  const detail::RegionRecord* local_region = nullptr;
  // Without a local region: an unregistered buffer (a send's), registered for this op only.
  const std::byte* local_buffer = nullptr;
  std::uint64_t local_offset = 0;
  // Or unregistered device memory (a receive's buffer): the allocation and the offset in it.
  std::shared_ptr<cuda::Allocation> local_device;
  // The remote region is a sender's exposed buffer, read once: the transport lets go of what it
  // holds for it (cuda_ipc: the mapping) before `done`, so that the send may complete then.
  bool transient = false;
  // Nonzero: the target is the peer's posted receive with this wire id (a rendezvous WRITE into
  // its buffer at remote_offset), not a registered region.
  std::uint64_t remote_receive = 0;
  // Or nonzero: the target is whatever receive the peer matches to this side's message with this
  // wire id (announced as RtsRma); the peer's transport asks its FrameHandler (message_target).
  std::uint64_t remote_message = 0;
  std::uint64_t remote_region = 0;
  std::uint64_t remote_generation = 0;
  std::uint64_t remote_offset = 0;
  std::uint64_t length = 0;
  // The remote region is the owner's device memory: RDMA grants it on the private grant path.
  bool remote_device = false;
  // Called once, on the lane, when no DMA can touch the local range any more.
  std::function<void(const Status&)> done;
};

// What an endpoint tells the protocol above it (the lane's Protocol implements it).
class FrameHandler {
 public:
  virtual ~FrameHandler() = default;
  // A frame's header arrived: where its payload goes. An error closes the peer as a protocol
  // error.
  virtual Result<detail::Sink> begin_frame(detail::PeerLink& link, const FrameHeader& h,
                                           PeerEndpoint& from) = 0;
  // The frame's payload is in place (in `body` for a Buffer sink).
  virtual void end_frame(detail::PeerLink& link, const FrameHeader& h, PeerEndpoint& from,
                         detail::Sink& sink, std::string&& body) = 0;
  // A queued frame left entirely: its borrowed bytes are no longer needed.
  virtual void frame_written(PeerEndpoint& ep, detail::SendItem& item) = 0;
  // The endpoint's connection broke (the peer is lost unless it said Bye).
  virtual void endpoint_failed(detail::PeerLink& link, const Status& why) = 0;
  virtual void protocol_error(detail::PeerLink& link, const std::string& what) = 0;
  // A rendezvous over a transport that runs it itself (caps().rma): the posted receive `recv_id`
  // of `link` as the target of [offset, offset + length) of the message. The receive stays
  // alive through `keepalive` until rendezvous_done.
  struct ReceiveTarget {
    std::byte* buffer = nullptr;  // the receive's first byte
    std::uint64_t length = 0;     // of the matched message
    std::shared_ptr<detail::RequestState> keepalive;
    std::uint64_t receive_id = 0;  // what rendezvous_done names
    // message_target only: no receive matched the message yet: ask again later. Nothing else
    // is set but `announced`: whether its announcement (RtsRma) arrived, so that the wait is
    // for a receive (as long as the application takes) rather than for the announcement (on
    // its way: the sender sent it first).
    bool waiting = false;
    bool announced = false;
  };
  virtual Result<ReceiveTarget> rendezvous_target(detail::PeerLink& link, std::uint64_t recv_id,
                                                  std::uint64_t offset, std::uint64_t length) = 0;
  // The same for a message announced as RtsRma, named by the sender's wire id for it.
  virtual Result<ReceiveTarget> message_target(detail::PeerLink& link, std::uint64_t sender_id,
                                               std::uint64_t offset, std::uint64_t length) = 0;
  // `bytes` of it landed (proven by the transport), or it failed.
  virtual void rendezvous_done(detail::PeerLink& link, std::uint64_t recv_id, std::uint64_t bytes,
                               const Status& outcome) = 0;
  // Payload buffers for Buffer sinks, recycled (allocating one per message costs page faults).
  virtual std::string take_buffer() = 0;
  virtual void give_buffer(std::string&& buffer) = 0;
};

// The control channel as a transport sees it: small frames to the peer's engine (doorbells
// today, RDMA grants later), on the connection the handshake made.
class ControlSender {
 public:
  virtual ~ControlSender() = default;
  virtual void send_control(detail::PeerLink& link, const FrameHeader& h,
                            std::string payload = {}) = 0;
};

class PeerEndpoint {
 public:
  virtual ~PeerEndpoint() = default;
  [[nodiscard]] virtual const Capabilities& caps() const = 0;
  [[nodiscard]] TransportId id() const { return caps().id; }
  // Queues one frame; frames of one endpoint arrive in order. Borrowed bytes stay untouched
  // until FrameHandler::frame_written. A broken endpoint reports through endpoint_failed.
  virtual void send(detail::SendItem item) = 0;
  // Hands over a small frame at once, copying header and payload; false when the endpoint
  // cannot (no room, or it always queues), and nothing was taken.
  virtual bool send_now(const FrameHeader& h, std::span<const iovec> payload) = 0;
  // Parallel paths (TCP streams) usable now: bulk data may be spread over them.
  [[nodiscard]] virtual std::size_t paths() const = 0;
  // One-sided access to the peer's memory by address; Unavailable where not native, and also
  // when the kernel refuses (the caller then sends the bytes as frames).
  virtual Status read_peer(std::byte* local, std::uint64_t remote, std::uint64_t len) = 0;
  virtual Status write_peer(const std::byte* local, std::uint64_t remote, std::uint64_t len) = 0;
  [[nodiscard]] virtual bool one_sided_usable() const = 0;
  // Runs `op` with the transport's own one-sided protocol (caps().rma); Unavailable where there
  // is none. On an error `op.done` is not called.
  virtual Status start_rma(RmaOp op) = 0;
  // Output queued, or a frame half read.
  [[nodiscard]] virtual bool busy() const = 0;
  // Closes; `orderly` tells the peer first (Bye) when it can be done without blocking.
  virtual void close(bool orderly) = 0;
};

// A handshake entry as the control channel carries it.
struct ConnectBlob {
  TransportId id = TransportId::Tcp;
  std::string blob;
};

class LaneTransport {
 public:
  virtual ~LaneTransport() = default;
  [[nodiscard]] virtual const Capabilities& caps() const = 0;
  // Initiator: this side's blob for the Hello to `link`; nullopt when not offered to this peer.
  virtual std::optional<std::string> offer(detail::PeerLink& link) = 0;
  // Acceptor: the peer offered `blob`. Opens the endpoint and returns the blob for the HelloAck;
  // an error declines (the link goes on without this transport).
  virtual Result<std::string> accept(detail::PeerLink& link, std::string_view blob) = 0;
  // Acceptor: the peer's Hello with this offer was refused (HelloNack). Its sender may be dead
  // and never drop the offer itself: a transport whose offer names a host resource removes it.
  virtual void decline(detail::PeerLink& /*link*/, std::string_view /*blob*/) {}
  // Initiator: the peer answered `blob`, or declined (nullopt). Opens the endpoint or drops the
  // offer.
  virtual Status complete(detail::PeerLink& link, std::optional<std::string_view> blob) = 0;
  // The endpoint to this engine itself; Unavailable where the transport has none.
  virtual Status open_self(detail::PeerLink& link) = 0;
  // A connection the peer opened for this transport (a Hello naming it), routed by the control
  // channel; Unavailable where the transport opens none.
  virtual Status adopt_connection(detail::PeerLink& link, int fd, std::uint32_t index) = 0;
  // A TransportControl frame the peer's transport sent on the control connection: `kind` and
  // `body` mean what this transport says; an error closes the peer as a protocol error.
  virtual Status on_control(detail::PeerLink& link, std::uint64_t kind, std::string_view body) = 0;
  // One pass; returns how much work it did.
  virtual int progress() = 0;
  // Appends the transport's lines of its lane's state report (docs/hangs.md), indented by four:
  // what it holds in flight that the protocol does not see. Nothing by default.
  virtual void report(std::string& /*out*/) const {}
  // Arms for sleep (false: work arrived meanwhile, do not sleep), and disarms.
  virtual bool prepare_sleep() = 0;
  virtual void end_sleep() = 0;
  [[nodiscard]] virtual bool busy() const = 0;
  // Milliseconds until work that no fd announces falls due while the transport is not busy (an
  // idle connection to reap), or -1 for none: an idle worker's sleep ends by then.
  [[nodiscard]] virtual int next_timer_ms() const { return -1; }
  // The peer closed in order (Bye, then end of stream on its control connection): whether frames
  // it sent before may still arrive here apart from that stream (an RDMA message QP whose Bye
  // has not arrived yet). The link stays open for them, within kOrderlyCloseBound.
  [[nodiscard]] virtual bool expects_frames(const detail::PeerLink& /*link*/) const {
    return false;
  }
  // The link failed: drop this transport's state for it.
  virtual void forget(detail::PeerLink& link) = 0;
  virtual void shutdown(const Status& why) = 0;
};

}  // namespace orbite::p2p
