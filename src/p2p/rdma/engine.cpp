#include "p2p/rdma/engine.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>

#include "common/log.h"
#include "common/wire.h"
#include "cuda/allocation.h"
#include "p2p/rdma/mr_cache.h"
#include "p2p/rdma/verbs.h"
#include "p2p/registry.h"
#include "topo/matrix.h"
#include "topo/port_rate.h"

namespace orbite::rdma {

Status Budget::take(std::uint64_t n, std::atomic<std::uint64_t>& exhausted) {
  std::uint64_t cur = used_.load(std::memory_order_acquire);
  do {
    if (cur + n > limit_ || cur + n < cur) {
      add(exhausted);
      return Status::error(Errc::ResourceExhausted,
                           std::string("rdma.") + name_ + " exhausted: " + std::to_string(cur) +
                               " of " + std::to_string(limit_) + " in use, " + std::to_string(n) +
                               " more asked");
    }
  } while (!used_.compare_exchange_weak(cur, cur + n, std::memory_order_acq_rel));
  return {};
}

bool Budget::try_take(std::uint64_t n) {
  std::uint64_t cur = used_.load(std::memory_order_acquire);
  do {
    if (cur + n > limit_ || cur + n < cur) return false;
  } while (!used_.compare_exchange_weak(cur, cur + n, std::memory_order_acq_rel));
  return true;
}

namespace {

// The host's NUMA nodes and GPUs, and where hwloc (or topology.nccl_xml) places each RDMA device
// (`placements`, by name; the contexts are the NICs here). A live host whose hwloc fails leaves
// the nodes unknown (every NIC then shares the "*" row); an explicit topology file that cannot
// be read fails installation.
Result<topo::Inventory> host_places(const EngineConfig& config,
                                    std::vector<topo::NicInfo>& placements) {
  topo::DiscoveryInput input;
  input.hwloc_xml = config.topology.hwloc_xml;
  input.nccl_xml = config.topology.nccl_xml;
  auto found = topo::discover(input);
  if (found.ok()) {
    placements = std::move(found->nics);
    found->nics.clear();
    return std::move(*found);
  }
  if (!input.hwloc_xml.empty() || !input.nccl_xml.empty()) {
    return found.status().with_context("topology");
  }
  ORBITE_LOG(Warn, Rdma) << "hwloc gave no NUMA placement (" << found.status().message()
                         << "): the RDMA rails are not ranked by locality";
  return topo::Inventory{};
}

}  // namespace

Result<std::shared_ptr<RdmaEngine>> RdmaEngine::install(const EngineConfig& config,
                                                        const detail::Identity& self) {
  // A field whose feature is not built: refused by name rather than accepted and ignored.
  if (config.rdma.gpu_source_reuse) {
    return Status::error(Errc::Configuration,
                         "config: rdma.gpu_source_reuse = true needs hardware-revocable keys, "
                         "which no supported provider offers here; leave it false");
  }
  // mlx5's scatter-to-CQE copies small READ results with the CPU, which cannot reach device
  // memory: GPUDirect needs it off before the provider reads its environment (the guide's
  // "GPUDirect RDMA ownership"). There is no fallback to staging.
  if (config.rdma.cuda_memory == RdmaCudaMemory::Direct) {
    const char* scatter = std::getenv("MLX5_SCATTER_TO_CQE");
    if (scatter == nullptr || std::string(scatter) != "0") {
      return Status::error(
          Errc::Configuration,
          std::string("config: rdma.cuda_memory = direct needs MLX5_SCATTER_TO_CQE=0 in the "
                      "environment before the process starts (it is ") +
              (scatter == nullptr ? "unset" : "\"" + std::string(scatter) + "\"") + ")");
    }
  }
  ORBITE_ASSIGN_OR_RETURN(const IbvApi* api, load_ibverbs(config.rdma.ibverbs_library));
  ORBITE_ASSIGN_OR_RETURN(Discovery found, discover_contexts(*api, config.rdma));
  if (found.usable() == 0) {
    return Status::error(
        Errc::Unavailable,
        "no usable RDMA context: " +
            (found.contexts.empty() ? std::string("no permitted device") : found.summary()));
  }
  // The selector's inventory: one NIC per context slot, as discovery numbered them (a refused
  // device keeps its ID and is never healthy), with the port's decoded rate and its NUMA node
  // from sysfs; the NUMA nodes and GPUs come from hwloc, so each cpu:N row puts that node's NICs
  // in tier 0 and the others in tier 2.
  std::vector<topo::NicInfo> placements;
  ORBITE_ASSIGN_OR_RETURN(topo::Inventory inventory, host_places(config, placements));
  inventory.source = "RDMA contexts";
  for (const auto& c : found.contexts) {
    const auto id = static_cast<std::size_t>(c->nic_id);
    if (inventory.nics.size() <= id) inventory.nics.resize(id + 1);
    topo::NicInfo& n = inventory.nics[id];
    n.name = c->name;
    n.link_gbps = c->route().rate_gbps;
    n.numa = c->numa >= 0 ? c->numa
                          : topo::kUnknownNuma;  // the kernel's word, even for a node hwloc lacks
    n.seen_by_verbs = true;
    // Its switch path, so that a GPU's tier 0 holds the NICs under its nearest switch.
    const auto pci = topo::PciAddress::parse(c->pci_bus_id);
    for (const topo::NicInfo& p : placements) {
      if (p.name == c->name || (pci && p.pci && p.pci->address == *pci)) {
        n.pci = p.pci;
        if (n.numa == topo::kUnknownNuma) n.numa = p.numa;
        break;
      }
    }
  }
  for (std::size_t i = 0; i < inventory.nics.size(); ++i) {
    inventory.nics[i].id = static_cast<int>(i);
    if (inventory.nics[i].name.empty()) inventory.nics[i].name = "nic" + std::to_string(i);
  }
  ORBITE_ASSIGN_OR_RETURN(topo::PriorityTable table, topo::load_priorities(config.rdma, inventory));
  ORBITE_ASSIGN_OR_RETURN(
      std::unique_ptr<topo::DeviceSelector> selector,
      topo::DeviceSelector::create(table, inventory, topo::SelectorConfig::from(config.rdma)));
  for (std::size_t i = 0; i < inventory.nics.size(); ++i)
    selector->set_healthy(static_cast<int>(i), false);
  for (const auto& c : found.contexts) {
    if (const double gbps = c->route().rate_gbps; gbps > 0)
      selector->set_link_rate(c->nic_id, gbps);
    selector->set_healthy(c->nic_id, c->state == ContextState::Active);
  }
  std::unique_ptr<SharedSlots> slots;
  if (config.rdma.shared_quota_shm_path && !config.rdma.shared_quota_shm_path->empty()) {
    ORBITE_ASSIGN_OR_RETURN(slots, SharedSlots::open(*config.rdma.shared_quota_shm_path,
                                                     config.rdma.slot_rotation_interval));
  }
  auto engine =
      std::make_shared<RdmaEngine>(config, *api, std::move(found), self, std::move(selector));
  engine->set_shared_slots(std::move(slots));
  return engine;
}

RdmaEngine::RdmaEngine(const EngineConfig& config, const IbvApi& api, Discovery contexts,
                       const detail::Identity& self, std::unique_ptr<topo::DeviceSelector> selector)
    : config_(config),
      api_(api),
      contexts_(std::move(contexts)),
      key_(::orbite::rdma::engine_key(self.id)),
      endpoints_("max_endpoints", config.rdma.max_endpoints),
      grants_("max_grants", config.rdma.max_grants),
      direct_bytes_("max_direct_bytes", config.rdma.max_direct_bytes),
      granted_bytes_("max_direct_bytes (granted ranges)", config.rdma.max_direct_bytes),
      selector_(std::move(selector)),
      rail_health_(config.rdma) {
  std::random_device rd;
  incarnation_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  ORBITE_LOG(Info, Rdma) << "RDMA installed from " << api.path << ": " << contexts_.summary();
}

RdmaEngine::~RdmaEngine() = default;

std::vector<NicRecord> RdmaEngine::nic_records() const {
  std::vector<NicRecord> out;
  for (const auto& c : contexts_.contexts) {
    if (!c->usable()) continue;
    NicRecord n;
    n.nic_id = static_cast<std::uint8_t>(c->nic_id);
    n.name = c->name;
    n.active = c->state == ContextState::Active ? 1 : 0;
    const Route route = c->route();
    n.port = route.port;
    n.link_layer = route.link_layer;
    n.mtu = static_cast<std::uint8_t>(route.mtu);
    n.lid = route.lid;
    n.gid_index = route.gid_index;
    std::memcpy(n.gid.data(), route.gid.raw, 16);
    n.route_generation = c->route_generation.load();
    out.push_back(std::move(n));
  }
  return out;
}

void RdmaEngine::retain(const std::string& what) {
  add(counters_.retained);
  ORBITE_LOG(Error, Rdma) << what << "; the object is retained and never destroyed again";
}

RdmaStats RdmaEngine::stats() const {
  RdmaStats s;
  s.installed = true;
  s.library = api_.path;
  for (const auto& c : contexts_.contexts) {
    RdmaContextStats cs;
    cs.nic_id = c->nic_id;
    cs.name = c->name;
    const Route route = c->route();
    cs.port = route.port;
    cs.state = c->usable() ? c->state_name() : "inert: " + c->why_inert;
    cs.fence = c->fence_reason();
    cs.gid_index = route.gid_index;
    cs.gid = gid_text(route.gid);
    cs.route_generation = c->route_generation.load();
    cs.live_qps = c->live_qps.load(std::memory_order_relaxed);
    cs.numa_node = c->numa;
    cs.events_read = c->events_read.load(std::memory_order_relaxed);
    cs.port_events = c->port_events.load(std::memory_order_relaxed);
    s.contexts.push_back(std::move(cs));
    if (c->usable()) {
      std::lock_guard lock(c->key_mu);
      s.window_keys_used += c->keys->keys_used();
      s.window_indices += c->keys->indices();
      s.window_indices_parked += c->keys->parked();
    }
  }
  auto r = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  const RdmaCounters& c = counters_;
  s.parents = r(c.parents);
  s.parents_failed = r(c.parents_failed);
  s.payload_send_cqes = r(c.payload_send_cqes);
  s.completed_reads = r(c.completed_reads);
  s.completed_writes = r(c.completed_writes);
  s.receipts_sent = r(c.receipts_sent);
  s.bytes_read = r(c.bytes_read);
  s.bytes_written = r(c.bytes_written);
  s.reconnects = r(c.reconnects);
  s.stale_cqes = r(c.stale_cqes);
  s.duplicate_cqes = r(c.duplicate_cqes);
  s.grants = r(c.grants);
  s.grants_active = r(c.grants_active);
  s.grants_peak = r(c.grants_peak);
  s.grant_nacks = r(c.grant_nacks);
  s.range_conflicts = r(c.range_conflicts);
  s.windows = r(c.windows);
  s.windows_invalidated = r(c.windows_invalidated);
  s.windows_revoked = r(c.windows_revoked);
  s.receipts = r(c.receipts);
  s.receipt_mismatches = r(c.receipt_mismatches);
  s.qps_created = r(c.qps_created);
  s.qps_destroyed = r(c.qps_destroyed);
  s.mr_registrations = r(c.mr_registrations);
  s.mr_deregistrations = r(c.mr_deregistrations);
  s.budget_exhausted = r(c.budget_exhausted);
  s.retained = r(c.retained);
  s.nic_tables_sent = r(c.nic_tables_sent);
  s.nic_tables_received = r(c.nic_tables_received);
  s.message_qp_moves = r(c.message_qp_moves);
  s.grant_requests_deferred = r(c.grant_requests_deferred);
  s.grants_expired = r(c.grants_expired);
  s.receipts_released = r(c.receipts_released);
  s.segments_released = r(c.segments_released);
  s.qps_reaped = r(c.qps_reaped);
  s.qps_destroyed_undrained = r(c.qps_destroyed_undrained);
  s.dmabuf_registrations = r(c.dmabuf_registrations);
  s.peermem_registrations = r(c.peermem_registrations);
  s.private_grants = r(c.private_grants);
  s.private_teardowns = r(c.private_teardowns);
  s.monitor_ticks = r(c.monitor_ticks);
  s.route_queries = r(c.route_queries);
  s.route_fences = r(c.route_fences);
  s.route_recoveries = r(c.route_recoveries);
  s.route_qps_retired = r(c.route_qps_retired);
  s.cq_poll_failures = r(c.cq_poll_failures);
  s.progress_recoveries = r(c.progress_recoveries);
  s.qps_lost = r(c.qps_lost);
  s.endpoints_in_use = endpoints_.used();
  s.grants_in_use = grants_.used();
  s.direct_bytes_in_use = direct_bytes_.used();
  s.granted_bytes_in_use = granted_bytes_.used();
  s.receipt_slots_in_use = r(c.receipt_slots_in_use);
  const RailHealth::Stats rail = rail_health_.stats();
  s.rail_errors = rail.errors;
  s.rail_open_pairs = rail.paused;
  s.rail_probes = rail.probes;
  s.rail_recoveries = rail.recoveries;
  s.rail_pauses = rail.pauses;
  s.rail_pairs = rail.pairs;
  s.rail_pairs_refused = rail.refused;
  for (std::size_t t = 0; t < kTiers; ++t) {
    s.tiers[t] = {r(c.tiers[t].queued), r(c.tiers[t].posted), r(c.tiers[t].promoted),
                  r(c.tiers[t].dropped), r(c.tiers[t].slot_waits)};
  }
  {
    std::lock_guard lock(counters_.last_qp_mu);
    s.last_connected_qp = counters_.last_connected_qp;
  }
  return s;
}

MrSet::~MrSet() {
  release();
}

Status MrSet::prepare(std::byte* base, std::uint64_t length, bool remote) {
  return prepare(base, length, remote, SIZE_MAX);
}

Status MrSet::prepare(std::byte* base, std::uint64_t length, bool remote, std::size_t only) {
  const auto& contexts = engine_->contexts();
  copies_.assign(contexts.size(), Copy{});
  // A zero-length region has nothing to register; its grants carry no payload.
  if (length == 0) return {};
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    const Context& c = *contexts[i];
    if (only != SIZE_MAX && i != only) continue;
    if (!c.usable()) continue;  // paused contexts are prepared too; inert ones have no PD
    Copy& copy = copies_[i];
    copy.local = engine_->api().reg_mr(c.pd, base, length, IBV_ACCESS_LOCAL_WRITE);
    if (copy.local == nullptr) {
      const int err = errno;
      release();
      return verbs::errno_status(
          Errc::Unavailable,
          c.name + ": ibv_reg_mr of " + std::to_string(length) + " bytes (local)", err);
    }
    add(engine_->counters().mr_registrations);
    if (remote) {
      copy.parent =
          engine_->api().reg_mr(c.pd, base, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
      if (copy.parent == nullptr) {
        const int err = errno;
        release();
        return verbs::errno_status(
            Errc::Unavailable,
            c.name + ": ibv_reg_mr of " + std::to_string(length) + " bytes (window parent)", err);
      }
      add(engine_->counters().mr_registrations);
    }
  }
  location_ = topo::host_memory_location(base);
  return {};
}

Status MrSet::prepare_gpu(const detail::RegionRecord& region, GdrRoute route) {
  const auto& contexts = engine_->contexts();
  copies_.assign(contexts.size(), Copy{});
  if (region.length == 0 || region.cuda == nullptr) return {};
  const auto address = reinterpret_cast<std::uint64_t>(region.base);
  std::uint64_t export_base = 0;
  gpu_memory_ = region.cuda;
  if (route == GdrRoute::Dmabuf) {
    ORBITE_ASSIGN_OR_RETURN(const cuda::DmabufExport exported, region.cuda->export_dmabuf());
    dmabuf_fd_ = exported.fd;
    export_base = exported.base;
  }
  export_base_ = export_base;
  route_ = route;
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    const Context& c = *contexts[i];
    if (!c.usable()) continue;
    Copy& copy = copies_[i];
    // The MR keeps the exact range: offset from the exported (page-aligned) base, iova the
    // device address, as the verbs offset/IOVA rule and the requester's SGEs expect.
    copy.local =
        route == GdrRoute::Dmabuf
            ? engine_->api().reg_dmabuf_mr(c.pd, address - export_base, region.length, address,
                                           dmabuf_fd_, IBV_ACCESS_LOCAL_WRITE)
            : engine_->api().reg_mr(c.pd, region.base, region.length, IBV_ACCESS_LOCAL_WRITE);
    if (copy.local == nullptr) {
      const int err = errno;
      release();
      return verbs::errno_status(
          Errc::Unavailable,
          c.name + ": " +
              (route == GdrRoute::Dmabuf ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr (peermem)") + " of " +
              std::to_string(region.length) + " bytes of " + region.cuda->describe(),
          err);
    }
    add(engine_->counters().mr_registrations);
    add(route == GdrRoute::Dmabuf ? engine_->counters().dmabuf_registrations
                                  : engine_->counters().peermem_registrations);
  }
  location_ = topo::Location::cuda(region.cuda->ordinal());
  ORBITE_LOG(Debug, Rdma) << "GPU MR: region " << region.id << ", " << region.length
                          << " bytes, route " << gdr_route_name(route);
  return {};
}

ibv_mr* MrSet::register_private(ibv_pd* pd, const std::byte* at, std::uint64_t length,
                                int access) const {
  if (gpu_memory_ == nullptr || (route_ == GdrRoute::Dmabuf && dmabuf_fd_ < 0)) {
    errno = EINVAL;
    return nullptr;
  }
  const auto address = reinterpret_cast<std::uint64_t>(at);
  ibv_mr* mr = route_ == GdrRoute::Dmabuf
                   ? engine_->api().reg_dmabuf_mr(pd, address - export_base_, length, address,
                                                  dmabuf_fd_, access)
                   : engine_->api().reg_mr(pd, const_cast<std::byte*>(at), length, access);
  if (mr != nullptr) {
    add(engine_->counters().mr_registrations);
    add(route_ == GdrRoute::Dmabuf ? engine_->counters().dmabuf_registrations
                                   : engine_->counters().peermem_registrations);
  }
  return mr;
}

std::unique_ptr<MrSet> MrSet::view_of(std::shared_ptr<const detail::RegionRecord> owner) {
  const MrSet* of = mr_set_of(*owner);
  auto view = std::make_unique<MrSet>(of->engine_);
  view->copies_ = of->copies_;
  view->location_ = of->location_;
  view->owner_ = std::move(owner);
  return view;
}

bool MrSet::release() {
  if (owner_ != nullptr) {
    copies_.clear();  // the owner's: deregistered when the owner goes
    owner_.reset();
    return true;
  }
  bool ok = true;
  // Reverse order of registration; a copy that refuses keeps its handle (and so its pages).
  for (std::size_t i = copies_.size(); i-- > 0;) {
    for (ibv_mr** mr : {&copies_[i].parent, &copies_[i].local}) {
      if (*mr == nullptr) continue;
      if (const int rc = engine_->api().dereg_mr(*mr); rc != 0) {
        engine_->retain(engine_->contexts()[i]->name +
                        ": ibv_dereg_mr failed: " + std::strerror(rc));
        *mr = nullptr;  // retained: never deregistered again
        ok = false;
        refused_ = true;
        continue;
      }
      add(engine_->counters().mr_deregistrations);
      *mr = nullptr;
    }
  }
  // A refused MR still reaches the device memory: its dma-buf and allocation stay for good.
  if (refused_) return false;
  // The dma-buf outlives its MRs: closed once all of them are gone, exactly once. A failed
  // close is not retried; the MRs are gone, so the allocation may go.
  if (dmabuf_fd_ >= 0) {
    const int fd = std::exchange(dmabuf_fd_, -1);
    if (::close(fd) != 0) {
      engine_->retain("the dma-buf of a GPU MR: close failed: " +
                      std::string(std::strerror(errno)));
      ok = false;
    }
  }
  gpu_memory_.reset();
  return ok;
}

std::uint64_t MrSet::nic_mask() const {
  std::uint64_t mask = 0;
  const auto& contexts = engine_->contexts();
  for (std::size_t i = 0; i < copies_.size(); ++i) {
    if (copies_[i].local != nullptr) mask |= 1ULL << contexts[i]->nic_id;
  }
  return mask;
}

RdmaDomain::RdmaDomain(std::shared_ptr<RdmaEngine> engine)
    : engine_(std::move(engine)), cache_(std::make_shared<MrCache>(engine_)) {}

void RdmaDomain::declare_owned(std::byte* base, std::uint64_t length) {
  cache_->declare(base, length);
}

void RdmaDomain::forget_owned(const std::byte* base) {
  cache_->forget(base);
}

p2p::Backing RdmaDomain::backing(MemoryKind kind, std::string* why) const {
  const RdmaConfig& cfg = engine_->config().rdma;
  if (kind == MemoryKind::Host) {
    return cfg.host_memory == RdmaHostMemory::Direct ? p2p::Backing::Native : p2p::Backing::Staged;
  }
  if (cfg.cuda_memory == RdmaCudaMemory::Staged) return p2p::Backing::Staged;
  // Direct: a GPU MR per context, its route resolved per allocation at registration.
  (void)why;
  return p2p::Backing::Native;
}

std::uint8_t RdmaDomain::gpu_direct_routes(const p2p::DomainRegistration* registration) const {
  const auto* set = dynamic_cast<const MrSet*>(registration);
  if (set == nullptr || !set->gpu()) return 0;
  return set->route() == GdrRoute::Dmabuf ? kGpuDirectDmabuf : kGpuDirectPeermem;
}

Result<std::unique_ptr<p2p::DomainRegistration>> RdmaDomain::register_within(
    const detail::RegionRecord& region, const std::shared_ptr<const detail::RegionRecord>& parent) {
  const MrSet* of = parent != nullptr ? mr_set_of(*parent) : nullptr;
  if (of == nullptr || region.base < parent->base ||
      region.base + region.length > parent->base + parent->length) {
    return Status::error(Errc::Internal, "an RDMA window outside its registered parent");
  }
  return std::unique_ptr<p2p::DomainRegistration>(MrSet::view_of(parent));
}

Result<std::unique_ptr<p2p::DomainRegistration>> RdmaDomain::register_region(
    const detail::RegionRecord& region) {
  if (region.kind != MemoryKind::Host) return register_gpu(region);
  auto set = std::make_unique<MrSet>(engine_);
  ORBITE_RETURN_IF_ERROR(
      set->prepare(region.base, region.length, region.access.read || region.access.write));
  return std::unique_ptr<p2p::DomainRegistration>(std::move(set));
}

Result<std::unique_ptr<p2p::DomainRegistration>> RdmaDomain::register_gpu(
    const detail::RegionRecord& region) {
  const RdmaConfig& cfg = engine_->config().rdma;
  if (cfg.cuda_memory != RdmaCudaMemory::Direct || region.cuda == nullptr) {
    return Status::error(Errc::Internal, "rdma: CUDA memory registered while it is staged");
  }
  const std::string where = "GPUDirect RDMA of " + region.cuda->describe();
  ORBITE_ASSIGN_OR_RETURN(const cuda::GpuDirectSupport support, region.cuda->gpudirect_support());
  GdrPrerequisites p;
  p.device_dma_buf = support.dma_buf;
  p.export_entry = support.dma_buf_export;
  p.verbs_dmabuf_entry = engine_->api().reg_dmabuf_mr != nullptr;
  p.peermem_file = peermem_probe(sysfs_root());
  ORBITE_ASSIGN_OR_RETURN(const GdrRoute route,
                          resolve_gdr_route(cfg.gpu_direct_registration, p, where));
  // SYNC_MEMOPS and the write-ordering check come before any registration.
  ORBITE_RETURN_IF_ERROR(region.cuda->prepare_gpudirect());
  auto set = std::make_unique<MrSet>(engine_);
  ORBITE_RETURN_IF_ERROR(set->prepare_gpu(region, route));
  return std::unique_ptr<p2p::DomainRegistration>(std::move(set));
}

Status RdmaDomain::deregister(std::unique_ptr<p2p::DomainRegistration> registration) {
  auto* set = dynamic_cast<MrSet*>(registration.get());
  if (set == nullptr) return {};
  if (!set->release()) {
    std::lock_guard lock(retained_mu_);
    retained_.push_back(std::move(registration));
    return Status::error(Errc::Unquiesced,
                         "an RDMA MR of the region could not be deregistered; "
                         "it is retained");
  }
  return {};
}

std::string RdmaDomain::pack(const detail::RegionRecord&,
                             const p2p::DomainRegistration* registration) const {
  std::string out;
  wire::Writer w(out);
  w.put<std::uint8_t>(1);
  const auto* set = dynamic_cast<const MrSet*>(registration);
  w.put<std::uint64_t>(set != nullptr ? set->nic_mask() : 0);
  return out;
}

Status RdmaDomain::unpack(std::string_view blob) const {
  wire::Reader r(blob);
  const auto version = r.get<std::uint8_t>();
  r.get<std::uint64_t>();
  if (!r.done() || version != 1) {
    return Status::error(Errc::InvalidArgument,
                         "its rdma entry of " + std::to_string(blob.size()) +
                             " bytes is not an OrbiTE RDMA descriptor (version 1, NIC mask)");
  }
  return {};
}

const MrSet* mr_set_of(const detail::RegionRecord& region) {
  return dynamic_cast<const MrSet*>(
      region.registrations[static_cast<std::size_t>(p2p::TransportId::Rdma)].get());
}

}  // namespace orbite::rdma
