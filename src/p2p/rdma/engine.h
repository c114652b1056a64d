// The RDMA transport's engine-wide part: the loaded library, the contexts, the budgets, the
// counters behind TransferEngine::rdma_stats(), and the memory domain that publishes every
// region on every usable context before it becomes visible (eager publication). Shared by the
// domain and every lane's RdmaLane; thread-safe (atomics, and the contexts' own mutexes).
#pragma once

#include <orbite/config.h>
#include <orbite/rdma.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "p2p/endpoint.h"
#include "p2p/rdma/context.h"
#include "p2p/rdma/gdr.h"
#include "p2p/rdma/rail_health.h"
#include "p2p/rdma/scheduler.h"
#include "p2p/rdma/shared_slots.h"
#include "p2p/rdma/wire.h"
#include "p2p/transport.h"
#include "topo/selector.h"

namespace orbite::cuda {
class Allocation;
}  // namespace orbite::cuda

namespace orbite::rdma {

class MrCache;

// A budget of the guide's table: admission limits charged while a resource exists (creating,
// closing and retained ones included).
class Budget {
 public:
  Budget(const char* name, std::uint64_t limit) : name_(name), limit_(limit) {}
  // Charges n, or returns ResourceExhausted naming the budget and changes nothing.
  Status take(std::uint64_t n, std::atomic<std::uint64_t>& exhausted_counter);
  // As take(), without counting an exhaustion (a queued requester retries every pass).
  bool try_take(std::uint64_t n);
  void give(std::uint64_t n) { used_.fetch_sub(n, std::memory_order_acq_rel); }
  [[nodiscard]] std::uint64_t used() const { return used_.load(std::memory_order_acquire); }
  [[nodiscard]] std::uint64_t limit() const { return limit_; }

 private:
  const char* name_;
  std::uint64_t limit_;
  std::atomic<std::uint64_t> used_{0};
};

// A charge of a Budget, given back when destroyed or reset. Move-only. keep() leaves it charged
// for good (the resource is retained: it may still exist).
class Charge {
 public:
  Charge() = default;
  // Adopts n already taken from `budget` (take or try_take).
  Charge(Budget& budget, std::uint64_t n) : budget_(&budget), n_(n) {}
  Charge(Charge&& other) noexcept
      : budget_(std::exchange(other.budget_, nullptr)), n_(std::exchange(other.n_, 0)) {}
  Charge& operator=(Charge&& other) noexcept {
    if (this != &other) {
      reset();
      budget_ = std::exchange(other.budget_, nullptr);
      n_ = std::exchange(other.n_, 0);
    }
    return *this;
  }
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;
  ~Charge() { reset(); }

  void reset() {
    if (budget_ != nullptr && n_ > 0) budget_->give(n_);
    budget_ = nullptr;
    n_ = 0;
  }
  void keep() {
    budget_ = nullptr;
    n_ = 0;
  }
  [[nodiscard]] std::uint64_t amount() const { return n_; }

