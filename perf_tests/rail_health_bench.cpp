// Cost of rail health in slice planning: every parent asks `usable()` once per candidate NIC
// (its pair with the peer), so this is what rail health adds per parent and rail. Measured
// beside its floor in the same run: one uncontended lock/unlock pair around the same hash lookup.
//
//   ninja -C build rail_health_bench && ./build/perf_tests/rail_health_bench
//   --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <chrono>
#include <mutex>
#include <unordered_map>

#include "p2p/rdma/rail_health.h"

namespace orbite::rdma {
namespace {

using Clock = RailHealth::Clock;

// A full default table (4096 pairs), every tenth pair paused, the rest counting one error.
RailHealth& full_table() {
  static RailHealth* h = [] {
    auto* t = new RailHealth(RdmaConfig{});
    const auto now = Clock::now();
    for (int i = 0; i < 4096; ++i) {
      const RailPair p{static_cast<std::uint64_t>(i / 16), i % 16 / 4, i % 4};
      for (int e = 0; e < (i % 10 == 0 ? 3 : 1); ++e) (void)t->record_error(p, now);
    }
    return t;
  }();
  return *h;
}

void BM_RailHealth_UsableUntracked(benchmark::State& state) {
  RailHealth& h = full_table();
  const RailPair healthy{100000, 0, 0};  // no error recorded: not in the table
  for (auto _ : state) benchmark::DoNotOptimize(h.usable(healthy));
}
BENCHMARK(BM_RailHealth_UsableUntracked);

void BM_RailHealth_UsableTracked(benchmark::State& state) {
  RailHealth& h = full_table();
  const RailPair counted{1, 1, 1};  // in the table, counting one error
  for (auto _ : state) benchmark::DoNotOptimize(h.usable(counted));
}
BENCHMARK(BM_RailHealth_UsableTracked);

// The floor: the same lock and one hash lookup in a map of as many entries.
void BM_Reference_LockedLookup(benchmark::State& state) {
  std::mutex mu;
  std::unordered_map<RailPair, int, RailPairHash> map;
  for (int i = 0; i < 4096; ++i) {
    map.emplace(RailPair{static_cast<std::uint64_t>(i / 16), i % 16 / 4, i % 4}, i);
  }
  const RailPair key{100000, 0, 0};
  for (auto _ : state) {
    std::lock_guard lock(mu);
    benchmark::DoNotOptimize(map.find(key) == map.end());
  }
}
BENCHMARK(BM_Reference_LockedLookup);

}  // namespace
}  // namespace orbite::rdma
