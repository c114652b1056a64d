// Devices, contexts, ports, GIDs and async events; the small helpers of libibverbs.
#include <endian.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "internal.h"
#include "provider_abi.h"

#undef ibv_query_port

extern "C" {
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
}

namespace softverbs {
namespace {

// rdma-core's providers reach their own state from an ibv_device through the verbs_device
// around it, whose first member after the ibv_device is the provider's ops pointer (their
// mlx5dv_*/efadv_* calls compare it with their own ops to tell their devices from others).
// A softverbs device has that pointer in the same place, pointing at a softverbs object, so
// those calls see a device of another provider and fail with EOPNOTSUPP as they do there.
const char kSoftverbsOps[] = "softverbs";

struct DeviceBox {
  ibv_device ibv;
  const void* provider_ops = kSoftverbsOps;  // where verbs_device::ops is
  int index = 0;
};

// The device structs live for the whole process, as rdma-core's do.
DeviceBox* device_boxes() {
  static DeviceBox* boxes = [] {
    const auto& cfg = devices();
    auto* b = new DeviceBox[cfg.size() + 1]();
    for (size_t i = 0; i < cfg.size(); ++i) {
      b[i].index = static_cast<int>(i);
      b[i].ibv.node_type = IBV_NODE_CA;
      b[i].ibv.transport_type = IBV_TRANSPORT_IB;
      std::snprintf(b[i].ibv.name, sizeof(b[i].ibv.name), "%s", cfg[i].name.c_str());
      std::snprintf(b[i].ibv.dev_name, sizeof(b[i].ibv.dev_name), "uverbs%zu", i);
      std::snprintf(b[i].ibv.dev_path, sizeof(b[i].ibv.dev_path), "%s", cfg[i].sysfs_path.c_str());
      std::snprintf(b[i].ibv.ibdev_path, sizeof(b[i].ibv.ibdev_path), "%s",
                    cfg[i].sysfs_path.c_str());
    }
    return b;
  }();
  return boxes;
}

const DeviceConfig& config_of(ibv_device* d) {
  return devices()[static_cast<size_t>(reinterpret_cast<DeviceBox*>(d)->index)];
}

void fill_device_attr(DeviceState& st, ibv_device_attr* a) {
  const DeviceConfig& cfg = *st.cfg;
  std::memset(a, 0, sizeof(*a));
  std::snprintf(a->fw_ver, sizeof(a->fw_ver), "softverbs 0.1");
  a->node_guid = htobe64(cfg.guid);
  a->sys_image_guid = htobe64(cfg.guid);
  a->max_mr_size = 1ULL << 40;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = 0x5356;
  a->vendor_part_id = 1;
  a->hw_ver = 1;
  a->max_qp = 1 << 15;
  a->max_qp_wr = 1 << 14;
  // MEM_MGT_EXTENSIONS: local invalidation and SEND_WITH_INV (ibv_query_device(3)), so it
  // goes with either "disable mw" (no LOCAL_INV) or "disable send_inv".
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
                        IBV_DEVICE_MEM_MGT_EXTENSIONS;
  const uint32_t limit = st.mw_index_limit.load();
  a->max_mw = limit != 0 ? static_cast<int>(limit) : 1 << 20;
  if (st.mw_disabled.load()) {
    a->device_cap_flags &=
        ~(IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_MEM_MGT_EXTENSIONS);
    a->max_mw = 0;
  }
  if (st.send_inv_disabled.load()) a->device_cap_flags &= ~IBV_DEVICE_MEM_MGT_EXTENSIONS;
  a->max_sge = 32;
  a->max_sge_rd = 32;
  a->max_cq = 1 << 16;
  a->max_cqe = (1 << 22) - 1;
  a->max_mr = 1 << 20;
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = 16;
  a->max_res_rd_atom = 16 << 15;
  a->max_qp_init_rd_atom = 16;
  a->atomic_cap = IBV_ATOMIC_NONE;
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 16;
  a->phys_port_cnt = 1;
}

void fill_port_attr(DeviceState& st, ibv_port_attr* p) {
  std::memset(p, 0, sizeof(*p));
  const ibv_port_state state = st.port_state();
  p->state = state;
  p->max_mtu = IBV_MTU_4096;
  p->active_mtu = IBV_MTU_4096;
  {
    std::lock_guard lock(st.gid_mu);
    p->gid_tbl_len = static_cast<int>(st.gids.size());
  }
  p->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  p->max_msg_sz = 1U << 30;
  p->pkey_tbl_len = 1;
  p->max_vl_num = 1;
  {
    std::lock_guard lock(st.mu);
    p->active_width = st.active_width;
    p->active_speed = st.active_speed;
  }
  p->phys_state = state == IBV_PORT_ACTIVE ? 5 : 3;  // LinkUp : Disabled
  p->link_layer = IBV_LINK_LAYER_ETHERNET;
}

int query_port_ext(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len) {
  if (port != 1) return EINVAL;
  ibv_port_attr full;
  fill_port_attr(*device_of(ctx)->st, &full);
  std::memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
  return 0;
}

// The caller's struct may be an older, shorter revision: only its first `size` bytes are ours.
int query_device_ext(ibv_context* ctx, const ibv_query_device_ex_input* input,
                     ibv_device_attr_ex* attr, size_t size) {
  if (input != nullptr && input->comp_mask != 0) return EINVAL;
  if (size < sizeof(attr->orig_attr)) return EINVAL;
  ibv_device_attr_ex full{};
  fill_device_attr(*device_of(ctx)->st, &full.orig_attr);
  // The 64-bit flags: the 32 of orig_attr, and none of the extended ones above them.
  full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
  full.phys_port_cnt_ex = full.orig_attr.phys_port_cnt;
  std::memcpy(attr, &full, size < sizeof(full) ? size : sizeof(full));
  return 0;
}

bool is_zero_gid(const ibv_gid& g) {
  for (uint8_t b : g.raw) {
    if (b != 0) return false;
  }
  return true;
}

}  // namespace

Device* device_of(ibv_context* ctx) {
  auto* v = reinterpret_cast<verbs_context*>(reinterpret_cast<char*>(ctx) -
                                             offsetof(verbs_context, context));
  return reinterpret_cast<CtxBox*>(v)->dev;
}

void Device::async_event(ibv_event_type type, ibv_qp* qp, ibv_cq* cq) {
  ibv_async_event e{};
  if (qp != nullptr)
    e.element.qp = qp;
  else if (cq != nullptr)
    e.element.cq = cq;
  else
    e.element.port_num = 1;
  e.event_type = type;
  if (write(async_write_fd, &e, sizeof(e)) != static_cast<ssize_t>(sizeof(e))) {
    std::fprintf(stderr, "softverbs: async event %d lost\n", static_cast<int>(type));
  }
}

bool Device::lookup_mr(uint32_t key, MrInfo* out) {
  std::shared_lock lock(mr_mu);
  auto it = mrs.find(key);
  if (it == mrs.end()) return false;
  *out = it->second;
  return true;
}

std::shared_ptr<Qp> Device::find_qp(uint32_t qpn) {
  std::lock_guard lock(qp_mu);
  auto it = qps.find(qpn);
  return it == qps.end() ? nullptr : it->second;
}

}  // namespace softverbs