 private:
  Budget* budget_ = nullptr;  // the engine's: outlives every charge
  std::uint64_t n_ = 0;
};

// Budget::take as an owner: the charge, or ResourceExhausted naming the budget.
inline Result<Charge> charge(Budget& budget, std::uint64_t n,
                             std::atomic<std::uint64_t>& exhausted_counter) {
  ORBITE_RETURN_IF_ERROR(budget.take(n, exhausted_counter));
  return Charge(budget, n);
}

// Counters of RdmaStats, written by lanes (relaxed atomics).
struct RdmaCounters {
  std::atomic<std::uint64_t> parents{0}, parents_failed{0}, payload_send_cqes{0},
      completed_reads{0}, completed_writes{0}, receipts_sent{0}, bytes_read{0}, bytes_written{0},
      reconnects{0}, stale_cqes{0}, duplicate_cqes{0}, grants{0}, grants_active{0}, grants_peak{0},
      grant_nacks{0}, range_conflicts{0}, windows{0}, windows_invalidated{0}, windows_revoked{0},
      receipts{0}, receipt_mismatches{0}, qps_created{0}, qps_destroyed{0}, mr_registrations{0},
      mr_deregistrations{0}, budget_exhausted{0}, retained{0}, nic_tables_sent{0},
      nic_tables_received{0}, message_qp_moves{0}, grant_requests_deferred{0}, grants_expired{0},
      receipts_released{0}, segments_released{0}, qps_reaped{0}, qps_destroyed_undrained{0},
      dmabuf_registrations{0}, peermem_registrations{0}, private_grants{0}, private_teardowns{0},
      monitor_ticks{0}, route_queries{0}, route_fences{0}, route_recoveries{0},
      route_qps_retired{0}, cq_poll_failures{0}, progress_recoveries{0}, qps_lost{0};
  // A gauge: receipts' registered slots taken and not yet given back (the WR not inline).
  std::atomic<std::uint64_t> receipt_slots_in_use{0};
  TierCounterSet tiers;  // the lanes' schedulers
  // Payload bytes posted per NIC and tier (nic_load_stats()).
  std::array<std::array<std::atomic<std::uint64_t>, kTiers>, kMaxNics> nic_tier_posted{};
  // Payload bytes posted per NIC and tier and not yet resolved (completed, flushed, or gone with
  // their QP): rdma.post_queue_target's room per tier.
  std::array<std::array<std::atomic<std::int64_t>, kTiers>, kMaxNics> nic_tier_outstanding{};
  void payload_posted(int nic, std::size_t tier, std::uint64_t bytes) {
    if (nic < 0 || static_cast<std::size_t>(nic) >= kMaxNics || tier >= kTiers) return;
    const auto i = static_cast<std::size_t>(nic);
    nic_tier_posted[i][tier].fetch_add(bytes, std::memory_order_relaxed);
    nic_tier_outstanding[i][tier].fetch_add(static_cast<std::int64_t>(bytes),
                                            std::memory_order_relaxed);
  }
  void payload_resolved(int nic, std::size_t tier, std::uint64_t bytes) {
    if (nic < 0 || static_cast<std::size_t>(nic) >= kMaxNics || tier >= kTiers) return;
    nic_tier_outstanding[static_cast<std::size_t>(nic)][tier].fetch_sub(
        static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  }
  std::mutex last_qp_mu;           // a leaf: taken alone, by a lane or by stats()
  RdmaQpLimits last_connected_qp;  // guarded by last_qp_mu
};

inline void add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
  c.fetch_add(n, std::memory_order_relaxed);
}

// Lifetime: shared by the domain and every RdmaLane of the engine; destroyed after all of them,
// so contexts outlive every QP, CQ, MR and window made on them.
class RdmaEngine {
 public:
  // Loads the library (rdma.ibverbs_library), opens the contexts and checks them. An error when
  // nothing usable exists; the caller decides whether that fails the engine (rdma.enable = on).
  static Result<std::shared_ptr<RdmaEngine>> install(const EngineConfig& config,
                                                     const detail::Identity& self);
  RdmaEngine(const EngineConfig& config, const IbvApi& api, Discovery contexts,
             const detail::Identity& self, std::unique_ptr<topo::DeviceSelector> selector);
  ~RdmaEngine();

