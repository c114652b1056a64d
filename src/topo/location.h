// Memory locations and the NIC priorities compiled for them: the vocabulary shared by discovery
// (tiers.cpp), the priority matrices (matrix.cpp) and the DeviceSelector (selector.cpp).
#pragma once

#include <orbite/status.h>

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orbite::topo {

inline constexpr int kUnknownNuma = -1;
// The device mask is 64 bits wide, so an inventory holds at most 64 NICs; the selector keeps
// fixed arrays of this size so that a selection never allocates.
inline constexpr std::size_t kMaxNics = 64;
inline constexpr std::size_t kTierCount = 3;

// TENT's memory type codes (Topology::MemType), as written in the native matrix format.
enum class MemoryType : int { Host = 0, Cuda = 1, Unknown = 4 };

// Where the bytes of a request live: "cpu:N" (NUMA node N), "cuda:N" (CUDA ordinal N) or "*"
// (unknown).
struct Location {
  enum class Kind : std::uint8_t { Any, Cpu, Cuda };
  Kind kind = Kind::Any;
  int index = -1;  // NUMA node or CUDA ordinal; -1 for Any

  static Location any() { return {}; }
  static Location cpu(int node) { return {Kind::Cpu, node}; }
  static Location cuda(int ordinal) { return {Kind::Cuda, ordinal}; }
  // "*", "cpu:N", "cuda:N"; "gpu:N" is read as "cuda:N" (TENT accepts it in matrices). Anything
  // else is InvalidArgument naming the text.
  static Result<Location> parse(std::string_view text);
  [[nodiscard]] std::string to_string() const;
  [[nodiscard]] MemoryType memory_type() const;
  friend auto operator<=>(const Location&, const Location&) = default;
};

// Where the host page holding `addr` lives: cpu:N of its NUMA node (move_pages(2) asked, moving
// nothing), or any() when the page is not resident or the kernel cannot tell. One syscall.
Location host_memory_location(const void* addr);

// The location a selection uses for memory owned at `owner`: rdma.preferred_numa_node, when set,
// replaces a CPU or unknown location (it is a hint about host memory); CUDA memory keeps its GPU.
Location selection_location(Location owner, std::optional<std::uint32_t> preferred_numa_node);

// One location's NICs (stable IDs) in priority tiers; tier 0 is preferred. A NIC appears in at
// most one tier of a row.
struct LocationTiers {
  Location location;
  std::array<std::vector<int>, kTierCount> tiers;
  // No NIC in any tier: the location is disabled (its requests find no device).
  [[nodiscard]] bool empty() const;
};

// Every location's tiers, compiled once at initialization and frozen afterwards.
struct PriorityTable {
  std::string origin;               // "discovery", "priority_matrix" or "custom_json_path FILE"
  std::vector<LocationTiers> rows;  // sorted by location; always holds a "*" row
  // The row of that location, or nullptr.
  [[nodiscard]] const LocationTiers* find(Location where) const;
  // The row of that location, or the "*" row for a location that has none.
  [[nodiscard]] const LocationTiers& lookup(Location where) const;
};

}  // namespace orbite::topo
