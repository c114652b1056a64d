// The shm algorithms: collectives of a single-host communicator through its shared segment
// (shared_area.h) instead of messages. Each moves its data in chunk steps; in a step every rank
// copies its part into its slot and publishes Arrived, waits (co_await until) for the others'
// counters, reads what it needs straight from their slots, and publishes Consumed. A slot is
// written again two steps later, once every rank consumed the step that used it last, so two
// steps can be in flight. Reductions combine the ranks' contributions in rank order (rank 0's
// first), on every rank the same way, so results are identical everywhere and from run to run.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>

#include "coll/algorithms.h"
#include "coll/reduce.h"
#include "coll/shared_area.h"

namespace orbite::coll {

namespace {

using Flag = SharedArea::Flag;

// The predicates capture at most 16 bytes (the area and one packed word), which std::function
// keeps without allocating: a small collective awaits several of them.

// Every rank's `f` reached `step`.
Ctx::Await all_reached(Ctx& c, SharedArea& area, Flag f, std::uint64_t step) {
  const std::uint64_t key = step << 2 | static_cast<std::uint64_t>(f);
  return c.until([a = &area, key] {
    const std::uint64_t s = key >> 2;
    const int behind = a->first_behind(Flag(key & 3), s);
    if (behind == Ctx::kReady && Flag(key & 3) == SharedArea::Arrived) a->arrived_by_all(s);
    return behind;
  });
}

// `rank`'s `f` reached `step` (ranks below 2^18, steps below 2^44).
Ctx::Await rank_reached(Ctx& c, SharedArea& area, int rank, Flag f, std::uint64_t step) {
  const std::uint64_t key =
      step << 20 | static_cast<std::uint64_t>(rank) << 2 | static_cast<std::uint64_t>(f);
  return c.until([a = &area, key] {
    const int r = static_cast<int>((key >> 2) & 0x3ffff);
    return a->seen(r, Flag(key & 3)) >= key >> 20 ? Ctx::kReady : r;
  });
}

// This rank's slot for `step` may be written: every rank consumed the step that used it before
// (usually known without reading their lines: see SharedArea::arrived_by_all).
Ctx::Await slot_free(Ctx& c, SharedArea& area, std::uint64_t step) {
  const std::uint64_t before = step > 2 ? step - 2 : 0;
  return c.until([a = &area, before] {
    return a->consumed_by_all(before) ? Ctx::kReady : a->first_behind(SharedArea::Consumed, before);
  });
}

// The collectives before this one (in start order) are done with the segment.
Ctx::Await my_turn(Ctx& c, SharedArea& area, std::uint64_t ticket) {
  return c.until([&area, ticket] { return area.serving(ticket) ? Ctx::kReady : Ctx::kNoRank; });
}

enum class Kind : std::uint64_t {
  AllReduce = 1,
  Reduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  Barrier
};
constexpr const char* kKindNames[] = {"",           "all_reduce",     "reduce", "broadcast",
                                      "all_gather", "reduce_scatter", "barrier"};

SharedArea::Shape shape_of(Kind kind, const Args& a) {
  return {a.count, static_cast<std::uint64_t>(kind) | static_cast<std::uint64_t>(a.type) << 8 |
                       static_cast<std::uint64_t>(a.op) << 16 |
                       static_cast<std::uint64_t>(static_cast<std::uint32_t>(a.root)) << 24};
}

std::string describe(const SharedArea::Shape& s) {
  const auto kind = s.what & 0xff;
  const auto type = static_cast<DataType>((s.what >> 8) & 0xff);
  const auto op = static_cast<ReduceOp>((s.what >> 16) & 0xff);
  const auto root = static_cast<std::int32_t>(static_cast<std::uint32_t>(s.what >> 24));
  if (kind == 0 || kind >= std::size(kKindNames) || static_cast<int>(type) >= kDataTypeCount ||
      static_cast<int>(op) >= kReduceOpCount) {
    return "something unknown";
  }
  const auto k = static_cast<Kind>(kind);
  std::string out = kKindNames[kind];
  if (k == Kind::Barrier) return out;
  out += " with " + std::to_string(s.count) + " elements of " + std::string(to_string(type));
  if (k == Kind::AllReduce || k == Kind::Reduce || k == Kind::ReduceScatter) {
    out += ", " + std::string(to_string(op));
  }
  if (k == Kind::Reduce || k == Kind::Broadcast) out += ", root " + std::to_string(root);
  return out;
}

// Fails the collective with InvalidArgument: rank `r` called `theirs` where this rank called
// `mine`.
void fail_mismatch(Ctx& c, int r, const SharedArea::Shape& theirs, const SharedArea::Shape& mine) {
  c.fail(Status::error(Errc::InvalidArgument,
                       "rank " + std::to_string(r) + " called " + describe(theirs) +
                           " where this rank called " + describe(mine) +
                           " (every rank calls the same collectives in the same order, with "
                           "the same counts, types, operators and roots)"));
}

// After the first step's Arrived of `ranks` (all, or just the root): they called what this rank
// did. Fails the collective with InvalidArgument otherwise (the caller returns at once).
bool same_shapes(Ctx& c, const SharedArea& area, std::uint64_t step, const SharedArea::Shape& mine,
                 int only = -1) {
  for (int r = 0; r < c.size(); ++r) {
    if ((only >= 0 && r != only) || r == c.rank()) continue;
    const SharedArea::Shape theirs = area.shape(r, step);
    if (theirs == mine) continue;
    fail_mismatch(c, r, theirs, mine);
    return false;
  }
  return true;
}

// Tiny steps: every rank's (or only `only`'s) tiny line reached `step`. A rank whose counter
// shows the step without its tiny line called something else: now and then (every 64 looks,
// reading its counter line) that ends the wait too, for same_tiny_shapes() to report.
Ctx::Await tiny_reached(Ctx& c, SharedArea& area, std::uint64_t step, int only = -1) {
  const std::uint64_t key = step << 20 | static_cast<std::uint64_t>(only < 0 ? 0xfffff : only);
  return c.until([a = &area, key] {
    const std::uint64_t s = key >> 20;
    const auto one = static_cast<int>(key & 0xfffff);
    const bool all = one == 0xfffff;
    int behind = Ctx::kReady;
    for (int r = all ? 0 : one; r < (all ? a->ranks() : one + 1); ++r) {
      if (a->tiny_seen(r, s) < s) {
        behind = r;
        break;
      }
    }
    if (behind == Ctx::kReady) {
      // Each published its Consumed of the step before its tiny line (see arrived_by_all).
      if (all) a->arrived_by_all(s);
      return Ctx::kReady;
    }
    // Arrived is stored after the tiny line: a rank whose Arrived shows the step and whose tiny
    // line, read again after it (acquire), does not, arrived without one.
    if (a->tiny_look() % 64 == 0 && a->seen(behind, SharedArea::Arrived) >= s &&
        a->tiny_seen(behind, s) < s) {
      return Ctx::kReady;
    }
    return behind;
  });
}

// same_shapes() for a tiny step: a rank without its tiny line for the step arrived at it
// through its counter with another collective (its counter line's shape says which).
bool same_tiny_shapes(Ctx& c, const SharedArea& area, std::uint64_t step,
                      const SharedArea::Shape& mine, int only = -1) {
  for (int r = 0; r < c.size(); ++r) {
    if ((only >= 0 && r != only) || r == c.rank()) continue;
    const bool tiny = area.tiny_seen(r, step) >= step;
    const SharedArea::Shape theirs = tiny ? area.tiny_shape(r, step) : area.shape(r, step);
    if (tiny && theirs == mine) continue;
    fail_mismatch(c, r, theirs, mine);
    return false;
  }
  return true;
}

// dst[0, len) = the ranks' slots of `step` at byte offset `at`, combined in rank order; rank
// `me`'s contribution read from `own` instead of its slot when `own` is set (the same bytes).
template <typename Part>
void combine(const Args& a, std::byte* dst, std::uint64_t len, int n, Part part) {
  if (len == 0) return;
  reduce(a.type, a.op, dst, part(0), part(1), len);
  for (int k = 2; k < n; ++k) reduce(a.type, a.op, dst, dst, part(k), len);
  if (a.op == ReduceOp::Avg) divide(a.type, dst, len, n);
}

void fold(const Args& a, std::byte* dst, const SharedArea& area, std::uint64_t step,
          std::uint64_t at, std::uint64_t len, int n, int me = -1, const std::byte* own = nullptr) {
  combine(a, dst, len, n, [&](int k) -> const std::byte* {
    return k == me && own != nullptr ? own : area.slot(k, step) + at;
  });
}

// Up to this many bytes every rank combines the whole vector itself after one step (one wait);
// above it, each combines its share and the shares are exchanged (two waits per step), except
// on 2 ranks, where every chunk is combined whole by each rank that receives it.
constexpr std::uint64_t kWholeReduceMax = 16 * 1024;

// all_reduce (`everyone`) or reduce to a.root.
Task reduce_through(Ctx& c, Args a, bool everyone) {
  SharedArea& area = *a.area;
  const int n = c.size();
  const int me = c.rank();
  const std::uint64_t es = size_of(a.type);
  const bool receives = everyone || me == a.root;
  const SharedArea::Shape shape = shape_of(everyone ? Kind::AllReduce : Kind::Reduce, a);
  if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
  const std::uint64_t bytes = a.count * es;
  if (bytes <= SharedArea::kTinyBytes) {
    // Tiny: each rank's input (reduce's root: none) and shape on its tiny line, one cache line
    // per rank to read. The counter line's shape and Arrived still tell a rank that called
    // something else.
    const bool own_input = a.in != a.out || me < 2;  // as in the whole form below
    const std::uint64_t s = area.next_step();
    co_await slot_free(c, area, s);
    if (everyone || me != a.root || !own_input) copy_bytes(area.tiny(me, s), a.in, bytes);
    area.describe(me, s, shape);
    area.publish_tiny(me, s, shape);
    area.publish(me, SharedArea::Arrived, s);
    if (receives) {
      co_await tiny_reached(c, area, s);
      if (!same_tiny_shapes(c, area, s, shape)) co_return;
      combine(a, a.out, a.count, n, [&](int k) -> const std::byte* {
        return k == me && own_input ? a.in : area.tiny(k, s);
      });
    }
    area.publish(me, SharedArea::Consumed, s);
    if (!a.holds_turn) area.release();
    co_return;
  }
  if (n == 2 || bytes <= std::min(kWholeReduceMax, area.slot_bytes())) {
    // Whole: per chunk, every rank that others read copies its part in (reduce's root is read
    // by no one), and each rank that receives combines the chunk from its own input and the
    // others' slots (in rank order, as fold always does). One wait per chunk.
    const bool read_by_others = everyone || me != a.root;
    // Its own input is read in place of its slot, except in place from rank 2 on: the first
    // combination (of ranks 0 and 1) overwrites the output before that rank's turn.
    const bool from_input = a.in != a.out || me < 2;
    const std::uint64_t chunk = area.slot_bytes() / es;
    for (std::uint64_t off = 0; off == 0 || off < a.count; off += chunk) {
      const std::uint64_t len = std::min(chunk, a.count - off);
      const std::uint64_t s = area.next_step();
      co_await slot_free(c, area, s);
      if (read_by_others || !from_input) copy_bytes(area.slot(me, s), a.in + off * es, len * es);
      if (off == 0) area.describe(me, s, shape);
      area.publish(me, SharedArea::Arrived, s);
      if (receives) {
        co_await all_reached(c, area, SharedArea::Arrived, s);
        if (off == 0 && !same_shapes(c, area, s, shape)) co_return;
        fold(a, a.out + off * es, area, s, 0, len, n, me, from_input ? a.in + off * es : nullptr);
      }
      area.publish(me, SharedArea::Consumed, s);
    }
    if (!a.holds_turn) area.release();
    co_return;
  }
  const std::uint64_t chunk = area.slot_bytes() / es;
  // A rank without an output (reduce's non-roots) combines its share in scratch.
  std::byte* scratch = receives ? nullptr : c.scratch(area.slot_bytes());
  for (std::uint64_t off = 0; off < a.count; off += chunk) {
    const std::uint64_t len = std::min(chunk, a.count - off);
    const std::uint64_t s = area.next_step();
    co_await slot_free(c, area, s);
    std::byte* mine = area.slot(me, s);
    copy_bytes(mine, a.in + off * es, len * es);
    if (off == 0) area.describe(me, s, shape);
    area.publish(me, SharedArea::Arrived, s);
    co_await all_reached(c, area, SharedArea::Arrived, s);
    if (off == 0 && !same_shapes(c, area, s, shape)) co_return;
    // This rank's share of the chunk: combined from every slot, then put back into its own
    // slot (where no other rank reads during this phase) for the others to copy.
    const std::uint64_t b = balanced_offset(len, n, me);
    const std::uint64_t e = balanced_offset(len, n, me + 1);
    std::byte* acc = receives ? a.out + (off + b) * es : scratch;
    fold(a, acc, area, s, b * es, e - b, n);
    copy_bytes(mine + b * es, acc, (e - b) * es);
    area.publish(me, SharedArea::Reduced, s);
    if (receives) {
      co_await all_reached(c, area, SharedArea::Reduced, s);
      for (int k = 0; k < n; ++k) {
        if (k == me) continue;
        const std::uint64_t kb = balanced_offset(len, n, k);
        const std::uint64_t ke = balanced_offset(len, n, k + 1);
        copy_bytes(a.out + (off + kb) * es, area.slot(k, s) + kb * es, (ke - kb) * es);
      }
    }
    area.publish(me, SharedArea::Consumed, s);
  }
  if (!a.holds_turn) area.release();
}

}  // namespace

Task shm_turn(Ctx& c, SharedArea& area) {
  co_await my_turn(c, area, area.take_ticket());
}

Task shm_all_reduce(Ctx& c, Args a) {
  return reduce_through(c, std::move(a), true);
}

Task shm_reduce(Ctx& c, Args a) {
  return reduce_through(c, std::move(a), false);
}

Task shm_broadcast(Ctx& c, Args a) {
  SharedArea& area = *a.area;
  const int me = c.rank();
  const bool root = me == a.root;
  const std::uint64_t bytes = a.count * size_of(a.type);
  const SharedArea::Shape shape = shape_of(Kind::Broadcast, a);
  if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
  if (root) copy_bytes(a.out, a.in, bytes);
  if (bytes <= SharedArea::kTinyBytes) {
    // Tiny: the root's data and shape on its tiny line, one cache line for the others to read.
    const std::uint64_t s = area.next_step();
    if (root) {
      co_await slot_free(c, area, s);
      copy_bytes(area.tiny(me, s), a.in, bytes);
      area.describe(me, s, shape);
      area.publish_tiny(me, s, shape);
      area.publish(me, SharedArea::Arrived, s);
    } else {
      co_await tiny_reached(c, area, s, a.root);
      if (!same_tiny_shapes(c, area, s, shape, a.root)) co_return;
      copy_bytes(a.out, area.tiny(a.root, s), bytes);
    }
    area.publish(me, SharedArea::Consumed, s);
    if (!a.holds_turn) area.release();
    co_return;
  }
  for (std::uint64_t off = 0; off < bytes; off += area.slot_bytes()) {
    const std::uint64_t len = std::min(area.slot_bytes(), bytes - off);
    const std::uint64_t s = area.next_step();
    if (root) {
      co_await slot_free(c, area, s);
      copy_bytes(area.slot(me, s), a.in + off, len);
      if (off == 0) area.describe(me, s, shape);
      area.publish(me, SharedArea::Arrived, s);
    } else {
      co_await rank_reached(c, area, a.root, SharedArea::Arrived, s);
      if (off == 0 && !same_shapes(c, area, s, shape, a.root)) co_return;
      copy_bytes(a.out + off, area.slot(a.root, s), len);
    }
    area.publish(me, SharedArea::Consumed, s);
  }
  if (!a.holds_turn) area.release();
}

Task shm_all_gather(Ctx& c, Args a) {
  SharedArea& area = *a.area;
  const int n = c.size();
  const int me = c.rank();
  const std::uint64_t block = a.count * size_of(a.type);
  const SharedArea::Shape shape = shape_of(Kind::AllGather, a);
  if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
  copy_bytes(a.out + static_cast<std::uint64_t>(me) * block, a.in, block);
  for (std::uint64_t off = 0; off < block; off += area.slot_bytes()) {
    const std::uint64_t len = std::min(area.slot_bytes(), block - off);
    const std::uint64_t s = area.next_step();
    co_await slot_free(c, area, s);
    copy_bytes(area.slot(me, s), a.in + off, len);
    if (off == 0) area.describe(me, s, shape);
    area.publish(me, SharedArea::Arrived, s);
    co_await all_reached(c, area, SharedArea::Arrived, s);
    if (off == 0 && !same_shapes(c, area, s, shape)) co_return;
    for (int k = 0; k < n; ++k) {
      if (k != me) {
        copy_bytes(a.out + static_cast<std::uint64_t>(k) * block + off, area.slot(k, s), len);
      }
    }
    area.publish(me, SharedArea::Consumed, s);
  }
  if (!a.holds_turn) area.release();
}

Task shm_reduce_scatter(Ctx& c, Args a) {
  SharedArea& area = *a.area;
  const int n = c.size();
  const int me = c.rank();
  const std::uint64_t es = size_of(a.type);
  const auto ranks = static_cast<std::uint64_t>(n);
  // Per step, a piece of every block: the slot holds n pieces of `chunk` elements.
  const std::uint64_t chunk = std::max<std::uint64_t>(1, area.slot_bytes() / (ranks * es));
  const SharedArea::Shape shape = shape_of(Kind::ReduceScatter, a);
  if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
  for (std::uint64_t off = 0; off < a.count; off += chunk) {
    const std::uint64_t len = std::min(chunk, a.count - off);
    const std::uint64_t s = area.next_step();
    co_await slot_free(c, area, s);
    std::byte* mine = area.slot(me, s);
    for (std::uint64_t k = 0; k < ranks; ++k) {
      copy_bytes(mine + k * len * es, a.in + (k * a.count + off) * es, len * es);
    }
    if (off == 0) area.describe(me, s, shape);
    area.publish(me, SharedArea::Arrived, s);
    co_await all_reached(c, area, SharedArea::Arrived, s);
    if (off == 0 && !same_shapes(c, area, s, shape)) co_return;
    fold(a, a.out + off * es, area, s, static_cast<std::uint64_t>(me) * len * es, len, n);
    area.publish(me, SharedArea::Consumed, s);
  }
  if (!a.holds_turn) area.release();
}

Task shm_barrier(Ctx& c, Args a) {
  SharedArea& area = *a.area;
  if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
  const std::uint64_t s = area.next_step();
  const SharedArea::Shape shape = shape_of(Kind::Barrier, Args{});
  co_await slot_free(c, area, s);  // its shape takes the parity's place
  area.describe(c.rank(), s, shape);
  area.publish_tiny(c.rank(), s, shape);
  area.publish(c.rank(), SharedArea::Arrived, s);
  co_await tiny_reached(c, area, s);
  if (!same_tiny_shapes(c, area, s, shape)) co_return;
  area.publish(c.rank(), SharedArea::Consumed, s);
  if (!a.holds_turn) area.release();
}

}  // namespace orbite::coll
