// PDs, MRs, completion channels, CQs and RC QPs with their state machine.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "internal.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace softverbs;

namespace {

constexpr uint32_t kMaxWr = 1 << 14;
constexpr uint32_t kMaxSge = 32;
constexpr uint32_t kMaxInline = 256;
constexpr int kMaxRdAtomic = 16;  // ibv_device_attr::max_qp_rd_atom and max_qp_init_rd_atom

// `gpu`: device memory the MR reaches through softverbs' shadow mapping (owned by the MR from
// here on, unmapped on failure); addr is then the device address.
ibv_mr* register_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access,
                    GpuMapping gpu = {}) {
  // Optional flags (relaxed ordering, ...) may be ignored by a provider, as here.
  access &= ~static_cast<int>(IBV_ACCESS_OPTIONAL_RANGE);
  const int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_HUGETLB;
  // Remote write and atomic access need local write (ibv_reg_mr(3)).
  const bool needs_local = (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0;
  if (pd == nullptr || (access & ~known) != 0 ||
      (needs_local && (access & IBV_ACCESS_LOCAL_WRITE) == 0) ||
      (addr == nullptr && length != 0 && gpu.base == nullptr)) {
    unmap_gpu(gpu);
    errno = EINVAL;
    return nullptr;
  }
  Device* dev = device_of(pd->context);
  auto* box = new (std::nothrow) MrBox();
  if (box == nullptr) {
    unmap_gpu(gpu);
    errno = ENOMEM;
    return nullptr;
  }
  MrInfo info;
  info.iova = iova;
  info.host = gpu.base != nullptr ? gpu.host : static_cast<char*>(addr);
  info.gpu = gpu;
  info.box = box;
  info.length = length;
  info.access = access;
  info.pd = pd;
  uint32_t key = 0;
  {
    std::unique_lock lock(dev->mr_mu);
    // Key: MR index in the upper 24 bits, an 8-bit tag below (as hardware keys look).
    const uint32_t index = dev->next_mr_index++ & 0xffffff;
    key = index << 8 | ((index * 0x9d) & 0xff);
    dev->mrs[key] = info;
  }
  box->ibv.context = pd->context;
  box->ibv.pd = pd;
  box->ibv.addr = addr;
  box->ibv.length = length;
  box->ibv.handle = key;
  box->ibv.lkey = key;
  box->ibv.rkey = key;
  box->access = access;
  return &box->ibv;
}

void cq_release(Cq* cq) {
  if (cq != nullptr) cq->users.fetch_sub(1);
}

// ibv_modify_qp(3): the attributes each RC transition requires and those it allows.
struct Transition {
  ibv_qp_state from;
  ibv_qp_state to;
  int required;
  int optional;
};
constexpr Transition kTransitions[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT,
     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {IBV_QPS_INIT, IBV_QPS_RTR,
     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {IBV_QPS_RTR, IBV_QPS_RTS,
     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
         IBV_QP_MAX_QP_RD_ATOMIC,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
         IBV_QP_PATH_MIG_STATE},
    {IBV_QPS_RTS, IBV_QPS_RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
         IBV_QP_PATH_MIG_STATE},
};

// Checks the mask and the values; 0 or an errno value.
int check_modify(const Qp& qp, const ibv_qp_attr& a, int mask, ibv_qp_state to) {
  const ibv_qp_state from = qp.state;
  if ((mask & IBV_QP_CUR_STATE) && a.cur_qp_state != from) return EINVAL;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
    return (mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE)) == 0 ? 0 : EINVAL;
  }
  const Transition* t = nullptr;
  for (const Transition& c : kTransitions) {
    if (c.from == from && c.to == to) t = &c;
  }
  if (t == nullptr) return EINVAL;
  const int req = t->required & ~IBV_QP_STATE;
  if ((mask & req) != req) return EINVAL;
  if ((mask & ~(t->required | t->optional | IBV_QP_STATE)) != 0) return EINVAL;
  if ((mask & IBV_QP_PORT) && a.port_num != 1) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index != 0) return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (a.qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)) != 0) {
    return EINVAL;
  }
  if ((mask & IBV_QP_PATH_MTU) && (a.path_mtu < IBV_MTU_256 || a.path_mtu > IBV_MTU_4096)) {
    return EINVAL;
  }
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > kMaxRdAtomic) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > kMaxRdAtomic) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return EINVAL;
  if (mask & IBV_QP_DEST_QPN) {
    if (a.dest_qp_num == 0 || a.dest_qp_num > 0xffffff ||
        (a.dest_qp_num >> kQpIndexBits) >= static_cast<uint32_t>(kSlots)) {
      return EINVAL;
    }
  }
  if (mask & IBV_QP_AV) {
    uint32_t ip = 0;
    // softverbs is RoCE-like: the address vector must carry the peer's IPv4-mapped GID.
    if (!a.ah_attr.is_global || !gid_to_ipv4(a.ah_attr.grh.dgid, &ip)) return EINVAL;
    {
      std::lock_guard lock(qp.dev->st->gid_mu);
      if (a.ah_attr.grh.sgid_index >= qp.dev->st->gids.size()) return EINVAL;
    }
    if (a.ah_attr.port_num != 0 && a.ah_attr.port_num != 1) return EINVAL;
  }
  return 0;
}

