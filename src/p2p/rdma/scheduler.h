// The RDMA lane's scheduler: the one place that decides which parent is admitted and which
// granted parent posts payload next (the guide's "Request priority and bandwidth arbitration"
// and "Priority promotion and shared slots"). A parent enters when its put/get/rendezvous starts
// and leaves once its payload is all posted or it ends; the lane visits the entries High, then
// Medium, then Low, FIFO within a tier, or with rdma.deadline_bw_arbitration each NIC's
// candidates of a tier ordered by DeadlineMlu. Completions, receives, windows and cleanup never
// pass through here. The scheduler knows parents only by (peer, id): the lane looks each one up
// when visited, so an entry whose parent ended is simply dropped. Single-threaded (the lane's
// mutex holder); its counters are atomics read by rdma_stats().
#pragma once

#include <orbite/config.h>
#include <orbite/transfer.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

namespace orbite::rdma {

struct PeerRdma;
using SchedClock = std::chrono::steady_clock;
inline constexpr SchedClock::time_point kNoDeadline = SchedClock::time_point::max();

inline constexpr std::size_t kTiers = 3;  // High, Medium, Low (Priority's order)
inline constexpr std::size_t tier_of(Priority p) {
  return static_cast<std::size_t>(p);
}
// TENT's greedy prefix of deadline arbitration; the tail is scored once and stable-sorted.
inline constexpr std::size_t kGreedyPicks = 64;

// The link utilization a request needs to finish by its deadline behind `bytes_ahead` bytes at
// `Bps` bytes per second: ((bytes_ahead + length) / Bps) / (deadline - now) in seconds. 0 with
// no deadline or no bandwidth; +infinity once the deadline passed.
double deadline_mlu(std::uint64_t bytes_ahead, std::uint64_t length,
                    SchedClock::time_point deadline, SchedClock::time_point now, double Bps);

// Per tier, engine-wide (every lane adds to the same set).
struct TierCounters {
  std::atomic<std::uint64_t> queued{0};    // entries waiting now (admission or payload)
  std::atomic<std::uint64_t> posted{0};    // parents whose first payload WRs were posted
  std::atomic<std::uint64_t> promoted{0};  // entries promoted into this tier
  std::atomic<std::uint64_t> dropped{0};   // failed Timeout before dispatch, nothing moved
  std::atomic<std::uint64_t> slot_waits{0};
};
using TierCounterSet = std::array<TierCounters, kTiers>;

struct SchedEntry {
  PeerRdma* peer = nullptr;
  std::uint64_t parent = 0;         // 0: removed
  SchedClock::time_point enqueued;  // kept through promotion (the age that promotes)
  SchedClock::time_point deadline = kNoDeadline;
  std::uint8_t tier = 0;      // current
  std::uint8_t original = 0;  // as submitted
};

// What arbitration needs of an entry: its local NIC (-1: none, it keeps its place) and the bytes
// it has left to post.
struct ArbCandidate {
  int nic = -1;
  std::uint64_t bytes = 0;
  SchedClock::time_point deadline = kNoDeadline;
};
// A NIC's transmit estimate and the payload bytes posted to it and not yet completed.
struct NicRate {
  double Bps = 0.0;
  std::uint64_t posted = 0;
};

// Deadline arbitration over one tier's candidates (FIFO as given). `order` gets a permutation of
// their indices: each NIC's candidates are reordered among the positions they hold, the first
// kGreedyPicks greedily (highest DeadlineMlu behind the bytes already placed; ties keep FIFO),
// the rest scored once against what the greedy picks added and stable-sorted. A NIC with no
// bandwidth, a group of one, or a group without any deadline keeps FIFO. Its buffers are reused:
// after the first calls of a size, no allocation.
class Arbiter {
 public:
  void order(std::span<const ArbCandidate> c, std::span<const NicRate> nics,
             SchedClock::time_point now, std::vector<std::uint32_t>& order);

