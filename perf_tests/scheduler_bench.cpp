// Cost of the RDMA scheduler's decisions (issue 24's goal: under 100 ns per slice). A "decision"
// is what the lane pays per ready entry and pass: visiting it in tier order (with promotion's
// once-a-millisecond check), and with rdma.deadline_bw_arbitration its place among a NIC's
// candidates. Time is reported per entry visited ("per_entry", seconds); the entries are kept, as
// a lane keeps parents waiting for SQ room, so no allocation happens in the timed loop.
//
//   ninja -C build scheduler_bench && ./build/perf_tests/scheduler_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <deque>
#include <vector>

#include "p2p/rdma/scheduler.h"

namespace orbite::rdma {
namespace {

using namespace std::chrono_literals;

// Time per entry visited, besides time per pass.
void per_entry(benchmark::State& state, std::size_t n) {
  state.counters["per_entry"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void fill(Scheduler& s, std::size_t n, SchedClock::time_point now, bool deadlines) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto tier = static_cast<Priority>(i % 3);
    s.push(nullptr, i + 1, tier, now,
           deadlines && i % 2 == 0 ? now + std::chrono::milliseconds(1 + i % 50) : kNoDeadline);
  }
}

// The reference: the same entries in one plain std::deque, visited in order (a FIFO that
// orders nothing), the floor any scheduler's visit pays.
void BM_ReferenceDequeVisit(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::deque<SchedEntry> q(n);
  for (std::size_t i = 0; i < n; ++i) q[i].parent = i + 1;
  std::uint64_t sum = 0;
  for (auto _ : state) {
    for (SchedEntry& e : q) {
      benchmark::DoNotOptimize(e);
      sum += e.parent;
    }
  }
  benchmark::DoNotOptimize(sum);
  per_entry(state, n);
}
BENCHMARK(BM_ReferenceDequeVisit)->Arg(16)->Arg(64)->Arg(256);

// Visit every entry in tier order, FIFO within (the default).
void BM_DispatchTiers(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  TierCounterSet counters;
  Scheduler s({}, counters);
  const auto now = SchedClock::now();
  fill(s, n, now, false);
  std::uint64_t sum = 0;
  for (auto _ : state) {
    s.promote(now);
    s.dispatch(
        now, {}, [](const SchedEntry&) { return ArbCandidate{}; },
        [&](SchedEntry& e) {
          sum += e.parent;
          return Scheduler::Verdict::Keep;
        });
  }
  benchmark::DoNotOptimize(sum);
  per_entry(state, n);
}
BENCHMARK(BM_DispatchTiers)->Arg(16)->Arg(64)->Arg(256);

// The same with deadline arbitration: half the entries have deadlines, four NICs.
void BM_DispatchArbitrated(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  TierCounterSet counters;
  SchedulerConfig config;
  config.arbitration = true;
  Scheduler s(config, counters);
  const auto now = SchedClock::now();
  fill(s, n, now, true);
  const std::vector<NicRate> nics = {{50e9, 1 << 20}, {50e9, 0}, {25e9, 4 << 20}, {50e9, 0}};
  std::uint64_t sum = 0;
  for (auto _ : state) {
    s.dispatch(
        now, nics,
        [](const SchedEntry& e) {
          return ArbCandidate{static_cast<int>(e.parent % 4), 1 << 20, e.deadline};
        },
        [&](SchedEntry& e) {
          sum += e.parent;
          return Scheduler::Verdict::Keep;
        });
  }
  benchmark::DoNotOptimize(sum);
  per_entry(state, n);
}
BENCHMARK(BM_DispatchArbitrated)->Arg(16)->Arg(64)->Arg(256);

// A new entry's whole life through one pass: pushed, visited, removed.
void BM_PushVisitRemove(benchmark::State& state) {
  TierCounterSet counters;
  Scheduler s({}, counters);
  const auto now = SchedClock::now();
  std::uint64_t id = 1;
  for (auto _ : state) {
    s.push(nullptr, id++, Priority::Medium, now);
    s.dispatch(
        now, {}, [](const SchedEntry&) { return ArbCandidate{}; },
        [](SchedEntry&) { return Scheduler::Verdict::Remove; });
  }
}
BENCHMARK(BM_PushVisitRemove);

}  // namespace
}  // namespace orbite::rdma
