// EngineCore: creation of the lanes and their threads, admission, waiting, close and the monitor.
#include "proxy/engine_core.h"
#include "proxy/host_topology.h"
#include "proxy/metrics_exporter.h"
#include "proxy/report.h"

#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <system_error>
#include <thread>

#include "common/clock.h"
#include "common/cpu_relax.h"
#include "common/host_identity.h"
#include "common/log.h"

namespace orbite::detail {

namespace {

std::string random_engine_id() {
  std::random_device rd;
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    const unsigned v = rd() & 0xff;
    out.push_back(hex[v >> 4]);
    out.push_back(hex[v & 15]);
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<EngineCore>> EngineCore::create(const EngineConfig& config,
                                                       bool prefer_loopback) {
  ORBITE_RETURN_IF_ERROR(config.validate());
  // An explicit priority matrix is checked against this host's inventory when the engine starts,
  // so an invalid one fails initialization (the guide) before the RDMA path ever reads it.
  if (config.rdma.priority_matrix || config.rdma.custom_json_path) {
    if (auto topology = proxy::discover_host_topology(config); !topology.ok()) {
      return topology.status();
    }
  }
  auto core = std::make_shared<EngineCore>();
  core->config = config;
  const HostIdentity& host = this_host();
  core->self.id = random_engine_id();
  core->self.host_id = host.host_id;
  core->self.pid = ::getpid();
  ORBITE_ASSIGN_OR_RETURN(core->domains,
                          p2p::make_memory_domains(config, core->self, &core->domain_notes));
  core->built = p2p::built_transports(core->domains);
  EngineCore* owner = core.get();
  ORBITE_ASSIGN_OR_RETURN(
      core->staging.pool,
      cuda::StagingPool::create(
          config.rdma.max_staging_bytes, config.cuda.staging_chunk_bytes,
          [owner](cuda::StagingSlab& slab) { return owner->register_slab(slab); }));
  core->staging.domains = &core->domains;

  auto iface = net::select_interface(config.tcp.interface, prefer_loopback);
  if (!iface.ok()) return iface.status().with_context("tcp.interface");
  auto listener = net::listen_tcp(net::HostPort{iface->address, 0});
  if (!listener.ok()) return listener.status().with_context("engine control listener");
  ORBITE_ASSIGN_OR_RETURN(net::HostPort bound, net::local_endpoint(listener->get()));
  net::set_nonblocking(listener->get());
  core->listener = std::move(*listener);
  core->self.address = net::format_host_port(bound.host, bound.port);

  core->monitor_wake = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!core->monitor_wake.valid()) {
    return Status::error(Errc::ResourceExhausted,
                         std::string("eventfd for the monitor failed: ") + std::strerror(errno));
  }
  for (std::uint32_t i = 0; i < config.num_lanes; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->core = core.get();
    lane->index = static_cast<int>(i);
    lane->protocol = p2p::make_lane_protocol(core->config, core->self, core->regions,
                                             lane->counters, core->domains, lane->index,
                                             core->staging.pool, core->notifications);
    ORBITE_RETURN_IF_ERROR(lane->protocol->init());
    lane->wake_fd = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    lane->driver_epfd = net::Fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!lane->wake_fd.valid() || !lane->driver_epfd.valid()) {
      return Status::error(Errc::ResourceExhausted,
                           std::string("eventfd/epoll for a lane failed: ") + std::strerror(errno));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = lane->wake_fd.get();
    if (::epoll_ctl(lane->driver_epfd.get(), EPOLL_CTL_ADD, lane->wake_fd.get(), &ev) != 0) {
      return Status::error(
          Errc::ResourceExhausted,
          std::string("epoll_ctl for a lane's eventfd failed: ") + std::strerror(errno));
    }
    ORBITE_RETURN_IF_ERROR(lane->protocol->set_wake_fd(lane->wake_fd.get()));
    core->lanes.push_back(std::move(lane));
  }
  EngineCore* raw = core.get();
  ORBITE_RETURN_IF_ERROR(core->lanes[0]->protocol->set_listener(
      core->listener.get(), [raw](p2p::AcceptedConnection a) {
        Lane& target = raw->lane_for(a.peer_id());
        if (target.index == 0) {
          target.protocol->adopt(std::move(a));
          return;
        }
        {
          std::lock_guard lock(target.adopt_mu);
          target.adopts.push_back(std::move(a));
          target.has_adopts.store(true, std::memory_order_release);
        }
        target.wake();
      }));
  ORBITE_RETURN_IF_ERROR(core->start_threads());
  ORBITE_LOG(Info, Proxy) << "engine " << core->self.id.substr(0, 8) << " listening on "
                          << core->self.address << " with " << config.num_lanes << " lane(s), "
                          << (config.progress_mode == ProgressMode::Polling ? "polling"
                                                                            : "event-driven");
  return core;
}

void EngineCore::run_monitor() {
  using Clock = std::chrono::steady_clock;
  const auto period = std::min<Duration>(config.rdma.monitor_interval, std::chrono::seconds(1));
  std::vector<pollfd> fds{{monitor_wake.get(), POLLIN, 0}};
  // SIGUSR1's requests for the state report: answered by whichever monitor sees one first.
  if (const int fd = state_report::request_fd(); fd >= 0) fds.push_back({fd, POLLIN, 0});
  for (int fd : p2p::monitor_fds(domains)) fds.push_back({fd, POLLIN, 0});
  auto next_scan = Clock::now() + period;
  while (!stopping.load(std::memory_order_acquire)) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next_scan - Clock::now());
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(left.count(), 0)));
    if (stopping.load(std::memory_order_acquire)) break;
    state_report::serve_requests();
    if (n < 0 && errno != EINTR) {
      ORBITE_LOG(Error, Proxy) << "the monitor's poll failed (" << std::strerror(errno)
                               << "); it falls back to sleeping one period";
      std::this_thread::sleep_for(period);
    }
    if (n > 0) {
      // A device event (a port's) takes effect now rather than at the next scan.
      p2p::drain_monitor_events(domains);
      for (auto& l : lanes) l->wake();
    }
    if (Clock::now() < next_scan) continue;
    next_scan = Clock::now() + period;
    // The transports' scans (RDMA contexts follow their ports).
    p2p::monitor_scan(domains);
    // Event-driven workers sleep without a timeout; the monitor's tick lets them check
    // connection deadlines.
    for (auto& l : lanes) l->wake();
  }
}

