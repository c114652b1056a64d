// Registered memory on the owner's side: the table the owner consults before any byte of a put or
// get moves. Region IDs are never reused, so a descriptor of an unregistered region stays stale.
#pragma once

#include <orbite/transfer.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "p2p/state.h"

namespace orbite::p2p {

class RegionRegistry {
 public:
  std::shared_ptr<detail::RegionRecord> add(std::weak_ptr<detail::EngineCore> engine,
                                            std::byte* base, std::uint64_t length, MemoryKind kind,
                                            Access access);
  void remove(std::uint64_t id);
  // The live region for an access of [offset, offset+length) with `write` or read rights, or
  // InvalidArgument naming what is wrong. The caller pins before touching memory.
  Result<std::shared_ptr<detail::RegionRecord>> authorize(std::uint64_t id,
                                                          std::uint64_t generation,
                                                          std::uint64_t offset,
                                                          std::uint64_t length, bool write) const;
  [[nodiscard]] std::size_t size() const;
  // Marks every region dead (engine close).
  void kill_all();

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::shared_ptr<detail::RegionRecord>> regions_;
  std::uint64_t next_id_ = 1;
};

// Checks that [offset, offset+length) lies in a region of `size` bytes, without overflow.
inline bool range_inside(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace orbite::p2p
