// Type-2B memory windows: ibv_alloc_mw/ibv_dealloc_mw (through the context's ops, as the
// inline verbs call them), binds and local invalidations posted on a QP's SQ, remote
// invalidation by SEND_WITH_INV, and the rkey checks of remote requests that name a window.
// A window's rkey is (index << 8 | key): the index is fixed at allocation, the 8-bit key comes
// from each bind WR (bind_mw.rkey, usually ibv_inc_rkey of the previous one).
#include <cerrno>
#include <new>

#include "internal.h"

namespace softverbs {

bool is_mw_key(uint32_t key) {
  return (key >> 8) >= kMwIndexBase;
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_2) {  // type 1 windows are not emulated
    errno = EOPNOTSUPP;
    return nullptr;
  }
  Device* dev = device_of(pd->context);
  auto* mw = new (std::nothrow) ibv_mw();
  if (mw == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  std::unique_lock lock(dev->mr_mu);
  const uint32_t index = dev->next_mw_index++;
  if (index > 0xffffff) {
    delete mw;
    errno = ENOMEM;
    return nullptr;
  }
  MwInfo info;
  info.pd = pd;
  info.rkey = index << 8;
  dev->mws[index] = info;
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = info.rkey;
  mw->handle = index;
  mw->type = type;
  return mw;
}

int dealloc_mw(ibv_mw* mw) {
  Device* dev = device_of(mw->context);
  {
    std::unique_lock lock(dev->mr_mu);
    dev->mws.erase(mw->rkey >> 8);  // a bound window is invalidated with it
  }
  delete mw;
  return 0;
}

int bind_mw_type1(ibv_qp*, ibv_mw*, ibv_mw_bind*) {
  return EOPNOTSUPP;
}

ibv_wc_status bind_now(Qp& qp, const ibv_send_wr& wr) {
  Device& dev = *qp.dev;
  const ibv_mw* mw = wr.bind_mw.mw;
  const ibv_mw_bind_info& b = wr.bind_mw.bind_info;
  if (mw == nullptr || mw->type != IBV_MW_TYPE_2) return IBV_WC_MW_BIND_ERR;
  std::unique_lock lock(dev.mr_mu);
  auto it = dev.mws.find(mw->rkey >> 8);
  // The new rkey keeps the window's index; the window must be free (type 2: invalidate first).
  if (it == dev.mws.end() || (wr.bind_mw.rkey >> 8) != it->first || it->second.bound ||
      it->second.pd != qp.ibv->pd) {
    return IBV_WC_MW_BIND_ERR;
  }
  MwInfo& w = it->second;
  const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if ((b.mw_access_flags & ~static_cast<unsigned>(remote | IBV_ACCESS_ZERO_BASED)) != 0 ||
      (b.mw_access_flags & IBV_ACCESS_ZERO_BASED) != 0) {
    return IBV_WC_MW_BIND_ERR;
  }
  uint32_t mr_key = 0;
  if (b.length != 0 || b.mr != nullptr) {
    if (b.mr == nullptr) return IBV_WC_MW_BIND_ERR;
    auto m = dev.mrs.find(b.mr->lkey);
    if (m == dev.mrs.end() || m->second.pd != qp.ibv->pd ||
        (m->second.access & IBV_ACCESS_MW_BIND) == 0) {
      return IBV_WC_MW_BIND_ERR;
    }
    // Remote write through the window needs local write on the region (ibv_bind_mw(3)).
    if ((b.mw_access_flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
        (m->second.access & IBV_ACCESS_LOCAL_WRITE) == 0) {
      return IBV_WC_MW_BIND_ERR;
    }
    if (b.addr < m->second.iova || b.length > m->second.length ||
        b.addr - m->second.iova > m->second.length - b.length) {
      return IBV_WC_MW_BIND_ERR;
    }
    mr_key = b.mr->lkey;
  }
  w.bound = true;
  w.rkey = wr.bind_mw.rkey;
  w.qpn = qp.ibv->qp_num;
  w.iova = b.addr;
  w.length = b.length;
  w.access = static_cast<int>(b.mw_access_flags);
  w.mr_key = mr_key;
  return IBV_WC_SUCCESS;
}

bool invalidate(Device& dev, const ibv_pd* pd, uint32_t qpn, uint32_t rkey) {
  if (!is_mw_key(rkey)) return false;  // MRs cannot be invalidated here
  std::unique_lock lock(dev.mr_mu);
  auto it = dev.mws.find(rkey >> 8);
  if (it == dev.mws.end() || !it->second.bound || it->second.rkey != rkey || it->second.pd != pd ||
      it->second.qpn != qpn) {
    return false;
  }
  it->second.bound = false;
  return true;
}

bool resolve_mw(Device& dev, uint32_t key, uint64_t addr, uint64_t len, int need, const ibv_pd* pd,
                uint32_t qpn, char** host) {
  std::shared_lock lock(dev.mr_mu);
  auto it = dev.mws.find(key >> 8);
  if (it == dev.mws.end()) return false;
  const MwInfo& w = it->second;
  if (!w.bound || w.rkey != key || w.pd != pd || w.qpn != qpn || (w.access & need) != need) {
    return false;
  }
  if (addr < w.iova || len > w.length || addr - w.iova > w.length - len) return false;
  auto m = dev.mrs.find(w.mr_key);
  if (m == dev.mrs.end()) return false;  // the region went away under the window
  *host = m->second.host + (addr - m->second.iova);
  return true;
}

}  // namespace softverbs
