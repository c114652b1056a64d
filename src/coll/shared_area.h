// The shared segment of a single-host communicator as the shm algorithms see it: per rank a line
// of step counters and two data slots. Only memory here; comm/coll_segment.cpp creates, maps and
// names the segment.
//
// Layout: a 4 KiB header (magic, version, ranks, slot size), then one 64-byte line per rank
// holding its counters (written by that rank only, read by all), then per rank kTinyLines tiny
// lines (a ring indexed by step: a step number, a shape and up to kTinyBytes of data in
// kTinyEntryBytes, so that a step of a few bytes moves in one cache line and one of a few
// hundred in a few adjacent ones), then per rank two slots of slot_bytes (chunk steps
// alternate between them by parity). Counters only grow: a rank stores a step number with
// release after the data it covers, a reader compares with acquire.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "coll/task.h"

namespace orbite::coll {

class SharedArea {
 public:
  // The counters of a rank's line.
  enum Flag : int {
    Arrived = 0,   // its input of the step is in its slot (or it reached the step)
    Reduced = 1,   // its part of the step's result is in its slot
    Consumed = 2,  // it read everything of the step it needs from the others' slots
  };

  static constexpr std::uint32_t kMagic = 0x4f43534d;  // "OCSM"
  static constexpr std::uint32_t kVersion = 6;
  static constexpr std::uint64_t kHeaderBytes = 4096;
  static constexpr std::uint64_t kLineBytes = 64;
  // A line: the three counters, the attached mark (with the rank's CPU placement), then two
  // shapes (two words each).
  static constexpr int kAttachedWord = 3;
  static constexpr int kShapeWord = 4;

  // `base`: the mapping (kept alive by `mapping`); slot_bytes a multiple of 64.
  SharedArea(std::byte* base, int ranks, std::uint64_t slot_bytes, std::shared_ptr<void> mapping)
      : base_(base), ranks_(ranks), slot_bytes_(slot_bytes), mapping_(std::move(mapping)) {}

  // A tiny line: the step (stored last, with release), the shape (two words), the data, which
  // runs on from the first cache line into the next seven. Up to about 512 bytes, copying
  // through a line costs less than a chunk step's op (2-rank 128-byte collectives 0.28-0.56x
  // Open MPI's speed as chunk steps; docs/performance.md); a step of at most 40 bytes touches
  // only the first cache line.
  static constexpr std::uint64_t kTinyEntryBytes = 8 * kLineBytes;
  static constexpr std::uint64_t kTinyBytes = kTinyEntryBytes - 3 * sizeof(std::uint64_t);

  // Tiny lines per rank: a rank whose tiny steps need no one else's data (a broadcast's root,
  // reduce's non-roots) runs this many steps ahead of the slowest reader before it waits.
  static constexpr std::uint64_t kTinyLines = 16;

  static std::uint64_t slots_offset(int ranks) {
    const std::uint64_t lines = kHeaderBytes + (kLineBytes + kTinyLines * kTinyEntryBytes) *
                                                   static_cast<std::uint64_t>(ranks);
    return (lines + 4095) & ~std::uint64_t{4095};
  }
  static std::uint64_t bytes_for(int ranks, std::uint64_t slot_bytes) {
    return slots_offset(ranks) + 2 * slot_bytes * static_cast<std::uint64_t>(ranks);
  }

  // The creator writes the header (the rest of a new segment reads as zero).
  void format() {
    auto* h = header();
    h->magic = kMagic;
    h->version = kVersion;
    h->ranks = static_cast<std::uint32_t>(ranks_);
    h->slot_bytes = slot_bytes_;
  }
  // An opener checks it (a foreign or differently sized segment is not used).
  [[nodiscard]] bool header_matches() const {
    const auto* h = header();
    return h->magic == kMagic && h->version == kVersion &&
           h->ranks == static_cast<std::uint32_t>(ranks_) && h->slot_bytes == slot_bytes_;
  }

  [[nodiscard]] int ranks() const { return ranks_; }
  [[nodiscard]] std::uint64_t slot_bytes() const { return slot_bytes_; }

  // The slot of `rank` used by chunk step `step`.
  [[nodiscard]] std::byte* slot(int rank, std::uint64_t step) const {
    const auto index = 2 * static_cast<std::uint64_t>(rank) + (step & 1);
    return base_ + slots_offset(ranks_) + index * slot_bytes_;
  }

