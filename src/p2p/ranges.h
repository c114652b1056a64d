// The ranges of one batched put or get, joined where they continue each other (TENT's
// merge_requests): a KV-cache batch of adjacent blocks then costs the transports one range, and
// RDMA one grant per max_direct_bytes, instead of one per block.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "orbite/transfer.h"

namespace orbite::p2p {

// Sorts `ranges` by remote offset (then local offset) and joins each range to the one before it
// when it starts where that one ends on both sides. The order within a batch is not defined
// (docs/transports.md), so sorting changes no result a caller may rely on; the bytes each range
// moves are the same. Returns how many ranges were joined to the one before them.
inline std::size_t merge_adjacent(std::vector<TransferRange>& ranges) {
  if (ranges.size() < 2) return 0;
  std::sort(ranges.begin(), ranges.end(), [](const TransferRange& a, const TransferRange& b) {
    return a.remote_offset != b.remote_offset ? a.remote_offset < b.remote_offset
                                              : a.local_offset < b.local_offset;
  });
  std::size_t last = 0;
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    TransferRange& tail = ranges[last];
    const TransferRange& next = ranges[i];
    if (tail.local_offset + tail.length == next.local_offset &&
        tail.remote_offset + tail.length == next.remote_offset) {
      tail.length += next.length;
    } else {
      ranges[++last] = next;
    }
  }
  const std::size_t merged = ranges.size() - (last + 1);
  ranges.resize(last + 1);
  return merged;
}

}  // namespace orbite::p2p
