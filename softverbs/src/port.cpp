// The live state of each configured device: port state (from the config, the control API and
// the link of the bind address's interface), the GID table, the rate, and what a port change
// does to the QPs of every context opened on the device. Network namespaces: a device whose
// config names one creates its sockets there (the calling thread enters it for the call).
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "internal.h"

namespace softverbs {

void start_control_socket();  // control.cpp
int execute_command(const std::string& command, std::string* reply);

namespace {

std::vector<std::unique_ptr<DeviceState>>& states() {
  static auto* list = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceState>>();
    const auto& cfg = devices();
    for (size_t i = 0; i < cfg.size(); ++i) {
      auto st = std::make_unique<DeviceState>();
      st->index = static_cast<int>(i);
      st->cfg = &cfg[i];
      st->admin_state = cfg[i].port_state;
      st->active = cfg[i].port_state == IBV_PORT_ACTIVE;
      st->gids = cfg[i].gids;
      st->rate_gbps = cfg[i].rate_gbps;
      st->active_speed = cfg[i].active_speed;
      st->active_width = cfg[i].active_width;
      st->bucket.set_rate(cfg[i].rate_gbps * 1e9 / 8, now_ns());
      st->mw_strict = cfg[i].mw_strict;
      st->mw_index_limit = cfg[i].mw_index_limit;
      v->push_back(std::move(st));
    }
    return v;
  }();
  return *list;
}

// Runs fn with the calling thread in the network namespace ns ("" = as it is); -errno on error.
template <typename F>
int in_netns(const std::string& ns, F&& fn) {
  if (ns.empty()) return fn();
  const std::string path = ns[0] == '/' ? ns : "/var/run/netns/" + ns;
  const int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0) return -errno;
  const int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0 || setns(target, CLONE_NEWNET) != 0) {
    const int err = errno;
    if (self >= 0) close(self);
    close(target);
    return -err;
  }
  const int r = fn();
  const int back = setns(self, CLONE_NEWNET);
  close(self);
  close(target);
  if (back != 0) {  // cannot happen with the rights that allowed the first setns
    std::fprintf(stderr, "softverbs: cannot return from network namespace %s\n", ns.c_str());
  }
  return r;
}

// What a link that stays down does to every connected QP once the retries run out.
void fail_in_flight(Device& dev) {
  std::vector<std::shared_ptr<Qp>> qps;
  {
    std::lock_guard lock(dev.qp_mu);
    for (auto& [qpn, qp] : dev.qps) qps.push_back(qp);
  }
  for (auto& sp : qps) {
    Qp& qp = *sp;
    std::lock_guard lock(qp.mu);
    if (qp.state == IBV_QPS_RTS || qp.state == IBV_QPS_SQD) fail_oldest_on_wire(qp);
  }
}

void apply_port(DeviceState& st, ibv_port_state admin, bool link_up) {
  std::lock_guard lock(st.mu);
  const bool was = st.active;
  st.admin_state = admin;
  st.link_up = link_up;
  const bool now = link_up && admin == IBV_PORT_ACTIVE;
  st.active = now;
  if (was == now) return;
  for (Device* dev : st.open) {
    dev->async_event(now ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR, nullptr, nullptr);
    if (!now) fail_in_flight(*dev);
  }
}

}  // namespace

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

DeviceState* find_state(const std::string& name) {
  auto& v = states();
  for (auto& st : v) {
    if (st->cfg->name == name || std::to_string(st->index) == name) return st.get();
  }
  return nullptr;
}

DeviceState& device_state(int index) {
  auto& v = states();
  static std::once_flag once;
  std::call_once(once, [&v] {
    for (auto& st : v) {
      for (const std::string& f : st->cfg->faults) {
        std::string reply;
        if (execute_command(f, &reply) != 0) {
          std::fprintf(stderr, "softverbs: %s: %s\n", f.c_str(), reply.c_str());
        }
      }
    }
    start_control_socket();
  });
  return *v[static_cast<size_t>(index)];
}

void set_admin_state(DeviceState& st, ibv_port_state state) {
  bool link = true;
  {
    std::lock_guard lock(st.mu);
    link = st.link_up;
  }
  apply_port(st, state, link);
}

void set_link_up(DeviceState& st, bool up) {
  ibv_port_state admin;
  {
    std::lock_guard lock(st.mu);
    if (st.link_up == up) return;
    admin = st.admin_state;
  }
  apply_port(st, admin, up);
}