void reset_qp(Qp& qp) {
  qp.inflight.clear();
  qp.rq.clear();
  qp.sq_blocked = false;
  qp.connect_error = 0;
  if (qp.out) {  // the WRs are gone: their output must not be read from their memory
    qp.dev->nic->abort(qp.out);
    qp.out.reset();
  }
}

}  // namespace

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  auto* pd = static_cast<ibv_pd*>(calloc(1, sizeof(ibv_pd)));
  if (pd == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  pd->context = context;
  return pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  Device* dev = device_of(pd->context);
  {
    std::shared_lock lock(dev->mr_mu);
    for (const auto& kv : dev->mrs) {
      if (kv.second.pd == pd) return EBUSY;
    }
    for (const auto& kv : dev->mws) {
      if (kv.second.pd == pd) return EBUSY;  // MwTest DeallocPdWithOutstandingMw
    }
  }
  free(pd);
  return 0;
}

}  // extern "C"

namespace {

// A registration of addr: device memory of softcuda's through peermem, else host memory.
ibv_mr* register_address(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  GpuMapping gpu;
  if (addr != nullptr && length != 0) {
    const int rc = map_peermem(addr, length, &gpu);
    if (rc != 0 && rc != ENOENT) {
      errno = rc;
      return nullptr;
    }
  }
  return register_mr(pd, addr, length, iova, access, gpu);
}

}  // namespace

extern "C" {

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return register_address(pd, addr, length, reinterpret_cast<uintptr_t>(addr), access);
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return register_address(pd, addr, length, iova, access);
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  return register_address(pd, addr, length, iova, static_cast<int>(access));
}

// ibv_reg_dmabuf_mr(3): [offset, offset + length) of the dma-buf fd, addressed from iova.
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                          int access) {
  if (pd == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  GpuMapping gpu;
  if (const int rc = map_dmabuf(fd, offset, length, &gpu); rc != 0) {
    errno = rc;
    return nullptr;
  }
  return register_mr(pd, reinterpret_cast<void*>(iova), length, iova, access, gpu);
}

int ibv_dereg_mr(ibv_mr* mr) {
  Device* dev = device_of(mr->context);
  if (const int err = take_dereg_fault(*dev->st); err != 0) return err;  // the MR stays
  // As on hardware, the NIC touches none of the region's memory once this returns: output that
  // still points into it is dropped (the WR or READ it belonged to fails).
  std::unique_lock dma(dev->dma_mu);
  MrInfo info;
  std::vector<std::pair<const char*, size_t>> others;  // MRs overlapping it that stay
  {
    std::unique_lock lock(dev->mr_mu);
    if (mr_has_bound_window(*dev, mr->lkey)) return EBUSY;
    auto it = dev->mrs.find(mr->lkey);
    if (it != dev->mrs.end()) info = it->second;
    dev->mrs.erase(mr->lkey);
    dev->dereg_gen.fetch_add(1);  // bodies being received into it are checked again
    for (const auto& [key, other] : dev->mrs) {
      if (other.host < info.host + info.length && info.host < other.host + other.length) {
        others.emplace_back(other.host, other.length);
      }
    }
  }
  if (info.host != nullptr) dev->nic->forget_range(info.host, info.length, others);
  unmap_gpu(info.gpu);  // the NIC no longer touches it (dma_mu is held)
  delete reinterpret_cast<MrBox*>(mr);
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  auto* ch = new (std::nothrow) ChannelBox();
  if (ch == nullptr) {
    close(fds[0]);
    close(fds[1]);
    errno = ENOMEM;
    return nullptr;
  }
  ch->ibv.context = context;
  ch->ibv.fd = fds[0];
  ch->write_fd = fds[1];
  return &ch->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel->refcnt != 0) {
    errno = EBUSY;
    return -1;
  }
  auto* ch = reinterpret_cast<ChannelBox*>(channel);
  close(ch->ibv.fd);
  close(ch->write_fd);
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  if (cqe < 1 || cqe > (1 << 22) - 1 || comp_vector < 0 ||
      comp_vector >= context->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  auto* box = new (std::nothrow) CqBox();
  auto* cq = new (std::nothrow) Cq();
  if (box == nullptr || cq == nullptr) {
    delete box;
    delete cq;
    errno = ENOMEM;
    return nullptr;
  }
  box->ibv.context = context;
  box->ibv.channel = channel;
  box->ibv.cq_context = cq_context;
  box->ibv.cqe = cqe;
  pthread_mutex_init(&box->ibv.mutex, nullptr);
  pthread_cond_init(&box->ibv.cond, nullptr);
  box->cq = cq;
  cq->ibv = &box->ibv;
  cq->dev = device_of(context);
  cq->capacity = static_cast<size_t>(cqe);
  cq->serial = cq->dev->st->next_cq_serial.fetch_add(1);
  if (channel != nullptr) __atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_SEQ_CST);
  return &box->ibv;
}

