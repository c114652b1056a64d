// RDMA contexts: one per (device, port), owning the device handle, its protection domain, the PD's
// window key history and the route (port, GID, LID, MTU). Discovery applies the filters before a
// device is opened, numbers NICs as the topology inventory does (position after the filters; a
// device that fails keeps its number), prefers an ACTIVE port and keeps a paused one with a valid
// GID, and never lets a pin (device, port, gid_index) fall back. A context whose provider lacks
// Type-2B memory windows or SEND_WITH_INV (IBV_DEVICE_MEM_MGT_EXTENSIONS) stays Inert with the
// missing capability named.
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "p2p/rdma/key_history.h"
#include "platform/ibv_loader.h"

namespace orbite::rdma {

enum class ContextState : std::uint8_t { Inert, Paused, Active };

struct DeviceLimits {
  std::uint32_t max_qp_wr = 0;
  std::uint32_t max_cqe = 0;
  std::uint32_t max_sge = 0;
  std::uint32_t max_mw = 0;
  std::uint32_t max_qp_rd_atom = 0;
  std::uint32_t max_qp_init_rd_atom = 0;
  std::uint64_t max_mr_size = 0;
};

struct Route {
  std::uint8_t port = 1;
  std::uint8_t gid_index = 0;
  ibv_gid gid{};
  std::uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  std::uint8_t link_layer = IBV_LINK_LAYER_ETHERNET;
  ibv_port_state state = IBV_PORT_NOP;
  double rate_gbps = 0.0;  // decoded from the port's active speed and width; 0 when unknown
  std::uint64_t generation = 1;
};

// Lifetime: owned by the RdmaEngine, destroyed after every lane's CQs, QPs and windows on it.
// Fields are fixed after discovery except `keys`, which key_mu guards, `state`, which moves
// between Active and Paused with the port and its address (RdmaEngine::refresh_port) and is read
// by every lane, and the route, which only the monitor replaces, while the context is Paused and
// holds no QP (route(), a copy under route_mu_).
class Context {
 public:
  Context(const IbvApi& api, int nic_id, std::string name);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const IbvApi& api;
  const int nic_id;
  const std::string name;
  std::atomic<ContextState> state{ContextState::Inert};
  std::atomic<std::uint64_t> route_generation{1};  // advances on every pause and resume
  std::string why_inert;                           // the reason, for an Inert context
  int numa = -1;                                   // sysfs <ibdev_path>/device/numa_node
  std::string pci_bus_id;                          // sysfs; empty: not a PCI device
  // The async event fd was made non-blocking: the monitor drains device events from it
  // (RdmaEngine::drain_events). False leaves port changes to the monitor's scan alone.
  bool async_events = false;
  // Device events read (all kinds) and port events among them; written by the monitor.
  std::atomic<std::uint64_t> events_read{0};
  std::atomic<std::uint64_t> port_events{0};
  // QPs on this device, every lane's: created and not yet destroyed (a QP whose destroy failed
  // stays counted for good). A fenced route is published again only once this is zero, so no QP
  // built on the old address survives into the new one.
  std::atomic<std::uint32_t> live_qps{0};
  // A fatal device event: the context stays paused for good (its QPs drain; nothing resumes it).
  std::atomic<bool> fatal{false};
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  DeviceLimits limits;

  // Order: a lane's mutex → key_mu, a leaf; the engine's stats take it alone. A grant locks its
  // range (RangeLocks) before it admits window keys here: Lane → RangeLocks, then → key_mu.
  std::mutex key_mu;
  std::unique_ptr<KeyHistory> keys;  // guarded by key_mu

  [[nodiscard]] bool usable() const { return state != ContextState::Inert; }
  [[nodiscard]] const char* state_name() const;
  // Destroys PD and device. False (and the handles kept) when one refuses: they are retained.
  bool destroy(std::string* why);

  // The route lanes connect with. set_route: discovery, and the monitor publishing a fenced
  // route again.
  [[nodiscard]] Route route() const;
  void set_route(const Route& r);
  // Why the route is fenced now ("" when it is not): the engine's monitor sets it with the pause
  // and clears it on publication.
  [[nodiscard]] std::string fence_reason() const;
  void set_fence_reason(std::string why);

 private:
  mutable std::mutex route_mu_;  // a leaf: guards route_ and fence_reason_
  Route route_;
  std::string fence_reason_;
};

struct Discovery {
  std::vector<std::unique_ptr<Context>> contexts;  // slots by NIC ID order; Inert ones included
  [[nodiscard]] std::size_t usable() const;
  // "soft_0: inert (...)", for the error when none is usable.
  [[nodiscard]] std::string summary() const;
};

// Opens the permitted devices. Unavailable when the library reports no device ("no RDMA
// devices") or the pinned device is absent.
Result<Discovery> discover_contexts(const IbvApi& api, const rdma::RdmaConfig& config);

// The GID a route on `port` uses now: the pinned index re-read (an unreadable or zero entry is no
// address; a pin never falls back), or, unpinned, the best valid entry ranked as TENT ranks them
// (RoCE v2 with an IPv4-mapped address, then RoCE v2, then any other non-zero entry). Sets
// route.gid and route.gid_index; false when there is none.
bool resolve_gid(const IbvApi& api, ibv_context* ctx, std::uint8_t port, int table_len,
                 std::optional<std::uint32_t> pinned, Route& route);

// 16 raw GID bytes as text ("::ffff:127.0.0.1" style is not attempted: hex groups).
std::string gid_text(const ibv_gid& gid);

}  // namespace orbite::rdma
