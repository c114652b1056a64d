// A lane's memory windows (type 2), per context: the unbound ones ready for the next grant, each
// window's current key, and the parked ones whose index spent every key tag (kept allocated, so
// the HCA never hands that index out again, until the lane closes). Part of the lane (used under
// its mutex only). Lock order: a lane's mutex → a context's key_mu (a leaf).
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "p2p/rdma/engine.h"

namespace orbite::rdma {

class WindowPool {
 public:
  WindowPool(RdmaEngine& engine, std::size_t contexts) : engine_(engine), pool_(contexts) {}
  WindowPool(const WindowPool&) = delete;
  WindowPool& operator=(const WindowPool&) = delete;

  // A window of `context` and the fresh key its next bind must use (the key history's next tag
  // of its index). ResourceExhausted when no window can be allocated or its index is refused.
  Result<std::pair<ibv_mw*, std::uint32_t>> take(std::size_t context);
  // A window the hardware invalidated (its receipt's SEND_WITH_INV): ready to bind again.
  void give_back(std::size_t context, ibv_mw* mw) { pool_[context].push_back(mw); }
  // Deallocates a window whose key must never work again; false (it is kept) when that fails.
  bool revoke(std::size_t context, ibv_mw* mw);
  // The lane closes: every pooled and parked window deallocated (a failure is retained).
  void close();

 private:
  Result<ibv_mw*> allocate(std::size_t context);

  RdmaEngine& engine_;                               // outlives the lane
  std::vector<std::vector<ibv_mw*>> pool_;           // unbound, by context
  std::unordered_map<ibv_mw*, std::uint32_t> keys_;  // each live window's current key
  std::vector<ibv_mw*> parked_;                      // never bound again
};

}  // namespace orbite::rdma