  void publish(int rank, Flag f, std::uint64_t step) {
    std::atomic_ref<std::uint64_t>(counter(rank, f)).store(step, std::memory_order_release);
  }
  [[nodiscard]] std::uint64_t seen(int rank, Flag f) const {
    return std::atomic_ref<std::uint64_t>(counter(rank, f)).load(std::memory_order_acquire);
  }
  // Set up: each rank marks itself attached once it mapped the segment, with the CPUs it may run
  // on (`cpus`: how many; `only_cpu`: that CPU when it is one, else -1); after a barrier every
  // rank that mapped it sees whether all did (a rank that could not map it marks nothing).
  void mark_attached(int rank, int cpus, int only_cpu) {
    const std::uint64_t placement = static_cast<std::uint64_t>(std::clamp(cpus, 0, 0xffff)) << 8 |
                                    (only_cpu >= 0 ? static_cast<std::uint64_t>(only_cpu) + 1 : 0)
                                        << 32;
    std::atomic_ref<std::uint64_t>(word(rank, kAttachedWord))
        .store(kAttachedMark | placement, std::memory_order_release);
  }
  // The first rank not marked attached, or -1.
  [[nodiscard]] int first_unattached() const {
    for (int r = 0; r < ranks_; ++r) {
      if ((attached_word(r) & 0xff) != kAttachedMark) return r;
    }
    return -1;
  }
  // Once all attached: whether this host's ranks of the communicator outnumber the CPUs they
  // may run on, so that a thread polling the segment should give its core away at once. Ranks
  // each bound to one CPU (orbite-run and mpirun --bind-to core do that when the ranks fit) are
  // oversubscribed when two share a CPU; otherwise the widest rank's CPU count stands in for
  // the union of their masks.
  [[nodiscard]] bool oversubscribed() const {
    std::uint64_t widest = 0;
    bool all_bound = true;
    std::vector<std::uint64_t> bound;
    for (int r = 0; r < ranks_; ++r) {
      const std::uint64_t w = attached_word(r);
      widest = std::max(widest, (w >> 8) & 0xffff);
      if ((w >> 32) == 0) all_bound = false;
      bound.push_back(w >> 32);
    }
    if (!all_bound) return widest < static_cast<std::uint64_t>(ranks_);
    std::sort(bound.begin(), bound.end());
    return std::adjacent_find(bound.begin(), bound.end()) != bound.end();
  }

