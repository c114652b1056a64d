// Cost of the DeviceSelector's hot path (the guide: selection adds no driver query or heap
// allocation per slice). Each iteration selects and then drops the lease, so the figures include
// returning the charges (one lock per lease). Multi-slice cases report time per slice
// ("per_slice", seconds) besides time per parent.
//
//   ninja -C build selector_bench && ./build/perf_tests/selector_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "topo/selector.h"

namespace orbite::topo {
namespace {

// Eight 400 Gbps NICs, four per NUMA node; cpu:0 prefers its own four.
std::unique_ptr<DeviceSelector> make_selector(bool smart) {
  Inventory inv;
  for (int i = 0; i < 8; ++i) {
    NicInfo& nic = inv.nics.emplace_back();
    nic.id = i;
    nic.name = "mlx5_" + std::to_string(i);
    nic.numa = i / 4;
    nic.link_gbps = 400.0;
  }
  PriorityTable table;
  table.origin = "bench";
  LocationTiers any;
  any.location = Location::any();
  any.tiers[0] = {0, 1, 2, 3, 4, 5, 6, 7};
  LocationTiers cpu0;
  cpu0.location = Location::cpu(0);
  cpu0.tiers[0] = {0, 1, 2, 3};
  cpu0.tiers[1] = {4, 5, 6, 7};
  table.rows = {any, cpu0};
  SelectorConfig config;
  config.scheduling.smart_selection = smart;
  auto selector = DeviceSelector::create(table, inv, config);
  if (!selector.ok()) {
    std::fprintf(stderr, "%s\n", selector.status().to_string().c_str());
    std::abort();
  }
  return std::move(selector).value();
}

const SelectionRequest kRequest{Location::cpu(0), ~0ULL, ~0ULL};

void BM_Select(benchmark::State& state) {
  // Shared by the threads of the contended run; built once, never destroyed before exit.
  static DeviceSelector* const selector = make_selector(true).release();
  for (auto _ : state) {
    auto lease = selector->select(kRequest, 64 * 1024);
    benchmark::DoNotOptimize(lease);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Select);
BENCHMARK(BM_Select)->Name("BM_Select_contended")->Threads(2)->UseRealTime();

void select_parents(benchmark::State& state, bool smart) {
  const auto selector = make_selector(smart);
  const std::vector<std::uint64_t> lengths(kMaxSlices, 64 * 1024);
  for (auto _ : state) {
    auto lease = selector->select_multi(kRequest, lengths);
    benchmark::DoNotOptimize(lease);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kMaxSlices));
  state.counters["per_slice"] = benchmark::Counter(
      static_cast<double>(kMaxSlices),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_SelectMulti64(benchmark::State& state) {
  select_parents(state, true);
}
BENCHMARK(BM_SelectMulti64);

void BM_SelectMulti64_RoundRobin(benchmark::State& state) {
  select_parents(state, false);
}
BENCHMARK(BM_SelectMulti64_RoundRobin);

// The reference measured in the same run: a selection and its release each take the selector's
// lock once, so two uncontended lock/unlock pairs are the floor any lock-based selector pays.
void BM_Reference_TwoMutexPairs(benchmark::State& state) {
  std::mutex mu;
  std::uint64_t charged = 0;
  for (auto _ : state) {
    {
      std::lock_guard lock(mu);
      charged += 64 * 1024;
    }
    {
      std::lock_guard lock(mu);
      charged -= 64 * 1024;
    }
    benchmark::DoNotOptimize(charged);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Reference_TwoMutexPairs);

}  // namespace
}  // namespace orbite::topo
