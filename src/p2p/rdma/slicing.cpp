#include "p2p/rdma/slicing.h"

#include <algorithm>

namespace orbite::rdma {

SlicePlan plan_slices(std::uint64_t length, std::uint64_t base, std::uint32_t max_slices) {
  SlicePlan plan;
  if (length == 0) return plan;
  base = std::max<std::uint64_t>(base, 1);
  max_slices = std::max<std::uint32_t>(max_slices, 1);
  auto ceil_div = [](std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; };
  std::uint64_t n = std::min<std::uint64_t>(ceil_div(length, base), max_slices);
  std::uint64_t block = ceil_div(ceil_div(length, n), base) * base;
  n = ceil_div(length, block);  // no empty slice
  if (n > 1 && length - (n - 1) * block < block / 4) --n;
  plan.block = block;
  plan.lengths.assign(n, block);
  plan.lengths.back() = length - (n - 1) * block;
  return plan;
}

}  // namespace orbite::rdma
