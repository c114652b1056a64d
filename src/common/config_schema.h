// The configuration schema: every field of EngineConfig declared once, with its JSON name,
// constraints and documentation. JSON parsing, JSON output, environment overrides, validation
// and docs/configuration.md are all visitors over this one declaration, so they cannot drift.
#pragma once

#include <orbite/config.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace orbite::config_schema {

// Constraints, one kind per representation.
struct UInt {
  std::uint64_t min;
  std::uint64_t max;
};
struct Real {
  double min;  // exclusive when min_exclusive
  double max;
  bool min_exclusive = false;
};
struct Dur {
  Duration min;
  Duration max;
};
struct Bytes {
  std::uint64_t min;
  std::uint64_t max;
};
struct Text {
  size_t max_len;
  bool allow_empty = true;
};
struct HostPortText {};  // "" or host:port
struct ShmName {};       // "" or a POSIX shared-memory name: optional leading '/', no other '/'
struct NicMask {};       // JSON array of NIC IDs 0..63 -> bitmask
struct JsonText {
  size_t max_bytes;
};                   // an inline JSON object (or a string holding one)
struct Weights3 {};  // three positive finite numbers

template <class E>
struct Enum {
  std::span<const std::pair<E, std::string_view>> names;
};

inline constexpr std::pair<ProgressMode, std::string_view> kProgressModes[] = {
    {ProgressMode::Polling, "polling"}, {ProgressMode::EventDriven, "event_driven"}};
inline constexpr std::pair<rdma::RdmaEnable, std::string_view> kRdmaEnable[] = {
    {rdma::RdmaEnable::Auto, "auto"}, {rdma::RdmaEnable::On, "on"}, {rdma::RdmaEnable::Off, "off"}};
inline constexpr std::pair<rdma::RdmaHostMemory, std::string_view> kHostMemory[] = {
    {rdma::RdmaHostMemory::Direct, "direct"}, {rdma::RdmaHostMemory::Staged, "staged"}};
inline constexpr std::pair<rdma::RdmaCudaMemory, std::string_view> kCudaMemory[] = {
    {rdma::RdmaCudaMemory::Staged, "staged"}, {rdma::RdmaCudaMemory::Direct, "direct"}};
inline constexpr std::pair<rdma::GpuDirectRegistration, std::string_view> kGdrRoutes[] = {
    {rdma::GpuDirectRegistration::Auto, "auto"},
    {rdma::GpuDirectRegistration::Dmabuf, "dmabuf"},
    {rdma::GpuDirectRegistration::Peermem, "peermem"}};

inline constexpr std::pair<Transport, std::string_view> kCollTransports[] = {
    {Transport::Unspec, "unspec"},
    {Transport::Tcp, "tcp"},
    {Transport::Shm, "shm"},
    {Transport::Rdma, "rdma"}};

inline constexpr std::uint64_t kU32Max = 0xffffffffULL;
inline constexpr Duration kForever = std::chrono::hours(24 * 365);
inline constexpr size_t kNameMax = 256;
inline constexpr size_t kPathMax = 4096;
inline constexpr size_t kMatrixMax = 1 << 20;  // the guide's 1 MiB limit

// V must provide: field(name, value&, constraint, doc) and section(name, fn).
// C is EngineConfig or const EngineConfig.
template <class V, class C>
void visit_scheduling(V& v, C& s) {
  v.field("smart_selection", s.smart_selection, std::monostate{},
          "Bandwidth-aware selection (TENT's DeviceSelector); false gives round-robin within the "
          "first tier.");
  v.field("tier_weights", s.tier_weights, Weights3{},
          "Multipliers of a NIC's predicted service time for tiers 0, 1 and 2 of a location.");
  v.field("multipath_probe_period", s.multipath_probe_period, UInt{1, kU32Max},
          "Every Nth multi-slice parent probes eligible NICs round-robin (never failed rails).");
}

