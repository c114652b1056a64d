// Typed engine configuration. Defaults are the OrbiTE guide's. An engine copies its configuration
// when it is created and never changes it afterwards.
//
// The JSON document mirrors these structures: top-level engine fields, then "rdma": {...},
// "tcp": {...}, "shm": {...}, "coll": {...}, "cuda": {...}, "bootstrap": {...}, "topology": {...}.
// docs/configuration.md lists every field with its JSON spelling, type, default and environment
// variable.
#pragma once

#include <orbite/export.h>
#include <orbite/status.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orbite {

using Duration = std::chrono::nanoseconds;

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;

// How the proxy's workers wait for work: spinning on the transports, or sleeping on
// epoll/eventfd and completion channels so that an idle engine costs no CPU.
enum class ProgressMode : std::uint8_t { Polling, EventDriven };

namespace rdma {

// Backing of host memory on RDMA: the application range itself, or private registered staging.
enum class RdmaHostMemory : std::uint8_t { Direct, Staged };
// Backing of NVIDIA device memory on RDMA: owned host staging (default) or a GPU MR.
enum class RdmaCudaMemory : std::uint8_t { Staged, Direct };
// How a GPU MR is registered when cuda_memory is Direct.
enum class GpuDirectRegistration : std::uint8_t { Auto, Dmabuf, Peermem };
// The guide's name for the progress mode.
using RdmaProgressMode = ProgressMode;
// Whether the engine installs its RDMA transport: auto when the verbs library loads and a device
// passes the capability checks, on (failure is an engine creation error), off (the library is
// never loaded).
enum class RdmaEnable : std::uint8_t { Auto, On, Off };

// TENT's SchedulingParams for bandwidth-aware NIC selection.
struct SchedulingParams {
  // Score-based selection (TENT's DeviceSelector); false gives round-robin within the first tier.
  bool smart_selection = true;
  // Multipliers of the predicted service time for NIC tiers 0, 1 and 2 of a location.
  std::array<double, 3> tier_weights = {1.0, 5.0, 10.0};
  // Every Nth multi-slice parent probes eligible NICs round-robin.
  std::uint32_t multipath_probe_period = 100;
};

struct ORBITE_API RdmaConfig {
  RdmaEnable enable = RdmaEnable::Auto;
  // What dlopen is given for the verbs library (also ORBITE_IBVERBS_LIBRARY). The first load in
  // a process wins: a later engine naming another path fails with a Configuration error.
  std::string ibverbs_library = "libibverbs.so.1";
  // Device, port and GID pins. Unset lets discovery choose; a pin never falls back.
  std::optional<std::string> device;
  std::optional<std::uint32_t> port;
  std::optional<std::uint32_t> gid_index;
  // Filters applied before a device is opened; a nonempty whitelist wins over the blacklist.
  std::vector<std::string> rdma_whitelist;
  std::vector<std::string> rdma_blacklist;
  // Restricts dispatch to these stable NIC IDs (bit i = NIC i, up to 64). Unset: no restriction.
  std::optional<std::uint64_t> device_mask;
  // CPU NUMA hint overriding the owner's location.
  std::optional<std::uint32_t> preferred_numa_node;
  // Reject NICs known to be on another NUMA node than the memory; unknown locality stays eligible.
  bool strict_local_numa = false;
  // Inline TENT priority matrix (JSON text); wins over custom_json_path. At most 1 MiB.
  std::optional<std::string> priority_matrix;
  // TENT matrix or native {"nics","mems"} file, read at initialization. At most 1 MiB.
  std::optional<std::string> custom_json_path;
  SchedulingParams scheduling;

  RdmaHostMemory host_memory = RdmaHostMemory::Direct;
  RdmaCudaMemory cuda_memory = RdmaCudaMemory::Staged;
  GpuDirectRegistration gpu_direct_registration = GpuDirectRegistration::Auto;
  // Never use GPU Direct RDMA. Combined with cuda_memory = Direct it is a configuration error.
  bool disable_gpu_direct_rdma = false;
  // Log each selected NIC pair and slice length at debug level (never keys or addresses).
  bool log_slice_affinity = false;
  // Let a GPU source reuse a connected QP and its local-only GPU MR (opt-in).
  bool gpu_source_reuse = false;