Status EngineCore::start_threads() {
  EngineCore* raw = this;
  // A thread that fails to start is a Status: the ones already running are stopped and joined.
  try {
    for (auto& lane : lanes) {
      Lane* l = lane.get();
      l->worker = std::thread([l] { l->run(); });
      threads_started = true;
    }
    state_report::enroll(*this);
    monitor = std::thread([raw] { raw->run_monitor(); });
  } catch (const std::system_error& e) {
    stop_threads();
    return Status::error(Errc::ResourceExhausted,
                         std::string("starting the engine's threads failed: ") + e.what());
  }
  threads_started = true;
  if (Status st = metrics_export::enroll(*this); !st.ok()) {
    stop_threads();
    return st;
  }
  return {};
}

EngineCore::~EngineCore() {
  stop_threads();
}

Status EngineCore::register_slab(cuda::StagingSlab& slab) {
  // Staging is the transports' own memory: registered natively everywhere, whatever the
  // policies say about application memory.
  auto rec = regions.prepare({}, slab.base, slab.length, MemoryKind::Host, Access{true, true});
  for (const auto& domain : domains) {
    if (!domain) continue;
    const auto i = static_cast<std::size_t>(domain->id());
    std::string why;
    if (domain->backing(MemoryKind::Host, &why) == p2p::Backing::Absent) continue;
    auto reg = domain->register_region(*rec);
    if (!reg.ok()) {
      for (std::size_t j = 0; j < rec->registrations.size(); ++j) {
        if (rec->registrations[j])
          domains[j]->deregister(std::move(rec->registrations[j])).ignore();
      }
      return reg.status().with_context("staging slab of " + std::to_string(slab.length) +
                                       " bytes on " + p2p::transport_name(domain->id()));
    }
    rec->registrations[i] = std::move(*reg);
  }
  slab.tag = std::move(rec);
  return {};
}

EngineCore::Staging::~Staging() {
  if (!pool || domains == nullptr) return;
  for (const auto& slab : pool->slabs()) {
    auto* rec = static_cast<RegionRecord*>(slab->tag.get());
    if (rec == nullptr) continue;
    for (std::size_t i = 0; i < rec->registrations.size(); ++i) {
      if (rec->registrations[i] && (*domains)[i]) {
        (*domains)[i]->deregister(std::move(rec->registrations[i])).ignore();
      }
    }
  }
}

