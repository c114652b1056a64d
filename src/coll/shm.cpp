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
#include "common/cpu_relax.h"

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

// This rank's tiny line for `step` may be written: every rank consumed the step that used it
// before, kTinyLines steps ago.
std::uint64_t tiny_line_before(std::uint64_t step) {
  return step > SharedArea::kTinyLines ? step - SharedArea::kTinyLines : 0;
}
bool tiny_line_free(SharedArea& area, std::uint64_t step) {
  return area.consumed_by_all(tiny_line_before(step));
}
Ctx::Await tiny_free(Ctx& c, SharedArea& area, std::uint64_t step) {
  return c.until([a = &area, step] {
    return tiny_line_free(*a, step) ? Ctx::kReady
                                    : a->first_behind(SharedArea::Consumed, tiny_line_before(step));
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
// did. Fails the collective with InvalidArgument otherwise (the caller returns at once). A rank
// that made the step a tiny one published its tiny line before its Arrived, and cannot rewrite
// it before this rank consumed the step: that line's shape is what it called.
bool same_shapes(Ctx& c, const SharedArea& area, std::uint64_t step, const SharedArea::Shape& mine,
                 int only = -1) {
  for (int r = 0; r < c.size(); ++r) {
    if ((only >= 0 && r != only) || r == c.rank()) continue;
    const bool tiny = area.tiny_seen(r, step) >= step;
    const SharedArea::Shape theirs = tiny ? area.tiny_shape(r, step) : area.shape(r, step);
    if (!tiny && theirs == mine) continue;
    fail_mismatch(c, r, theirs, mine);
    return false;
  }
  return true;
}

// Tiny steps: every rank's (or only `only`'s) tiny line reached `step`. A rank whose counter
// shows the step without its tiny line called something else: now and then (every 64 looks,
// reading its counter line) that ends the wait too, for same_tiny_shapes() to report.
int tiny_behind(SharedArea& a, std::uint64_t s, int only) {
  const bool all = only < 0;
  int behind = Ctx::kReady;
  for (int r = all ? 0 : only; r < (all ? a.ranks() : only + 1); ++r) {
    if (a.tiny_seen(r, s) < s) {
      behind = r;
      break;
    }
  }
  // (All tiny lines there say nothing of the Consumed counters: a line written ahead of its
  // turn may precede its writer's Consumed of earlier steps by up to kTinyLines.)
  if (behind == Ctx::kReady) return Ctx::kReady;
  // Arrived is stored after the tiny line: a rank whose Arrived shows the step and whose tiny
  // line, read again after it (acquire), does not, arrived without one.
  if (a.tiny_look() % 64 == 0 && a.seen(behind, SharedArea::Arrived) >= s &&
      a.tiny_seen(behind, s) < s) {
    return Ctx::kReady;
  }
  return behind;
}
Ctx::Await tiny_reached(Ctx& c, SharedArea& area, std::uint64_t step, int only = -1) {
  const std::uint64_t key = step << 20 | static_cast<std::uint64_t>(only < 0 ? 0xfffff : only);
  return c.until([a = &area, key] {
    const auto one = static_cast<int>(key & 0xfffff);
    return tiny_behind(*a, key >> 20, one == 0xfffff ? -1 : one);
  });
}

// The first rank (of all, or only `only`) whose tiny line of `step` is missing or shows another
// shape than `mine`, with what it called in `theirs`; -1 when there is none. A rank without its
// tiny line for the step arrived at it through its counter with another collective (its counter
// line's shape says which).
int tiny_mismatch(const SharedArea& area, std::uint64_t step, const SharedArea::Shape& mine, int me,
                  int only, SharedArea::Shape& theirs) {
  for (int r = 0; r < area.ranks(); ++r) {
    if ((only >= 0 && r != only) || r == me) continue;
    const bool tiny = area.tiny_seen(r, step) >= step;
    theirs = tiny ? area.tiny_shape(r, step) : area.shape(r, step);
    if (tiny && theirs == mine) continue;
    return r;
  }
  return -1;
}

// same_shapes() for a tiny step.
bool same_tiny_shapes(Ctx& c, const SharedArea& area, std::uint64_t step,
                      const SharedArea::Shape& mine, int only = -1) {
  SharedArea::Shape theirs;
  const int r = tiny_mismatch(area, step, mine, c.rank(), only, theirs);
  if (r < 0) return true;
  fail_mismatch(c, r, theirs, mine);
  return false;
}

// dst[0, len) = the ranks' slots of `step` at byte offset `at`, combined in rank order; rank
// `me`'s contribution read from `own` instead of its slot when `own` is set (the same bytes).
// Block by block (kFoldBlock bytes) from 3 parts on, so that the partial result stays in L1
// while each rank's part is folded into it: every part is read once and the result written once,
// instead of the result being read and written again from memory for every rank. The same
// combination per element as one pass over the whole range. With `also`, each finished block is
// copied there too (while it is in cache).
constexpr std::uint64_t kFoldBlock = 16 * 1024;

template <typename Part>
void combine(const Args& a, std::byte* dst, std::uint64_t len, int n, Part part,
             std::byte* also = nullptr) {
  const std::uint64_t es = size_of(a.type);
  // Two parts fold in one pass: no partial result to keep in cache.
  const std::uint64_t block =
      n > 2 || also != nullptr ? std::max<std::uint64_t>(1, kFoldBlock / es) : len;
  for (std::uint64_t i = 0; i < len; i += block) {
    const std::uint64_t m = std::min(block, len - i);
    const std::uint64_t o = i * es;
    reduce(a.type, a.op, dst + o, part(0) + o, part(1) + o, m);
    for (int k = 2; k < n; ++k) reduce(a.type, a.op, dst + o, dst + o, part(k) + o, m);
    if (a.op == ReduceOp::Avg) divide(a.type, dst + o, m, n);
    if (also != nullptr) copy_bytes(also + o, dst + o, m * es);
  }
}

void fold(const Args& a, std::byte* dst, const SharedArea& area, std::uint64_t step,
          std::uint64_t at, std::uint64_t len, int n, int me = -1, const std::byte* own = nullptr,
          std::byte* also = nullptr) {
  combine(
      a, dst, len, n,
      [&](int k) -> const std::byte* {
        return k == me && own != nullptr ? own : area.slot(k, step) + at;
      },
      also);
}

// Elements per chunk step of a collective moving `count` elements of `unit` bytes each through
// every slot (`unit`: the element's size, or n of them for reduce_scatter's pieces). Steps of
// kChunkMin bytes (or the slot, if smaller) keep what the ranks copy in cache and overlap one
// step's copies with the reads of the step before. Where the host's ranks outnumber its CPUs
// every step is a wait for ranks that may be off a core for a time slice, so large collectives
// take fewer, larger steps there: kCrowdedSteps of them, up to the slot (docs/performance.md,
// "Chunk steps where ranks outnumber cores").
constexpr std::uint64_t kChunkMin = 256 * 1024;
constexpr std::uint64_t kCrowdedSteps = 8;

std::uint64_t chunk_elements(const SharedArea& area, std::uint64_t count, std::uint64_t unit) {
  const std::uint64_t most = std::max<std::uint64_t>(1, area.slot_bytes() / unit);
  std::uint64_t want = kChunkMin;
  if (area.crowded()) {
    const std::uint64_t share = (count * unit + kCrowdedSteps - 1) / kCrowdedSteps;
    want = std::max(want, (share + 4095) / 4096 * 4096);
  }
  return std::min(most, std::max<std::uint64_t>(1, want / unit));
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
  if (n == 2 || bytes <= std::min(kWholeReduceMax, area.slot_bytes())) {
    // Whole: per chunk, every rank that others read copies its part in (reduce's root is read
    // by no one), and each rank that receives combines the chunk from its own input and the
    // others' slots (in rank order, as fold always does). One wait per chunk.
    const bool read_by_others = everyone || me != a.root;
    // Its own input is read in place of its slot, except in place from rank 2 on: the first
    // combination (of ranks 0 and 1) overwrites the output before that rank's turn.
    const bool from_input = a.in != a.out || me < 2;
    const std::uint64_t chunk = chunk_elements(area, a.count, es);
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
  const std::uint64_t chunk = chunk_elements(area, a.count, es);
  // A rank without an output (reduce's non-roots) combines its share in scratch.
  std::byte* scratch = receives ? nullptr : c.scratch(chunk * es);
  // Its own share of its input is read by no other rank: the fold reads it from the input,
  // except in place from rank 2 on (see from_input above), where it goes through the slot.
  const bool from_input = a.in != a.out || me < 2;
  for (std::uint64_t off = 0; off < a.count; off += chunk) {
    const std::uint64_t len = std::min(chunk, a.count - off);
    const std::uint64_t s = area.next_step();
    const std::uint64_t b = balanced_offset(len, n, me);
    const std::uint64_t e = balanced_offset(len, n, me + 1);
    co_await slot_free(c, area, s);
    std::byte* mine = area.slot(me, s);
    if (from_input) {
      copy_bytes(mine, a.in + off * es, b * es);
      copy_bytes(mine + e * es, a.in + (off + e) * es, (len - e) * es);
    } else {
      copy_bytes(mine, a.in + off * es, len * es);
    }
    if (off == 0) area.describe(me, s, shape);
    area.publish(me, SharedArea::Arrived, s);
    co_await all_reached(c, area, SharedArea::Arrived, s);
    if (off == 0 && !same_shapes(c, area, s, shape)) co_return;
    // This rank's share of the chunk: combined from every slot, and also put into its own
    // slot (where no other rank reads during this phase) for the others to copy.
    std::byte* acc = receives ? a.out + (off + b) * es : scratch;
    fold(a, acc, area, s, b * es, e - b, n, me, from_input ? a.in + (off + b) * es : nullptr,
         mine + b * es);
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

// ---- Tiny steps: at most kTinyBytes per rank, or a barrier, in one tiny line per rank ----

bool is_tiny(const Args& a, Kind kind) {
  return kind == Kind::Barrier || a.tiny_step != 0 ||
         a.count * size_of(a.type) <= SharedArea::kTinyBytes;
}

// One rank's part in a tiny step.
struct TinyRole {
  bool publishes;  // it writes its tiny line (and Arrived): all but a broadcast's receivers
  bool receives;   // it reads the others' lines: all but reduce's non-roots and broadcast's root
  int only;        // the one rank it reads (a broadcast's root), else -1: all
};
TinyRole tiny_role(Kind kind, const Args& a, int me) {
  switch (kind) {
    case Kind::Reduce: return {true, me == a.root, -1};
    case Kind::Broadcast: return {me == a.root, me != a.root, a.root};
    default: return {true, true, -1};  // all_reduce, barrier
  }
}
SharedArea::Shape tiny_shape_of(Kind kind, const Args& a) {
  return kind == Kind::Barrier ? shape_of(kind, Args{}) : shape_of(kind, a);
}
// In place from rank 2 on, a rank's input is read from its line: the first combination (of
// ranks 0 and 1) overwrites the output before its turn.
bool reads_own_input(const Args& a, int me) {
  return a.in != a.out || me < 2;
}

// Step `s` of this rank begins: its data (if the others read it) and shape on its tiny line,
// then Arrived (`arrive`; a step begun ahead of its turn stores it in its turn). Arrived also
// tells a rank that waits in a chunk step, which then reads this line's shape (same_shapes).
void tiny_publish(SharedArea& area, const Args& a, Kind kind, int me, std::uint64_t s,
                  bool arrive = true) {
  const std::uint64_t bytes = kind == Kind::Barrier ? 0 : a.count * size_of(a.type);
  const TinyRole role = tiny_role(kind, a, me);
  if (kind == Kind::Broadcast && me == a.root) copy_bytes(a.out, a.in, bytes);
  if (!role.publishes) return;
  const bool read_by_others = kind != Kind::Reduce || me != a.root || !reads_own_input(a, me);
  if (bytes > 0 && read_by_others) copy_bytes(area.tiny(me, s), a.in, bytes);
  area.publish_tiny(me, s, tiny_shape_of(kind, a));
  if (arrive) area.publish(me, SharedArea::Arrived, s);
}

// Step `s` of this rank ends, once the lines it reads are there with the shapes it expects: the
// result (combined in rank order, or the root's copy), then Consumed and the segment's turn.
void tiny_finish(SharedArea& area, const Args& a, Kind kind, int me, std::uint64_t s) {
  const TinyRole role = tiny_role(kind, a, me);
  if (role.receives && kind == Kind::Broadcast) {
    copy_bytes(a.out, area.tiny(a.root, s), a.count * size_of(a.type));
  } else if (role.receives && kind != Kind::Barrier) {
    const bool own = reads_own_input(a, me);
    combine(a, a.out, a.count, area.ranks(),
            [&](int k) -> const std::byte* { return k == me && own ? a.in : area.tiny(k, s); });
  }
  area.publish(me, SharedArea::Consumed, s);
  if (!a.holds_turn) area.release();
}

// A tiny collective: from its start, or (a.tiny_step set) from the wait of a step that began
// inline (tiny_inline), holding the segment's turn, or waiting for it when it began ahead.
Task tiny_collective(Ctx& c, Args a, Kind kind) {
  SharedArea& area = *a.area;
  const int me = c.rank();
  const TinyRole role = tiny_role(kind, a, me);
  std::uint64_t s = a.tiny_step;
  if (s == 0) {
    if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
    s = area.next_step();
    co_await tiny_free(c, area, s);
    tiny_publish(area, a, kind, me, s);
  } else if (a.tiny_ahead) {
    if (!a.tiny_written) {
      co_await tiny_free(c, area, s);
      tiny_publish(area, a, kind, me, s, false);
    }
    co_await my_turn(c, area, a.tiny_ticket);
    if (role.publishes) area.publish(me, SharedArea::Arrived, s);
  }
  if (role.receives) {
    co_await tiny_reached(c, area, s, role.only);
    if (!same_tiny_shapes(c, area, s, tiny_shape_of(kind, a), role.only)) co_return;
  }
  tiny_finish(area, a, kind, me, s);
}

// The start of a tiny collective on the caller's thread (under the executor lock). With no
// collective of the communicator in flight (`alone`) and the segment idle: Done when it needed
// nothing it had to wait for; Continue when its step began and tiny_collective() waits for the
// rest (a.tiny_step set). Otherwise, behind collectives whose steps are all numbered: its step
// numbered now and its line written if it is free (so that a rank writes several steps in one
// time slice where they are posted without waiting), Continue, and tiny_collective() writes
// the line once it is free, then stores its Arrived and finishes it in its turn. NotTaken,
// with nothing changed, when an earlier collective's steps are not numbered yet.
//
// Where every rank has a core, the lines it reads are usually a fraction of a microsecond
// behind: it looks for them up to kInlineLooks times (a few microseconds at most, 4 pauses
// apart) before it leaves the rest to an op, whose start costs about what the wait does
// (2-rank 8-byte all_reduce 0.72-0.84 to 0.62-0.73 us, docs/performance.md). Not where ranks
// outnumber cores: there the rank it waits for may need this core.
constexpr int kInlineLooks = 64;
Inline tiny_inline(Args& a, Kind kind, int me, int n, bool alone) {
  if (!is_tiny(a, kind) || n < 2) return Inline::NotTaken;
  SharedArea& area = *a.area;
  if (!area.steps_known()) return Inline::NotTaken;
  const bool line_free = tiny_line_free(area, area.step() + 1);
  if (!alone || !area.idle() || !line_free) {
    a.tiny_ticket = area.take_numbered_ticket();
    a.tiny_step = area.next_step();
    a.tiny_ahead = true;
    a.tiny_written = line_free;
    if (line_free) tiny_publish(area, a, kind, me, a.tiny_step, false);
    return Inline::Continue;
  }
  area.take_numbered_ticket();
  const std::uint64_t s = area.next_step();
  tiny_publish(area, a, kind, me, s);
  a.tiny_step = s;
  const TinyRole role = tiny_role(kind, a, me);
  if (role.receives) {
    SharedArea::Shape theirs;
    if (!area.crowded()) {
      for (int i = 0; i < kInlineLooks && tiny_behind(area, s, role.only) != Ctx::kReady; ++i) {
        for (int p = 0; p < 4; ++p) cpu_relax();
      }
    }
    if (tiny_behind(area, s, role.only) != Ctx::kReady ||
        tiny_mismatch(area, s, tiny_shape_of(kind, a), me, role.only, theirs) >= 0) {
      return Inline::Continue;  // a mismatch fails in tiny_collective(), as everywhere
    }
  }
  tiny_finish(area, a, kind, me, s);
  return Inline::Done;
}

Task broadcast_through(Ctx& c, Args a) {
  SharedArea& area = *a.area;
  const int me = c.rank();
  const bool root = me == a.root;
  const std::uint64_t bytes = a.count * size_of(a.type);
  const SharedArea::Shape shape = shape_of(Kind::Broadcast, a);
  if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
  if (root) copy_bytes(a.out, a.in, bytes);
  const std::uint64_t chunk = chunk_elements(area, bytes, 1);
  for (std::uint64_t off = 0; off < bytes; off += chunk) {
    const std::uint64_t len = std::min(chunk, bytes - off);
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

}  // namespace

Task shm_turn(Ctx& c, SharedArea& area) {
  co_await my_turn(c, area, area.take_ticket());
}

Task shm_all_reduce(Ctx& c, Args a) {
  if (is_tiny(a, Kind::AllReduce)) return tiny_collective(c, std::move(a), Kind::AllReduce);
  return reduce_through(c, std::move(a), true);
}

Task shm_reduce(Ctx& c, Args a) {
  if (is_tiny(a, Kind::Reduce)) return tiny_collective(c, std::move(a), Kind::Reduce);
  return reduce_through(c, std::move(a), false);
}

Task shm_broadcast(Ctx& c, Args a) {
  if (is_tiny(a, Kind::Broadcast)) return tiny_collective(c, std::move(a), Kind::Broadcast);
  return broadcast_through(c, std::move(a));
}
Task shm_all_gather(Ctx& c, Args a) {
  SharedArea& area = *a.area;
  const int n = c.size();
  const int me = c.rank();
  const std::uint64_t block = a.count * size_of(a.type);
  const SharedArea::Shape shape = shape_of(Kind::AllGather, a);
  if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
  copy_bytes(a.out + static_cast<std::uint64_t>(me) * block, a.in, block);
  const std::uint64_t chunk = chunk_elements(area, block, 1);
  for (std::uint64_t off = 0; off < block; off += chunk) {
    const std::uint64_t len = std::min(chunk, block - off);
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
  const std::uint64_t chunk = chunk_elements(area, a.count, ranks * es);
  const SharedArea::Shape shape = shape_of(Kind::ReduceScatter, a);
  if (!a.holds_turn) co_await my_turn(c, area, area.take_ticket());
  // Its own block is read by no other rank: the fold reads it from the input, except in place
  // from rank 2 on, where the first combination (of ranks 0 and 1) overwrites it first.
  const std::byte* own = a.in + static_cast<std::uint64_t>(me) * a.count * es;
  const bool from_input = a.out != own || me < 2;
  for (std::uint64_t off = 0; off < a.count; off += chunk) {
    const std::uint64_t len = std::min(chunk, a.count - off);
    const std::uint64_t s = area.next_step();
    co_await slot_free(c, area, s);
    std::byte* mine = area.slot(me, s);
    for (std::uint64_t k = 0; k < ranks; ++k) {
      if (from_input && k == static_cast<std::uint64_t>(me)) continue;
      copy_bytes(mine + k * len * es, a.in + (k * a.count + off) * es, len * es);
    }
    if (off == 0) area.describe(me, s, shape);
    area.publish(me, SharedArea::Arrived, s);
    co_await all_reached(c, area, SharedArea::Arrived, s);
    if (off == 0 && !same_shapes(c, area, s, shape)) co_return;
    fold(a, a.out + off * es, area, s, static_cast<std::uint64_t>(me) * len * es, len, n, me,
         from_input ? own + off * es : nullptr);
    area.publish(me, SharedArea::Consumed, s);
  }
  if (!a.holds_turn) area.release();
}

Task shm_barrier(Ctx& c, Args a) {
  return tiny_collective(c, std::move(a), Kind::Barrier);
}

Inline shm_all_reduce_inline(Args& a, int rank, int size, bool alone) {
  return tiny_inline(a, Kind::AllReduce, rank, size, alone);
}
Inline shm_reduce_inline(Args& a, int rank, int size, bool alone) {
  return tiny_inline(a, Kind::Reduce, rank, size, alone);
}
Inline shm_broadcast_inline(Args& a, int rank, int size, bool alone) {
  return tiny_inline(a, Kind::Broadcast, rank, size, alone);
}
Inline shm_barrier_inline(Args& a, int rank, int size, bool alone) {
  return tiny_inline(a, Kind::Barrier, rank, size, alone);
}

}  // namespace orbite::coll
