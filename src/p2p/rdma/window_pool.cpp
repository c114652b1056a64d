#include "p2p/rdma/window_pool.h"

#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/log.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

Result<std::pair<ibv_mw*, std::uint32_t>> WindowPool::take(std::size_t context) {
  Context& c = *engine_.contexts()[context];
  for (;;) {
    ORBITE_ASSIGN_OR_RETURN(ibv_mw * mw, allocate(context));
    std::optional<std::uint32_t> key;
    {
      std::lock_guard guard(c.key_mu);
      key = c.keys->next_key(keys_[mw]);
    }
    if (!key) {
      parked_.push_back(mw);  // every tag of its index used: kept, never bound
      continue;
    }
    keys_[mw] = *key;
    return std::pair{mw, *key};
  }
}

Result<ibv_mw*> WindowPool::allocate(std::size_t context) {
  auto& pool = pool_[context];
  if (!pool.empty()) {
    ibv_mw* mw = pool.back();
    pool.pop_back();
    return mw;
  }
  Context& c = *engine_.contexts()[context];
  ibv_mw* mw = verbs::alloc_mw(c.pd, IBV_MW_TYPE_2);
  if (mw == nullptr) {
    add(engine_.counters().budget_exhausted);
    return verbs::errno_status(Errc::ResourceExhausted, c.name + ": ibv_alloc_mw (type 2)", errno);
  }
  Status admitted;
  {
    std::lock_guard guard(c.key_mu);
    admitted = c.keys->admit(mw->rkey);
  }
  if (!admitted.ok()) {
    add(engine_.counters().budget_exhausted);
    if (verbs::dealloc_mw(mw) != 0) parked_.push_back(mw);
    return admitted;
  }
  keys_[mw] = mw->rkey;
  return mw;
}

bool WindowPool::revoke(std::size_t context, ibv_mw* mw) {
  if (const int rc = verbs::dealloc_mw(mw); rc != 0) {
    ORBITE_LOG(Error, Rdma) << engine_.contexts()[context]->name
                            << ": ibv_dealloc_mw failed: " << std::strerror(rc);
    return false;
  }
  keys_.erase(mw);
  return true;
}

void WindowPool::close() {
  for (std::size_t c = 0; c < pool_.size(); ++c) {
    for (ibv_mw* mw : pool_[c]) revoke(c, mw);
    pool_[c].clear();
  }
  // Parked windows stay allocated while the PD lives (so their index is never handed out
  // again); the PD goes with the engine, so they go now.
  for (ibv_mw* mw : parked_) {
    if (verbs::dealloc_mw(mw) != 0) engine_.retain("ibv_dealloc_mw of a parked window failed");
  }
  parked_.clear();
}

}  // namespace orbite::rdma
