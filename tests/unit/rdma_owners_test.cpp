// The move-only owners of what a grant or a parent holds (issue 24's split): a range lock, a
// budget charge and a region pin are each released exactly once, by destruction, reset or the
// owner they moved into, and keep() holds them for good.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "p2p/rdma/engine.h"
#include "p2p/rdma/range_locks.h"
#include "p2p/rdma/region_pin.h"

namespace orbite::rdma {
namespace {

TEST(RdmaOwners, ARangeLockIsReleasedOnceByWhoeverHoldsItLast) {
  const std::uintptr_t at = 0x7000'0000'0000;
  const std::size_t before = range_locks().held();
  {
    RangeLock a = RangeLock::try_lock(at, 4096, true);
    ASSERT_TRUE(a);
    EXPECT_FALSE(RangeLock::try_lock(at + 100, 10, false)) << "a conflicting lock was granted";
    RangeLock b = std::move(a);
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the moved-from owner holds nothing
    EXPECT_EQ(range_locks().held(), before + 1);
    std::vector<RangeLock> held;
    held.push_back(std::move(b));
    EXPECT_EQ(range_locks().held(), before + 1);
  }
  EXPECT_EQ(range_locks().held(), before);
  RangeLock kept = RangeLock::try_lock(at, 4096, true);
  ASSERT_TRUE(kept);
  kept.keep();  // retained: the range stays locked for good
  EXPECT_FALSE(RangeLock::try_lock(at, 1, false));
}

TEST(RdmaOwners, AChargeGoesBackOnceAndKeepHoldsIt) {
  Budget budget("max_test", 100);
  std::atomic<std::uint64_t> exhausted{0};
  {
    auto c = charge(budget, 60, exhausted);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(budget.used(), 60U);
    auto refused = charge(budget, 50, exhausted);
    EXPECT_EQ(refused.status().code(), Errc::ResourceExhausted);
    EXPECT_NE(refused.status().message().find("max_test"), std::string::npos);
    EXPECT_EQ(budget.used(), 60U) << "a refused charge changed the budget";
    Charge moved = std::move(*c);
    ASSERT_TRUE(budget.try_take(10));
    moved = Charge(budget, 10);  // adopts the 10; the assignment returns the 60 it held
    EXPECT_EQ(budget.used(), 10U);
  }
  EXPECT_EQ(budget.used(), 0U);
  ASSERT_TRUE(budget.try_take(5));
  {
    Charge kept(budget, 5);
    kept.keep();  // retained: charged for good
  }
  EXPECT_EQ(budget.used(), 5U);
}

TEST(RdmaOwners, ARegionPinIsReleasedOnceAndRefusedOnADeadRegion) {
  auto region = std::make_shared<detail::RegionRecord>();
  {
    auto pin = RegionPin::take(region);
    ASSERT_TRUE(pin.has_value());
    EXPECT_EQ(region->pins.load(), 1);
    RegionPin moved = std::move(*pin);
    pin.reset();
    EXPECT_EQ(region->pins.load(), 1);
  }
  EXPECT_EQ(region->pins.load(), 0);
  auto kept = RegionPin::take(region);
  ASSERT_TRUE(kept.has_value());
  kept->keep();
  kept.reset();
  EXPECT_EQ(region->pins.load(), 1) << "a kept pin was released";
  region->dead = true;
  EXPECT_FALSE(RegionPin::take(region).has_value());
  EXPECT_EQ(region->pins.load(), 1);
}

}  // namespace
}  // namespace orbite::rdma
