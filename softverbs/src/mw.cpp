// Type-2B memory windows: ibv_alloc_mw/ibv_dealloc_mw (through the context's ops, as the
// inline verbs call them), binds and local invalidations posted on a QP's SQ, remote
// invalidation by SEND_WITH_INV, and the checks of remote requests that name a window.
// A bound window's rkey is the one its bind WR names (bind_mw.rkey), and the bind updates
// mw->rkey to it. Strict keys (the default, "mw_strict DEV off" to leave them): the rkey must
// keep the window's index in its upper 24 bits, so only the low 8 bits (what ibv_inc_rkey
// changes) are the application's choice, as on hardware. Without them, any value not in use
// by another window or region. Indices are the lowest free ones (a freed index is reused, and
// starts from the key byte after its last one, so the last key of its previous life is refused),
// at most mw_index_limit of them (ENOMEM beyond). Outcomes follow rdma-unit-test's MwType2
// cases where they name one.
#include <cerrno>
#include <new>

#include "internal.h"

namespace softverbs {

bool is_mw_key(Device& dev, uint32_t rkey) {
  std::shared_lock lock(dev.mr_mu);
  return dev.mw_rkeys.count(rkey) != 0;
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {  // not a window type
    errno = EINVAL;
    return nullptr;
  }
  if (type != IBV_MW_TYPE_2) {  // type 1 windows are not emulated
    errno = EOPNOTSUPP;
    return nullptr;
  }
  Device* dev = device_of(pd->context);
  if (dev->st->mw_disabled.load()) {  // "disable mw": a provider without windows (EFA)
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* mw = new (std::nothrow) ibv_mw();
  if (mw == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  std::unique_lock lock(dev->mr_mu);
  const bool reuse = !dev->free_mws.empty();
  const uint32_t index = reuse ? dev->free_mws.begin()->first : dev->next_mw_index;
  const uint8_t key = reuse ? static_cast<uint8_t>(dev->free_mws.begin()->second + 1) : 0;
  uint32_t limit = dev->st->mw_index_limit.load();
  if (limit == 0 || limit > kMwIndexCount) limit = kMwIndexCount;
  if (index - kMwIndexBase >= limit) {
    delete mw;
    errno = ENOMEM;
    return nullptr;
  }
  if (reuse) {
    dev->free_mws.erase(dev->free_mws.begin());
  } else {
    ++dev->next_mw_index;
  }
  MwInfo info;
  info.pd = pd;
  info.rkey = index << 8 | key;
  dev->mws[index] = info;
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = info.rkey;
  mw->handle = index;  // softverbs finds the window by handle; the rkey changes with binds
  mw->type = type;
  return mw;
}

int dealloc_mw(ibv_mw* mw) {
  Device* dev = device_of(mw->context);
  {
    std::unique_lock lock(dev->mr_mu);
    auto it = dev->mws.find(mw->handle);
    if (it != dev->mws.end()) {
      if (it->second.bound) dev->mw_rkeys.erase(it->second.rkey);  // invalidated with it
      dev->free_mws[it->first] = static_cast<uint8_t>(it->second.rkey & 0xff);
      dev->mws.erase(it);
    }
  }
  delete mw;
  return 0;
}

int bind_mw_type1(ibv_qp*, ibv_mw*, ibv_mw_bind*) {
  return EOPNOTSUPP;
}

ibv_wc_status bind_now(Qp& qp, const ibv_send_wr& wr) {
  Device& dev = *qp.dev;
  ibv_mw* mw = wr.bind_mw.mw;
  const ibv_mw_bind_info& b = wr.bind_mw.bind_info;
  if (mw == nullptr || mw->type != IBV_MW_TYPE_2) return IBV_WC_MW_BIND_ERR;
  // Window and region must be objects of this QP's PD (so of its context): handles and keys
  // are numbered per context, and another context's may name one of this context's objects.
  if (mw->pd != qp.ibv->pd || (b.mr != nullptr && b.mr->pd != qp.ibv->pd)) {
    return IBV_WC_MW_BIND_ERR;
  }
  std::unique_lock lock(dev.mr_mu);
  auto it = dev.mws.find(mw->handle);
  if (it == dev.mws.end() || it->second.pd != qp.ibv->pd) return IBV_WC_MW_BIND_ERR;
  MwInfo& w = it->second;
  // A bound window rebinds only through its own QP (MwType2 Rebind, CrossQpBind); the new rkey
  // must not name another window or a region (BindRKeyReuse, InUseRkey).
  if (w.bound && w.qpn != qp.ibv->qp_num) return IBV_WC_MW_BIND_ERR;
  const uint32_t rkey = wr.bind_mw.rkey;
  // Strict keys: only the key byte is the application's (ibv_inc_rkey), the index is the
  // window's.
  if (dev.st->mw_strict.load() && rkey >> 8 != it->first) return IBV_WC_MW_BIND_ERR;
  auto used = dev.mw_rkeys.find(rkey);
  if ((used != dev.mw_rkeys.end() && used->second != it->first) || dev.mrs.count(rkey) != 0) {
    return IBV_WC_MW_BIND_ERR;
  }
  const unsigned remote =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  // Local flags in a window's rights mean nothing and are ignored (rdma-unit-test MWBindTest
  // AllPermissions/WriteOnly/ReadOnly, rdma-core test_mr.py's REMOTE_WRITE | LOCAL_WRITE
  // windows); zero-based windows are not emulated, other bits are unknown.
  const unsigned ignored = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
  if ((b.mw_access_flags & ~(remote | ignored)) != 0) return IBV_WC_MW_BIND_ERR;
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
  if (w.bound) dev.mw_rkeys.erase(w.rkey);
  dev.mw_rkeys[rkey] = it->first;
  w.bound = true;
  w.rkey = rkey;
  w.qpn = qp.ibv->qp_num;
  w.iova = b.addr;
  w.length = b.length;
  w.access = static_cast<int>(b.mw_access_flags & remote);
  w.mr_key = mr_key;
  mw->rkey = rkey;  // the bind runs at post time, in the caller's thread
  return IBV_WC_SUCCESS;
}

bool invalidate(Device& dev, const ibv_pd* pd, uint32_t qpn, uint32_t rkey) {
  std::unique_lock lock(dev.mr_mu);
  auto k = dev.mw_rkeys.find(rkey);  // regions cannot be invalidated here
  if (k == dev.mw_rkeys.end()) return false;
  auto it = dev.mws.find(k->second);
  // Type 2B: only through the QP it is bound through (MwType2 CrossQpInvalidate).
  if (it == dev.mws.end() || it->second.pd != pd || it->second.qpn != qpn) return false;
  it->second.bound = false;
  dev.mw_rkeys.erase(k);
  return true;
}

bool resolve_mw(Device& dev, uint32_t key, uint64_t addr, uint64_t len, int need, const ibv_pd* pd,
                uint32_t qpn, char** host) {
  std::shared_lock lock(dev.mr_mu);
  auto k = dev.mw_rkeys.find(key);
  if (k == dev.mw_rkeys.end()) return false;
  auto it = dev.mws.find(k->second);
  if (it == dev.mws.end()) return false;
  const MwInfo& w = it->second;
  if (!w.bound || w.pd != pd || w.qpn != qpn || (w.access & need) != need) return false;
  if (addr < w.iova || len > w.length || addr - w.iova > w.length - len) return false;
  auto m = dev.mrs.find(w.mr_key);
  if (m == dev.mrs.end()) return false;  // the region went away under the window
  *host = m->second.host + (addr - m->second.iova);
  return true;
}

bool mr_has_bound_window(Device& dev, uint32_t mr_key) {
  for (const auto& kv : dev.mws) {
    if (kv.second.bound && kv.second.mr_key == mr_key && kv.second.length != 0) return true;
  }
  return false;
}

bool qp_has_bound_window(Device& dev, uint32_t qpn) {
  std::shared_lock lock(dev.mr_mu);
  for (const auto& kv : dev.mws) {
    if (kv.second.bound && kv.second.qpn == qpn) return true;
  }
  return false;
}

}  // namespace softverbs
