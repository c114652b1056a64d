#include "p2p/rdma/context.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>

#include "common/log.h"
#include "p2p/rdma/verbs.h"
#include "topo/inventory.h"
#include "topo/port_rate.h"

namespace orbite::rdma {

Context::Context(const IbvApi& a, int id, std::string n) : api(a), nic_id(id), name(std::move(n)) {}

Context::~Context() {
  std::string why;
  if (!destroy(&why)) {
    ORBITE_LOG(Error, Rdma) << name << ": " << why << "; the handles are retained";
  }
}

bool Context::destroy(std::string* why) {
  if (pd != nullptr) {
    if (const int rc = api.dealloc_pd(pd); rc != 0) {
      *why = "ibv_dealloc_pd failed: " + std::string(std::strerror(rc));
      return false;
    }
    pd = nullptr;
  }
  if (ctx != nullptr) {
    if (api.close_device(ctx) != 0) {
      *why = "ibv_close_device failed: " + std::string(std::strerror(errno));
      return false;
    }
    ctx = nullptr;
  }
  return true;
}

Route Context::route() const {
  std::lock_guard lock(route_mu_);
  return route_;
}

void Context::set_route(const Route& r) {
  std::lock_guard lock(route_mu_);
  route_ = r;
}

std::string Context::fence_reason() const {
  std::lock_guard lock(route_mu_);
  return fence_reason_;
}

void Context::set_fence_reason(std::string why) {
  std::lock_guard lock(route_mu_);
  fence_reason_ = std::move(why);
}

const char* Context::state_name() const {
  switch (state.load()) {
    case ContextState::Active: return "active";
    case ContextState::Paused: return "paused";
    case ContextState::Inert: return "inert";
  }
  return "inert";
}

std::size_t Discovery::usable() const {
  return static_cast<std::size_t>(
      std::count_if(contexts.begin(), contexts.end(), [](const auto& c) { return c->usable(); }));
}

std::string Discovery::summary() const {
  std::string out;
  for (const auto& c : contexts) {
    if (!out.empty()) out += "; ";
    out += c->name + ": " + c->state_name();
    if (!c->why_inert.empty()) out += " (" + c->why_inert + ")";
  }
  return out;
}

std::string gid_text(const ibv_gid& gid) {
  std::string out;
  char buf[8];
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(buf, sizeof(buf), "%s%02x%02x", i == 0 ? "" : ":", gid.raw[i], gid.raw[i + 1]);
    out += buf;
  }
  return out;
}

namespace {

bool zero_gid(const ibv_gid& g) {
  return std::all_of(std::begin(g.raw), std::end(g.raw), [](std::uint8_t b) { return b == 0; });
}

bool ipv4_mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i) {
    if (g.raw[i] != 0) return false;
  }
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

// The automatic GID choice, as TENT ranks them: RoCE v2 with an IPv4-mapped address first, then
// RoCE v2, then any other non-zero entry. Without _ibv_query_gid_ex the type is unknown and the
// first non-zero entry wins. Returns false when the port has no valid GID.
bool choose_gid(const IbvApi& api, ibv_context* ctx, std::uint8_t port, int table_len,
                Route& route) {
  int best_rank = 99;
  for (int i = 0; i < std::min(table_len, 256); ++i) {
    ibv_gid gid{};
    int rank = 2;
    if (api.query_gid_ex != nullptr) {
      ibv_gid_entry e{};
      if (api.query_gid_ex(ctx, port, static_cast<std::uint32_t>(i), &e, 0, sizeof(e)) != 0)
        continue;
      gid = e.gid;
      if (e.gid_type == IBV_GID_TYPE_ROCE_V2) rank = ipv4_mapped(gid) ? 0 : 1;
    } else if (api.query_gid(ctx, port, i, &gid) != 0) {
      continue;
    }
    if (zero_gid(gid) || rank >= best_rank) continue;
    best_rank = rank;
    route.gid = gid;
    route.gid_index = static_cast<std::uint8_t>(i);
    if (rank == 0) break;
  }
  return best_rank != 99;
}

