// The per-process proxy: lanes (a worker thread, a lock-free submission queue, the tiered ready
// queue and the transports of the peers assigned to the lane) and a monitor thread.
//
// Progress model: a lane's state has one owner at a time, whoever holds its mutex. The worker
// runs progress passes and backs off when idle (polling mode spins and yields briefly first;
// event-driven mode goes straight to epoll). A user thread in Request::wait() progresses the
// lane itself when it can take the mutex, and while it does, the worker sleeps on its wake-up
// eventfd only, so a ping-pong needs no thread hand-off.
#pragma once

#include <orbite/transfer.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "common/mpsc_queue.h"
#include "common/net.h"
#include "cuda/staging.h"
#include "p2p/counters.h"
#include "p2p/domains.h"
#include "p2p/endpoint.h"
#include "p2p/lane.h"
#include "p2p/notifications.h"
#include "p2p/registry.h"
#include "p2p/request.h"
#include "proxy/tiered_queue.h"

namespace orbite::detail {

// Lifetime: owned by its EngineCore and destroyed with it; requests reach it through an aliasing
// shared_ptr that keeps the core alive. Lock order: mu before adopt_mu; mu is never held while
// waiting for another lane. Everything below "protected by mu" is touched only by mu's holder.
struct Lane final : ProgressDriver {
  EngineCore* core = nullptr;
  int index = 0;
  std::mutex mu;
  MpscQueue queue;  // lock-free: any thread pushes, mu's holder pops
  // protected by mu
  p2p::Counters counters;  // this lane's; written by mu's holder only
  std::unique_ptr<p2p::LaneProtocol> protocol;
  proxy::TieredQueue<std::shared_ptr<RequestState>> ready;
  std::mutex adopt_mu;                          // guards adopts
  std::vector<p2p::AcceptedConnection> adopts;  // connections lane 0 read a Hello on, for this lane
  std::atomic<bool> has_adopts{false};
  net::Fd wake_fd;
  net::Fd driver_epfd;  // holds wake_fd only: where the worker sleeps while a user drives
  std::atomic<int> drivers{0};
  // When a user thread last stopped driving (steady clock, ns): a user that waits again soon
  // keeps progressing itself, so the worker stays out of the way (no spinning, no doorbells).
  std::atomic<std::int64_t> driver_left_ns{0};
  [[nodiscard]] bool user_driving_recently() const;
  // When a user thread last said it polls memory (EngineCore::note_memory_polling; coarse clock,
  // ns): the worker then does not spin between its sleeps, but still sleeps on its sockets.
  std::atomic<std::int64_t> memory_polled_ns{0};
  [[nodiscard]] bool memory_polled_recently() const;
  // A coarse monotonic clock (ns): cheap enough for every wait().
  static std::int64_t coarse_now_ns();
  std::atomic<bool> sleeping{false};
  std::atomic<bool> socket_woke{false};  // the worker's sleep ended on an fd: poll them next pass
  std::atomic<std::uint64_t> idle_sleeps{0};  // written by the worker only
  std::uint64_t passes = 0;
  std::thread worker;

  // Caller holds mu.
  int progress_once();
  // Caller holds mu: moves submitted requests into the ready queue and starts them.
  int start_submitted();
  void submit(const std::shared_ptr<RequestState>& req);
  void wake();
  void run();
  void sleep_once();

  // ProgressDriver: Request::test() and wait() on this lane's requests.
  void poll() override;
  void wait(const std::atomic<int>& phase, Duration timeout) override;
};

// Lifetime: shared by TransferEngine, communicators, MemoryRegions (weakly) and requests (through
// their lane driver). Lanes and the monitor thread stop in close() or the destructor.
struct EngineCore : std::enable_shared_from_this<EngineCore> {
  EngineConfig config;
  Identity self;
  net::Fd listener;
  p2p::RegionRegistry regions;
  // Notifications peers delivered, until the application takes them; the lanes (declared below)
  // push into it, so it outlives them.
  p2p::NotificationBox notifications;
  std::atomic<std::uint64_t> submitted{0};      // any thread
  std::atomic<std::uint64_t> ranges_merged{0};  // any thread (merge_requests)
  // Set (never cleared) once a communicator finds this host's ranks outnumbering the CPUs they
  // run on: a thread driving a lane then gives its core away on every idle pass (Open MPI's
  // mpi_yield_when_idle), since the peer it waits for may be waiting for that core.
  std::atomic<bool> yield_when_idle{false};
  // One memory domain per transport, indexed by TransportId; the table's built column.
  p2p::MemoryDomains domains;
  std::array<bool, p2p::kTransportCount> built{};
  p2p::DomainNotes domain_notes;  // why a transport's domain is not installed
  // The staging pool (rdma.max_staging_bytes, cuda.staging_chunk_bytes). Each slab is registered
  // once on every memory domain, never published; the holder forgets the registrations after
  // the lanes (declared below) are gone and before the domains (above) are.
  struct Staging {
    std::shared_ptr<cuda::StagingPool> pool;
    p2p::MemoryDomains* domains = nullptr;
    ~Staging();
  } staging;
  std::vector<std::unique_ptr<Lane>> lanes;
  // The monitor waits on its wake eventfd (written by stop_threads) and the RDMA devices' async
  // event fds, and scans the RDMA ports each monitor period.
  std::thread monitor;
  net::Fd monitor_wake;
  std::atomic<bool> stopping{false};
  std::atomic<bool> closed{false};
  // Set by close_requester(): new put/get are refused (checked after their local pin).
  std::atomic<bool> requester_closed{false};
  // Held for a whole close(), close_source() or close_requester(): they are serialized. Taken
  // before any lane's mu.
  std::mutex close_mu;
  // The layers above (each communicator's collectives) add their part of the state report
  // here. Lock order: reporters_mu after every lane's mu (report() takes them one at a time,
  // then this); a reporter takes only locks of its own, with a bounded try.
  std::mutex reporters_mu;
  std::map<std::uint64_t, std::function<void(std::string&)>> reporters;
  std::uint64_t next_reporter = 1;
  bool threads_started = false;
  // The metrics' labels (docs/metrics.md): the rank of the communicator that created the engine
  // (else the launcher's; -1: none), and the engine's place among the process's engines, set
  // once when it enrolls with the exporter (proxy/metrics_exporter.h).
  std::atomic<int> metrics_rank{-1};
  std::uint64_t metrics_index = 0;