using namespace softverbs;

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  const size_t n = devices().size();
  auto** list = static_cast<ibv_device**>(calloc(n + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < n; ++i) list[i] = &device_boxes()[i].ibv;
  if (num_devices != nullptr) *num_devices = static_cast<int>(n);
  return list;
}

void ibv_free_device_list(ibv_device** list) {
  free(list);
}

const char* ibv_get_device_name(ibv_device* device) {
  return device->name;
}

__be64 ibv_get_device_guid(ibv_device* device) {
  return htobe64(config_of(device).guid);
}

int ibv_get_device_index(ibv_device* device) {
  return reinterpret_cast<DeviceBox*>(device)->index;
}

ibv_context* ibv_open_device(ibv_device* device) {
  auto* box = static_cast<CtxBox*>(calloc(1, sizeof(CtxBox)));
  if (box == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  auto* dev = new (std::nothrow) Device();
  int fds[2];
  if (dev == nullptr || pipe2(fds, O_CLOEXEC) != 0) {
    delete dev;
    free(box);
    errno = ENOMEM;
    return nullptr;
  }
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  dev->cfg = &config_of(device);
  dev->st = &device_state(reinterpret_cast<DeviceBox*>(device)->index);
  dev->box = box;
  dev->async_write_fd = fds[1];
  box->dev = dev;
  box->v.sz = sizeof(verbs_context);
  box->v.query_port = query_port_ext;
  box->v.query_device_ex = query_device_ext;
  ibv_context& c = box->v.context;
  c.device = device;
  c.cmd_fd = -1;
  c.async_fd = fds[0];
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c.ops.poll_cq = softverbs::poll_cq;
  c.ops.req_notify_cq = softverbs::req_notify_cq;
  c.ops.post_send = softverbs::post_send;
  c.ops.post_recv = softverbs::post_recv;
  c.ops.alloc_mw = softverbs::alloc_mw;
  c.ops.bind_mw = softverbs::bind_mw_type1;
  c.ops.dealloc_mw = softverbs::dealloc_mw;
  dev->nic = std::make_unique<Nic>(dev);
  if (int err = dev->nic->start(); err != 0) {
    close(fds[0]);
    close(fds[1]);
    delete dev;
    free(box);
    errno = err;
    return nullptr;
  }
  {
    std::lock_guard lock(dev->st->mu);
    dev->st->open.push_back(dev);
  }
  return &c;
}

int ibv_close_device(ibv_context* context) {
  Device* dev = device_of(context);
  {
    std::lock_guard lock(dev->st->mu);
    auto& v = dev->st->open;
    v.erase(std::remove(v.begin(), v.end(), dev), v.end());
  }
  dev->nic->stop();  // the thread uses dev->nic until it is joined
  dev->nic.reset();
  close(context->async_fd);
  close(dev->async_write_fd);
  pthread_mutex_destroy(&context->mutex);
  CtxBox* box = dev->box;
  delete dev;
  free(box);
  return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  fill_device_attr(*device_of(context)->st, attr);
  return 0;
}

// The exported (compat) entry: fills only the fields every ibv_port_attr revision has.
int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* attr) {
  return query_port_ext(context, port_num, reinterpret_cast<ibv_port_attr*>(attr),
                        offsetof(ibv_port_attr, flags));
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  DeviceState& st = *device_of(context)->st;
  std::lock_guard lock(st.gid_mu);
  if (port_num != 1 || index < 0 || static_cast<size_t>(index) >= st.gids.size()) {
    errno = EINVAL;
    return -1;
  }
  *gid = st.gids[static_cast<size_t>(index)];
  return 0;
}