// The context's port: the pinned one, or the first ACTIVE one, else the first with a valid
// address (kept paused); its GID pinned or ranked. Sets c.route; false when none qualifies.
bool choose_port(Context& c, std::uint32_t ports, const rdma::RdmaConfig& cfg,
                 const topo::NicFilter& filter, bool& found_active) {
  const IbvApi& api = c.api;
  bool found = false;
  found_active = false;
  for (std::uint32_t p = 1; p <= ports && !found_active; ++p) {
    if (cfg.port && *cfg.port != p) continue;
    if (!topo::filter_allows(filter, c.name, p)) continue;
    ibv_port_attr pa{};
    if (api.query_port(c.ctx, static_cast<std::uint8_t>(p), &pa) != 0) continue;
    Route r;
    r.port = static_cast<std::uint8_t>(p);
    r.lid = pa.lid;
    r.mtu = pa.active_mtu;
    r.link_layer = pa.link_layer;
    r.state = pa.state;
    r.rate_gbps = topo::port_rate_gbps(pa.active_speed, pa.active_width);
    const bool gid_ok = resolve_gid(api, c.ctx, r.port, pa.gid_tbl_len, cfg.gid_index, r);
    // InfiniBand routes by LID and needs no GID; RoCE needs one.
    if (!gid_ok && r.link_layer != IBV_LINK_LAYER_INFINIBAND) continue;
    if (found && pa.state != IBV_PORT_ACTIVE) continue;
    c.set_route(r);
    found = true;
    found_active = pa.state == IBV_PORT_ACTIVE;
  }
  return found;
}

// Opens one device for `cfg`: its port (pinned, or the first ACTIVE one, else the first with a
// valid GID, kept paused), its GID (pinned or ranked), the capability checks, then the PD.
void open_context(Context& c, ibv_device* dev, const rdma::RdmaConfig& cfg,
                  const topo::NicFilter& filter) {
  const IbvApi& api = c.api;
  c.ctx = api.open_device(dev);
  if (c.ctx == nullptr) {
    c.why_inert = "ibv_open_device failed: " + std::string(std::strerror(errno));
    return;
  }
  // Port events arrive on the async fd; the monitor reads it without blocking.
  const int fl = ::fcntl(c.ctx->async_fd, F_GETFL);
  if (fl >= 0 && ::fcntl(c.ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0) {
    c.async_events = true;
  } else {
    ORBITE_LOG(Warn, Rdma) << c.name << ": the async event fd cannot be made non-blocking ("
                           << std::strerror(errno) << "): port changes wait for the monitor's scan";
  }
  ibv_device_attr_ex attr{};
  if (const int rc = verbs::query_device_ex(api, c.ctx, &attr); rc != 0) {
    c.why_inert = "ibv_query_device failed: " + std::string(std::strerror(rc));
    return;
  }
  const ibv_device_attr& a = attr.orig_attr;
  c.limits = DeviceLimits{static_cast<std::uint32_t>(a.max_qp_wr),
                          static_cast<std::uint32_t>(a.max_cqe),
                          static_cast<std::uint32_t>(a.max_sge),
                          static_cast<std::uint32_t>(a.max_mw),
                          static_cast<std::uint32_t>(a.max_qp_rd_atom),
                          static_cast<std::uint32_t>(a.max_qp_init_rd_atom),
                          a.max_mr_size};
  const std::uint64_t flags = a.device_cap_flags | attr.device_cap_flags_ex;
  if ((flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) == 0 || a.max_mw == 0) {
    c.why_inert = "the provider lacks Type-2B memory windows (IBV_DEVICE_MEM_WINDOW_TYPE_2B)";
    return;
  }
  if ((flags & IBV_DEVICE_MEM_MGT_EXTENSIONS) == 0) {
    c.why_inert = "the provider lacks SEND_WITH_INV (IBV_DEVICE_MEM_MGT_EXTENSIONS)";
    return;
  }
  bool found_active = false;
  const bool found = choose_port(c, a.phys_port_cnt, cfg, filter, found_active);
  if (!found) {
    c.why_inert = cfg.port || cfg.gid_index
                      ? "the pinned port " + std::to_string(cfg.port.value_or(1)) +
                            " / GID index " + std::to_string(cfg.gid_index.value_or(0)) +
                            " has no valid address (pins never fall back)"
                      : "no port with a valid GID";
    return;
  }
  c.pd = api.alloc_pd(c.ctx);
  if (c.pd == nullptr) {
    c.why_inert = "ibv_alloc_pd failed: " + std::string(std::strerror(errno));
    return;
  }
  c.keys = std::make_unique<KeyHistory>(cfg.max_window_key_indices);
  c.state = found_active ? ContextState::Active : ContextState::Paused;
  if (!found_active) c.set_fence_reason("its port was not ACTIVE at discovery");
}

}  // namespace

