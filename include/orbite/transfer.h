// The data path: the per-process TransferEngine, its asynchronous Request handles, registered
// memory (MemoryRegion) and the RemoteRegion descriptors that peers import for put/get.
//
// Every data operation is asynchronous: the calling thread validates the arguments, hands a
// request to the engine's proxy and gets a Request back. Blocking is Request::wait(). A thread in
// wait()/test() may drive the transports itself when no other thread is doing so (as MPI and UCX
// progress inside their wait calls); background work never depends on it.
#pragma once

#include <orbite/config.h>
#include <orbite/cuda.h>
#include <orbite/export.h>
#include <orbite/rdma.h>
#include <orbite/status.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace orbite {

namespace detail {
struct RequestState;
struct RequestAccess;
struct EngineCore;
struct RegionRecord;
struct DescriptorCodec;
}  // namespace detail

// Transport (declared in config.h, which coll.transport needs) names which transport carries a
// request.
ORBITE_API std::string_view to_string(Transport t);

// Request priority (High is the default, as in TENT). The proxy starts queued High work before
// Medium before Low, FIFO within a tier.
enum class Priority : std::uint8_t { High, Medium, Low };
ORBITE_API std::string_view to_string(Priority p);

enum class MemoryKind : std::uint8_t { Host, Cuda };

// What TransferEngine::close() does with work still running when its timeout passes.
enum class CloseTimeout : std::uint8_t { Cancel, KeepWaiting };

// Rights a registration grants to remote peers: read lets them get(), write lets them put().
struct Access {
  bool read = true;
  bool write = true;
};

using Clock = std::chrono::steady_clock;

struct TransferOptions {
  Transport transport = Transport::Unspec;
  Priority priority = Priority::High;
  // A request whose deadline passes before its payload starts moving fails with Errc::Timeout and
  // moves nothing. Once bytes move, it runs to completion or failure.
  std::optional<Clock::time_point> deadline;
  // put and get only (send, recv and the collectives refuse it): a message for the engine that
  // owns the remote region, delivered there after the request's bytes are in place (put) or
  // were read (get); TransferEngine::notifications() returns it at that engine (NIXL's
  // notifications, OpenSHMEM's put-with-signal). The request then completes once the owner holds
  // the message, and fails (its bytes moved) when the owner refused it or the link failed before
  // it arrived. A failed transfer sends no notification. At most kMaxNotificationBytes.
  std::optional<std::string> notification;
};

// The largest notification: a control frame's payload, which every transport carries.
inline constexpr std::size_t kMaxNotificationBytes = 4096;

// A notification a peer delivered to this engine (TransferOptions::notification, notify()).
struct Notification {
  std::string peer;  // the sender's engine id (TransferEngine::id(), PeerInfo::engine_id)
  std::string message;
};

// Handle to an asynchronous operation. Copies share the same operation. The operation keeps its
// buffers borrowed until it is done: do not free or reuse them before.
class ORBITE_API Request {
 public:
  Request() = default;
  [[nodiscard]] bool valid() const { return state_ != nullptr; }
  // Makes progress if it can, then reports whether the operation finished (successfully or not).
  bool test();
  // Waits until the operation finished or the timeout passed. Returns the operation's status, or
  // Errc::Timeout if it is still running (it keeps running; wait again or close the engine).
  Status wait(Duration timeout = Duration::max());
  // The final status once done; nullopt while running.
  [[nodiscard]] std::optional<Status> status() const;
  [[nodiscard]] bool done() const;
  // Payload bytes moved: for a receive, the size of the message received.
  [[nodiscard]] std::uint64_t bytes() const;
  // A receive on a communicator, once done: the rank that sent the message it matched and the
  // message's tag, as MPI_Status reports them (how a receive from kAnySource or with kAnyTag
  // learns them), also when it failed after matching (a truncated message). -1 while it runs and
  // for requests that are not receives; a receive that failed before matching reports its named
  // peer (-1 from kAnySource) and tag -1.
  [[nodiscard]] int source() const;
  [[nodiscard]] int tag() const;

 private:
  friend struct detail::RequestAccess;
  explicit Request(std::shared_ptr<detail::RequestState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::RequestState> state_;
};

// Waits for every request (each bounded by the same overall timeout); returns the first error.
ORBITE_API Status wait_all(std::span<Request> requests, Duration timeout = Duration::max());

// A peer's registered memory as this process knows it: owner, region id, generation, length,
// rights and reachable transports. It is plain data; the owner checks every access.
class ORBITE_API RemoteRegion {
 public:
  RemoteRegion() = default;
  // The serialized form that MemoryRegion::export_descriptor() produced (versioned and checked).
  static Result<RemoteRegion> from_bytes(std::span<const std::byte> bytes);
  static Result<RemoteRegion> from_bytes(std::string_view bytes);
  [[nodiscard]] std::string bytes() const;