 private:
  void order_group(std::span<const ArbCandidate> c, const NicRate& nic, SchedClock::time_point now);
  std::vector<std::uint32_t> group_;                    // one NIC's candidate indices, FIFO
  std::vector<std::uint32_t> placed_;                   // their arbitrated order
  std::vector<std::pair<double, std::uint32_t>> tail_;  // (score, index)
  std::vector<std::uint8_t> taken_;
};

struct SchedulerConfig {
  bool arbitration = false;  // rdma.deadline_bw_arbitration
  Duration promotion_timeout = std::chrono::milliseconds(10);
  bool promotion_per_entry = false;
};

class Scheduler {
 public:
  enum class Verdict : std::uint8_t { Keep, Remove };

  Scheduler(SchedulerConfig config, TierCounterSet& counters)
      : config_(config), counters_(counters) {}
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  ~Scheduler();

  // A new entry at the tail of its tier.
  void push(PeerRdma* peer, std::uint64_t parent, Priority priority, SchedClock::time_point now,
            SchedClock::time_point deadline = kNoDeadline);

  // An entry at the tail of its tier as it is: a new one (push), or one a visit removed while it
  // waited outside the scheduler (a parent waiting for its grant) with its age, tier, deadline.
  void resume(const SchedEntry& e);

  // At most once per millisecond: entries older than the promotion timeout move one tier up (to
  // the tail). Per tier (the default, TENT's): an aged head moves its whole tier, and once Medium
  // moved Low waits for the next check. Per entry: exactly the aged entries, Medium first, so no
  // entry climbs two tiers in one check. Returns how many moved.
  std::size_t promote(SchedClock::time_point now);

  // Visits every entry in dispatch order: `fn(SchedEntry&)` returns Keep or Remove. With
  // arbitration, `describe(const SchedEntry&)` gives each entry's ArbCandidate and `nics` the
  // NICs' rates. Entries pushed during the visit join after it.
  template <class Describe, class Fn>
  void dispatch(SchedClock::time_point now, std::span<const NicRate> nics, Describe&& describe,
                Fn&& fn) {
    dispatching_ = true;
    for (std::size_t t = 0; t < kTiers; ++t) {
      std::deque<SchedEntry>& tier = tiers_[t];
      if (tier.empty()) continue;
      order_.resize(tier.size());
      if (config_.arbitration && tier.size() > 1) {
        cands_.clear();
        for (const SchedEntry& e : tier) cands_.push_back(describe(e));
        arbiter_.order(cands_, nics, now, order_);
      } else {
        for (std::uint32_t i = 0; i < order_.size(); ++i) order_[i] = i;
      }
      bool removed = false;
      for (std::uint32_t i : order_) {
        SchedEntry& e = tier[i];
        if (e.parent != 0 && fn(e) == Verdict::Remove) {
          e.parent = 0;
          removed = true;
        }
      }
      if (removed) {
        const auto n = std::erase_if(tier, [](const SchedEntry& e) { return e.parent == 0; });
        counters_[t].queued.fetch_sub(n, std::memory_order_relaxed);
      }
    }
    dispatching_ = false;
    for (SchedEntry& e : incoming_) enqueue(e);
    incoming_.clear();
  }

  [[nodiscard]] std::size_t size(std::size_t tier) const { return tiers_[tier].size(); }
  [[nodiscard]] bool empty() const {
    return tiers_[0].empty() && tiers_[1].empty() && tiers_[2].empty() && incoming_.empty();
  }
  [[nodiscard]] TierCounterSet& counters() { return counters_; }

 private:
  void enqueue(const SchedEntry& e);
  std::size_t promote_tier(std::size_t from, SchedClock::time_point now);

  SchedulerConfig config_;
  TierCounterSet& counters_;  // outlives the scheduler (the engine's)
  std::array<std::deque<SchedEntry>, kTiers> tiers_;
  std::vector<SchedEntry> incoming_;  // pushed during dispatch()
  bool dispatching_ = false;
  SchedClock::time_point next_promotion_{};
  // dispatch()'s buffers, reused.
  std::vector<std::uint32_t> order_;
  std::vector<ArbCandidate> cands_;
  Arbiter arbiter_;
};

}  // namespace orbite::rdma