bool resolve_gid(const IbvApi& api, ibv_context* ctx, std::uint8_t port, int table_len,
                 std::optional<std::uint32_t> pinned, Route& route) {
  if (!pinned) return choose_gid(api, ctx, port, table_len, route);
  ibv_gid gid{};
  if (api.query_gid(ctx, port, static_cast<int>(*pinned), &gid) != 0 || zero_gid(gid)) {
    return false;
  }
  route.gid = gid;
  route.gid_index = static_cast<std::uint8_t>(*pinned);
  return true;
}

Result<Discovery> discover_contexts(const IbvApi& api, const rdma::RdmaConfig& cfg) {
  int n = 0;
  ibv_device** list = api.get_device_list(&n);
  if (list == nullptr) {
    const int err = errno;
    // rdma-core answers ENOSYS when the kernel has no RDMA support at all (no devices).
    return verbs::errno_status(Errc::Unavailable,
                               "libibverbs.so.1 (" + api.path + "): no RDMA devices" +
                                   (err == ENOSYS ? " (no RDMA support in the kernel)" : "") +
                                   ": ibv_get_device_list",
                               err);
  }
  topo::NicFilter filter{cfg.rdma_whitelist, cfg.rdma_blacklist};
  Discovery out;
  int nic_id = 0;
  bool pin_seen = false;
  for (int i = 0; i < n; ++i) {
    const std::string name = api.get_device_name(list[i]);
    // NIC IDs are positions after the filters, as in the topology inventory.
    if (!topo::filter_allows(filter, name) && !topo::filter_allows(filter, name, 2)) continue;
    const int id = nic_id++;
    if (cfg.device && *cfg.device != name) continue;
    pin_seen = pin_seen || cfg.device.has_value();
    auto c = std::make_unique<Context>(api, id, name);
    const VerbsDeviceRecord place = describe_sysfs_place(list[i], api);
    c->numa = place.numa;
    c->pci_bus_id = place.pci_bus_id;
    open_context(*c, list[i], cfg, filter);
    if (!c->usable()) {
      ORBITE_LOG(Info, Rdma) << name << " is not used: " << c->why_inert;
      std::string ignored;
      if (!c->destroy(&ignored)) {
        ORBITE_LOG(Error, Rdma) << name << ": " << ignored;
      }
    }
    out.contexts.push_back(std::move(c));
  }
  api.free_device_list(list);
  if (n == 0) {
    return Status::error(Errc::Unavailable, "libibverbs.so.1 (" + api.path +
                                                "): no RDMA devices (ibv_get_device_list found "
                                                "none)");
  }
  if (cfg.device && !pin_seen) {
    return Status::error(Errc::Unavailable, "rdma.device '" + *cfg.device +
                                                "' is not among the permitted RDMA devices");
  }
  return out;
}

}  // namespace orbite::rdma