  [[nodiscard]] std::uint64_t length() const { return length_; }
  [[nodiscard]] std::uint64_t region_id() const { return region_id_; }
  [[nodiscard]] std::uint64_t generation() const { return generation_; }
  [[nodiscard]] Access access() const { return access_; }
  [[nodiscard]] const std::string& owner_address() const { return owner_address_; }
  [[nodiscard]] const std::string& owner_host_id() const { return owner_host_id_; }
  [[nodiscard]] const std::string& owner_id() const { return owner_id_; }
  [[nodiscard]] std::int64_t owner_pid() const { return owner_pid_; }
  // Host or CUDA memory at the owner.
  [[nodiscard]] MemoryKind kind() const { return kind_; }
  // Transports the owner accepts for this region (tcp always; shm for same-host peers).
  [[nodiscard]] std::vector<Transport> transports() const;
  // Transports that reach it through the owner's staging (its CUDA memory on every transport
  // today; host memory on RDMA with RdmaHostMemory::Staged).
  [[nodiscard]] std::vector<Transport> staged_transports() const;
  // The GPUDirect RDMA routes the owner registered this device memory by (rdma.cuda_memory =
  // "direct"): Dmabuf and/or Peermem, empty for host memory or staged device memory. Evidence
  // of what the owner did when it described the region, not a promise that a route works later.
  [[nodiscard]] std::vector<rdma::GpuDirectRegistration> gpu_direct_routes() const;

 private:
  friend struct detail::DescriptorCodec;
  std::string owner_id_;  // the owning engine's identity (128-bit, hex)
  std::string owner_address_;
  std::string owner_host_id_;
  std::int64_t owner_pid_ = 0;
  std::uint64_t region_id_ = 0;
  std::uint64_t generation_ = 0;
  std::uint64_t length_ = 0;
  Access access_{};
  MemoryKind kind_ = MemoryKind::Host;
  // One entry per transport the owner published the region on: its id and its packed part of
  // the descriptor (empty for tcp and shm; an RDMA NIC mask, a CUDA IPC handle).
  std::vector<std::pair<std::uint8_t, std::string>> transport_blobs_;
  std::uint32_t staged_ = 0;  // bit i: TransportId i carries it staged
  // Bit i: TransportId i's registration is GPU MRs by dma-buf (gpu_dmabuf_) or peermem.
  std::uint32_t gpu_dmabuf_ = 0, gpu_peermem_ = 0;
  // The owner's staging chunk (a staged access asks for at most this much at once).
  std::uint64_t staging_chunk_ = 0;
};

// A registration of [data, data + length) with an engine. Unregistered by unregister() or by the
// destructor; unregistering waits for this process's transfers that use it, and fails remote
// peers' transfers that have not finished, so no byte moves into the range afterwards.
class ORBITE_API MemoryRegion {
 public:
  MemoryRegion() = default;
  MemoryRegion(MemoryRegion&&) noexcept;
  MemoryRegion& operator=(MemoryRegion&&) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion();

  [[nodiscard]] bool valid() const { return record_ != nullptr; }
  [[nodiscard]] void* data() const;
  [[nodiscard]] std::uint64_t length() const;
  [[nodiscard]] Access access() const;
  [[nodiscard]] MemoryKind kind() const;
  [[nodiscard]] RemoteRegion export_descriptor() const;
  // Errc::Unquiesced if this process still has transfers on it after the timeout: the
  // registration then stays in place (and the memory must stay allocated).
  Status unregister(Duration timeout = std::chrono::seconds(30));

