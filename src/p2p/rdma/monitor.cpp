// The RDMA engine's monitor hook: route queries (port, address, fence and publication, see
// docs/reliability.md, "Monitor recovery"), the periodic scan and the devices' async events.
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "p2p/rdma/engine.h"
#include "topo/port_rate.h"

namespace orbite::rdma {

namespace {

// Whether the route's address still holds on an active port: InfiniBand routes by LID, RoCE by
// the GID at the route's index (re-read: an entry that changed or went away fails).
bool address_holds(const IbvApi& api, const Context& c, const Route& route,
                   const ibv_port_attr& pa) {
  if (route.link_layer == IBV_LINK_LAYER_INFINIBAND) return pa.lid == route.lid;
  ibv_gid gid{};
  if (api.query_gid(c.ctx, route.port, route.gid_index, &gid) != 0) return false;
  return std::memcmp(gid.raw, route.gid.raw, sizeof(gid.raw)) == 0;
}

}  // namespace

bool RdmaEngine::refresh_port(std::size_t context) {
  if (context >= contexts_.contexts.size()) return false;
  Context& c = *contexts_.contexts[context];
  if (!c.usable()) return false;
  std::lock_guard lock(health_mu_);
  add(counters_.route_queries);
  const Route was = c.route();
  ibv_port_attr pa{};
  if (api_.query_port(c.ctx, was.port, &pa) != 0) return false;  // keeps the last state
  const bool port_active = pa.state == IBV_PORT_ACTIVE;
  // Every successful query of an active port refreshes its rate (a changed one re-seeds both
  // estimates; an unchanged one changes nothing).
  if (port_active) {
    selector_->set_link_rate(c.nic_id, topo::port_rate_gbps(pa.active_speed, pa.active_width));
  }
  if (c.state.load() == ContextState::Active) {
    std::string why;
    if (c.fatal.load()) {
      why = "a fatal device event";
    } else if (!port_active) {
      why = "its port left ACTIVE";
    } else if (!address_holds(api_, c, was, pa)) {
      why = was.link_layer == IBV_LINK_LAYER_INFINIBAND ? "its LID changed"
                                                        : "its GID changed or went away";
    }
    if (why.empty()) return false;
    // Fenced: no new parent or message QP picks the context; the lanes retire its QPs once idle
    // (RdmaLane::retire_fenced_qps), the peers theirs to it once the NicTable tells them.
    c.state = ContextState::Paused;
    c.set_fence_reason(why);
    c.route_generation.fetch_add(1);
    selector_->set_healthy(c.nic_id, false);
    nic_epoch_.fetch_add(1, std::memory_order_acq_rel);
    add(counters_.route_fences);
    ORBITE_LOG(Warn, Rdma) << c.name << " port " << static_cast<int>(was.port) << ": " << why
                           << "; the route is fenced (later transfers take the other rails) "
                              "until its QPs have drained and a valid address is back";
    return true;
  }
  // Paused: the route comes back only validated (an active port and an address: the pinned GID
  // index re-read, or the GIDs ranked again) and with every QP of the old one destroyed.
  if (c.fatal.load() || !port_active) return false;
  Route next = was;
  next.state = pa.state;
  next.lid = pa.lid;
  next.mtu = pa.active_mtu;
  next.rate_gbps = topo::port_rate_gbps(pa.active_speed, pa.active_width);
  const bool addressed =
      resolve_gid(api_, c.ctx, was.port, pa.gid_tbl_len, config_.rdma.gid_index, next) ||
      next.link_layer == IBV_LINK_LAYER_INFINIBAND;
  if (!addressed) {
    c.set_fence_reason("its port is ACTIVE but has no valid GID" +
                       std::string(config_.rdma.gid_index ? " at the pinned index" : ""));
    return false;
  }
  if (const std::uint32_t left = c.live_qps.load(); left != 0) {
    c.set_fence_reason("waiting for " + std::to_string(left) + " QP(s) of the old route to drain");
    return false;
  }
  c.set_route(next);
  c.set_fence_reason("");
  c.state = ContextState::Active;
  c.route_generation.fetch_add(1);
  selector_->set_healthy(c.nic_id, true);
  nic_epoch_.fetch_add(1, std::memory_order_acq_rel);
  add(counters_.route_recoveries);
  ORBITE_LOG(Warn, Rdma) << c.name << " port " << static_cast<int>(was.port)
                         << " is ACTIVE with a valid address again (GID index "
                         << static_cast<int>(next.gid_index)
                         << "): the route is published, the context resumes";
  return true;
}

void RdmaEngine::scan_ports() {
  add(counters_.monitor_ticks);
  for (std::size_t i = 0; i < contexts_.contexts.size(); ++i) refresh_port(i);
}

std::vector<int> RdmaEngine::event_fds() const {
  std::vector<int> out;
  for (const auto& c : contexts_.contexts) {
    if (c->usable() && c->async_events) out.push_back(c->ctx->async_fd);
  }
  return out;
}

std::size_t RdmaEngine::drain_events() {
  std::size_t total = 0;
  for (std::size_t i = 0; i < contexts_.contexts.size(); ++i) {
    Context& c = *contexts_.contexts[i];
    if (!c.usable() || !c.async_events) continue;
    bool port_changed = false;
    for (int k = 0; k < 64; ++k) {
      ibv_async_event e{};
      if (api_.get_async_event(c.ctx, &e) != 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          ORBITE_LOG(Warn, Rdma) << c.name << ": ibv_get_async_event failed ("
                                 << std::strerror(errno)
                                 << "); its port changes now wait for the monitor's scan";
          c.async_events = false;
        }
        break;
      }
      ++total;
      add(c.events_read);
      switch (e.event_type) {
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_GID_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
          add(c.port_events);
          port_changed = true;
          ORBITE_LOG(Debug, Rdma) << c.name << ": port event " << static_cast<int>(e.event_type);
          break;
        case IBV_EVENT_DEVICE_FATAL:
          port_changed = true;
          c.fatal = true;
          ORBITE_LOG(Error, Rdma) << c.name
                                  << ": fatal device event; the context is fenced for good";
          break;
        default:
          ORBITE_LOG(Debug, Rdma) << c.name << ": device event " << static_cast<int>(e.event_type)
                                  << ", left to the lanes' completions";
          break;
      }
      api_.ack_async_event(&e);
    }
    if (port_changed) refresh_port(i);
  }
  return total;
}

}  // namespace orbite::rdma