int ibv_destroy_cq(ibv_cq* cq) {
  Cq* c = cq_of(cq);
  if (c->users.load() != 0) return EBUSY;
  {
    std::lock_guard lock(c->dev->delay_mu);
    auto& v = c->dev->delayed_cqs;
    v.erase(std::remove(v.begin(), v.end(), c), v.end());
  }
  if (cq->channel != nullptr) __atomic_sub_fetch(&cq->channel->refcnt, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete c;
  delete reinterpret_cast<CqBox*>(cq);
  return 0;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  Cq* c = cq_of(cq);
  std::lock_guard lock(c->mu);
  if (cqe < 1 || static_cast<size_t>(cqe) < c->entries.size()) return EINVAL;
  c->capacity = static_cast<size_t>(cqe);
  cq->cqe = cqe;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  ibv_cq* got = nullptr;
  for (;;) {
    const ssize_t n = read(channel->fd, &got, sizeof(got));
    if (n == static_cast<ssize_t>(sizeof(got))) break;
    if (n < 0 && errno == EINTR) continue;
    if (n >= 0) errno = EIO;
    return -1;
  }
  *cq = got;
  *cq_context = got->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  const ibv_qp_cap& c = init->cap;
  Device* dev = device_of(pd->context);
  const uint32_t max_inline = std::min(kMaxInline, dev->cfg->max_inline_data);
  if (init->qp_type != IBV_QPT_RC || init->srq != nullptr || init->send_cq == nullptr ||
      init->recv_cq == nullptr || c.max_send_wr > kMaxWr || c.max_recv_wr > kMaxWr ||
      c.max_send_sge > kMaxSge || c.max_recv_sge > kMaxSge || c.max_inline_data > max_inline) {
    errno = init->qp_type != IBV_QPT_RC ? EOPNOTSUPP : EINVAL;
    return nullptr;
  }
  auto* box = new (std::nothrow) QpBox();
  if (box == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  auto qp = std::make_shared<Qp>();
  qp->ibv = &box->ibv;
  qp->dev = dev;
  qp->send_cq = cq_of(init->send_cq);
  qp->recv_cq = cq_of(init->recv_cq);
  qp->sq_sig_all = init->sq_sig_all != 0;
  qp->cap = c;
  qp->cap.max_send_wr = c.max_send_wr == 0 ? 1 : c.max_send_wr;
  qp->cap.max_recv_wr = c.max_recv_wr == 0 ? 1 : c.max_recv_wr;
  qp->cap.max_inline_data = max_inline;
  init->cap = qp->cap;
  uint32_t qpn = 0;
  {
    std::lock_guard lock(dev->qp_mu);
    const uint32_t span = 1U << kQpIndexBits;
    for (uint32_t tries = 0; tries < span; ++tries) {
      const uint32_t index = dev->next_qp_index++ % span;
      const uint32_t n = dev->nic->slot() << kQpIndexBits | index;
      if (index >= 2 && dev->qps.count(n) == 0) {
        qpn = n;
        break;
      }
    }
    if (qpn == 0) {
      delete box;
      errno = ENOMEM;
      return nullptr;
    }
    dev->qps[qpn] = qp;
  }
  qp->send_cq->users.fetch_add(1);
  qp->recv_cq->users.fetch_add(1);
  box->qp = qp;
  box->ibv.context = pd->context;
  box->ibv.qp_context = init->qp_context;
  box->ibv.pd = pd;
  box->ibv.send_cq = init->send_cq;
  box->ibv.recv_cq = init->recv_cq;
  box->ibv.handle = qpn;
  box->ibv.qp_num = qpn;
  box->ibv.state = IBV_QPS_RESET;
  box->ibv.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&box->ibv.mutex, nullptr);
  pthread_cond_init(&box->ibv.cond, nullptr);
  return &box->ibv;
}

int ibv_modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  std::shared_ptr<Qp> qp = qp_of(ibqp);
  bool connect = false;
  {
    std::lock_guard lock(qp->mu);
    const ibv_qp_state to = (mask & IBV_QP_STATE) ? attr->qp_state : qp->state;
    if (int err = check_modify(*qp, *attr, mask, to); err != 0) return err;
    if (mask & IBV_QP_ACCESS_FLAGS) {
      qp->access_flags = attr->qp_access_flags;
      qp->attr.qp_access_flags = attr->qp_access_flags;
    }
    if (mask & IBV_QP_PKEY_INDEX) qp->attr.pkey_index = attr->pkey_index;
    if (mask & IBV_QP_PORT) qp->attr.port_num = attr->port_num;
    if (mask & IBV_QP_AV) {
      qp->attr.ah_attr = attr->ah_attr;
      gid_to_ipv4(attr->ah_attr.grh.dgid, &qp->dest_ip);
    }
    if (mask & IBV_QP_PATH_MTU) qp->attr.path_mtu = attr->path_mtu;
    if (mask & IBV_QP_DEST_QPN) {
      qp->dest_qpn = attr->dest_qp_num;
      qp->attr.dest_qp_num = attr->dest_qp_num;
      qp->dest_port =
          static_cast<uint16_t>(qp->dev->cfg->port_base + (attr->dest_qp_num >> kQpIndexBits));
    }
    if (mask & IBV_QP_RQ_PSN) qp->attr.rq_psn = attr->rq_psn;
    if (mask & IBV_QP_SQ_PSN) qp->attr.sq_psn = attr->sq_psn;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) qp->attr.max_rd_atomic = attr->max_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) qp->attr.min_rnr_timer = attr->min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT) qp->attr.timeout = attr->timeout;
    if (mask & IBV_QP_RETRY_CNT) qp->attr.retry_cnt = attr->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) qp->attr.rnr_retry = attr->rnr_retry;
    if (to == IBV_QPS_ERR && qp->state != IBV_QPS_ERR) {
      enter_error(*qp);
    } else if (to == IBV_QPS_RESET) {
      reset_qp(*qp);
      qp->state = IBV_QPS_RESET;
      qp->attr = ibv_qp_attr{};
    } else {
      connect = to == IBV_QPS_RTR && qp->state == IBV_QPS_INIT;
      qp->state = to;
    }
    qp->attr.qp_state = qp->state;
    ibqp->state = qp->state;
  }
  if (connect) {
    // The requester's connection to the peer NIC; a failure shows later as RETRY_EXC_ERR,
    // as a missing peer does on hardware.
    std::shared_ptr<Conn> conn;
    const int err = qp->dev->nic->connect(qp, &conn);
    std::lock_guard lock(qp->mu);
    qp->out = conn;
    qp->connect_error = err;
  }
  qp->dev->nic->wake();  // requests waiting for RTR may proceed
  return 0;
}

