// The collective algorithms, each a coroutine over a Ctx (task.h). Arguments are checked by the
// communicator before any of these runs; they assume size() >= 2 and consistent buffers.
#pragma once

#include <orbite/collectives.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "coll/task.h"

namespace orbite::coll {

class SharedArea;

// The communicator's ranks by host (the same on every rank): hosts in the order of their first
// rank, each with its ranks ascending; the first is the host's leader.
struct Hosts {
  std::vector<std::vector<int>> members;
  std::vector<int> host_of;  // by rank
  [[nodiscard]] const std::vector<int>& of(int rank) const {
    return members[static_cast<std::size_t>(host_of[static_cast<std::size_t>(rank)])];
  }
  // `rank`'s position among its host's ranks.
  [[nodiscard]] int local_rank(int rank) const {
    const std::vector<int>& m = of(rank);
    return static_cast<int>(std::find(m.begin(), m.end(), rank) - m.begin());
  }
  [[nodiscard]] std::vector<int> leaders() const {
    std::vector<int> out;
    for (const auto& m : members) out.push_back(m.front());
    return out;
  }
  // More than one host, and some host with several ranks: a hierarchical collective differs
  // from a flat one.
  [[nodiscard]] bool nested() const {
    if (members.size() < 2) return false;
    for (const auto& m : members) {
      if (m.size() > 1) return true;
    }
    return false;
  }
};

struct Args {
  const std::byte* in = nullptr;
  std::byte* out = nullptr;
  std::uint64_t count = 0;  // elements (per block for the gathers, scatters and all_to_all)
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  std::uint64_t chunk_bytes = 1 << 20;  // pipelining unit of the ring and chain algorithms
  int depth = 4;                        // receive buffers in flight per pipelined stream
  // all_to_allv (elements).
  std::vector<std::uint64_t> send_counts, send_displs, recv_counts, recv_displs;
  // The communicator's shared segment (the shm algorithms; set when one of them runs), or for a
  // hierarchical collective this host's segment (null when the host has none).
  std::shared_ptr<SharedArea> area;
  // An shm algorithm run as a step of a hierarchical collective: the caller took the segment's
  // turn for the whole collective (collectives use a segment in start order).
  bool holds_turn = false;
  // The hierarchical algorithms' host groups.
  std::shared_ptr<const Hosts> hosts;
  // local_copy: the bytes it copies from in to out.
  std::uint64_t local_bytes = 0;
  // A tiny shm collective whose step began on the caller's thread (shm_*_inline): that step;
  // and when it began ahead, while earlier collectives were still in flight (its step numbered,
  // its tiny line written if it was free, its Arrived not yet), the segment turn it waits for.
  std::uint64_t tiny_step = 0;
  bool tiny_ahead = false;
  bool tiny_written = false;
  std::uint64_t tiny_ticket = 0;
};

// How a collective's start on the caller's thread went (Executor::start's `first`).
enum class Inline {
  NotTaken,  // nothing done: the algorithm runs from its start
  Continue,  // begun: the algorithm (with the Args as left) runs on from where it stopped
  Done,      // finished, successfully
};

// size() == 1, or nothing to move: copy a.local_bytes from in to out where they differ.
Task local_copy(Ctx& c, Args a);
// The same on the caller's thread, for host buffers, where no other collective is in flight
// (Executor::start's `first`).
Inline local_copy_inline(Args& a, int rank, int size, bool alone);

// all_reduce: ring reduce-scatter + all-gather, pipelined in chunks; and recursive doubling with
// the non-power-of-two fold. reduce_scatter: the ring's first half.
Task ring_all_reduce(Ctx& c, Args a);
Task recursive_doubling_all_reduce(Ctx& c, Args a);
Task ring_reduce_scatter(Ctx& c, Args a);

// Rooted: binomial trees and pipelined chains; linear gather and scatter.
Task binomial_broadcast(Ctx& c, Args a);
Task chain_broadcast(Ctx& c, Args a);
Task binomial_reduce(Ctx& c, Args a);
Task chain_reduce(Ctx& c, Args a);
Task linear_gather(Ctx& c, Args a);
Task linear_scatter(Ctx& c, Args a);

// Exchanges.
Task ring_all_gather(Ctx& c, Args a);
Task bruck_all_gather(Ctx& c, Args a);
Task pairwise_all_to_all(Ctx& c, Args a);  // all_to_allv when the count vectors are set
Task dissemination_barrier(Ctx& c);

// Through the shared segment of a single-host communicator (shm.cpp; a.area set).
Task shm_all_reduce(Ctx& c, Args a);
Task shm_reduce(Ctx& c, Args a);
Task shm_broadcast(Ctx& c, Args a);
Task shm_all_gather(Ctx& c, Args a);
Task shm_reduce_scatter(Ctx& c, Args a);
Task shm_barrier(Ctx& c, Args a);
// A tiny one (at most SharedArea::kTinyBytes per rank; any barrier) begun on the caller's
// thread (under the executor lock): where no collective of the communicator is in flight,
// finished there when it needs nothing it must wait for (a broadcast's root, reduce's non-roots,
// and every rank whose peers' lines are there already); behind collectives in flight whose
// steps are all numbered (tiny ones begun so), its line written ahead, the rest in its turn.
Inline shm_all_reduce_inline(Args& a, int rank, int size, bool alone);
Inline shm_reduce_inline(Args& a, int rank, int size, bool alone);
Inline shm_broadcast_inline(Args& a, int rank, int size, bool alone);
Inline shm_barrier_inline(Args& a, int rank, int size, bool alone);
// co_await shm_turn(c, area): this collective's turn on the segment, taken in start order (the
// first thing the collective does); area.release() when it is done with the segment.
Task shm_turn(Ctx& c, SharedArea& area);

// Hierarchical, for communicators spanning hosts (hierarchical.cpp; a.hosts set, a.area this
// host's segment or null): a step inside each host (through its segment, or messages without
// one), one among the hosts' leaders over messages, and a step inside each host again.
Task hierarchical_all_reduce(Ctx& c, Args a);
Task hierarchical_reduce(Ctx& c, Args a);
Task hierarchical_broadcast(Ctx& c, Args a);
Task hierarchical_all_gather(Ctx& c, Args a);
Task hierarchical_reduce_scatter(Ctx& c, Args a);
Task hierarchical_barrier(Ctx& c, Args a);

// Element offset of part k of `count` split into n balanced parts.
inline std::uint64_t balanced_offset(std::uint64_t count, int n, int k) {
  return static_cast<std::uint64_t>(
      (static_cast<unsigned __int128>(count) * static_cast<unsigned>(k)) /
      static_cast<unsigned>(n));
}

// memcpy that accepts empty ranges with null pointers and skips copies onto themselves.
inline void copy_bytes(void* dst, const void* src, std::uint64_t bytes) {
  if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
}

inline int wrap(int x, int n) {
  return ((x % n) + n) % n;
}

// [off, off + len) split into pieces of at most `piece` elements (none when len is 0). Sender
// and receiver compute the same list, so they agree on every message's size.
struct Piece {
  int step = 0;
  std::uint64_t off = 0;
  std::uint64_t len = 0;
};
void split_pieces(std::vector<Piece>& out, int step, std::uint64_t off, std::uint64_t len,
                  std::uint64_t piece);

}  // namespace orbite::coll