Lane& EngineCore::lane_for(const std::string& peer_id) {
  if (lanes.size() == 1) return *lanes[0];
  return *lanes[std::hash<std::string>{}(peer_id) % lanes.size()];
}

Result<Request> EngineCore::submit(std::shared_ptr<RequestState> req) {
  if (closed.load(std::memory_order_acquire)) {
    if (req->local_pinned) {
      req->local->unpin_local();
      req->local_pinned = false;
    }
    return Status::error(Errc::Cancelled, "the engine is closed; no new requests are accepted");
  }
  Lane& lane = lane_for(req->peer->ep.id);
  // The driver aliases the engine: a request keeps its engine alive while anyone holds it.
  req->driver = std::shared_ptr<ProgressDriver>(shared_from_this(), &lane);
  req->counters = &lane.counters;
  req->submitted_ns = Lane::coarse_now_ns();
  submitted.fetch_add(1, std::memory_order_relaxed);
  hand_to(lane, req);
  return RequestAccess::make(std::move(req));
}

void EngineCore::hand_to(Lane& lane, const std::shared_ptr<RequestState>& req) {
  // Start it on this thread when the lane is free: a small send then completes before wait().
  // With nothing queued ahead of it, it skips the queues: there is no order to keep.
  if (lane.mu.try_lock()) {
    if (!lane.queue.maybe_nonempty() && lane.ready.empty()) {
      lane.protocol->start(req);
      lane.protocol->flush_dirty();
    } else {
      lane.submit(req);
      lane.start_submitted();
    }
    lane.mu.unlock();
  } else {
    lane.submit(req);
  }
}

Result<Request> EngineCore::submit_any_source(std::shared_ptr<RequestState> req) {
  if (closed.load(std::memory_order_acquire)) {
    return Status::error(Errc::Cancelled, "the engine is closed; no new requests are accepted");
  }
  // Lane 0 drives it; the lane that matches it counts it (Protocol::claim).
  req->driver = std::shared_ptr<ProgressDriver>(shared_from_this(), lanes[0].get());
  req->submitted_ns = Lane::coarse_now_ns();
  submitted.fetch_add(1, std::memory_order_relaxed);
  hand_to(*lanes[0], req);
  for (std::size_t i = 1; i < lanes.size(); ++i) {
    auto ticket = make_request_state();
    ticket->kind = OpKind::Recv;
    ticket->options.priority = req->options.priority;
    ticket->ticket_of = req;
    hand_to(*lanes[i], ticket);
  }
  return RequestAccess::make(std::move(req));
}

Result<std::optional<p2p::ProbeHit>> EngineCore::probe(std::uint32_t comm,
                                                       const std::string* peer_id, std::int32_t tag,
                                                       const p2p::PeerRanks& members) {
  if (closed.load(std::memory_order_acquire)) {
    return Status::error(Errc::Cancelled, "the engine is closed");
  }
  auto look = [&](Lane& lane) {
    std::lock_guard lock(lane.mu);
    lane.progress_once();
    return lane.protocol->probe(comm, peer_id, tag, members);
  };
  if (peer_id != nullptr) return look(lane_for(*peer_id));
  for (auto& lane : lanes) {
    if (auto hit = look(*lane)) return hit;
  }
  return std::optional<p2p::ProbeHit>();
}