template <class V, class C>
void visit_rdma(V& v, C& r) {
  v.field("enable", r.enable, Enum<rdma::RdmaEnable>{kRdmaEnable},
          "Install the RDMA transport: auto when the verbs library loads and a device passes the "
          "capability checks, on (failure fails engine creation), off (never load the library).");
  v.field("ibverbs_library", r.ibverbs_library, Text{kPathMax, false},
          "What dlopen is given for the verbs library (alias ORBITE_IBVERBS_LIBRARY); the first "
          "load in a process wins.");
  v.field(
      "device", r.device, Text{kNameMax, false},
      "Pin this RDMA device (e.g. mlx5_0); null lets discovery choose. A pin never falls back.");
  v.field("port", r.port, UInt{1, 255}, "Pin this port of the device; null lets discovery choose.");
  v.field("gid_index", r.gid_index, UInt{0, 255},
          "Pin this GID index; null ranks valid GIDs automatically (and re-ranks on recovery).");
  v.field(
      "rdma_whitelist", r.rdma_whitelist, Text{kNameMax, false},
      "Only these devices are opened; a nonempty whitelist wins over the blacklist. An entry is "
      "a device name, \"prefix*\", either with \":PORT\" (ORBITE_RDMA_HCA, in NCCL_IB_HCA "
      "syntax, replaces both lists).");
  v.field("rdma_blacklist", r.rdma_blacklist, Text{kNameMax, false},
          "These devices are never opened (same entry syntax as rdma_whitelist).");
  v.field("device_mask", r.device_mask, NicMask{},
          "Restrict dispatch to these stable NIC IDs (array of 0..63); null allows every NIC.");
  v.field("preferred_numa_node", r.preferred_numa_node, UInt{0, 4095},
          "CPU NUMA hint overriding the memory owner's location.");
  v.field("strict_local_numa", r.strict_local_numa, std::monostate{},
          "Reject NICs known to sit on another NUMA node; unknown locality stays eligible.");
  v.field("priority_matrix", r.priority_matrix, JsonText{kMatrixMax},
          "Inline TENT priority matrix (a JSON object, or a string holding one; at most 1 MiB). "
          "Wins over custom_json_path.");
  v.field("custom_json_path", r.custom_json_path, Text{kPathMax, false},
          "TENT matrix or native {\"nics\",\"mems\"} topology file read at initialization "
          "(at most 1 MiB).");
  v.section("scheduling", [&](V& sub) { visit_scheduling(sub, r.scheduling); });
  v.field("host_memory", r.host_memory, Enum<rdma::RdmaHostMemory>{kHostMemory},
          "Host memory on RDMA: the application range itself, or private registered staging.");
  v.field("cuda_memory", r.cuda_memory, Enum<rdma::RdmaCudaMemory>{kCudaMemory},
          "NVIDIA device memory on RDMA: owned host staging, or a GPU MR (GPUDirect RDMA).");
  v.field("gpu_direct_registration", r.gpu_direct_registration,
          Enum<rdma::GpuDirectRegistration>{kGdrRoutes},
          "GPU MR route when cuda_memory is direct: auto prefers dma-buf, else peermem.");
  v.field("disable_gpu_direct_rdma", r.disable_gpu_direct_rdma, std::monostate{},
          "Never use GPUDirect RDMA; with cuda_memory \"direct\" this is a configuration error.");
  v.field("log_slice_affinity", r.log_slice_affinity, std::monostate{},
          "Log each selected NIC pair and slice length at debug level (no keys or addresses).");
  v.field("gpu_source_reuse", r.gpu_source_reuse, std::monostate{},
          "Let a GPU source reuse a connected QP and its local-only GPU MR (opt-in). Needs "
          "hardware-revocable keys: true is refused when RDMA starts.");
  v.field("deadline_bw_arbitration", r.deadline_bw_arbitration, std::monostate{},
          "Order work sharing a NIC and priority by the DeadlineMlu formula.");
  v.field("deadline_admission_mlu", r.deadline_admission_mlu, Real{0.0, 1e6},
          "Drop a request with a deadline before dispatch when its predicted DeadlineMlu reaches "
          "this (0: only deadlines already passed drop).");
  v.field("post_queue_target", r.post_queue_target, Dur{Duration::zero(), std::chrono::seconds(1)},
          "Medium and Low payload posted to a NIC and not completed (with the work of the tiers "
          "above) is kept to about this much of its transmit estimate (at least 256 KiB), so "
          "higher-tier work finds a short queue (0: QP depth only; High is never held by it).");
  v.field("priority_promotion_timeout", r.priority_promotion_timeout,
          Dur{Duration::zero(), kForever},
          "Age after which ready lower-priority payloads are promoted one tier.");
  v.field("priority_promotion_per_entry", r.priority_promotion_per_entry, std::monostate{},
          "Promote only entries that individually aged out (false: an aged head promotes its "
          "whole tier, as in TENT).");
  v.field("shared_quota_shm_path", r.shared_quota_shm_path, ShmName{},
          "POSIX shared-memory name for priority slots shared by cooperating processes; null or "
          "empty keeps scheduling local. A foreign or damaged object is refused when RDMA starts.");
  v.field("slot_rotation_interval", r.slot_rotation_interval,
          Dur{std::chrono::milliseconds(1), std::chrono::seconds(10)},
          "Length of one shared priority slot (High, High+Medium, all); only with "
          "shared_quota_shm_path.");
  v.field("eager_limit", r.eager_limit, Bytes{4 * kKiB, 256 * kKiB},
          "Largest send/recv message carried eagerly in one RDMA frame; larger ones use the "
          "rendezvous. Each peer's message QP keeps 32 receives of this size per lane and context, "
          "charged to max_cached_mr_bytes; two peers use the smaller of their limits.");
  v.field("bounce_limit", r.bounce_limit, Bytes{0, 64 * kMiB},
          "Largest rendezvous message copied through the bounce pool's registered chunks on both "
          "sides instead of registering the user's buffers for it; 0 never bounces.");
  v.field("bounce_pool_bytes", r.bounce_pool_bytes, Bytes{0, 1ULL << 40},
          "Bound on the bounce pool (chunks of bounce_limit, per process); a message finding no "
          "chunk free registers its buffer instead.");
  v.field("max_endpoints", r.max_endpoints, UInt{1, kU32Max},
          "Physical QPs, including retained connections.");
  v.field("max_grants", r.max_grants, UInt{1, kU32Max}, "Whole-parent grant reservations.");
  v.field("max_send_wr", r.max_send_wr, UInt{1, 65536}, "Unresolved send WRs per QP.");
  v.field("max_cqes", r.max_cqes, UInt{1, 4194304}, "Capacity of each CQ.");
  v.field("max_direct_bytes", r.max_direct_bytes, Bytes{1, 1ULL << 50},
          "Active direct loans; bounds the requester's loans and the ranges granted as the "
          "source, each on its own.");
  v.field("max_staging_bytes", r.max_staging_bytes, Bytes{1, 1ULL << 50},
          "Bound on the engine's staging pool, all slabs together: the pinned chunks through "
          "which device memory (and rdma.host_memory = \"staged\" host memory) moves.");
  v.field("max_cached_mrs", r.max_cached_mrs, UInt{1, kU32Max},
          "Full-view MR copies across contexts.");
  v.field("max_cached_mr_bytes", r.max_cached_mr_bytes, Bytes{1, 1ULL << 50},
          "Bytes covered by cached full-view MRs.");
  v.field("max_window_key_indices", r.max_window_key_indices, UInt{1, 1U << 24},
          "Memory-window key history per PD (24-bit MW index space).");
  v.field("max_rd_atomic", r.max_rd_atomic, UInt{0, 255},
          "Initiator READ depth per RC QP, clamped to the HCA's limit; zero stays zero.");
  v.field("max_dest_rd_atomic", r.max_dest_rd_atomic, UInt{0, 255},
          "Responder READ depth per RC QP, clamped to the HCA's limit; zero stays zero.");
  v.field("signal_interval", r.signal_interval, UInt{1, 65536},
          "Signal every Nth payload WR and the post tail, capped at half the SQ depth.");
  v.field("rail_error_threshold", r.rail_error_threshold, UInt{1, kU32Max},
          "Errors inside rail_error_window that pause a NIC pair.");
  v.field("rail_error_window", r.rail_error_window, Dur{std::chrono::milliseconds(1), kForever},
          "Window in which rail errors are counted.");
  v.field("rail_cooldown", r.rail_cooldown, Dur{std::chrono::milliseconds(1), kForever},
          "Pause of a failed NIC pair; a failed half-open trial doubles it up to five minutes.");
  v.field("rail_probe_interval", r.rail_probe_interval, Dur{Duration::zero(), kForever},
          "Interval between exploratory probes of a paused pair; zero allows an immediate trial.");
  v.field("max_rail_pairs", r.max_rail_pairs, UInt{1, kU32Max},
          "Rail pair identities retained per process; a full table is ResourceExhausted.");
  v.field("block_size", r.block_size, Bytes{1, 1ULL << 30},
          "Base slice block for multirail slicing (TENT's 64 KiB).");
  v.field("default_bandwidth_gbps", r.default_bandwidth_gbps, Real{0.0, 1e6, true},
          "Rate assumed for a port whose reported rate is unknown or out of range.");
  v.field("monitor_interval", r.monitor_interval,
          Dur{std::chrono::milliseconds(10), std::chrono::hours(1)},
          "Period of the monitor's context and route scans.");
  v.field("destroy_timeout", r.destroy_timeout, Dur{std::chrono::milliseconds(1), kForever},
          "One destruction window for a parent's cleanup and a retired QP's flushes; expiry "
          "proves nothing (the parent reports Unquiesced and keeps its loan; the QP is destroyed "
          "anyway).");
  v.field("grant_timeout", r.grant_timeout, Dur{std::chrono::milliseconds(1), kForever},
          "A grant without all its receipts this long after its reservation is revoked by the "
          "source (windows invalidated, range and budgets freed, the requester told).");
  v.field("idle_qp_timeout", r.idle_qp_timeout, Dur{Duration::zero(), kForever},
          "A requester's QP that carried nothing this long is retired at both ends, so that "
          "max_endpoints recovers; zero keeps idle QPs for good.");
}

