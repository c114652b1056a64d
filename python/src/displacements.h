// The displacements of blocks laid end to end (all_to_allv's default), shared by orbite._core
// and orbite._torch.
#pragma once

#include <cstdint>
#include <vector>

namespace orbite::python {

// Prefix sums of `counts`.
inline std::vector<std::uint64_t> displacements_of(const std::vector<std::uint64_t>& counts) {
  std::vector<std::uint64_t> d(counts.size());
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    d[i] = at;
    at += counts[i];
  }
  return d;
}

}  // namespace orbite::python