int ibv_query_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  std::shared_ptr<Qp> qp = qp_of(ibqp);
  std::lock_guard lock(qp->mu);
  *attr = qp->attr;
  attr->qp_state = qp->state;
  attr->cur_qp_state = qp->state;
  attr->cap = qp->cap;
  std::memset(init, 0, sizeof(*init));
  init->qp_context = ibqp->qp_context;
  init->send_cq = ibqp->send_cq;
  init->recv_cq = ibqp->recv_cq;
  init->cap = qp->cap;
  init->qp_type = IBV_QPT_RC;
  init->sq_sig_all = qp->sq_sig_all ? 1 : 0;
  return 0;
}

int ibv_destroy_qp(ibv_qp* ibqp) {
  std::shared_ptr<Qp> qp = qp_of(ibqp);
  Device* dev = qp->dev;
  if (qp_has_bound_window(*dev, ibqp->qp_num)) return EBUSY;
  if (const int err = take_destroy_fault(*dev->st, ibqp->qp_num); err != 0) return err;
  {
    std::lock_guard lock(dev->qp_mu);
    dev->qps.erase(ibqp->qp_num);
  }
  {
    std::lock_guard lock(qp->mu);
    reset_qp(*qp);
    qp->state = IBV_QPS_RESET;
    qp->destroyed = true;
    qp->ibv = nullptr;
  }
  cq_release(qp->send_cq);
  cq_release(qp->recv_cq);
  pthread_mutex_destroy(&ibqp->mutex);
  pthread_cond_destroy(&ibqp->cond);
  delete reinterpret_cast<QpBox*>(ibqp);  // the NIC may still hold the Qp; it is destroyed
  dev->nic->wake();
  return 0;
}

}  // extern "C"