template <class V, class C>
void visit_tcp(V& v, C& t) {
  v.field("interface", t.interface, Text{kNameMax},
          "Interfaces for control and data sockets in NCCL_SOCKET_IFNAME syntax (\"eth\", "
          "\"^docker\", \"=eth0\"); empty: loopback for a store on loopback, else the first usable "
          "interface (alias ORBITE_SOCKET_IFNAME).");
  v.field("streams_per_peer", t.streams_per_peer, UInt{1, 64}, "Parallel connections per peer.");
  v.field("nodelay", t.nodelay, std::monostate{}, "Set TCP_NODELAY on data sockets.");
  v.field("keepalive", t.keepalive, std::monostate{}, "Enable TCP keepalive on data sockets.");
  v.field("connect_timeout", t.connect_timeout, Dur{std::chrono::milliseconds(1), kForever},
          "Bound for establishing a connection to a peer.");
  v.field("max_pending_handshakes", t.max_pending_handshakes, UInt{1, 65536},
          "Accepted control connections still to send their Hello, at once (each has "
          "tcp.connect_timeout to do so); beyond it the listener rests and new connections wait "
          "in the kernel's backlog.");
  v.field("peer_timeout", t.peer_timeout, Dur{std::chrono::milliseconds(1), kForever},
          "Bound for declaring a silent peer dead (ConnectionLost).");
  v.field("send_buffer_bytes", t.send_buffer_bytes, Bytes{0, 1ULL << 31},
          "SO_SNDBUF; 0 keeps the kernel default and its autotuning.");
  v.field("recv_buffer_bytes", t.recv_buffer_bytes, Bytes{0, 1ULL << 31},
          "SO_RCVBUF; 0 keeps the kernel default and its autotuning.");
  v.field("eager_limit", t.eager_limit, Bytes{0, 16 * kMiB},
          "Largest message sent eagerly over TCP; larger ones use rendezvous into the posted "
          "buffer.");
}

