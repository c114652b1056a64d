// The DeviceSelector's behaviour (the guide's "Bandwidth-aware RDMA selection"; TENT notes §5) and
// the port rate decode. Values are injected (rates, times), so nothing depends on timing. This
// binary replaces the global operator new to prove that the selection paths never allocate.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <new>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "topo/port_rate.h"
#include "topo/selector.h"

namespace {
thread_local bool g_armed = false;  // count only inside an armed window, on this thread
std::atomic<long> g_allocations{0};
}  // namespace

// Out of line, so that GCC does not see malloc/free paired with new/delete after inlining
// (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t size) {
  if (g_armed) g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) std::abort();
  return p;
}
[[gnu::noinline]] void* operator new[](std::size_t size) {
  return ::operator new(size);
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete[](void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

namespace orbite::topo {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr double kGbps400 = 400e9 / 8;  // 50e9 B/s

struct NicSpec {
  int numa = kUnknownNuma;
  double gbps = 400.0;
};

Inventory inventory(const std::vector<NicSpec>& nics, const std::vector<int>& gpu_numa = {}) {
  Inventory inv;
  for (std::size_t i = 0; i < nics.size(); ++i) {
    NicInfo& n = inv.nics.emplace_back();
    n.id = static_cast<int>(i);
    n.name = "mlx5_" + std::to_string(i);
    n.numa = nics[i].numa;
    n.link_gbps = nics[i].gbps;
  }
  for (std::size_t g = 0; g < gpu_numa.size(); ++g) {
    GpuInfo& gpu = inv.gpus.emplace_back();
    gpu.ordinal = static_cast<int>(g);
    gpu.cuda_visible = true;
    gpu.numa = gpu_numa[g];
  }
  return inv;
}

LocationTiers row(Location where, std::vector<int> t0, std::vector<int> t1 = {},
                  std::vector<int> t2 = {}) {
  LocationTiers r;
  r.location = where;
  r.tiers = {std::move(t0), std::move(t1), std::move(t2)};
  return r;
}

PriorityTable table(std::vector<LocationTiers> rows) {
  PriorityTable t;
  t.origin = "test";
  t.rows = std::move(rows);
  std::sort(t.rows.begin(), t.rows.end(),
            [](const auto& a, const auto& b) { return a.location < b.location; });
  return t;
}

// Every NIC of the inventory in tier 0 of "*".
PriorityTable flat(std::size_t nics) {
  std::vector<int> all(nics);
  std::iota(all.begin(), all.end(), 0);
  return table({row(Location::any(), all)});
}

std::unique_ptr<DeviceSelector> make(const PriorityTable& t, const Inventory& inv,
                                     SelectorConfig config = {}) {
  auto s = DeviceSelector::create(t, inv, config);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

DeviceLease granted(Result<DeviceLease> lease) {
  EXPECT_TRUE(lease.ok()) << lease.status().to_string();
  return lease.ok() ? std::move(lease).value() : DeviceLease{};
}
DeviceLease pick(DeviceSelector& s, std::uint64_t bytes, SelectionRequest req = {}) {
  return granted(s.select(req, bytes));
}
DeviceLease pick_multi(DeviceSelector& s, const std::vector<std::uint64_t>& lengths,
                       SelectionRequest req = {}) {
  return granted(s.select_multi(req, lengths));
}

std::vector<int> nics_of(const DeviceLease& lease) {
  std::vector<int> out;
  for (std::size_t i = 0; i < lease.size(); ++i) out.push_back(lease.nic(i));
  return out;
}

NicLoadStats stat(const DeviceSelector& s, int nic) {
  return s.nic_load_stats().at(static_cast<std::size_t>(nic));
}

std::uint64_t mask_of(std::initializer_list<int> nics) {
  std::uint64_t m = 0;
  for (int n : nics) m |= std::uint64_t{1} << n;
  return m;
}

// ---------------------------------------------------------------------------------------------

TEST(Selector, RejectsInvalidInput) {
  const Inventory inv = inventory({{}, {}});
  SelectorConfig bad_weight;
  bad_weight.scheduling.tier_weights = {1.0, 0.0, 10.0};
  EXPECT_EQ(DeviceSelector::create(flat(2), inv, bad_weight).status().code(), Errc::Configuration);
  SelectorConfig bad_default;
  bad_default.default_bandwidth_gbps = 0.0;
  EXPECT_EQ(DeviceSelector::create(flat(2), inv, bad_default).status().code(), Errc::Configuration);
  auto unknown = DeviceSelector::create(table({row(Location::any(), {0, 9})}), inv, {});
  EXPECT_EQ(unknown.status().code(), Errc::InvalidArgument);
  EXPECT_NE(unknown.status().message().find("NIC 9"), std::string::npos);
  // A parent holds 1..kMaxSlices slices.
  auto s = make(flat(2), inv);
  EXPECT_EQ(s->select_multi({}, std::vector<std::uint64_t>{}).status().code(),
            Errc::InvalidArgument);
  EXPECT_EQ(s->select_multi({}, std::vector<std::uint64_t>(kMaxSlices + 1, 4096)).status().code(),
            Errc::InvalidArgument);
}

TEST(Selector, PicksTheLowestScore) {
  // Idle: the faster link has the shorter predicted service time.
  auto s = make(flat(2), inventory({{kUnknownNuma, 120.0}, {kUnknownNuma, 400.0}}));
  EXPECT_EQ(pick(*s, 1 << 20).nic(0), 1);
  // Charged bytes count: per MiB NIC 0 needs 1/15 ms, NIC 1 (k + 1)/50 ms with k MiB charged,
  // so three slices stay on NIC 1 and the fourth moves.
  std::vector<DeviceLease> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(pick(*s, 1 << 20));
    EXPECT_EQ(held.back().nic(0), 1) << i;
  }
  held.push_back(pick(*s, 1 << 20));
  EXPECT_EQ(held.back().nic(0), 0);
  EXPECT_EQ(stat(*s, 1).charged_bytes, 3u << 20);
  EXPECT_EQ(stat(*s, 0).charged_bytes, 1u << 20);
}

TEST(Selector, TierWeightFavoursAnIdleLowerTierButNeverAnExcludedNic) {
  const Inventory inv = inventory({{0}, {1}});
  const PriorityTable t = table({row(Location::any(), {0}, {1})});
  SelectorConfig config;
  config.scheduling.tier_weights = {1.0, 4.5, 10.0};
  auto s = make(t, inv, config);
  std::vector<DeviceLease> held;
  // Score of NIC 0 = charged slices + 1, of idle NIC 1 = 4.5: four slices stay on tier 0.
  for (int i = 0; i < 4; ++i) {
    held.push_back(pick(*s, 1 << 20));
    EXPECT_EQ(held.back().nic(0), 0) << i;
  }
  EXPECT_EQ(pick(*s, 1 << 20).nic(0), 1);  // 5 > 4.5

  // The same load, with NIC 1 excluded in each way: NIC 0 keeps winning.
  EXPECT_EQ(pick(*s, 1 << 20, {Location::any(), mask_of({0})}).nic(0), 0);
  EXPECT_EQ(pick(*s, 1 << 20, {Location::any(), ~0ULL, mask_of({0})}).nic(0), 0);
  SelectorConfig strict = config;
  strict.strict_local_numa = true;
  auto numa = make(t, inv, strict);
  std::vector<DeviceLease> local;  // after `numa`: leases must not outlive their selector
  for (int i = 0; i < 8; ++i) {
    local.push_back(pick(*numa, 1 << 20, {Location::cpu(0)}));
    EXPECT_EQ(local.back().nic(0), 0) << i;
  }
  s->set_healthy(1, false);
  EXPECT_EQ(pick(*s, 1 << 20).nic(0), 0);
}

TEST(Selector, TiesRotateAcrossEqualNics) {
  auto s = make(flat(3), inventory({{}, {}, {}}));
  std::vector<int> seen;
  for (int i = 0; i < 6; ++i) seen.push_back(pick(*s, 65536).nic(0));  // abandoned: idle again
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), 2);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 2);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 2), 2);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_NE(seen[i], seen[i - 1]);
}

