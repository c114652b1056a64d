// What the RDMA transport reports: TransferEngine::rdma_stats(). No verbs type appears here.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace orbite {

// The READ depths and limits of the last RC QP this engine connected (both transitions done).
struct RdmaQpLimits {
  bool valid = false;
  std::uint32_t hca_max_qp_rd_atom = 0;       // the HCA's initiator limit
  std::uint32_t hca_max_qp_init_rd_atom = 0;  // its responder limit
  std::uint32_t max_rd_atomic = 0;            // applied
  std::uint32_t max_dest_rd_atomic = 0;       // applied
  std::uint32_t max_inline_data = 0;          // what the provider returned
};

struct RdmaContextStats {
  int nic_id = -1;
  std::string name;
  std::uint32_t port = 0;
  std::string state;  // "active", "paused", or "inert: <why>"
  // Why a paused context's route is fenced (its port, its address, a fatal device event, or the
  // QPs of the old route it waits for); "" when active.
  std::string fence;
  std::uint32_t gid_index = 0;
  std::string gid;                     // the route's GID, hex groups
  std::uint64_t route_generation = 0;  // advances on every fence and publication
  std::uint32_t live_qps = 0;          // QPs on this device now, every lane's
  int numa_node = -1;                  // from sysfs; -1 when unknown
  std::uint64_t events_read = 0;       // device async events the monitor consumed
  std::uint64_t port_events = 0;       // of them, port events (each refreshed the context at once)
};

// Counters of this engine's RDMA transport (all zero when it is not installed).
// The MR cache of engine-owned memory: the collectives' scratch, registered at first use and kept
// across requests, and the lanes' slot slabs, all within rdma.max_cached_mrs (MR copies, one per
// context) and rdma.max_cached_mr_bytes.
struct RdmaMrCacheStats {
  std::uint64_t declared = 0;       // engine-owned ranges known now
  std::uint64_t registered = 0;     // of them, registered now
  std::uint64_t draining = 0;       // freed by their owner, still used by a transfer
  std::uint64_t mr_copies = 0;      // charged to max_cached_mrs
  std::uint64_t bytes = 0;          // charged to max_cached_mr_bytes (length x copies)
  std::uint64_t hits = 0;           // lookups served by a kept registration
  std::uint64_t registrations = 0;  // ranges registered at first use
  std::uint64_t evictions = 0;      // unreferenced registrations dropped to make room
  std::uint64_t refused = 0;        // lookups (and slabs) the budgets could not take
  // The lanes' receive and staging slot slabs (one MR copy each), included in mr_copies/bytes.
  std::uint64_t slabs = 0;
  std::uint64_t slab_bytes = 0;
  // Bounce buffers (rdma.bounce_limit): rendezvous messages copied through the pool's chunks
  // instead of registering the user's buffer, as the sender and as the receiver; messages under
  // the limit that registered their buffer because no chunk (or no budget for its slab) was
  // there; the pool's slabs made so far (bytes) and chunks lent now.
  std::uint64_t bounce_sends = 0;
  std::uint64_t bounce_receives = 0;
  std::uint64_t bounce_fallbacks = 0;
  std::uint64_t bounce_pool_bytes = 0;
  std::uint64_t bounce_lent = 0;
};

// One priority tier of the RDMA scheduler (requester side).
struct RdmaTierStats {
  std::uint64_t queued = 0;      // parents waiting now for admission or to post payload
  std::uint64_t posted = 0;      // parents whose payload started
  std::uint64_t promoted = 0;    // entries promoted into this tier (priority_promotion_timeout)
  std::uint64_t dropped = 0;     // dropped before dispatch: deadline passed or DeadlineMlu, Timeout
  std::uint64_t slot_waits = 0;  // passes a payload waited for its shared priority slot
};