template <class V, class C>
void visit_shm(V& v, C& s) {
  v.field("enable", s.enable, std::monostate{}, "Use shared memory for peers on the same host.");
  v.field("single_copy", s.single_copy, std::monostate{},
          "Single-copy transfers with process_vm_readv/writev when the kernel allows it.");
  v.field("eager_limit", s.eager_limit, Bytes{0, 1 * kMiB},
          "Largest message sent eagerly through the shared-memory ring; larger ones use "
          "rendezvous (single copy, or chunks through the ring).");
  v.field("ring_bytes", s.ring_bytes, Bytes{64 * kKiB, 1 * kGiB},
          "Capacity of each direction's shared-memory ring per peer (a power of two).");
}

template <class V, class C>
void visit_bootstrap(V& v, C& b) {
  v.field("store", b.store, HostPortText{},
          "Store address host:port; empty: ORBITE_STORE, else MASTER_ADDR:MASTER_PORT.");
  v.field("host_store", b.host_store, std::monostate{},
          "Rank 0 starts the store server at the store address (implied by MASTER_ADDR).");
  v.field("interface", b.interface, Text{kNameMax},
          "Interface for a store this process hosts (MPI bootstrap), NCCL_SOCKET_IFNAME syntax.");
  v.field("timeout", b.timeout, Dur{std::chrono::milliseconds(1), kForever},
          "Bound on every bootstrap wait (peer exchange, barriers).");
  v.field("connect_timeout", b.connect_timeout, Dur{std::chrono::milliseconds(1), kForever},
          "Bound for reaching the store server, retried with backoff.");
  v.field("max_value_bytes", b.max_value_bytes, Bytes{1, 1ULL << 30},
          "Largest value the store accepts.");
  v.field("shutdown_timeout", b.shutdown_timeout, Dur{Duration::zero(), kForever},
          "How long a process hosting the store waits for the other ranks to disconnect.");
}