  // What a rank called, written before its Arrived of a collective's first step (one per slot
  // parity, so it is rewritten only when the slot is): the others compare it with their own,
  // so that ranks calling different collectives or counts fail instead of misreading slots.
  struct Shape {
    std::uint64_t count = 0;
    std::uint64_t what = 0;  // collective, type, op and root, packed by the algorithms
    bool operator==(const Shape&) const = default;
  };
  void describe(int rank, std::uint64_t step, Shape shape) {
    std::uint64_t* at = &word(rank, kShapeWord + 2 * static_cast<int>(step & 1));
    std::atomic_ref<std::uint64_t>(at[0]).store(shape.count, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(at[1]).store(shape.what, std::memory_order_relaxed);
  }
  // Valid once `rank`'s Arrived reached `step` (acquire), until the slot's next use.
  [[nodiscard]] Shape shape(int rank, std::uint64_t step) const {
    std::uint64_t* at = &word(rank, kShapeWord + 2 * static_cast<int>(step & 1));
    return {std::atomic_ref<std::uint64_t>(at[0]).load(std::memory_order_relaxed),
            std::atomic_ref<std::uint64_t>(at[1]).load(std::memory_order_relaxed)};
  }

  // Tiny steps (at most kTinyBytes of data per rank): `rank` writes its data to tiny(rank,
  // step), then publish_tiny() stores its shape and the step; the others read tiny_seen(), then
  // tiny_shape() and the data, from that one line. The line is rewritten kTinyLines steps later,
  // once every rank consumed the step that used it; a tiny step writes no shape on the counter
  // line (a reader that expected a chunk step finds the tiny line of the step instead).
  [[nodiscard]] std::byte* tiny(int rank, std::uint64_t step) const {
    return reinterpret_cast<std::byte*>(&tiny_word(rank, step, 3));
  }
  void publish_tiny(int rank, std::uint64_t step, Shape shape) {
    std::atomic_ref<std::uint64_t>(tiny_word(rank, step, 1))
        .store(shape.count, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(tiny_word(rank, step, 2))
        .store(shape.what, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(tiny_word(rank, step, 0)).store(step, std::memory_order_release);
  }
  // The last step that `rank` published on `step`'s tiny line.
  [[nodiscard]] std::uint64_t tiny_seen(int rank, std::uint64_t step) const {
    return std::atomic_ref<std::uint64_t>(tiny_word(rank, step, 0)).load(std::memory_order_acquire);
  }
  // Valid once tiny_seen(rank, step) >= step (acquire), until the line's next use.
  [[nodiscard]] Shape tiny_shape(int rank, std::uint64_t step) const {
    return {
        std::atomic_ref<std::uint64_t>(tiny_word(rank, step, 1)).load(std::memory_order_relaxed),
        std::atomic_ref<std::uint64_t>(tiny_word(rank, step, 2)).load(std::memory_order_relaxed)};
  }
  // Process-local, under the executor lock: counts a tiny wait's looks, so that it reads the
  // others' counter lines (a rank that called something else) only now and then.
  std::uint64_t tiny_look() { return ++tiny_looks_; }

  // The first rank whose counter is below `step` (Ctx::kReady when none is): what an until()
  // predicate answers.
  [[nodiscard]] int first_behind(Flag f, std::uint64_t step) const {
    for (int r = 0; r < ranks_; ++r) {
      if (seen(r, f) < step) return r;
    }
    return Ctx::kReady;
  }

  // Whether every rank published Consumed for `step` (or later). Under the executor lock (it
  // keeps what it learned, the slowest rank's step, so that a step's slot check usually reads no
  // other rank's line).
  [[nodiscard]] bool consumed_by_all(std::uint64_t step) {
    if (consumed_known_ >= step) return true;
    std::uint64_t slowest = ~std::uint64_t{0};
    for (int r = 0; r < ranks_; ++r) slowest = std::min(slowest, seen(r, Consumed));
    consumed_known_ = std::max(consumed_known_, slowest);
    return consumed_known_ >= step;
  }
  // Every rank's Arrived reached `step`: each published its Consumed of the step before first
  // (every algorithm ends a step with Consumed before it arrives at the next, with release
  // stores, and the caller read the Arrived counters with acquire; a tiny step written ahead
  // stores its Arrived only in its turn, after the step before it). Under the executor lock.
  void arrived_by_all(std::uint64_t step) {
    if (step > 0) consumed_known_ = std::max(consumed_known_, step - 1);
  }

  // In-process order, touched only under the communicator's executor lock: collectives use the
  // segment one at a time in the order they were started (the same order on every rank), and
  // number their chunk steps consecutively, so every rank gives a step the same number.
  // take_ticket(): a collective that numbers its steps in its turn; take_numbered_ticket(): a
  // tiny one that numbers its step now (next_step() right after). steps_known(): every
  // collective started so far numbered all its steps (the ones of take_ticket() are done), so
  // a tiny collective started now may number its step at once, ahead of its turn.
  std::uint64_t take_ticket() {
    unnumbered_until_ = tickets_ + 1;
    return tickets_++;
  }
  std::uint64_t take_numbered_ticket() { return tickets_++; }
  [[nodiscard]] bool steps_known() const { return serving_ >= unnumbered_until_; }
  [[nodiscard]] bool serving(std::uint64_t ticket) const { return serving_ == ticket; }
  void release() { ++serving_; }
  // No collective holds or waits for a turn.
  [[nodiscard]] bool idle() const { return serving_ == tickets_; }
  std::uint64_t next_step() { return ++steps_; }
  [[nodiscard]] std::uint64_t step() const { return steps_; }  // the last step numbered

  // oversubscribed(), kept once every rank attached (set before the first collective, then only
  // read): the same on every rank, so the ranks size their chunk steps alike.
  void set_crowded(bool crowded) { crowded_ = crowded; }
  [[nodiscard]] bool crowded() const { return crowded_; }

 private:
  struct Header {
    std::uint32_t magic;
    std::uint32_t version;
    std::uint32_t ranks;
    std::uint32_t reserved;
    std::uint64_t slot_bytes;
  };
  Header* header() const { return reinterpret_cast<Header*>(base_); }
  std::uint64_t& word(int rank, int index) const {
    auto* line = base_ + kHeaderBytes + kLineBytes * static_cast<std::uint64_t>(rank);
    return reinterpret_cast<std::uint64_t*>(line)[index];
  }
  std::uint64_t& counter(int rank, Flag f) const { return word(rank, f); }
  std::uint64_t& tiny_word(int rank, std::uint64_t step, int index) const {
    auto* line =
        base_ + kHeaderBytes + kLineBytes * static_cast<std::uint64_t>(ranks_) +
        kTinyEntryBytes * (kTinyLines * static_cast<std::uint64_t>(rank) + step % kTinyLines);
    return reinterpret_cast<std::uint64_t*>(line)[index];
  }
  [[nodiscard]] std::uint64_t attached_word(int rank) const {
    return std::atomic_ref<std::uint64_t>(word(rank, kAttachedWord))
        .load(std::memory_order_acquire);
  }
  static constexpr std::uint64_t kAttachedMark = 1;

  std::byte* base_;
  int ranks_;
  std::uint64_t slot_bytes_;
  std::shared_ptr<void> mapping_;
  std::uint64_t tickets_ = 0;
  std::uint64_t serving_ = 0;
  std::uint64_t steps_ = 0;
  std::uint64_t consumed_known_ = 0;  // every rank's Consumed reached at least this step
  std::uint64_t tiny_looks_ = 0;
  std::uint64_t unnumbered_until_ = 0;  // 1 + the last ticket of take_ticket()
  bool crowded_ = false;
};

}  // namespace orbite::coll
