// The RDMA lane's scheduler (p2p/rdma/scheduler.h): tier order, FIFO within a tier, promotion
// per tier and per entry, DeadlineMlu and the arbiter's order with synthetic bandwidths and
// deadlines.
#include "p2p/rdma/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace orbite::rdma {
namespace {

using namespace std::chrono_literals;
using V = Scheduler::Verdict;

const SchedClock::time_point t0 = SchedClock::time_point{} + 1h;

// The parent ids in dispatch order (every entry kept).
std::vector<std::uint64_t> order_of(Scheduler& s, SchedClock::time_point now = t0) {
  std::vector<std::uint64_t> out;
  s.dispatch(
      now, {}, [](const SchedEntry&) { return ArbCandidate{}; },
      [&](SchedEntry& e) {
        out.push_back(e.parent);
        return V::Keep;
      });
  return out;
}

TEST(RdmaScheduler, HighThenMediumThenLowFifoWithinATier) {
  TierCounterSet counters;
  Scheduler s({}, counters);
  s.push(nullptr, 1, Priority::Low, t0);
  s.push(nullptr, 2, Priority::Medium, t0);
  s.push(nullptr, 3, Priority::High, t0);
  s.push(nullptr, 4, Priority::Low, t0);
  s.push(nullptr, 5, Priority::High, t0);
  s.push(nullptr, 6, Priority::Medium, t0);
  EXPECT_EQ(order_of(s), (std::vector<std::uint64_t>{3, 5, 2, 6, 1, 4}));
  EXPECT_EQ(counters[0].queued.load(), 2U);
  EXPECT_EQ(counters[1].queued.load(), 2U);
  EXPECT_EQ(counters[2].queued.load(), 2U);
}

TEST(RdmaScheduler, RemovedEntriesLeaveAndABatchKeepsItsOrder) {
  TierCounterSet counters;
  Scheduler s({}, counters);
  for (std::uint64_t id = 1; id <= 6; ++id) s.push(nullptr, id, Priority::Medium, t0);
  s.dispatch(
      t0, {}, [](const SchedEntry&) { return ArbCandidate{}; },
      [](SchedEntry& e) { return e.parent % 2 == 0 ? V::Remove : V::Keep; });
  EXPECT_EQ(order_of(s), (std::vector<std::uint64_t>{1, 3, 5}));
  EXPECT_EQ(counters[1].queued.load(), 3U);
}

TEST(RdmaScheduler, EntriesPushedDuringADispatchJoinAfterIt) {
  TierCounterSet counters;
  Scheduler s({}, counters);
  s.push(nullptr, 1, Priority::Low, t0);
  std::vector<std::uint64_t> seen;
  s.dispatch(
      t0, {}, [](const SchedEntry&) { return ArbCandidate{}; },
      [&](SchedEntry& e) {
        seen.push_back(e.parent);
        if (e.parent == 1) s.push(nullptr, 2, Priority::High, t0);
        return V::Keep;
      });
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(order_of(s), (std::vector<std::uint64_t>{2, 1}));
}

// A parent waiting for its grant leaves the passes (parked) and comes back at the tail of its
// tier with its age: a pass visits only what it can act on.
TEST(RdmaScheduler, AParkedEntryResumesAtItsTiersTailWithItsAge) {
  TierCounterSet counters;
  SchedulerConfig config;
  config.promotion_timeout = 10ms;
  Scheduler s(config, counters);
  s.push(nullptr, 1, Priority::Low, t0);
  s.push(nullptr, 2, Priority::Low, t0 + 1ms);
  SchedEntry parked{};
  s.dispatch(
      t0, {}, [](const SchedEntry&) { return ArbCandidate{}; },
      [&](SchedEntry& e) {
        if (e.parent != 1) return V::Keep;
        parked = e;
        return V::Remove;
      });
  EXPECT_EQ(order_of(s), (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(counters[2].queued.load(), 1U);
  s.resume(parked);
  EXPECT_EQ(order_of(s), (std::vector<std::uint64_t>{2, 1}));
  EXPECT_EQ(counters[2].queued.load(), 2U);
  // Its age is kept: 10 ms after it was first queued, the tier (headed by 2, 9 ms old) waits,
  // and at 11 ms both are promoted.
  EXPECT_EQ(s.promote(t0 + 10ms), 0U);
  EXPECT_EQ(s.promote(t0 + 11ms), 2U);
  EXPECT_EQ(s.size(1), 2U);
}

TEST(RdmaScheduler, AnAgedHeadPromotesItsWholeTierOneTierPerCheck) {
  TierCounterSet counters;
  SchedulerConfig config;
  config.promotion_timeout = 10ms;
  Scheduler s(config, counters);
  s.push(nullptr, 1, Priority::Low, t0);
  s.push(nullptr, 2, Priority::Low, t0 + 9ms);  // young, moves with its aged head
  s.push(nullptr, 3, Priority::Medium, t0 + 5ms);
  s.push(nullptr, 4, Priority::High, t0 + 9ms);
  EXPECT_EQ(s.promote(t0 + 9ms), 0U);  // nothing aged yet
  // Medium's head (3) is aged at 15 ms, Low's too: Medium moves, Low waits for the next check.
  EXPECT_EQ(s.promote(t0 + 15ms), 1U);
  EXPECT_EQ(order_of(s), (std::vector<std::uint64_t>{4, 3, 1, 2}));
  EXPECT_EQ(s.size(0), 2U);
  // Checked at most once a millisecond.
  EXPECT_EQ(s.promote(t0 + 15ms + 500us), 0U);
  EXPECT_EQ(s.promote(t0 + 16ms), 2U);  // Low, head and all, into Medium
  EXPECT_EQ(s.size(1), 2U);
  EXPECT_EQ(counters[1].promoted.load(), 2U);
  EXPECT_EQ(counters[0].promoted.load(), 1U);
  // The original enqueue age stays: one check later the same entries reach High, behind 4 and 3.
  EXPECT_EQ(s.promote(t0 + 17ms), 2U);
  EXPECT_EQ(order_of(s), (std::vector<std::uint64_t>{4, 3, 1, 2}));
  EXPECT_EQ(s.size(0), 4U);
  EXPECT_EQ(counters[0].queued.load(), 4U);
  EXPECT_EQ(counters[2].queued.load(), 0U);
}

TEST(RdmaScheduler, PerEntryPromotionMovesOnlyTheAgedEntries) {
  TierCounterSet counters;
  SchedulerConfig config;
  config.promotion_timeout = 10ms;
  config.promotion_per_entry = true;
  Scheduler s(config, counters);
  s.push(nullptr, 1, Priority::Low, t0);
  s.push(nullptr, 2, Priority::Low, t0 + 9ms);
  s.push(nullptr, 3, Priority::Medium, t0);
  s.push(nullptr, 4, Priority::Medium, t0 + 8ms);
  // Both tiers in one check, each entry one tier: 3 into High, 1 into Medium (not further).
  EXPECT_EQ(s.promote(t0 + 12ms), 2U);
  EXPECT_EQ(order_of(s), (std::vector<std::uint64_t>{3, 4, 1, 2}));
  EXPECT_EQ(s.size(0), 1U);
  EXPECT_EQ(s.size(1), 2U);
  EXPECT_EQ(s.size(2), 1U);
}

TEST(RdmaScheduler, AClockThatWentBackwardsPromotesNothing) {
  TierCounterSet counters;
  SchedulerConfig config;
  config.promotion_timeout = 1ms;
  Scheduler s(config, counters);
  s.push(nullptr, 1, Priority::Low, t0 + 1s);
  EXPECT_EQ(s.promote(t0), 0U);
}

TEST(RdmaScheduler, DeadlineMluFollowsTheFormula) {
  // No deadline or no bandwidth: 0; passed: infinite; else ((ahead + len) / B) / window.
  EXPECT_EQ(deadline_mlu(0, 1000, kNoDeadline, t0, 1e9), 0.0);
  EXPECT_EQ(deadline_mlu(0, 1000, t0 + 1s, t0, 0.0), 0.0);
  EXPECT_TRUE(std::isinf(deadline_mlu(0, 1000, t0, t0, 1e9)));
  // The guide's worked example: 32 MiB posted, 50 GB/s, 16 MiB with 10 ms and 2 ms windows.
  const double mib = 1024.0 * 1024.0;
  const double a = deadline_mlu(32 * (1 << 20), 16 * (1 << 20), t0 + 10ms, t0, 50e9);
  const double b = deadline_mlu(32 * (1 << 20), 16 * (1 << 20), t0 + 2ms, t0, 50e9);
  EXPECT_NEAR(a, (48 * mib / 50e9) / 0.010, 1e-9);
  EXPECT_NEAR(b, (48 * mib / 50e9) / 0.002, 1e-9);
  EXPECT_GT(b, a);
}

TEST(RdmaScheduler, ArbitrationOrdersANicsCandidatesByDeadlineMlu) {
  // The guide's example: A (10 ms), B (2 ms), C (no deadline), 16 MiB each, 32 MiB posted at
  // 50 GB/s: B, then A, then C.
  const std::uint64_t len = 16 << 20;
  std::vector<ArbCandidate> c = {{0, len, t0 + 10ms}, {0, len, t0 + 2ms}, {0, len, kNoDeadline}};
  std::vector<NicRate> nics = {{50e9, 32 << 20}};
  Arbiter arb;
  std::vector<std::uint32_t> order;
  arb.order(c, nics, t0, order);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{1, 0, 2}));
}

TEST(RdmaScheduler, ArbitrationKeepsOtherNicsPlacesAndFifoWithoutBandwidthOrDeadlines) {
  const std::uint64_t len = 1 << 20;
  // NIC 0: positions 0, 2, 4; NIC 1 (no bandwidth): 1, 3; -1 (no NIC yet): 5.
  std::vector<ArbCandidate> c = {{0, len, t0 + 100ms}, {1, len, t0 + 50ms},   {0, len, t0 + 1ms},
                                 {1, len, t0 + 1ms},   {0, len, kNoDeadline}, {-1, len, t0 + 1ms}};
  std::vector<NicRate> nics = {{1e9, 0}, {0.0, 0}};
  Arbiter arb;
  std::vector<std::uint32_t> order;
  arb.order(c, nics, t0, order);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{2, 1, 0, 3, 4, 5}));
  // Without any deadline on NIC 0, FIFO.
  for (auto& x : c) x.deadline = kNoDeadline;
  arb.order(c, nics, t0, order);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5}));
}