template <class V, class C>
void visit_topology(V& v, C& t) {
  v.field("hwloc_xml", t.hwloc_xml, Text{kPathMax},
          "hwloc XML topology to load instead of the live machine (alias ORBITE_TOPO_XML).");
  v.field("nccl_xml", t.nccl_xml, Text{kPathMax},
          "NCCL topology XML (NCCL_TOPO_FILE's format) placing GPUs, NICs and NUMA nodes over "
          "hwloc's view (aliases ORBITE_TOPO_NCCL_XML, then NCCL_TOPO_FILE).");
}

template <class V, class C>
void visit_coll(V& v, C& s) {
  v.field(
      "algo", s.algo, Text{kNameMax},
      "Collective algorithm override (also ORBITE_ALGO): \"\" or \"auto\" for the size rule of "
      "docs/collectives.md, an algorithm (shm, hierarchical, ring, recursive_doubling, binomial, "
      "chain, bruck, pairwise, linear, dissemination) for every collective that has it, or a list "
      "such as "
      "\"all_reduce=ring,broadcast=binomial\". Checked when a communicator is created.");
  v.field("chunk_bytes", s.chunk_bytes, Bytes{4 * kKiB, 1 * kGiB},
          "Pipelining unit of the ring and chain algorithms: a piece is reduced and forwarded "
          "while the next one arrives.");
  v.field("pipeline_depth", s.pipeline_depth, UInt{1, 64},
          "Receive buffers of chunk_bytes in flight per pipelined stream.");
  v.field("transport", s.transport, Enum<Transport>{kCollTransports},
          "Transport of every collective's messages: unspec (shm between ranks of one host, RDMA "
          "across hosts where both have a rail, else tcp), or "
          "tcp, shm or rdma forced (a peer the forced transport cannot reach fails the "
          "collective with Unavailable); anything but unspec or shm also turns off the shared "
          "segments of the collectives.");
  v.field("shm_slot_bytes", s.shm_slot_bytes, Bytes{0, 256 * kMiB},
          "Each rank's two slots in the shared segment of its host (a single-host communicator's, "
          "or each host's of one spanning hosts): the largest chunk step of the shm algorithms and "
          "of the hierarchical collectives' steps inside a host (steps are 256 KiB, or this if "
          "smaller; larger collectives take larger ones only where the host's ranks outnumber its "
          "CPUs). 0 (no segment: collectives run over messages) or a multiple of 64 from 4096; "
          "the segment takes about twice this per rank of /dev/shm, reserved when it is created "
          "(a /dev/shm too small for it leaves the collectives on messages).");
}

template <class V, class C>
void visit_cuda(V& v, C& s) {
  v.field("staging_chunk_bytes", s.staging_chunk_bytes, Bytes{4 * kKiB, 64 * kMiB},
          "Chunk of the staging pipeline: device memory (and rdma.host_memory = \"staged\" host "
          "memory) moves through pinned host buffers of this size, from the pool bounded by "
          "rdma.max_staging_bytes.");
  v.field("staging_depth", s.staging_depth, UInt{1, 256},
          "Chunks in flight per transfer, so that the device copies of one overlap the wire of "
          "another.");
}