int device_socket(const DeviceConfig& cfg, int type) {
  return in_netns(cfg.netns, [type] {
    const int fd = socket(AF_INET, type, 0);
    return fd >= 0 ? fd : -errno;
  });
}

void check_link(DeviceState& st) {
  std::string ifname;
  int fd = -1;
  {
    std::lock_guard lock(st.mu);
    if (!st.link_probed) {
      st.link_probed = true;
      const uint32_t ip = st.cfg->bind_ip;
      std::string found;
      in_netns(st.cfg->netns, [ip, &found] {
        ifaddrs* list = nullptr;
        if (getifaddrs(&list) != 0) return -errno;
        for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
          if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET &&
              reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == ip) {
            found = a->ifa_name;
            break;
          }
        }
        freeifaddrs(list);
        return 0;
      });
      st.ifname = found;
      if (!found.empty()) {
        const int s = device_socket(*st.cfg, SOCK_DGRAM | SOCK_CLOEXEC);
        st.link_fd = s >= 0 ? s : -1;
      }
    }
    ifname = st.ifname;
    fd = st.link_fd;
  }
  if (fd < 0) return;  // an address no interface holds (yet): nothing to watch
  ifreq req{};
  std::snprintf(req.ifr_name, sizeof(req.ifr_name), "%s", ifname.c_str());
  bool up = false;
  if (ioctl(fd, SIOCGIFFLAGS, &req) == 0) {
    up = (req.ifr_flags & IFF_UP) != 0 && (req.ifr_flags & IFF_RUNNING) != 0;
  }
  set_link_up(st, up);
}

int take_wr_fault(DeviceState& st, uint32_t qpn) {
  if (!st.have_wr_faults.load(std::memory_order_relaxed)) return -1;
  std::lock_guard lock(st.fault_mu);
  for (size_t i = 0; i < st.wr_faults.size(); ++i) {
    WrFault& f = st.wr_faults[i];
    if (f.qpn != 0 && f.qpn != qpn) continue;
    if (--f.countdown > 0) continue;
    const int status = f.status;
    st.wr_faults.erase(st.wr_faults.begin() + static_cast<ptrdiff_t>(i));
    st.have_wr_faults = !st.wr_faults.empty();
    return status;
  }
  return -1;
}

int take_dereg_fault(DeviceState& st) {
  std::lock_guard lock(st.fault_mu);
  for (size_t i = 0; i < st.dereg_faults.size(); ++i) {
    if (--st.dereg_faults[i].countdown > 0) continue;
    const int err = st.dereg_faults[i].err;
    st.dereg_faults.erase(st.dereg_faults.begin() + static_cast<ptrdiff_t>(i));
    return err;
  }
  return 0;
}

bool take_poll_fault(DeviceState& st, uint64_t cq_serial) {
  if (!st.have_poll_faults.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(st.fault_mu);
  bool failing = false;
  for (size_t i = 0; i < st.poll_faults.size();) {
    PollFault& f = st.poll_faults[i];
    if (cq_serial >= f.cq_limit) {
      ++i;
      continue;
    }
    if (f.countdown > 1) {
      --f.countdown;
      ++i;
      continue;
    }
    failing = true;
    if (--f.remaining == 0) {
      st.poll_faults.erase(st.poll_faults.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  st.have_poll_faults = !st.poll_faults.empty();
  if (failing) ++st.polls_failed;
  return failing;
}

int take_destroy_fault(DeviceState& st, uint32_t qpn) {
  std::lock_guard lock(st.fault_mu);
  for (size_t i = 0; i < st.destroy_faults.size(); ++i) {
    DestroyFault& f = st.destroy_faults[i];
    if (f.qpn != 0 && f.qpn != qpn) continue;
    if (--f.countdown > 0) continue;
    const int err = f.err;
    st.destroy_faults.erase(st.destroy_faults.begin() + static_cast<ptrdiff_t>(i));
    return err;
  }
  return 0;
}

bool take_post_fault(DeviceState& st, uint32_t qpn, PostFault* out) {
  if (!st.have_post_faults.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(st.fault_mu);
  for (size_t i = 0; i < st.post_faults.size(); ++i) {
    PostFault& f = st.post_faults[i];
    if (f.qpn != 0 && f.qpn != qpn) continue;
    if (--f.countdown > 0) continue;
    *out = f;
    st.post_faults.erase(st.post_faults.begin() + static_cast<ptrdiff_t>(i));
    st.have_post_faults = !st.post_faults.empty();
    return true;
  }
  return false;
}

}  // namespace softverbs