  // Order work sharing a NIC and priority by the DeadlineMlu formula.
  bool deadline_bw_arbitration = false;
  // DeadlineMlu admission: a request with a deadline whose predicted utilization (the requester's
  // admitted, unfinished bytes plus its own, over the healthy NICs' transmit estimates, per second
  // of deadline left) reaches this is dropped before dispatch (Timeout, nothing moved). 0: only
  // requests whose deadline already passed are dropped. TENT's guidance: 1.2 to 1.5.
  double deadline_admission_mlu = 0.0;
  // Medium and Low payload posted to a NIC and not yet completed, counted with the work of the
  // tiers above it, is kept to about this much of the NIC's transmit estimate (at least 256 KiB,
  // at least one WR): what is not posted stays in the scheduler, where higher-tier work can still
  // overtake it (posted DMA is never preempted). High has no tier above it and is bounded by its
  // QPs' depth only. 0: only the QPs' depth bounds every tier.
  Duration post_queue_target = std::chrono::microseconds(500);
  // Age after which ready lower-priority payloads are promoted one tier.
  Duration priority_promotion_timeout = std::chrono::milliseconds(10);
  // Promote only entries that individually aged out (false: an aged head promotes its tier).
  bool priority_promotion_per_entry = false;
  // POSIX shared-memory name shared by cooperating processes' priority slots; unset: local only.
  std::optional<std::string> shared_quota_shm_path;
  // Length of one shared priority slot.
  Duration slot_rotation_interval = std::chrono::milliseconds(2);

  // Largest send/recv message carried eagerly in one frame (a SEND into a receive the peer keeps
  // posted); larger ones use the rendezvous. Each peer's message QP keeps 32 receives of this
  // size plus a 48-byte header per lane and context, charged to max_cached_mr_bytes (8 KiB: 126
  // peers' receives take 33 MB of the default 64 MiB). Two peers use the smaller of their limits.
  std::uint64_t eager_limit = 8 * kKiB;
  // Bounce buffers: a rendezvous message of at most this many bytes is copied through a chunk of
  // an engine-owned pool, registered once and kept (the MR cache), on both sides: the sender
  // copies its buffer into a chunk and WRITEs from it, the receiver grants a chunk and copies it
  // into the posted buffer on the receipt. No user buffer is registered for such a message. Larger
  // messages (and any message when the pool or the MR budgets are spent) register the user's
  // buffers for the message alone. 0: never bounce. Rounded up to a multiple of 64.
  std::uint64_t bounce_limit = 256 * kKiB;
  // Bound on the bounce pool (per process, all peers and lanes), in chunks of bounce_limit made
  // eight at a time on first need; its slabs are registered through the MR cache and charged to
  // max_cached_mrs / max_cached_mr_bytes like any engine-owned memory.
  std::uint64_t bounce_pool_bytes = 8 * kMiB;

  // Budgets (admission limits, not throughput guarantees).
  std::uint32_t max_endpoints = 64;
  std::uint32_t max_grants = 64;
  std::uint32_t max_send_wr = 16;
  std::uint32_t max_cqes = 1024;
  std::uint64_t max_direct_bytes = 64 * kMiB;
  std::uint64_t max_staging_bytes = 64 * kMiB;
  std::uint32_t max_cached_mrs = 64;
  std::uint64_t max_cached_mr_bytes = 64 * kMiB;
  std::uint32_t max_window_key_indices = 65536;

  // Requested READ depths per RC QP, clamped to what the HCA reports (zero stays zero).
  std::uint32_t max_rd_atomic = 16;
  std::uint32_t max_dest_rd_atomic = 16;
  // Signal every Nth payload WR (and the post tail), capped at half the SQ depth.
  std::uint32_t signal_interval = 1;

  // Rail health: errors inside the window pause a NIC pair for the cooldown.
  std::uint32_t rail_error_threshold = 3;
  Duration rail_error_window = std::chrono::seconds(10);
  Duration rail_cooldown = std::chrono::seconds(30);
  Duration rail_probe_interval = std::chrono::seconds(1);
  std::uint32_t max_rail_pairs = 4096;