  const EngineConfig& config() const { return config_; }
  const IbvApi& api() const { return api_; }
  const std::vector<std::unique_ptr<Context>>& contexts() const { return contexts_.contexts; }
  const EngineKey& engine_key() const { return key_; }
  std::uint64_t incarnation() const { return incarnation_; }
  RdmaCounters& counters() { return counters_; }
  Budget& endpoints() { return endpoints_; }
  Budget& grants() { return grants_; }
  // rdma.max_direct_bytes, once per role. The requester's loan waits for a peer's grant; a grant
  // waits only for a requester that already holds its loan. One pool for both made a cycle: two
  // ranks each lending their whole budget to a message for the other could grant neither.
  Budget& direct_bytes() { return direct_bytes_; }    // requester loans, admission to parent end
  Budget& granted_bytes() { return granted_bytes_; }  // source grants, Reserving to READY
  // The rails' bandwidth-aware selection (thread-safe): every parent's slices take its lease.
  topo::DeviceSelector& selector() { return *selector_; }
  // Payload WRs' bytes on NIC `nic`, for the scheduler tier that posted them: once when the HCA
  // accepted them, and once when each is resolved (completed, ok or not; flushed; or forgotten
  // with its QP destroyed undrained). Both ledgers that count them move together: the selector's
  // transmit meter (its estimates; a successful completion is a sample of the rail) and the
  // per-tier backlog that rdma.post_queue_target bounds. Thread-safe.
  void payload_posted(int nic, std::size_t tier, std::uint64_t bytes,
                      std::chrono::steady_clock::time_point now) {
    selector_->on_posted(nic, bytes, now);
    counters_.payload_posted(nic, tier, bytes);
  }
  void payload_resolved(int nic, std::size_t tier, std::uint64_t bytes, bool ok,
                        std::chrono::steady_clock::time_point now) {
    selector_->on_completed(nic, bytes, ok, now);
    counters_.payload_resolved(nic, tier, bytes);
  }
  // Per NIC: both estimates, rates, charged/posted/completed/allocated bytes. Allocates.
  std::vector<topo::NicLoadStats> nic_load_stats() const { return selector_->nic_load_stats(); }
  // Rail health: the circuit breaker per (peer epoch, local NIC, remote NIC) that the requesters'
  // slice planning consults and their rail errors and trials feed. Thread-safe (a leaf lock).
  RailHealth& rail_health() { return rail_health_; }
  const RailHealth& rail_health() const { return rail_health_; }
  // rdma.shared_quota_shm_path's slots, or null (scheduling local). Set once at install.
  const SharedSlots* shared_slots() const { return shared_slots_.get(); }
  void set_shared_slots(std::unique_ptr<SharedSlots> slots) { shared_slots_ = std::move(slots); }
  std::uint64_t next_grant_id() { return next_grant_id_.fetch_add(1) + 1; }
  std::uint64_t next_link_incarnation() { return next_link_.fetch_add(1) + 1; }
  // The NIC records this engine offers to every peer.
  std::vector<NicRecord> nic_records() const;
  RdmaStats stats() const;
  // A native object whose destroy failed: counted, kept for good, never destroyed again.
  void retain(const std::string& what);
  // The monitor's route query (docs/reliability.md, "Monitor recovery"): queries the port (a
  // failed query changes nothing; an active port's rate is re-read every time) and the route's
  // address. An Active context whose port left ACTIVE, whose GID (RoCE) or LID (InfiniBand)
  // changed or went away, or that had a fatal device event is fenced: Paused, unhealthy in the
  // selector, a new NicTable for the peers; PD, key history and MRs are kept. A Paused context
  // is published again only with an active port, a valid address (the pinned GID index re-read,
  // or the GIDs ranked again when gid_index is not pinned) and no QP left on it (live_qps, every
  // lane's); a fatal one never is. Returns whether the state changed. Thread-safe (the monitor
  // every scan and on device events).
  bool refresh_port(std::size_t context);
  // Advances on every pause or resume of a context: each lane sends its peers the new NIC table
  // once it sees a value it has not sent.
  [[nodiscard]] std::uint64_t nic_epoch() const {
    return nic_epoch_.load(std::memory_order_acquire);
  }
  // One monitor tick: every context's route queried (monitor_ticks, route_queries).
  void scan_ports();
  // The async event fds of the usable contexts that have a non-blocking one (the monitor polls
  // them). Fixed after install.
  std::vector<int> event_fds() const;
  // Reads every pending device event without blocking (at most 64 per context per call) and
  // acknowledges it. A port event (ERR, ACTIVE, LID/GID/SM change, reregister) or a fatal device
  // event refreshes its context at once; QP and CQ events are only counted and logged: the lanes
  // learn of those through their completions. Monitor thread only. Returns the events read.
  std::size_t drain_events();