struct RdmaStats {
  bool installed = false;
  std::string library;  // the verbs library the loader picked
  std::string why_not;  // why it is not installed ("" when it is)
  std::vector<RdmaContextStats> contexts;
  // Requester side.
  std::uint64_t parents = 0;  // put/get units that got (or asked for) a grant
  std::uint64_t parents_failed = 0;
  std::uint64_t payload_send_cqes = 0;  // physical payload CQEs polled (signaled and flushed)
  std::uint64_t completed_reads = 0;    // READ WRs proven successful
  std::uint64_t completed_writes = 0;   // WRITE WRs proven successful
  std::uint64_t receipts_sent = 0;      // SEND_WITH_INV receipts completed
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t reconnects = 0;      // pre-authority cache misses that rebuilt a connection
  std::uint64_t stale_cqes = 0;      // completions of an older QP generation, ignored
  std::uint64_t duplicate_cqes = 0;  // completions of a WR already resolved, ignored
  // Status-1 receipts completed: segments given back unwritten because the request's deadline
  // passed after its payload had started.
  std::uint64_t receipts_released = 0;
  // Payload QPs retired at both ends after rdma.idle_qp_timeout without traffic.
  std::uint64_t qps_reaped = 0;
  // Source side.
  std::uint64_t grants = 0;         // grants published
  std::uint64_t grants_active = 0;  // published and not yet closed
  std::uint64_t grants_peak = 0;
  std::uint64_t grant_nacks = 0;  // requests refused before any authority existed
  // Requests that waited here (receipt slots, SQ room, or for a rendezvous the grant budgets,
  // its range, or the receive an announced message waits for) before being answered, each
  // counted once.
  std::uint64_t grant_requests_deferred = 0;
  std::uint64_t grants_expired = 0;  // revoked after rdma.grant_timeout without their receipts
  std::uint64_t range_conflicts = 0;
  std::uint64_t windows = 0;              // memory windows bound
  std::uint64_t windows_invalidated = 0;  // by a receipt's SEND_WITH_INV
  std::uint64_t windows_revoked = 0;      // deallocated without a receipt (failure, close)
  std::uint64_t receipts = 0;             // receipts accepted
  std::uint64_t receipt_mismatches = 0;   // receipts whose binding did not match: link failed
  std::uint64_t segments_released = 0;    // of the receipts, status 1: released without payload
  std::uint64_t window_keys_used = 0;
  std::uint64_t window_indices = 0;
  std::uint64_t window_indices_parked = 0;
  // Both.
  std::uint64_t qps_created = 0;
  std::uint64_t qps_destroyed = 0;
  // Of them, retired QPs whose WRs had not all completed or flushed within rdma.destroy_timeout:
  // destroyed anyway (after the destroy no WR of theirs can run).
  std::uint64_t qps_destroyed_undrained = 0;
  std::uint64_t mr_registrations = 0;  // MRs registered (eager copies on every context)
  std::uint64_t mr_deregistrations = 0;
  // GPU MRs registered (rdma.cuda_memory = direct), by route: from a dma-buf of the
  // allocation, or of the device address through a peermem module. One per context.
  std::uint64_t dmabuf_registrations = 0;
  std::uint64_t peermem_registrations = 0;
  // Grants of device memory built on the private grant path (a PD, exact MR and QP of their
  // own), and those whose objects were all destroyed again (QP, MRs, PD, before the GrantAck or
  // the refusal); a difference beyond the grants open now was retained (see retained).
  std::uint64_t private_grants = 0;
  std::uint64_t private_teardowns = 0;
  // The monitor (docs/reliability.md, "Monitor recovery"): its scans, the route queries they and
  // the device events made, routes fenced (port down, address changed or gone, fatal event) and
  // routes published again (an active port, a valid address, every QP of the old route drained).
  std::uint64_t monitor_ticks = 0;
  std::uint64_t route_queries = 0;
  std::uint64_t route_fences = 0;
  std::uint64_t route_recoveries = 0;
  // Payload QPs retired at both ends because their route was fenced (here or at the peer).
  std::uint64_t route_qps_retired = 0;
  // ibv_poll_cq calls that failed (a negative return). The CQ is polled again on the next pass
  // and what it holds is not lost; a run of them is logged once a second.
  std::uint64_t cq_poll_failures = 0;
  // CQ sets replaced because their polls kept failing for a second (the lane's progress
  // recovered on a new set, on the same PD and MRs), and the QPs destroyed with them.
  std::uint64_t progress_recoveries = 0;
  std::uint64_t qps_lost = 0;
  std::uint64_t budget_exhausted = 0;  // ResourceExhausted answers, any budget
  // NIC tables sent to peers after a context paused or resumed, and received from them.
  std::uint64_t nic_tables_sent = 0;
  std::uint64_t nic_tables_received = 0;
  // Message QPs moved off a paused or fenced rail once no frame was in flight (retired at both
  // ends; the next frame builds one on an active rail).
  std::uint64_t message_qp_moves = 0;
  // Rail health, the circuit breaker per (peer connection, local NIC, remote NIC): payload errors
  // counted (lifetime), pairs whose breaker is open now (paused: no slice but a half-open trial),
  // trials admitted, trials whose receipt reopened their pair, pauses (by the threshold or a
  // failed trial), pairs tracked now (of rdma.max_rail_pairs), and errors of pairs the full table
  // could not track (ResourceExhausted).
  std::uint64_t rail_errors = 0;
  std::uint64_t rail_open_pairs = 0;
  std::uint64_t rail_probes = 0;
  std::uint64_t rail_recoveries = 0;
  std::uint64_t rail_pauses = 0;
  std::uint64_t rail_pairs = 0;
  std::uint64_t rail_pairs_refused = 0;
  // Budgets in use now (creating, closing and retained resources included).
  std::uint64_t endpoints_in_use = 0;  // of rdma.max_endpoints
  std::uint64_t grants_in_use = 0;     // of rdma.max_grants
  // rdma.max_direct_bytes bounds each role on its own: the requester's loans and the ranges this
  // engine granted as the source (one pool for both let two ranks' crossed messages deadlock).
  std::uint64_t direct_bytes_in_use = 0;   // requester loans, of rdma.max_direct_bytes
  std::uint64_t granted_bytes_in_use = 0;  // granted ranges, of rdma.max_direct_bytes
  std::uint64_t retained = 0;              // native objects whose destroy failed, kept for good
  // Registered slots of receipts in flight (used where the QP cannot send 141 bytes inline).
  std::uint64_t receipt_slots_in_use = 0;
  RdmaQpLimits last_connected_qp;
  RdmaMrCacheStats mr_cache;
  // The scheduler, per tier (index: Priority, High first), over this engine's lanes.
  std::array<RdmaTierStats, 3> tiers{};
};

