// The MR cache for engine-owned memory (collective scratch, the bounce pool's slabs; the lanes'
// slot slabs are charged to its budgets too): such memory is declared when it is allocated and
// forgotten before it is freed, so a registration of it can outlive one request without ever
// reaching pages that a user re-mapped. User buffers never enter it: a rendezvous message up to
// rdma.bounce_limit is copied through a bounce chunk instead, and larger user buffers are
// registered per request (Requester::register_send_buffer, GrantSource::prepare_memory).
#pragma once

#include <orbite/rdma.h>
#include <orbite/status.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuda/staging.h"
#include "p2p/registry.h"

namespace orbite::rdma {

class RdmaEngine;

// Thread-safe (lanes look up from their threads; the collectives declare and forget from theirs).
// Lock order: a lane's mutex, then the bounce pool's, then mu_; nothing is called back with mu_
// held. Lifetime: shared by the RDMA domain and every RdmaLane; an entry's record (with its
// full-view MrSet) is shared with the jobs and grants using it, and deregisters when the last one
// drops.
class MrCache {
 public:
  explicit MrCache(std::shared_ptr<RdmaEngine> engine);

  // [base, base + length) is engine-owned from now until forget(base).
  void declare(std::byte* base, std::uint64_t length);
  // The range at `base` is about to be freed: it leaves the cache; jobs still using its
  // registration keep it until they finish (its budget stays charged until then).
  void forget(const std::byte* base);
  // For [p, p + length) inside declared memory: its record, registered on every usable context
  // (local and remote access) at first use and kept; least recently used unreferenced entries
  // are deregistered to stay within max_cached_mrs copies and max_cached_mr_bytes. Null when the
  // range is not engine-owned or the budgets cannot take it (the caller registers per request);
  // `owned`, when given, tells which: whether the range lies wholly in declared memory.
  std::shared_ptr<detail::RegionRecord> find(const std::byte* p, std::uint64_t length,
                                             bool* owned = nullptr);

  // Bounce buffers (rdma.bounce_limit). Whether a message of `length` bytes may bounce.
  [[nodiscard]] bool bounces(std::uint64_t length) const {
    return bounce_ != nullptr && length > 0 && length <= bounce_limit_;
  }
  // A chunk of the pool for such a message, with the cached record that reaches it (registered
  // on every usable context, remote access included) and the chunk's offset in that record. The
  // chunk goes back to the pool when the last holder drops it, so whoever posts DMA through it
  // holds it until that DMA ended. Nullopt when the message may not bounce, every chunk is lent,
  // or the budgets cannot take the chunk's slab: the caller registers the user's buffer for the
  // message, as above the limit.
  struct Bounce {
    std::shared_ptr<cuda::StagingLease> chunk;
    std::shared_ptr<detail::RegionRecord> record;
    std::uint64_t offset = 0;  // of the chunk's first byte in record
  };
  std::optional<Bounce> take_bounce(std::uint64_t length);
  // Counts a message that could bounce, once, when its side committed to it: bounced, or fell
  // back to registering (RdmaMrCacheStats).
  void count_bounce(bool sender, bool bounced);

  // The lanes' slabs of receive and staging slots (one MR on one context each, kept for the
  // lane's life) count against the same budgets: a slab takes one MR copy and its bytes, making
  // room by evicting unused cached ranges. ResourceExhausted naming the budget, and nothing
  // charged, when it cannot fit; release_slab returns exactly what charge_slab took.
  Status charge_slab(std::uint64_t bytes, const std::string& what);
  void release_slab(std::uint64_t bytes);

  [[nodiscard]] RdmaMrCacheStats stats() const;

 private:
  struct Entry {
    std::uint64_t length = 0;
    std::shared_ptr<detail::RegionRecord> record;  // null until first use
    std::uint64_t copies = 0;                      // MR copies charged (contexts registered)
    std::uint64_t last_use = 0;
  };
  // Caller holds mu_: frees the draining entries nobody uses any more; deregisters least
  // recently used unreferenced entries (never `keep`) until `copies` and `bytes` more fit.
  void sweep_draining();
  bool make_room(std::uint64_t copies, std::uint64_t bytes, const std::byte* keep);
  void uncharge(const Entry& e);

  std::shared_ptr<RdmaEngine> engine_;
  const std::uint64_t max_copies_;
  const std::uint64_t max_bytes_;
  const std::uint64_t bounce_limit_;  // rdma.bounce_limit rounded up to 64; 0: off
  // The bounce pool (null when off). Its slab hook declares each new slab here, with the pool's
  // mutex held: order pool → mu_. Leases keep the pool alive past the cache; only take_bounce
  // makes slabs, so the hook never runs after the cache is gone. Declared before entries_, so
  // the cached registrations of its slabs go before the slabs' memory does.
  std::shared_ptr<cuda::StagingPool> bounce_;
  // Order: a lane's mutex or a user thread (register, unregister) → mu_ → the verbs calls of
  // (de)registration; no other OrbiTE lock is taken under it.
  mutable std::mutex mu_;
  std::map<const std::byte*, Entry> entries_;        // by base; guarded by mu_
  std::vector<Entry> draining_;                      // forgotten while in use; guarded by mu_
  std::uint64_t copies_ = 0, bytes_ = 0, tick_ = 0;  // guarded by mu_ (slabs included)
  std::uint64_t slabs_ = 0, slab_bytes_ = 0;         // guarded by mu_
  std::uint64_t hits_ = 0, misses_ = 0, registrations_ = 0, evictions_ = 0, refused_ = 0;
  std::uint64_t bounce_sends_ = 0, bounce_receives_ = 0, bounce_fallbacks_ = 0;  // guarded by mu_
};

}  // namespace orbite::rdma
