// Sample wire values the RDMA codec and tiling tests share.
#pragma once

#include <cstdint>

#include "p2p/rdma/wire.h"

namespace orbite::rdma::samples {

// An engine key whose bytes count up from `first`.
inline EngineKey key_of(std::uint8_t first) {
  EngineKey k{};
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::uint8_t>(first + i);
  return k;
}

// Segment `slot` of a request cut in 64 KiB slices: slices [first, first + slices).
inline SegmentRequest segment(std::uint8_t first, std::uint8_t slices, std::uint32_t slot) {
  SegmentRequest s;
  s.first_slice = first;
  s.slices = slices;
  s.slot = slot;
  s.offset = 0x10000ull * first;
  s.length = 0x10000ull * slices;
  s.qp_incarnation = 1000 + slot;
  s.requester_qpn = 0x100 + slot;
  return s;
}

}  // namespace orbite::rdma::samples