 private:
  EngineConfig config_;
  const IbvApi& api_;
  Discovery contexts_;
  EngineKey key_{};
  std::uint64_t incarnation_ = 0;
  mutable RdmaCounters counters_;
  Budget endpoints_;
  Budget grants_;
  Budget direct_bytes_;
  Budget granted_bytes_;
  std::atomic<std::uint64_t> nic_epoch_{0};
  std::atomic<std::uint64_t> next_grant_id_{0};
  std::atomic<std::uint64_t> next_link_{0};
  // Its inventory is the contexts (NIC IDs as discovery numbered them), every NIC in the "*"
  // row unless a priority matrix says otherwise.
  std::unique_ptr<topo::DeviceSelector> selector_;
  std::unique_ptr<SharedSlots> shared_slots_;  // its publisher thread ends with the engine
  RailHealth rail_health_;
  // Serializes refresh_port (a query and its state change). Order: a lane's mutex (a rail error
  // in payload.cpp) or the monitor → health_mu_ → the selector's mu_ → a meter's mu.
  std::mutex health_mu_;
};

// The MRs of one region: per context slot, a local-only MR (LOCAL_WRITE) and, when the region
// grants remote access, a parent MR (LOCAL_WRITE | MW_BIND) that windows are bound over. Neither
// key leaves this process: remote authority exists only in windows.
class MrSet final : public p2p::DomainRegistration {
 public:
  struct Copy {
    ibv_mr* local = nullptr;
    ibv_mr* parent = nullptr;
  };
  explicit MrSet(std::shared_ptr<RdmaEngine> engine) : engine_(std::move(engine)) {}
  ~MrSet() override;
  // Registers on every usable context; on failure deregisters what it made (a copy that
  // refuses is retained) and returns the error.
  Status prepare(std::byte* base, std::uint64_t length, bool remote);
  // On context slot `only` alone (a registration for one grant or one send).
  Status prepare(std::byte* base, std::uint64_t length, bool remote, std::size_t only);
  // Device memory under rdma.cuda_memory = direct: one local-only GPU MR per usable context, by
  // `route` (the requester's slices borrow them; no window parent: a GPU range is never bound
  // to an ordinary memory window). A dma-buf export's fd is kept until every MR of it is
  // deregistered, then closed exactly once.
  Status prepare_gpu(const detail::RegionRecord& region, GdrRoute route);
  // The private grant path: an MR of exactly [at, at + length) of this GPU set's allocation in
  // a grant's own `pd` with `access`, by the set's route and from the set's own dma-buf (no
  // second export: the fd stays the set's, closed once after its last MR). Null with errno set.
  // The caller deregisters it before the set can go (the grant pins the region).
  ibv_mr* register_private(ibv_pd* pd, const std::byte* at, std::uint64_t length, int access) const;
  // Whether these are GPU MRs (prepare_gpu), and by which route.
  [[nodiscard]] bool gpu() const { return gpu_memory_ != nullptr; }
  [[nodiscard]] GdrRoute route() const { return route_; }
  // A view of `owner`'s MRs (a cached full-view set): it keeps the owner alive and deregisters
  // nothing itself.
  static std::unique_ptr<MrSet> view_of(std::shared_ptr<const detail::RegionRecord> owner);
  // Deregisters; false when one refused (it is retained, never retried). A view releases nothing.
  bool release();
  [[nodiscard]] const Copy* on(std::size_t slot) const {
    return slot < copies_.size() ? &copies_[slot] : nullptr;
  }
  [[nodiscard]] std::uint64_t nic_mask() const;
  // Where the registered bytes live (the NUMA node of the first page, read once the MRs have
  // pinned it); any() for an empty set or when the kernel cannot tell.
  [[nodiscard]] topo::Location location() const { return location_; }