 private:
  friend struct detail::EngineCore;
  explicit MemoryRegion(std::shared_ptr<detail::RegionRecord> r) : record_(std::move(r)) {}
  std::shared_ptr<detail::RegionRecord> record_;
};

// A range to register. MemoryKind::Cuda: device memory of one allocation, adopted as
// cuda::CudaMemory::from_raw_parts adopts it (the application keeps it allocated while it is
// registered); it is staged through the engine's pool on every transport that does not reach
// device memory itself.
struct RegistrationRequest {
  void* data = nullptr;
  std::uint64_t length = 0;
  MemoryKind kind = MemoryKind::Host;
  Access access{};
};

// One range of a batched put or get.
struct TransferRange {
  std::uint64_t local_offset = 0;
  std::uint64_t remote_offset = 0;
  std::uint64_t length = 0;
};

// What one transport carried, both directions: payload bytes (frames' payloads, and bytes copied
// by one-sided access) and frames.
struct TransportStats {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_received = 0;
};

struct EngineStats {
  std::uint64_t requests_submitted = 0;
  // Ranges of batched puts and gets joined to the range before them because both sides continue
  // it (merge_requests): a batch of N adjacent ranges adds N - 1.
  std::uint64_t ranges_merged = 0;
  // Notifications peers delivered to this engine, those refused because too many were
  // untaken, and those waiting to be taken now.
  std::uint64_t notifications_received = 0;
  std::uint64_t notifications_refused = 0;
  std::uint64_t notifications_pending = 0;
  std::uint64_t requests_completed = 0;
  std::uint64_t requests_failed = 0;
  // Of the failed, how many failed with each code (indexed by Errc).
  std::array<std::uint64_t, kErrcCount> failures_by_code{};
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t eager_messages = 0;
  std::uint64_t rendezvous_messages = 0;
  std::uint64_t single_copy_bytes = 0;
  std::uint64_t peers_connected = 0;
  std::uint64_t peers_lost = 0;
  std::uint64_t protocol_errors = 0;
  std::uint64_t regions_registered = 0;
  // Unexpected eager bytes buffered now, and the most ever buffered.
  std::uint64_t unexpected_bytes = 0;
  std::uint64_t unexpected_bytes_peak = 0;
  // Worker passes that found nothing to do, and sleeps on epoll/eventfd.
  std::uint64_t worker_idle_sleeps = 0;
  // Times the control listener rested: accept found no file descriptor, or
  // tcp.max_pending_handshakes connections were still to send their Hello.
  std::uint64_t control_listener_rests = 0;
  // Whether a thread waiting on this engine gives its core away on every idle pass (Open MPI's
  // mpi_yield_when_idle): set once a communicator found its host's ranks outnumbering the CPUs
  // they run on.
  bool yields_when_idle = false;
  // The staging pool (device memory, and host memory a transport carries staged): chunks lent so
  // far, the most lent at once, chunks kept for good (a copy that could not be proven finished),
  // and the bytes of the slabs made (bounded by rdma.max_staging_bytes).
  std::uint64_t staging_loans = 0;
  std::uint64_t staging_lent_peak = 0;
  std::uint64_t staging_retained = 0;
  std::uint64_t staging_slab_bytes = 0;
  // Per transport, indexed by Transport (Unspec stays zero; Nvlink is the CUDA IPC transport).
  std::array<TransportStats, 5> transports{};
  [[nodiscard]] const TransportStats& of(Transport t) const {
    return transports[static_cast<std::size_t>(t)];
  }
};

// The per-process engine. Normally a Communicator creates and owns it; create() is for
// engine-level use (put/get between processes that exchange RemoteRegion descriptors themselves).
class ORBITE_API TransferEngine {
 public:
  static Result<std::shared_ptr<TransferEngine>> create(const EngineConfig& config);
  ~TransferEngine();
  TransferEngine(const TransferEngine&) = delete;
  TransferEngine& operator=(const TransferEngine&) = delete;

  // host:port of this engine's control listener, and its identity (128-bit, hex).
  [[nodiscard]] const std::string& control_address() const;
  [[nodiscard]] const std::string& id() const;
  [[nodiscard]] const EngineConfig& config() const;

  Result<MemoryRegion> register_memory(void* data, std::uint64_t length,
                                       MemoryKind kind = MemoryKind::Host, Access access = {});
  // Device memory OrbiTE owns or adopted: the registration shares the allocation's owner.
  Result<MemoryRegion> register_memory(const cuda::CudaMemory& memory, Access access = {});
  // Pinned host memory from cuda::allocate_pinned_host: host memory whose producer readiness
  // every access consumes first.
  Result<MemoryRegion> register_memory(const cuda::HostMemory& memory, Access access = {});
  // All or nothing: on any error no range stays registered.
  Result<std::vector<MemoryRegion>> register_memory(std::span<const RegistrationRequest> requests);