TEST(Selector, MultipathSharesFollowTheWorkedExample) {
  // Selection bandwidths 2:1, so scores 1:2 and weights 2:1 (TENT notes §5.5).
  auto s = make(flat(2), inventory({{kUnknownNuma, 400.0}, {kUnknownNuma, 200.0}}));
  {
    DeviceLease six = pick_multi(*s, {65536, 65536, 65536, 65536, 65536, 1000});
    EXPECT_EQ(nics_of(six), (std::vector<int>{0, 0, 0, 0, 1, 1}));
    EXPECT_EQ(stat(*s, 0).charged_bytes, 4u * 65536);
    EXPECT_EQ(stat(*s, 1).charged_bytes, 65536u + 1000);  // exact lengths, not ceil(total/n)
  }
  DeviceLease seven = pick_multi(*s, std::vector<std::uint64_t>(7, 65536));
  // floor(4.67) = 4 and floor(2.33) = 2 as contiguous runs; the leftover goes last to the best.
  EXPECT_EQ(nics_of(seven), (std::vector<int>{0, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(stat(*s, 0).allocated_bytes, 4u * 65536 + 5u * 65536);
  EXPECT_EQ(stat(*s, 1).allocated_bytes, 65536u + 1000 + 2u * 65536);
}

TEST(Selector, EveryHundredthParentProbesOnlyHealthyNics) {
  // NIC 0 is four times faster: ordinary 4-slice parents put everything on it.
  auto s = make(flat(3), inventory({{kUnknownNuma, 400.0}, {kUnknownNuma, 100.0}, {}}));
  s->set_healthy(2, false);
  const std::vector<std::uint64_t> four(4, 65536);
  for (int parent = 1; parent <= 201; ++parent) {
    pick(*s, 65536);  // single slices are no parents and do not move the cadence
    const std::vector<int> got = nics_of(pick_multi(*s, four));
    if (parent % 100 == 0) {
      // Round-robin counts, one contiguous run per NIC in score order.
      EXPECT_EQ(got, (std::vector<int>{0, 0, 1, 1})) << parent;
    } else {
      EXPECT_EQ(got, (std::vector<int>{0, 0, 0, 0})) << parent;
    }
  }
  EXPECT_EQ(stat(*s, 0).probes, 2u);
  EXPECT_EQ(stat(*s, 1).probes, 2u);
  EXPECT_EQ(stat(*s, 2).probes, 0u);
  EXPECT_EQ(stat(*s, 2).allocated_bytes, 0u);
}

TEST(Selector, MaskCompatibilityAndStrictNumaAreHardLimits) {
  // NIC 0 on NUMA 0, NIC 1 on NUMA 1, NIC 2 unknown; cuda:0 on NUMA 1, cuda:1 unknown.
  const Inventory inv = inventory({{0}, {1}, {kUnknownNuma}}, {1, kUnknownNuma});
  SelectorConfig strict;
  strict.strict_local_numa = true;
  auto s = make(flat(3), inv, strict);
  const auto reachable = [&](Location where, std::uint64_t mask = ~0ULL) {
    std::vector<DeviceLease> held;  // held, so charges spread the choices over every NIC
    std::set<int> out;
    for (int i = 0; i < 12; ++i) {
      auto lease = s->select({where, mask}, 65536);
      if (!lease.ok()) break;
      out.insert(lease->nic(0));
      held.push_back(std::move(lease).value());
    }
    return out;
  };
  EXPECT_EQ(reachable(Location::cpu(0)), (std::set<int>{0, 2}));
  EXPECT_EQ(reachable(Location::cuda(0)), (std::set<int>{1, 2}));
  EXPECT_EQ(reachable(Location::cuda(1)), (std::set<int>{0, 1, 2}));  // unknown GPU NUMA
  EXPECT_EQ(reachable(Location::cuda(7)), (std::set<int>{0, 1, 2}));  // unknown GPU
  EXPECT_EQ(reachable(Location::any()), (std::set<int>{0, 1, 2}));
  EXPECT_EQ(reachable(Location::cpu(0), mask_of({0, 1})), (std::set<int>{0}));

  // A mask cannot re-admit a cross-NUMA NIC; the error says why.
  auto none = s->select({Location::cpu(0), mask_of({1})}, 65536);
  ASSERT_EQ(none.status().code(), Errc::Unavailable);
  const std::string& msg = none.status().message();
  EXPECT_NE(msg.find("no eligible NIC for cpu:0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mask 0x2 excludes 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 cross-NUMA"), std::string::npos) << msg;

  s->set_healthy(0, false);
  s->set_healthy(2, false);
  auto sick = s->select({Location::cpu(0)}, 65536);
  EXPECT_NE(sick.status().message().find("2 unhealthy"), std::string::npos);
  auto no_path = s->select({Location::cpu(1), ~0ULL, 0}, 65536);
  EXPECT_NE(no_path.status().message().find("3 without a path"), std::string::npos);

  // Without strict_local_numa the cross-NUMA NIC is eligible.
  auto loose = make(flat(3), inv);
  EXPECT_EQ(pick(*loose, 65536, {Location::cpu(0), mask_of({1})}).nic(0), 1);
}

TEST(Selector, RowsFallBackToStarAndEmptyRowsDisableALocation) {
  const Inventory inv = inventory({{}, {}});
  auto s = make(
      table({row(Location::any(), {1}), row(Location::cpu(0), {0}), row(Location::cuda(0), {})}),
      inv);
  EXPECT_EQ(pick(*s, 4096, {Location::cpu(0)}).nic(0), 0);
  EXPECT_EQ(pick(*s, 4096, {Location::cpu(3)}).nic(0), 1);
  auto disabled = s->select({Location::cuda(0)}, 4096);
  EXPECT_EQ(disabled.status().code(), Errc::Unavailable);
  EXPECT_NE(disabled.status().message().find("lists no NIC"), std::string::npos);
  auto no_star = make(table({row(Location::cpu(0), {0})}), inv);
  EXPECT_EQ(no_star->select({Location::cpu(1)}, 4096).status().code(), Errc::Unavailable);
}

TEST(Selector, ChargesReturnExactlyOnce) {
  auto s = make(flat(2), inventory({{}, {}}));
  DeviceLease lease = pick_multi(*s, {1000, 2000, 3000, 4000});
  const auto charged = [&] { return stat(*s, 0).charged_bytes + stat(*s, 1).charged_bytes; };
  EXPECT_EQ(charged(), 10000u);
  EXPECT_TRUE(lease.complete(1, true, nanoseconds(0)));
  EXPECT_EQ(charged(), 8000u);
  EXPECT_FALSE(lease.complete(1, true, nanoseconds(0)));  // second completion: no-op
  EXPECT_FALSE(lease.complete(4, true, nanoseconds(0)));  // out of range
  EXPECT_EQ(charged(), 8000u);

  DeviceLease moved = std::move(lease);
  EXPECT_EQ(lease.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from owns nothing
  EXPECT_FALSE(lease.complete(0, true, nanoseconds(0)));
  lease.abandon();
  EXPECT_EQ(charged(), 8000u);
  EXPECT_EQ(moved.size(), 4u);
  EXPECT_EQ(moved.bytes(3), 4000u);
  EXPECT_TRUE(moved.complete(3, false, nanoseconds(0)));
  EXPECT_EQ(charged(), 4000u);
  moved.abandon();  // slices 0 and 2
  EXPECT_EQ(charged(), 0u);
  moved.abandon();
  EXPECT_FALSE(moved.complete(0, true, nanoseconds(0)));
  EXPECT_EQ(charged(), 0u);

  // Move assignment abandons what the target held; destruction abandons the rest.
  {
    DeviceLease a = pick(*s, 500);
    a = pick(*s, 700);
    EXPECT_EQ(charged(), 700u);
  }
  EXPECT_EQ(charged(), 0u);
  for (const NicLoadStats& n : s->nic_load_stats()) EXPECT_LT(n.charged_bytes, 1u << 30);
}

TEST(Selector, SelectionEwmaLearnsFromSuccessfulSlicesWithinItsClamp) {
  auto s = make(flat(1), inventory({{}}));
  EXPECT_DOUBLE_EQ(stat(*s, 0).selection_Bps, kGbps400);
  // 1 GB in 40 ms = 25e9 B/s; old-value weight 0.01.
  pick(*s, 1'000'000'000).complete(0, true, milliseconds(40));
  const double learned = 0.01 * kGbps400 + 0.99 * 25e9;
  EXPECT_DOUBLE_EQ(stat(*s, 0).selection_Bps, learned);
  // Failed or untimed slices learn nothing, and still return their charge.
  DeviceLease failed = pick(*s, 1'000'000'000);
  EXPECT_TRUE(failed.complete(0, false, milliseconds(1)));
  EXPECT_TRUE(pick(*s, 1'000'000'000).complete(0, true, nanoseconds(0)));
  EXPECT_DOUBLE_EQ(stat(*s, 0).selection_Bps, learned);
  EXPECT_EQ(stat(*s, 0).charged_bytes, 0u);
  // Clamped to [0.1×, 10×] the seed.
  pick(*s, 1000).complete(0, true, std::chrono::seconds(100));
  EXPECT_DOUBLE_EQ(stat(*s, 0).selection_Bps, 0.1 * kGbps400);
  pick(*s, 1'000'000'000).complete(0, true, nanoseconds(1));
  EXPECT_DOUBLE_EQ(stat(*s, 0).selection_Bps, 10 * kGbps400);
}

TEST(Selector, ANicBackFromUnhealthyRestartsItsEstimatesFromTheSeed) {
  auto s = make(flat(2), inventory({{}, {}}));
  DeviceLease first = pick(*s, 1'000'000'000, {Location::any(), mask_of({0})});
  first.complete(0, true, milliseconds(400));  // 2.5e9 B/s: well below the seed
  const double learned = stat(*s, 0).selection_Bps;
  EXPECT_LT(learned, kGbps400);
  s->set_healthy(0, true);  // healthy already: nothing changes
  EXPECT_DOUBLE_EQ(stat(*s, 0).selection_Bps, learned);
  s->set_healthy(0, false);
  EXPECT_DOUBLE_EQ(stat(*s, 0).selection_Bps, learned);  // paused: kept, unused
  s->set_healthy(0, true);
  EXPECT_DOUBLE_EQ(stat(*s, 0).selection_Bps, kGbps400);
  EXPECT_DOUBLE_EQ(stat(*s, 0).transmit_Bps, kGbps400);
  // With equal estimates again, a multi-slice parent spreads over both.
  std::vector<std::uint64_t> slices(8, 1 << 20);
  auto both_rails = s->select_multi({Location::any()}, slices);
  ASSERT_TRUE(both_rails.ok()) << both_rails.status().to_string();
  const DeviceLease& both = *both_rails;
  std::set<int> used;
  for (std::size_t i = 0; i < both.size(); ++i) used.insert(both.nic(i));
  EXPECT_EQ(used.size(), 2u);
}

TEST(Selector, LearnedBandwidthSteersSelection) {
  auto s = make(flat(2), inventory({{}, {}}));
  DeviceLease first = pick(*s, 1'000'000'000);
  const int slow = first.nic(0);
  first.complete(0, true, milliseconds(100));  // 10e9 B/s, a fifth of the other
  for (int i = 0; i < 4; ++i) EXPECT_NE(pick(*s, 65536).nic(0), slow);
}

TEST(Selector, TransmitMeterSamplesEveryTenMillisecondsAndDropsLongIntervals) {
  auto s = make(flat(1), inventory({{}}));
  const TimePoint t0{};
  const auto at = [&](int ms) { return t0 + milliseconds(ms); };
  const auto transmit = [&] { return stat(*s, 0).transmit_Bps; };
  double expected = kGbps400;
  const auto learn = [&](double bytes, double busy_s) {
    expected = 0.9 * expected + 0.1 * (bytes / busy_s);
  };

  // A WR posted and completed: the meter samples at the completion.
  const auto pulse = [&](std::uint64_t bytes, int posted_ms, int done_ms, bool ok) {
    s->on_posted(0, bytes, at(posted_ms));
    s->on_completed(0, bytes, ok, at(done_ms));
  };
  s->on_posted(0, 1000, at(0));
  EXPECT_EQ(stat(*s, 0).posted_bytes, 1000u);
  s->on_completed(0, 1000, true, at(1));  // first sample: baselines only
  EXPECT_DOUBLE_EQ(transmit(), expected);
  pulse(100'000'000, 2, 12, true);  // 11 ms after the last sample
  learn(100e6, 0.010);
  EXPECT_DOUBLE_EQ(transmit(), expected);
  // Within 10 ms of the last sample nothing is learned; the bytes count in the next interval,
  // and idle time between posts does not.
  pulse(50'000'000, 13, 15, true);
  EXPECT_DOUBLE_EQ(transmit(), expected);
  pulse(50'000'000, 16, 22, true);
  learn(100e6, 0.008);
  EXPECT_NEAR(transmit(), expected, expected * 1e-12);
  // An interval over 50 ms is discarded (its baselines still move).
  pulse(1'000'000, 80, 81, true);
  EXPECT_NEAR(transmit(), expected, expected * 1e-12);
  pulse(10'000'000, 85, 91, true);
  learn(10e6, 0.006);
  EXPECT_NEAR(transmit(), expected, expected * 1e-12);
  // A failure resets the meter: the next sample only rebuilds baselines.
  pulse(10'000'000, 92, 93, false);
  pulse(10'000'000, 94, 101, true);
  EXPECT_NEAR(transmit(), expected, expected * 1e-12);
  pulse(20'000'000, 102, 111, true);
  learn(20e6, 0.009);
  EXPECT_NEAR(transmit(), expected, expected * 1e-12);
  // Clamped at 10× the seed.
  pulse(1'000'000'000'000, 112, 122, true);
  EXPECT_DOUBLE_EQ(transmit(), 10 * kGbps400);
  const NicLoadStats n = stat(*s, 0);
  EXPECT_EQ(n.posted_bytes, 0u);
  EXPECT_EQ(n.completed_bytes, 1000u + 201'000'000u + 40'000'000u + 1'000'000'000'000u);
  EXPECT_DOUBLE_EQ(n.selection_Bps, kGbps400);  // the two estimates are independent
}

TEST(Selector, LinkRateChangesReseedBothEstimates) {
  SelectorConfig config;
  config.default_bandwidth_gbps = 400.0;
  auto s = make(flat(3), inventory({{kUnknownNuma, 0.0}, {kUnknownNuma, 3200.0}, {}}), config);
  EXPECT_DOUBLE_EQ(stat(*s, 0).effective_gbps, 400.0);  // unknown
  EXPECT_DOUBLE_EQ(stat(*s, 1).effective_gbps, 400.0);  // out of range
  EXPECT_DOUBLE_EQ(stat(*s, 1).link_gbps, 3200.0);

  DeviceLease lease = pick(*s, 1'000'000'000, {Location::any(), mask_of({2})});
  lease.complete(0, true, milliseconds(40));
  s->on_completed(2, 1, true, TimePoint{});
  s->on_posted(2, 100'000'000, TimePoint{} + milliseconds(1));
  s->on_completed(2, 100'000'000, true, TimePoint{} + milliseconds(11));
  EXPECT_LT(stat(*s, 2).selection_Bps, kGbps400);
  EXPECT_LT(stat(*s, 2).transmit_Bps, kGbps400);
  s->set_link_rate(2, 400.0);  // same effective rate: what was learned stays
  EXPECT_LT(stat(*s, 2).selection_Bps, kGbps400);
  s->set_link_rate(2, 200.0);
  NicLoadStats n = stat(*s, 2);
  EXPECT_DOUBLE_EQ(n.link_gbps, 200.0);
  EXPECT_DOUBLE_EQ(n.effective_gbps, 200.0);
  EXPECT_DOUBLE_EQ(n.selection_Bps, 25e9);
  EXPECT_DOUBLE_EQ(n.transmit_Bps, 25e9);
  s->set_link_rate(2, 2500.0);
  n = stat(*s, 2);
  EXPECT_DOUBLE_EQ(n.link_gbps, 2500.0);
  EXPECT_DOUBLE_EQ(n.effective_gbps, 400.0);
  EXPECT_DOUBLE_EQ(n.selection_Bps, kGbps400);
  EXPECT_DOUBLE_EQ(n.transmit_Bps, kGbps400);
  // The new seed moves the clamp too.
  s->set_link_rate(2, 100.0);
  pick(*s, 1'000'000'000, {Location::any(), mask_of({2})}).complete(0, true, nanoseconds(1));
  EXPECT_DOUBLE_EQ(stat(*s, 2).selection_Bps, 10 * 100e9 / 8);
  EXPECT_DOUBLE_EQ(
      stat(*make(flat(1), inventory({{kUnknownNuma, 0.0}}), {{}, false, 100.0}), 0).effective_gbps,
      100.0);
}

TEST(Selector, RoundRobinModeCyclesTheFirstEligibleTierWithoutCharges) {
  SelectorConfig config;
  config.scheduling.smart_selection = false;
  auto s = make(table({row(Location::any(), {0, 1}, {2})}),
                inventory({{kUnknownNuma, 400.0}, {kUnknownNuma, 10.0}, {}}), config);
  std::vector<DeviceLease> held;
  std::vector<int> seen;
  for (int i = 0; i < 4; ++i) {
    held.push_back(pick(*s, 1000));
    seen.push_back(held.back().nic(0));
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 0, 1}));  // rates and load play no part
  EXPECT_EQ(nics_of(held.emplace_back(pick_multi(*s, {1, 2, 3, 4, 5}))),
            (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(pick(*s, 1000, {Location::any(), mask_of({1, 2})}).nic(0), 1);
  s->set_healthy(0, false);
  s->set_healthy(1, false);
  EXPECT_EQ(pick(*s, 1000).nic(0), 2);
  for (auto& lease : held) lease.complete(0, true, milliseconds(1));
  const std::vector<NicLoadStats> stats = s->nic_load_stats();
  for (const NicLoadStats& n : stats) EXPECT_EQ(n.charged_bytes, 0u);
  EXPECT_EQ(stats[0].allocated_bytes, 2000u + 1 + 3 + 5);
  EXPECT_EQ(stats[1].allocated_bytes, 2000u + 2 + 4 + 1000);
  EXPECT_EQ(stats[2].allocated_bytes, 1000u);
}

TEST(Selector, SelectionPathsNeverAllocate) {
  auto s = make(flat(8), inventory(std::vector<NicSpec>(8)));
  std::vector<std::uint64_t> lengths(kMaxSlices, 65536);
  // Prove the counter counts.
  g_allocations = 0;
  g_armed = true;
  ::operator delete(::operator new(16));
  g_armed = false;
  ASSERT_EQ(g_allocations.load(), 1);

  g_allocations = 0;
  bool all_ok = true;
  g_armed = true;
  for (int i = 0; i < 200; ++i) {
    auto one = s->select({Location::cpu(0), ~0ULL}, 65536);
    auto many = s->select_multi({Location::cuda(0)}, lengths);  // every 100th is a probe
    all_ok = all_ok && one.ok() && many.ok();
    if (!all_ok) break;
    DeviceLease a = std::move(one).value();
    DeviceLease b = std::move(many).value();
    a.complete(0, true, std::chrono::microseconds(10));
    b.complete(1, false, std::chrono::microseconds(10));
    b.abandon();
    DeviceLease c = std::move(b);
  }  // the leases' destructors run inside the window too
  g_armed = false;
  EXPECT_TRUE(all_ok);
  EXPECT_EQ(g_allocations.load(), 0);
}

TEST(Selector, ConcurrentSelectionsBalanceTheirCharges) {
  auto s = make(flat(8), inventory(std::vector<NicSpec>(8)));
  constexpr int kThreads = 8;
  constexpr int kRounds = 2000;
  std::atomic<std::uint64_t> total{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t bytes = 0;
      std::vector<std::uint64_t> lengths(8);
      for (int r = 0; r < kRounds; ++r) {
        const std::uint64_t len = 4096 + static_cast<std::uint64_t>((t * 131 + r * 17) % 4096);
        const SelectionRequest req{Location::cpu(t % 2), ~0ULL ^ (std::uint64_t{1} << (r % 8))};
        if (auto one = s->select(req, len); one.ok()) {
          bytes += len;
          one->complete(0, r % 3 != 0, std::chrono::microseconds(1 + r % 50));
        }
        std::fill(lengths.begin(), lengths.end(), len);
        if (auto many = s->select_multi(req, lengths); many.ok()) {
          bytes += 8 * len;
          for (std::size_t i = 0; i < 8; i += 2)
            many->complete(i, true, std::chrono::microseconds(5));
        }  // the odd slices are abandoned by the destructor
        s->on_posted(r % 8, len, SelectorClock::now());
        s->on_completed(r % 8, len, r % 5 != 0, SelectorClock::now());
      }
      total += bytes;
    });
  }
  std::thread admin([&] {
    for (int i = 0; !stop.load(); ++i) {
      s->set_healthy(1 + i % 7, i % 2 == 0);  // NIC 0 stays healthy
      s->set_link_rate(1 + i % 7, i % 3 == 0 ? 200.0 : 400.0);
      (void)s->nic_load_stats();
      std::this_thread::yield();
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  admin.join();
  std::uint64_t allocated = 0;
  for (const NicLoadStats& n : s->nic_load_stats()) {
    EXPECT_EQ(n.charged_bytes, 0u) << n.name;
    EXPECT_EQ(n.posted_bytes, 0u) << n.name;
    allocated += n.allocated_bytes;
  }
  EXPECT_EQ(allocated, total.load());
}

// Every 16-slice parent commits and returns its charges under one lock, so a snapshot taken while
// writers commit and abandon parents holds whole parents only. Each writer keeps one parent while
// it takes the next, so that charges are outstanding while the observer reads; the observer counts
// the reads that saw charges outstanding and those that saw allocation move since the previous
// read, and the test fails unless both happened often, so it cannot pass without ever having
// looked at a parent in flight. The writers run until the observer has its samples (or a generous
// bound runs out), not for a fixed count, so a loaded machine makes it slower, never vacuous.
TEST(Selector, ObserversNeverSeeHalfAParent) {
  auto s = make(flat(8), inventory(std::vector<NicSpec>(8)));
  constexpr std::uint64_t kParent = 16 * 4096;
  constexpr int kWanted = 200;  // reads with charges outstanding, and reads after progress
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&] {
      const std::vector<std::uint64_t> lengths(16, 4096);
      DeviceLease held;
      while (!stop.load()) {
        auto next = s->select_multi({}, lengths);
        if (!next.ok()) {
          refused.fetch_add(1);
          continue;
        }
        held = std::move(next).value();  // abandons the parent held until now
      }
    });  // the last parent is abandoned as the thread ends
  }
  bool whole = true;
  int reads = 0, in_flight = 0, progressed = 0;
  std::uint64_t last_allocated = 0;
  while ((in_flight < kWanted || progressed < kWanted) &&
         std::chrono::steady_clock::now() < deadline) {
    std::uint64_t charged = 0, allocated = 0;
    for (const NicLoadStats& n : s->nic_load_stats()) {
      charged += n.charged_bytes;
      allocated += n.allocated_bytes;
    }
    ++reads;
    whole = whole && charged % kParent == 0 && allocated % kParent == 0;
    if (charged > 0) ++in_flight;
    if (allocated != last_allocated) ++progressed;
    last_allocated = allocated;
  }
  stop = true;
  for (auto& th : writers) th.join();
  EXPECT_TRUE(whole);
  EXPECT_EQ(refused.load(), 0);
  EXPECT_GE(in_flight, kWanted) << "reads with charges outstanding, of " << reads;
  EXPECT_GE(progressed, kWanted) << "reads after the writers moved on, of " << reads;
  for (const NicLoadStats& n : s->nic_load_stats()) EXPECT_EQ(n.charged_bytes, 0u) << n.name;
}

}  // namespace
}  // namespace orbite::topo