 private:
  std::shared_ptr<RdmaEngine> engine_;
  std::vector<Copy> copies_;  // indexed like RdmaEngine::contexts()
  topo::Location location_;
  // The dma-buf the GPU MRs were registered from (-1: none, or closed). A failed
  // deregistration keeps it open with the MR (the set is then retained); a failed close is not
  // retried.
  int dmabuf_fd_ = -1;
  std::uint64_t export_base_ = 0;  // the dma-buf's first byte (its MRs' offsets count from it)
  GdrRoute route_ = GdrRoute::Dmabuf;
  // The device allocation behind GPU MRs: kept until they are all deregistered, so memory a
  // retained MR still reaches is never freed.
  std::shared_ptr<cuda::Allocation> gpu_memory_;
  bool refused_ = false;  // an ibv_dereg_mr failed: the set keeps what its MRs reach
  std::shared_ptr<const detail::RegionRecord> owner_;  // set in a view: whose MRs these are
};

class RdmaDomain final : public p2p::MemoryDomain {
 public:
  explicit RdmaDomain(std::shared_ptr<RdmaEngine> engine);
  [[nodiscard]] p2p::TransportId id() const override { return p2p::TransportId::Rdma; }
  // Host memory: Native (RdmaHostMemory::Direct) or Staged; CUDA memory: Staged
  // (RdmaCudaMemory::Staged) or Native (Direct: GPU MRs, register_gpu). Peers reach device
  // memory under Direct natively too, granted on the private grant path (a receiver's read of
  // an exposed device buffer knows it from the exposure word's device bit).
  [[nodiscard]] p2p::Backing backing(MemoryKind kind, std::string* why) const override;
  [[nodiscard]] std::uint8_t gpu_direct_routes(
      const p2p::DomainRegistration* registration) const override;
  Result<std::unique_ptr<p2p::DomainRegistration>> register_region(
      const detail::RegionRecord& region) override;
  Result<std::unique_ptr<p2p::DomainRegistration>> register_within(
      const detail::RegionRecord& region,
      const std::shared_ptr<const detail::RegionRecord>& parent) override;
  Status deregister(std::unique_ptr<p2p::DomainRegistration> registration) override;
  [[nodiscard]] std::size_t retained() const override {
    std::lock_guard lock(retained_mu_);
    return retained_.size();
  }
  [[nodiscard]] std::string pack(const detail::RegionRecord& region,
                                 const p2p::DomainRegistration* registration) const override;
  [[nodiscard]] Status unpack(std::string_view blob) const override;
  const std::shared_ptr<RdmaEngine>& engine() const { return engine_; }
  const std::shared_ptr<MrCache>& cache() const { return cache_; }
  void declare_owned(std::byte* base, std::uint64_t length) override;
  void forget_owned(const std::byte* base) override;
  // factory.cpp: the transport's factory and monitor hook. A lane's RdmaLane; the devices' async
  // event fds, drained without blocking (a port event pauses or resumes its context at once);
  // the port scan; rdma_stats() and nic_load_stats().
  Result<std::unique_ptr<p2p::LaneTransport>> make_lane(const p2p::LaneParts& parts) const override;
  [[nodiscard]] std::vector<int> monitor_fds() const override;
  void drain_monitor_events() const override;
  void monitor_scan() const override;
  void report(p2p::TransportReport& out) const override;

 private:
  // Device memory under rdma.cuda_memory = direct: the route for its device (gdr.h), then
  // SYNC_MEMOPS and the write-ordering check, then one GPU MR per context. A failure is
  // returned: never another route, never staging.
  Result<std::unique_ptr<p2p::DomainRegistration>> register_gpu(const detail::RegionRecord& region);

  std::shared_ptr<RdmaEngine> engine_;
  // Holds registrations (and so the engine): owned here, never by the engine.
  std::shared_ptr<MrCache> cache_;
  // Registrations whose deregistration failed, kept for good. deregister() runs on whichever
  // thread unregisters while stats read the count: a leaf lock, nothing is taken under it.
  mutable std::mutex retained_mu_;
  std::vector<std::unique_ptr<p2p::DomainRegistration>> retained_;  // guarded by retained_mu_
};

// The MR set a region has on RDMA (null when it is not published there).
const MrSet* mr_set_of(const detail::RegionRecord& region);

}  // namespace orbite::rdma