  // Writes [local + local_offset, +length) to [remote + remote_offset, +length).
  Result<Request> put(const MemoryRegion& local, std::uint64_t local_offset,
                      const RemoteRegion& remote, std::uint64_t remote_offset, std::uint64_t length,
                      const TransferOptions& options = {});
  // Reads [remote + remote_offset, +length) into [local + local_offset, +length).
  Result<Request> get(const MemoryRegion& local, std::uint64_t local_offset,
                      const RemoteRegion& remote, std::uint64_t remote_offset, std::uint64_t length,
                      const TransferOptions& options = {});
  // Many ranges, one Request; every range is validated before any is issued.
  Result<Request> put(const MemoryRegion& local, const RemoteRegion& remote,
                      std::span<const TransferRange> ranges, const TransferOptions& options = {});
  Result<Request> get(const MemoryRegion& local, const RemoteRegion& remote,
                      std::span<const TransferRange> ranges, const TransferOptions& options = {});

  // Sends `message` (at most kMaxNotificationBytes) to the engine that owns `remote`, ordered
  // after this engine's put/get requests to it that completed before (a notification with no
  // bytes: NIXL's send_notif). Completes once that engine holds it. options.notification must
  // be unset.
  Result<Request> notify(const RemoteRegion& remote, std::string message,
                         const TransferOptions& options = {});
  // The notifications peers delivered to this engine, oldest first (per sender in the order
  // their requests completed), taken: each is returned once. Waits up to `wait` for the first
  // when none is there; empty when none came (or the engine closed). An engine keeps at most
  // 65,536 untaken notifications or 64 MiB of them; a peer's request whose notification finds
  // it full fails with ResourceExhausted.
  std::vector<Notification> notifications(Duration wait = Duration::zero());

  // Fences admission, waits for accepted work, then retires connections and registrations.
  // What is still running when `timeout` passes depends on `on_timeout`:
  // - CloseTimeout::Cancel (the default): those requests fail with Errc::Cancelled, the
  //   connections close, and close() returns Errc::Unquiesced. No transfer of this engine
  //   touches registered memory afterwards (RDMA resources whose destroy failed are retained
  //   and reported as Unquiesced too).
  // - CloseTimeout::KeepWaiting: nothing is cancelled; admission stays fenced, the work keeps
  //   running, and close() returns Errc::Unquiesced. A later close() goes on from there.
  // A later close() may always be called again. Calls are serialized.
  Status close(Duration timeout = std::chrono::seconds(30),
               CloseTimeout on_timeout = CloseTimeout::Cancel);
  // Directional closes; neither closes connections, transports or registrations, and each may
  // be called again to keep waiting. After the timeout what runs keeps running (bounded by its
  // own request's deadline; close() cancels it) and the call returns Errc::Unquiesced naming
  // how many accesses are left.
  // close_source: peers' put/get on this engine's registered memory (RDMA grants included) are
  //   refused with Errc::Cancelled from now on, also on regions registered later; waits until
  //   the accesses already started have finished. The engine's own requests are unaffected.
  // close_requester: this engine's new put/get fail with Errc::Cancelled; waits until those
  //   already accepted have finished. Peers' accesses to this engine are unaffected.
  // Send/recv and the collectives are two-sided and are not affected by either.
  Status close_source(Duration timeout = std::chrono::seconds(30));
  Status close_requester(Duration timeout = std::chrono::seconds(30));

  [[nodiscard]] EngineStats stats() const;
  // The RDMA transport's counters and contexts (installed = false when it is not installed).
  [[nodiscard]] RdmaStats rdma_stats() const;
  // Per initialized RDMA NIC: both bandwidth estimates, the link rates and the byte counters of
  // the selection (empty when RDMA is not installed).
  [[nodiscard]] std::vector<NicLoad> nic_load_stats() const;
  // This engine's counters in the Prometheus text format (docs/metrics.md): what the process's
  // exporter serves for it, for a snapshot without HTTP (perf_tests' --metrics).
  [[nodiscard]] std::string metrics() const;
  // host:port of this process's metrics exporter (EngineConfig::metrics.listen, offset by the
  // local rank; the port port 0 took), "" when none runs. It serves every engine of the process.
  [[nodiscard]] std::string metrics_endpoint() const;
  // What this engine holds outstanding now, as text for a person (docs/hangs.md): each lane's
  // peer links, posted receives (with their age), unexpected messages, requests in flight with
  // the transport carrying them, the transports' own state (RDMA parents, grants, QPs), and each
  // communicator's collectives with their step. A lane busy for over half a second is reported
  // as such, so the call returns within about that per lane. SIGUSR1 and orbite-dump write the
  // same report for every engine of a process (EngineConfig::diagnostics).
  [[nodiscard]] std::string state_report() const;

 private:
  friend class Communicator;
  friend struct detail::EngineCore;
  explicit TransferEngine(std::shared_ptr<detail::EngineCore> core);
  std::shared_ptr<detail::EngineCore> core_;
};

}  // namespace orbite