  // Base slice block for multirail slicing.
  std::uint64_t block_size = 64 * kKiB;
  // Rate assumed for a port whose reported rate is unknown or out of range.
  double default_bandwidth_gbps = 400.0;
  // Period of the monitor's context scans.
  Duration monitor_interval = std::chrono::seconds(1);
  // One destruction window for a parent's cleanup and a retired QP's flushes; expiry proves
  // nothing (the parent reports Unquiesced and keeps its loan; the QP is destroyed anyway).
  Duration destroy_timeout = std::chrono::seconds(30);
  // A grant whose receipts have not all arrived this long after it was reserved is revoked by
  // the source: windows invalidated, range, pin and budgets returned, the requester told.
  Duration grant_timeout = std::chrono::seconds(60);
  // A requester's payload QP that carried nothing this long is retired at both ends (QpRetire),
  // so that max_endpoints recovers; zero keeps idle QPs for good. Message QPs are kept.
  Duration idle_qp_timeout = std::chrono::seconds(60);

  // The guide's RdmaConfig::new(device): strictly pin that device, port 1 and GID index 0.
  static RdmaConfig pinned(std::string device_name);
};

}  // namespace rdma

struct TcpConfig {
  // Interfaces for control and data sockets in NCCL_SOCKET_IFNAME syntax ("eth", "^docker",
  // "=eth0"). Empty: loopback when the store is on loopback, else the first usable interface.
  std::string interface;
  // Parallel connections per peer for bandwidth.
  std::uint32_t streams_per_peer = 1;
  bool nodelay = true;
  bool keepalive = true;
  // Bound for establishing a connection to a peer.
  Duration connect_timeout = std::chrono::seconds(30);
  // Accepted control connections still to send their Hello, at once; beyond it the listener
  // rests and new connections wait in the kernel's backlog.
  std::uint32_t max_pending_handshakes = 1024;
  // Bound for declaring a silent peer dead (ConnectionLost).
  Duration peer_timeout = std::chrono::seconds(10);
  // Socket buffer sizes; 0 keeps the kernel's default (and its autotuning).
  std::uint64_t send_buffer_bytes = 0;
  std::uint64_t recv_buffer_bytes = 0;
  // Largest message sent eagerly; larger ones use rendezvous into the posted buffer.
  std::uint64_t eager_limit = 64 * kKiB;
};

struct ShmConfig {
  // Use shared memory for peers on the same host.
  bool enable = true;
  // Single-copy transfers with process_vm_readv/writev when the kernel allows it.
  bool single_copy = true;
  // Largest message sent eagerly through the ring (and put/get moved as Data chunks through it):
  // two copies of up to 64 KiB beat the single copy's Rts, process_vm_readv and Fin on a
  // 2-core VM (32 KiB: 3.5 against 7.5 us; docs/performance.md, sixteenth session).
  std::uint64_t eager_limit = 64 * kKiB;
  // Capacity of each direction's ring per peer (a power of two).
  std::uint64_t ring_bytes = 1 * kMiB;
};

struct BootstrapConfig {
  // Store address host:port. Empty: ORBITE_STORE, else MASTER_ADDR:MASTER_PORT.
  std::string store;
  // This process (rank 0) starts the store server at the store address. torchrun-style
  // MASTER_ADDR/MASTER_PORT bootstraps imply it.
  bool host_store = false;
  // Interface for a store this process hosts (MPI bootstrap), in NCCL_SOCKET_IFNAME syntax.
  std::string interface;
  // Bound on every bootstrap wait (peer exchange, barriers).
  Duration timeout = std::chrono::seconds(300);
  // Bound for reaching the store server (retried with backoff until then).
  Duration connect_timeout = std::chrono::seconds(60);
  // Largest key+value frame the store accepts.
  std::uint64_t max_value_bytes = 64 * kMiB;
  // How long a process hosting the store waits for the other ranks to disconnect before exit.
  Duration shutdown_timeout = std::chrono::seconds(10);
};

struct TopologyConfig {
  // hwloc XML file to load instead of the live machine (also ORBITE_TOPO_XML).
  std::string hwloc_xml;
  // NCCL topology XML (the NCCL_TOPO_FILE format cloud GPU images ship) that places GPUs, NICs
  // and NUMA nodes over what hwloc sees; the NIC tiers are computed from it the same way (also
  // ORBITE_TOPO_NCCL_XML, then NCCL_TOPO_FILE).
  std::string nccl_xml;
};