// An empty (all-zero) entry has no type; rdma-core reports it as IB/RoCE v1, as here.
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                       ibv_gid_type_sysfs* type) {
  DeviceState& st = *device_of(context)->st;
  std::lock_guard lock(st.gid_mu);
  if (port_num != 1 || index >= st.gids.size()) {
    errno = EINVAL;
    return -1;
  }
  *type = is_zero_gid(st.gids[index]) ? IBV_GID_TYPE_SYSFS_IB_ROCE_V1 : IBV_GID_TYPE_SYSFS_ROCE_V2;
  return 0;
}

// As the kernel's GID query answers: a port or an index outside the table is EINVAL, an
// empty (all-zero) entry inside it ENODATA (a GID deleted in the middle of the table).
int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  DeviceState& st = *device_of(context)->st;
  if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  std::lock_guard lock(st.gid_mu);
  if (port_num != 1 || gid_index >= st.gids.size()) return EINVAL;
  if (is_zero_gid(st.gids[gid_index])) return ENODATA;
  std::memset(entry, 0, entry_size);
  entry->gid = st.gids[gid_index];
  entry->gid_index = gid_index;
  entry->port_num = 1;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  return 0;
}

// The valid (non-zero) entries, in index order; -EINVAL when they do not fit in max_entries.
ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  DeviceState& st = *device_of(context)->st;
  if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  std::vector<ibv_gid> gids;
  {
    std::lock_guard lock(st.gid_mu);
    gids = st.gids;
  }
  auto* p = reinterpret_cast<char*>(entries);
  size_t count = 0;
  for (uint32_t i = 0; i < gids.size(); ++i) {
    if (is_zero_gid(gids[i])) continue;
    if (count == max_entries) return -EINVAL;
    auto* e = reinterpret_cast<ibv_gid_entry*>(p + count * entry_size);
    std::memset(e, 0, entry_size);
    e->gid = gids[i];
    e->gid_index = i;
    e->port_num = 1;
    e->gid_type = IBV_GID_TYPE_ROCE_V2;
    ++count;
  }
  return static_cast<ssize_t>(count);
}

int ibv_query_pkey(ibv_context*, uint8_t port_num, int index, __be16* pkey) {
  if (port_num != 1 || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(0xffff);
  return 0;
}

int ibv_get_pkey_index(ibv_context*, uint8_t port_num, __be16 pkey) {
  return port_num == 1 && be16toh(pkey) == 0xffff ? 0 : -1;
}

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  size_t got = 0;
  auto* p = reinterpret_cast<char*>(event);
  while (got < sizeof(*event)) {
    const ssize_t n = read(context->async_fd, p + got, sizeof(*event) - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n == 0) errno = EIO;
      return -1;
    }
  }
  return 0;
}

