// Registered memory on the owner's side: the table the owner consults before any byte of a put or
// get moves. Region IDs are never reused, so a descriptor of an unregistered region stays stale.
#pragma once

#include <orbite/transfer.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/allocation.h"
#include "p2p/transport.h"

namespace orbite::detail {

// Lifetime: shared by the MemoryRegion handle, the registry and the requests that use it. Fields
// other than dead and pins are fixed once the record is published in the registry.
struct RegionRecord {
  // The owning engine (the proxy's EngineCore, which p2p does not name).
  std::weak_ptr<void> engine;
  std::uint64_t id = 0;
  std::uint64_t generation = 0;
  std::byte* base = nullptr;
  std::uint64_t length = 0;
  Access access{};
  MemoryKind kind = MemoryKind::Host;
  // CUDA memory behind the region: the device allocation (kind Cuda), or the pinned host
  // allocation OrbiTE made (kind Host), shared with the application's views; its readiness is
  // consumed before any access. Null for other host memory.
  std::shared_ptr<cuda::Allocation> cuda;
  std::uint64_t cuda_offset = 0;  // of base in the allocation
  // Transports that carry this region staged (bit i: TransportId i), decided at registration.
  std::uint32_t staged = 0;
  // What each transport's memory domain prepared for this registration (null: nothing needed).
  std::array<std::unique_ptr<p2p::DomainRegistration>, p2p::kTransportCount> registrations;
  // Registered by the application (register_memory); false for the engine's own records
  // (staging slabs and windows, exposed messages). Only these close_source() fences.
  bool application = false;
  // Set by unregister: no new access starts. pins counts peers' accesses in progress (the
  // source role), local_pins this engine's own put/get using the region (the requester role);
  // unregister returns only once both drop to zero, so nothing touches the memory afterwards.
  std::atomic<bool> dead{false};
  // Set by close_source(): no new access by a peer starts; the engine's own requests still may.
  std::atomic<bool> source_fenced{false};
  std::atomic<std::int64_t> pins{0};
  std::atomic<std::int64_t> local_pins{0};

  // n pins at once, or none: a reply split in n chunks is either fully covered or refused.
  // seq_cst on both sides: either the pin sees the fence, or the fencing thread sees the pin.
  bool pin_many(std::int64_t n) {
    pins.fetch_add(n, std::memory_order_seq_cst);
    if (dead.load(std::memory_order_seq_cst) || source_fenced.load(std::memory_order_seq_cst)) {
      pins.fetch_sub(n, std::memory_order_seq_cst);
      return false;
    }
    return true;
  }
  bool pin() { return pin_many(1); }
  void unpin() { pins.fetch_sub(1, std::memory_order_seq_cst); }
  // This engine's own put/get: refused only by unregister, never by close_source().
  bool pin_local() {
    local_pins.fetch_add(1, std::memory_order_seq_cst);
    if (dead.load(std::memory_order_seq_cst)) {
      local_pins.fetch_sub(1, std::memory_order_seq_cst);
      return false;
    }
    return true;
  }
  void unpin_local() { local_pins.fetch_sub(1, std::memory_order_seq_cst); }
  [[nodiscard]] std::int64_t all_pins() const {
    return pins.load(std::memory_order_seq_cst) + local_pins.load(std::memory_order_seq_cst);
  }
};

}  // namespace orbite::detail

namespace orbite::p2p {

// How long an access of pinned host memory waits for its producer's recorded work.
inline constexpr Duration kProducerBound = std::chrono::seconds(60);

// OrbiTE's pinned host memory (cuda::allocate_pinned_host) with a producer generation recorded
// on it: waits for that generation once, polling (never a blocking synchronisation) until
// `deadline`; Timeout while it runs. Any other memory returns at once.
Status consume_pinned_readiness(const detail::RegionRecord& r, Deadline deadline);

class RegionRegistry {
 public:
  // A record with its id, not yet visible to peers: the transports prepare it first.
  std::shared_ptr<detail::RegionRecord> prepare(std::weak_ptr<void> engine, std::byte* base,
                                                std::uint64_t length, MemoryKind kind,
                                                Access access);
  // Makes a prepared record visible to authorize().
  void publish(const std::shared_ptr<detail::RegionRecord>& record);
  void remove(std::uint64_t id);
  // The live region for an access of [offset, offset+length) with `write` or read rights by
  // transport `via` itself, or InvalidArgument naming what is wrong (a region `via` carries
  // staged is reached only through the owner's staging: `via` never touches its bytes). The
  // caller pins before touching memory. OrbiTE's pinned host memory with a recorded producer
  // generation is waited for first (consume_pinned_readiness, up to kProducerBound).
  Result<std::shared_ptr<detail::RegionRecord>> authorize(std::uint64_t id,
                                                          std::uint64_t generation,
                                                          std::uint64_t offset,
                                                          std::uint64_t length, bool write,
                                                          TransportId via) const;
  // As authorize, for the owner's staging (any transport): the region's own bytes are copied
  // by the owner, never reached by a transport.
  Result<std::shared_ptr<detail::RegionRecord>> authorize_staged(std::uint64_t id,
                                                                 std::uint64_t generation,
                                                                 std::uint64_t offset,
                                                                 std::uint64_t length,
                                                                 bool write) const;
  [[nodiscard]] std::size_t size() const;
  // Marks every region dead (engine close).
  void kill_all();

  // close_source(): fences every application region, and those registered later, against
  // peers' accesses (authorize answers Cancelled); the engine's own put/get are not affected.
  void fence_sources();
  [[nodiscard]] bool sources_fenced() const;
  // Accesses in progress on application regions, by role.
  struct RoleLoad {
    std::int64_t served = 0;     // peers' accesses (pins)
    std::int64_t requested = 0;  // this engine's put/get (local_pins)
  };
  [[nodiscard]] RoleLoad role_load() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::shared_ptr<detail::RegionRecord>> regions_;
  std::uint64_t next_id_ = 1;
  bool sources_fenced_ = false;  // under mu_
};

// Checks that [offset, offset+length) lies in a region of `size` bytes, without overflow.
inline bool range_inside(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace orbite::p2p