// The state report (docs/hangs.md): what each engine holds outstanding, written on SIGUSR1 or
// orbite-dump, and returned by TransferEngine::state_report().
struct DiagnosticsConfig {
  // Install a SIGUSR1 handler that writes the report (only where the signal's action is still
  // the default, which would end the process; an application's own handler is left alone).
  bool dump_on_signal = true;
  // Where the report goes: <dump_dir>/orbite-dump.<pid>.txt; "" is /tmp, "-" is stderr (also
  // ORBITE_DUMP_DIR).
  std::string dump_dir;
};

// The metrics exporter (docs/metrics.md): one HTTP endpoint per process serving every engine's
// counters in the Prometheus text format at /metrics.
struct MetricsConfig {
  // host:port to listen on; "" (the default) starts no exporter. The port is offset by the
  // process's local rank (ORBITE_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, ...) so that the ranks
  // of one host do not collide; port 0 takes a free port (TransferEngine::metrics_endpoint()
  // says which). Also ORBITE_METRICS_LISTEN.
  std::string listen;
};

// Which transport carries a request. Unspec picks shm for a peer on the same host, RDMA for a
// peer on another host when both sides have a compatible rail (and, for put/get, the region is
// published on RDMA), tcp otherwise. A forced transport that cannot reach the peer is
// Errc::Unavailable.
enum class Transport : std::uint8_t { Unspec, Tcp, Shm, Rdma, Nvlink };

struct CollConfig {
  // Algorithm override (also ORBITE_ALGO): "" or "auto" for the size rule, an algorithm name
  // for every collective that has it, or "all_reduce=ring,broadcast=binomial".
  std::string algo;
  // Pipelining unit of the ring and chain algorithms.
  std::uint64_t chunk_bytes = 1 * kMiB;
  // Receive buffers of that size in flight per pipelined stream.
  std::uint32_t pipeline_depth = 4;
  // The transport of every collective's messages (also ORBITE_COLL_TRANSPORT).
  Transport transport = Transport::Unspec;
  // Each rank's two slots in the shared segment of a single-host communicator (the shm
  // algorithms' largest chunk step; a multiple of 64 from 4096, or 0 for no segment). The
  // segment takes about 2 x this per rank of /dev/shm (Open MPI's vader takes 4 MiB per process).
  std::uint64_t shm_slot_bytes = 2 * kMiB;
};

// Device memory (and RdmaHostMemory::Staged host memory) moves through the engine's staging pool
// (pinned host chunks bounded by rdma.max_staging_bytes): each transfer is cut into chunks, and
// several are in flight, so that the device copies of one overlap the wire of another.
struct CudaConfig {
  std::uint64_t staging_chunk_bytes = 512 * kKiB;
  // Chunks in flight per transfer.
  std::uint32_t staging_depth = 8;
};

struct ORBITE_API EngineConfig {
  // Data worker threads of the per-process proxy.
  std::uint32_t num_lanes = 1;
  ProgressMode progress_mode = ProgressMode::Polling;
  // Unexpected eager bytes a sender may have outstanding at each receiver (credit window). Also
  // how far an eager sender may run ahead of its receiver: four 64 KiB messages, not 64
  // (docs/performance.md, "The broadcast's tail").
  std::uint64_t eager_credit_bytes = 256 * kKiB;
  // Batched puts and gets join ranges that continue each other on both sides (TENT's
  // merge_requests): one range, and one RDMA grant, for a run of adjacent blocks.
  bool merge_requests = true;

  rdma::RdmaConfig rdma;
  TcpConfig tcp;
  ShmConfig shm;
  CollConfig coll;
  CudaConfig cuda;
  BootstrapConfig bootstrap;
  TopologyConfig topology;
  DiagnosticsConfig diagnostics;
  MetricsConfig metrics;

  // Parses a JSON document over the defaults. Strict: wrong types, unknown keys and invalid
  // values are Configuration errors naming the JSON path. Environment variables are not read.
  static Result<EngineConfig> from_json(std::string_view json_text);
  static Result<EngineConfig> from_file(const std::string& path);
  // Defaults, then the file named by ORBITE_CONFIG (if set), then ORBITE_<FIELD> overrides.
  static Result<EngineConfig> load();

  // Range and cross-field checks (also run by the loaders).
  [[nodiscard]] Status validate() const;
  // The effective configuration as a JSON document that from_json accepts.
  [[nodiscard]] std::string to_json(int indent = 2) const;
};

// Markdown reference of every field (JSON path, type, default, environment variable, meaning).
ORBITE_API std::string configuration_reference_markdown();

}  // namespace orbite