void ibv_ack_async_event(ibv_async_event*) {}

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  const std::string path = std::string(dir) + "/" + file;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || size == 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return -1;
  if (buf[n - 1] == '\n') --n;
  buf[n] = '\0';
  return static_cast<int>(n);
}

int ibv_fork_init(void) {
  return 0;
}
ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}
int ibv_dontfork_range(void*, size_t) {
  return 0;
}
int ibv_dofork_range(void*, size_t) {
  return 0;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp*) {
  errno = EOPNOTSUPP;
  return nullptr;
}

const char* ibv_node_type_str(ibv_node_type t) {
  switch (t) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

const char* ibv_port_state_str(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "PORT_NOP";
    case IBV_PORT_DOWN: return "PORT_DOWN";
    case IBV_PORT_INIT: return "PORT_INIT";
    case IBV_PORT_ARMED: return "PORT_ARMED";
    case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "PORT_ACTIVE_DEFER";
    default: return "invalid state";
  }
}

const char* ibv_event_type_str(ibv_event_type e) {
  static const char* const names[] = {"CQ error",
                                      "local work queue catastrophic error",
                                      "invalid request local work queue error",
                                      "local access violation work queue error",
                                      "communication established",
                                      "send queue drained",
                                      "path migrated",
                                      "path migration request error",
                                      "local catastrophic error",
                                      "port active",
                                      "port error",
                                      "LID change",
                                      "P_Key change",
                                      "SM change",
                                      "SRQ catastrophic error",
                                      "SRQ limit reached",
                                      "last WQE reached",
                                      "client reregistration",
                                      "GID table change",
                                      "WQ fatal"};
  const auto i = static_cast<size_t>(e);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "unknown";
}

const char* ibv_wc_status_str(ibv_wc_status s) {
  static const char* const names[] = {"success",
                                      "local length error",
                                      "local QP operation error",
                                      "local EE context operation error",
                                      "local protection error",
                                      "Work Request Flushed Error",
                                      "memory management operation error",
                                      "bad response error",
                                      "local access error",
                                      "remote invalid request error",
                                      "remote access error",
                                      "remote operation error",
                                      "transport retry counter exceeded",
                                      "RNR retry counter exceeded",
                                      "local RDD violation error",
                                      "remote invalid RD request",
                                      "aborted error",
                                      "invalid EE context number",
                                      "invalid EE context state",
                                      "fatal error",
                                      "response timeout error",
                                      "general error",
                                      "TM error",
                                      "TM rendezvous pending"};
  const auto i = static_cast<size_t>(s);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "unknown";
}

// IB rate enum <-> multiples of 2.5 Gb/s and Mb/s, for the rates a soft port can report.
int ibv_rate_to_mult(ibv_rate rate) {
  switch (rate) {
    case IBV_RATE_2_5_GBPS: return 1;
    case IBV_RATE_5_GBPS: return 2;
    case IBV_RATE_10_GBPS: return 4;
    case IBV_RATE_20_GBPS: return 8;
    case IBV_RATE_30_GBPS: return 12;
    case IBV_RATE_40_GBPS: return 16;
    case IBV_RATE_60_GBPS: return 24;
    case IBV_RATE_80_GBPS: return 32;
    case IBV_RATE_120_GBPS: return 48;
    default: return -1;
  }
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (int r = IBV_RATE_2_5_GBPS; r <= IBV_RATE_120_GBPS; ++r) {
    if (ibv_rate_to_mult(static_cast<ibv_rate>(r)) == mult) return static_cast<ibv_rate>(r);
  }
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate rate) {
  switch (rate) {
    case IBV_RATE_25_GBPS: return 25781;
    case IBV_RATE_50_GBPS: return 53125;
    case IBV_RATE_100_GBPS: return 103125;
    case IBV_RATE_200_GBPS: return 206250;
    case IBV_RATE_400_GBPS: return 425000;
    default: {
      const int mult = ibv_rate_to_mult(rate);
      return mult < 0 ? -1 : mult * 2500;
    }
  }
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  for (int r = IBV_RATE_2_5_GBPS; r <= IBV_RATE_800_GBPS; ++r) {
    if (ibv_rate_to_mbps(static_cast<ibv_rate>(r)) == mbps) return static_cast<ibv_rate>(r);
  }
  return IBV_RATE_MAX;
}

}  // extern "C"