TEST(RdmaScheduler, ArbitrationEqualScoresKeepFifoAndTheTailIsSortedOnce) {
  // 70 candidates on one NIC: the first 64 picks greedy, the 6 left scored once. Every other
  // one has a deadline; equal ones keep FIFO.
  std::vector<ArbCandidate> c;
  for (int i = 0; i < 70; ++i) {
    c.push_back({0, 1000, i % 2 == 0 ? t0 + 1s : kNoDeadline});
  }
  std::vector<NicRate> nics = {{1e6, 0}};
  Arbiter arb;
  std::vector<std::uint32_t> order;
  arb.order(c, nics, t0, order);
  ASSERT_EQ(order.size(), 70U);
  // The 35 deadlined ones first, in FIFO order, then the rest in FIFO order.
  for (std::size_t k = 0; k < 35; ++k) EXPECT_EQ(order[k], 2 * k) << k;
  for (std::size_t k = 35; k < 70; ++k) EXPECT_EQ(order[k], 2 * (k - 35) + 1) << k;
}

TEST(RdmaScheduler, DispatchWithArbitrationVisitsInArbitratedOrder) {
  TierCounterSet counters;
  SchedulerConfig config;
  config.arbitration = true;
  Scheduler s(config, counters);
  s.push(nullptr, 1, Priority::Low, t0, t0 + 100ms);
  s.push(nullptr, 2, Priority::Low, t0, t0 + 1ms);
  s.push(nullptr, 3, Priority::High, t0, kNoDeadline);
  std::vector<NicRate> nics = {{1e9, 0}};
  std::vector<std::uint64_t> seen;
  s.dispatch(
      t0, nics,
      [](const SchedEntry& e) {
        return ArbCandidate{0, 1 << 20, e.deadline};
      },
      [&](SchedEntry& e) {
        seen.push_back(e.parent);
        return V::Keep;
      });
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{3, 2, 1}));
}

}  // namespace
}  // namespace orbite::rdma