// One initialized NIC as the bandwidth-aware selection sees it (TransferEngine::nic_load_stats):
// rates in bytes per second, link rates in Gb/s. Observations of this process only; reading them
// queries no device.
struct NicLoad {
  int nic_id = -1;
  std::string name;
  bool healthy = true;
  double link_gbps = 0.0;              // the port's reported rate (0: unknown)
  double effective_gbps = 0.0;         // the seed: the reported rate, or default_bandwidth_gbps
  double selection_bytes_per_s = 0.0;  // the selection estimate (EWMA of completed slices)
  double transmit_bytes_per_s = 0.0;   // the transmit meter
  std::uint64_t charged_bytes = 0;     // charged by parents, not yet completed or abandoned
  std::uint64_t posted_bytes = 0;      // posted payload not yet completed
  std::uint64_t completed_bytes = 0;   // payload completed successfully, lifetime
  std::uint64_t allocated_bytes = 0;   // bytes the selection gave it, lifetime
  // Rail health of the pairs with this local NIC: payload errors (lifetime), half-open trials
  // admitted (lifetime), and pairs paused now (their circuit breaker open).
  std::uint64_t rail_errors = 0;
  std::uint64_t rail_probes = 0;
  std::uint64_t rail_open_pairs = 0;
  // Payload bytes posted to it, lifetime, by the scheduler tier the parent was in (Priority index).
  std::array<std::uint64_t, 3> posted_by_tier{};
  // Payload bytes posted to it and not yet completed, by tier: what rdma.post_queue_target bounds
  // for Medium and Low (the backlog a higher tier's work finds ahead of it).
  std::array<std::uint64_t, 3> outstanding_by_tier{};
};

}  // namespace orbite
