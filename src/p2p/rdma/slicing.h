// The slice plan of one parent, as TENT plans RDMA slices: a base block (rdma.block_size, 64 KiB),
// at most 64 slices for a READ into host memory and 32 for a WRITE (or a READ into device
// memory), blocks grown to a multiple of the base so that the count fits, and a short tail (under
// a quarter block) folded into its predecessor. One slice is one payload WR.
#pragma once

#include <cstdint>
#include <vector>

namespace orbite::rdma {

struct SlicePlan {
  std::uint64_t block = 0;
  std::vector<std::uint64_t> lengths;  // slice i covers [i * block, i * block + lengths[i])
};

inline constexpr std::uint32_t kMaxReadSlices = 64;
inline constexpr std::uint32_t kMaxWriteSlices = 32;

// An empty plan for length 0 (no WR; the grant only validates).
SlicePlan plan_slices(std::uint64_t length, std::uint64_t base_block, std::uint32_t max_slices);

}  // namespace orbite::rdma