void EngineCore::drive_until(Lane& lane, const std::atomic<int>& phase, Duration timeout) {
  lane.drivers.fetch_add(1, std::memory_order_acq_rel);
  // The clock is first read after 16 idle passes: a small ping-pong finishes before that, and
  // every read costs tens of nanoseconds on a path that takes a few hundred. The deadline starts
  // then too, a few passes (well under a microsecond) late.
  Deadline deadline;
  auto last_work = std::chrono::steady_clock::time_point();
  auto last_yield = last_work;
  unsigned idle = 0;
  bool timing = false;   // the clock was read since the last pass that did work
  bool copying = false;  // device copies in flight on the lane (read under its mutex)
  // Oversubscribed, with passes that poll sockets (a recv per socket: microseconds of syscalls):
  // every idle pass reads the clock and yields. 16 such passes between two looks at the clock
  // kept the peer that needed this core waiting 100-200 us per message (4 ranks on 2 cores: a
  // small all_reduce over tcp at 3x Open MPI's time). Passes over rings cost nanoseconds, and
  // yielding each of them added a syscall to every shm message (4x its latency): they keep the
  // default.
  const bool oversubscribed = yield_when_idle.load(std::memory_order_relaxed);
  bool yield_each_pass = false;
  while (phase.load(std::memory_order_acquire) == 0) {
    int work = 0;
    if (lane.mu.try_lock()) {
      // A few passes per acquisition while nothing arrives: taking and dropping the mutex costs
      // about as much as a pass over the rings. Dropped often enough that other threads waiting
      // on this lane (or submitting to it) get their turn.
      // No pause between them: a pause costs about as much as a pass, and a message that lands
      // meanwhile waits for it.
      for (int pass = 0; pass < (yield_each_pass ? 1 : 8); ++pass) {
        work = lane.progress_once();
        if (work > 0 || phase.load(std::memory_order_acquire) != 0) break;
      }
      copying = lane.protocol->copies_pending();
      yield_each_pass = oversubscribed && lane.protocol->polled_sockets();
      lane.mu.unlock();
    }
    if (phase.load(std::memory_order_acquire) != 0) break;
    if (work > 0) {
      idle = 0;
      timing = false;
      continue;
    }
    ++idle;
    if (!yield_each_pass && (idle & 15) != 0) {
      // Waiting on device copies, whose threads (softcuda's copy engine, the driver's) need the
      // core more than this loop does.
      if (copying) {
        ::sched_yield();
      } else {
        cpu_relax();
      }
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!timing) {
      timing = true;
      last_work = last_yield = now;
      if (deadline.time_point() == Clock::time_point::max()) deadline = Deadline::after(timeout);
    }
    // When more threads spin than there are cores (ranks and their workers oversubscribing the
    // cores), a peer waiting on this core would otherwise wait for the scheduler's tick. By time,
    // not by passes: a pass over TCP sockets costs microseconds, one over rings nanoseconds.
    // Every 5 us: this process's own worker may need the core (it serves put/get for peers).
    if (yield_each_pass || now - last_yield >= std::chrono::microseconds(5)) {
      ::sched_yield();
      last_yield = now;
    }
    if (now >= deadline.time_point()) break;
    if (now - last_work > std::chrono::milliseconds(2)) {
      // Nothing moved for a while: leave progress to the worker (woken by sockets and
      // doorbells) and poll the request's state at a gentle pace.
      lane.drivers.fetch_sub(1, std::memory_order_acq_rel);
      lane.driver_left_ns.store(0, std::memory_order_relaxed);
      lane.wake();
      while (phase.load(std::memory_order_acquire) == 0 && !deadline.expired()) {
        std::this_thread::sleep_for(
            std::min<Duration>(std::chrono::microseconds(200), deadline.remaining()));
      }
      return;
    }
  }
  lane.driver_left_ns.store(Lane::coarse_now_ns(), std::memory_order_relaxed);
  lane.drivers.fetch_sub(1, std::memory_order_acq_rel);
}

void EngineCore::note_memory_polling() {
  const std::int64_t now = Lane::coarse_now_ns();
  for (auto& lane : lanes) lane->memory_polled_ns.store(now, std::memory_order_relaxed);
}

void EngineCore::declare_owned(std::byte* base, std::uint64_t length) {
  for (auto& d : domains) {
    if (d) d->declare_owned(base, length);
  }
}

void EngineCore::forget_owned(const std::byte* base) {
  for (auto& d : domains) {
    if (d) d->forget_owned(base);
  }
}

bool EngineCore::any_busy() {
  for (auto& lane : lanes) {
    std::lock_guard lock(lane->mu);
    if (lane->protocol->busy() || !lane->ready.empty() || lane->queue.maybe_nonempty()) {
      return true;
    }
  }
  return false;
}

void EngineCore::stop_threads() {
  if (!threads_started) return;
  metrics_export::withdraw(*this);
  state_report::withdraw(*this);
  stopping.store(true, std::memory_order_release);
  for (auto& lane : lanes) lane->wake();
  const std::uint64_t one = 1;
  if (::write(monitor_wake.get(), &one, sizeof(one)) != static_cast<ssize_t>(sizeof(one))) {
    // Only a full counter fails, and then the monitor is readable already.
    ORBITE_LOG(Debug, Proxy) << "monitor wake write: " << std::strerror(errno);
  }
  for (auto& lane : lanes) {
    if (lane->worker.joinable()) lane->worker.join();
  }
  if (monitor.joinable()) monitor.join();
  threads_started = false;
}

}  // namespace orbite::detail