template <class V, class C>
void visit_diagnostics(V& v, C& d) {
  v.field("dump_on_signal", d.dump_on_signal, std::monostate{},
          "SIGUSR1 (or orbite-dump) writes the state report: every engine's links, posted "
          "receives, unexpected messages, requests in flight with their age and transport, RDMA "
          "parents, grants and QPs, and each communicator's collective and step. The handler is "
          "installed only where SIGUSR1's action is the default (which ends the process).");
  v.field("dump_dir", d.dump_dir, Text{kPathMax},
          "Directory of the state report, orbite-dump.<pid>.txt (written whole, then renamed "
          "into place); empty: /tmp; \"-\": standard error (alias ORBITE_DUMP_DIR).");
}

template <class V, class C>
void visit_metrics(V& v, C& m) {
  v.field("listen", m.listen, HostPortText{},
          "host:port of the Prometheus exporter, one HTTP endpoint per process serving /metrics "
          "(docs/metrics.md); empty: none. The port is offset by the process's local rank; port 0 "
          "takes a free one.");
}

template <class V, class C>
void visit_engine(V& v, C& c) {
  v.field("num_lanes", c.num_lanes, UInt{1, 64}, "Data worker threads of the per-process proxy.");
  v.field("progress_mode", c.progress_mode, Enum<ProgressMode>{kProgressModes},
          "polling: an idle worker spins briefly, then sleeps in 1 ms steps; event_driven: it "
          "sleeps on epoll/eventfd until woken, so that an idle engine costs no CPU.");
  v.field("eager_credit_bytes", c.eager_credit_bytes, Bytes{64 * kKiB, 1 * kGiB},
          "Unexpected eager bytes a sender may have outstanding at each receiver; beyond it, "
          "messages wait for rendezvous, so a fast sender cannot exhaust a receiver's memory "
          "or run far ahead of its receives.");
  v.field("merge_requests", c.merge_requests, std::monostate{},
          "A batched put or get joins ranges that continue each other in both regions (after "
          "sorting them by remote offset), so adjacent blocks cost one range and one RDMA grant; "
          "false keeps one range per block.");
  v.section("rdma", [&](V& sub) { visit_rdma(sub, c.rdma); });
  v.section("tcp", [&](V& sub) { visit_tcp(sub, c.tcp); });
  v.section("shm", [&](V& sub) { visit_shm(sub, c.shm); });
  v.section("coll", [&](V& sub) { visit_coll(sub, c.coll); });
  v.section("cuda", [&](V& sub) { visit_cuda(sub, c.cuda); });
  v.section("bootstrap", [&](V& sub) { visit_bootstrap(sub, c.bootstrap); });
  v.section("topology", [&](V& sub) { visit_topology(sub, c.topology); });
  v.section("diagnostics", [&](V& sub) { visit_diagnostics(sub, c.diagnostics); });
  v.section("metrics", [&](V& sub) { visit_metrics(sub, c.metrics); });
}

// Environment variables that are aliases of configuration fields (alias, JSON path).
inline constexpr std::pair<std::string_view, std::string_view> kEnvAliases[] = {
    {"ORBITE_SOCKET_IFNAME", "tcp.interface"},          {"ORBITE_TOPO_XML", "topology.hwloc_xml"},
    {"ORBITE_TOPO_NCCL_XML", "topology.nccl_xml"},      {"NCCL_TOPO_FILE", "topology.nccl_xml"},
    {"ORBITE_DUMP_DIR", "diagnostics.dump_dir"},        {"ORBITE_ALGO", "coll.algo"},
    {"ORBITE_IBVERBS_LIBRARY", "rdma.ibverbs_library"},
};

// ORBITE_* variables read elsewhere (not configuration fields).
inline constexpr std::string_view kOtherEnv[] = {
    "ORBITE_CONFIG",     "ORBITE_STORE",      "ORBITE_STORE_TOKEN", "ORBITE_RANK",
    "ORBITE_WORLD_SIZE", "ORBITE_LOCAL_RANK", "ORBITE_LOCAL_SIZE",  "ORBITE_LOG_LEVEL",
    "ORBITE_LOG_SUBSYS", "ORBITE_HOSTID",     "ORBITE_RDMA_HCA",
};

}  // namespace orbite::config_schema