  static Result<std::shared_ptr<EngineCore>> create(const EngineConfig& config,
                                                    bool prefer_loopback);
  ~EngineCore();
  Lane& lane_for(const std::string& peer_id);
  // Validated request → lane. Fails fast (no Request) when the engine is closed.
  Result<Request> submit(std::shared_ptr<RequestState> req);
  // A validated receive from any source (its `any_source` set, no peer): posted on every lane,
  // since its message may come from a peer of any of them (lane 0 gets it and drives it, the
  // others a ticket naming it).
  Result<Request> submit_any_source(std::shared_ptr<RequestState> req);
  // Starts `req` on this thread when the lane is free and nothing waits ahead of it, else
  // queues it for the lane.
  void hand_to(Lane& lane, const std::shared_ptr<RequestState>& req);
  // The first message of `comm` from `peer_id` (null: any engine of `members`) with `tag` (or
  // any tag) that waits for its receive, after a progress pass of each lane it looks at. Takes
  // those lanes' mutexes one at a time.
  Result<std::optional<p2p::ProbeHit>> probe(std::uint32_t comm, const std::string* peer_id,
                                             std::int32_t tag, const p2p::PeerRanks& members);
  // Progress `lane` from a waiting thread until `done` or the deadline passes.
  void drive_until(Lane& lane, const std::atomic<int>& phase, Duration timeout);
  Status close(Duration timeout, CloseTimeout on_timeout);
  Status close_source(Duration timeout);
  Status close_requester(Duration timeout);
  // proxy/report.cpp: appends this engine's state report (docs/hangs.md): each lane's links,
  // receives, unexpected messages and requests in flight (a lane whose mutex stays held past a
  // bound is reported as such), then the reporters'. Any thread.
  void report(std::string& out);
  // proxy/engine_stats.cpp: the counters behind TransferEngine's stats calls, and the same as
  // Prometheus metrics (docs/metrics.md). Any thread.
  [[nodiscard]] EngineStats stats() const;
  [[nodiscard]] RdmaStats rdma_stats() const;
  [[nodiscard]] std::vector<NicLoad> nic_load_stats() const;
  [[nodiscard]] MetricLabels metric_labels() const;
  void append_metrics(Exposition& out) const;
  [[nodiscard]] std::string metrics_text() const;
  std::uint64_t add_reporter(std::function<void(std::string&)> fn);
  void remove_reporter(std::uint64_t id);
  // Drives the lanes (those no worker holds) until `idle()` or the deadline; true when idle.
  bool drive_while_busy(Deadline deadline, const std::function<bool()>& idle);
  Status start_threads();
  // The monitor thread's loop (start_threads runs it).
  void run_monitor();
  void stop_threads();
  [[nodiscard]] bool any_busy();
  // A user thread is polling memory (a collective's shared segment) and needs its core: the
  // workers do not spin between their sleeps (which sockets and doorbells still end) for a
  // while after the last call. Any thread; a few nanoseconds per lane.
  void note_memory_polling();
  // Engine-owned memory (the collectives' scratch) for every memory domain: see
  // p2p::MemoryDomain::declare_owned. Thread-safe.
  void declare_owned(std::byte* base, std::uint64_t length);
  // The staging pool's slab hook: registers a new slab on every memory domain.
  Status register_slab(cuda::StagingSlab& slab);
  void forget_owned(const std::byte* base);
  MemoryRegion wrap(std::shared_ptr<RegionRecord> r) { return MemoryRegion(std::move(r)); }
  // Tests: every lane's mutex, held until the guards go, so that submissions wait in the queues.
  static std::vector<std::unique_lock<std::mutex>> hold_lanes(TransferEngine& engine) {
    std::vector<std::unique_lock<std::mutex>> held;
    for (auto& lane : engine.core_->lanes) held.emplace_back(lane->mu);
    return held;
  }
  static const std::shared_ptr<RegionRecord>& record_of(const MemoryRegion& m) { return m.record_; }
};

}  // namespace orbite::detail
