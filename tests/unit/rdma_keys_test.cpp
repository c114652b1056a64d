// The memory-window key history of a PD (design 2.2) and the process's address range locks, on
// their own. (Planner and ledgers are in rdma_logic_test.cpp, the codecs in rdma_codec_test.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "p2p/rdma/key_history.h"
#include "p2p/rdma/range_locks.h"

namespace orbite::rdma {
namespace {

// ------------------------------------------------------------------------------------------------
// KeyHistory

constexpr std::uint32_t rkey(std::uint32_t index, std::uint32_t tag) {
  return index << 8 | tag;
}

TEST(KeyHistory, NewIndicesAreAdmittedUntilTheHistoryIsFull) {
  KeyHistory h(3);
  EXPECT_TRUE(h.admit(rkey(1, 0x05)).ok());
  EXPECT_TRUE(h.admit(rkey(2, 0x00)).ok());
  EXPECT_TRUE(h.admit(rkey(0xffffff, 0xff)).ok());
  EXPECT_EQ(h.indices(), 3u);
  const Status full = h.admit(rkey(4, 0x00));
  EXPECT_EQ(full.code(), Errc::ResourceExhausted);
  EXPECT_NE(full.message().find("rdma.max_window_key_indices"), std::string::npos)
      << full.message();
  EXPECT_EQ(h.indices(), 3u);
  // A recorded index (any tag) is still admitted.
  EXPECT_TRUE(h.admit(rkey(1, 0x80)).ok());
  EXPECT_TRUE(h.admit(rkey(2, 0x00)).ok());
  EXPECT_EQ(h.indices(), 3u);
}

TEST(KeyHistory, AZeroSizedHistoryAdmitsNothing) {
  KeyHistory h(0);
  EXPECT_EQ(h.admit(rkey(1, 0)).code(), Errc::ResourceExhausted);
}

TEST(KeyHistory, NextKeyKeepsTheIndexAndAdvancesTheTag) {
  KeyHistory h(4);
  ASSERT_TRUE(h.admit(0xabcdef7eu).ok());
  auto k = h.next_key(0xabcdef7eu);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(*k, 0xabcdef7fu);
  k = h.next_key(*k);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(*k, 0xabcdef80u);
  EXPECT_EQ(h.keys_used(), 2u);
}

TEST(KeyHistory, TheTagWrapsWithinItsIndex) {
  KeyHistory h(4);
  ASSERT_TRUE(h.admit(rkey(0x1234, 0xfe)).ok());
  EXPECT_EQ(h.next_key(rkey(0x1234, 0xfe)), std::optional<std::uint32_t>(rkey(0x1234, 0xff)));
  EXPECT_EQ(h.next_key(rkey(0x1234, 0xff)), std::optional<std::uint32_t>(rkey(0x1234, 0x00)));
  EXPECT_EQ(h.next_key(rkey(0x1234, 0x00)), std::optional<std::uint32_t>(rkey(0x1234, 0x01)));
}

TEST(KeyHistory, AnUnknownIndexHasNoNextKey) {
  KeyHistory h(4);
  EXPECT_FALSE(h.next_key(rkey(9, 0)).has_value());
  EXPECT_EQ(h.keys_used(), 0u);
  EXPECT_EQ(h.indices(), 0u);
}

TEST(KeyHistory, AnIndexIsParkedAfterItsLastTag) {
  KeyHistory h(4);
  const std::uint32_t first = rkey(0x42, 0x10);
  ASSERT_TRUE(h.admit(first).ok());
  std::set<std::uint32_t> keys{first};
  std::uint32_t cur = first;
  for (int i = 0; i < 255; ++i) {
    auto k = h.next_key(cur);
    ASSERT_TRUE(k.has_value()) << "bind " << i;
    EXPECT_EQ(*k >> 8, 0x42u);
    EXPECT_TRUE(keys.insert(*k).second) << "key reused at bind " << i;
    cur = *k;
  }
  EXPECT_EQ(keys.size(), 256u);  // every tag, each once
  EXPECT_EQ(h.keys_used(), 255u);
  EXPECT_EQ(h.parked(), 0u);
  EXPECT_FALSE(h.next_key(cur).has_value());
  EXPECT_EQ(h.parked(), 1u);
  EXPECT_FALSE(h.next_key(cur).has_value());
  EXPECT_EQ(h.parked(), 1u);  // counted once
  EXPECT_EQ(h.keys_used(), 255u);
  EXPECT_EQ(h.admit(first).code(), Errc::ResourceExhausted);
  EXPECT_EQ(h.admit(rkey(0x42, 0x99)).code(), Errc::ResourceExhausted);
  // Other indices are unaffected.
  ASSERT_TRUE(h.admit(rkey(0x43, 0)).ok());
  EXPECT_TRUE(h.next_key(rkey(0x43, 0)).has_value());
}

TEST(KeyHistory, AParkedIndexStaysInTheHistory) {
  KeyHistory h(1);
  ASSERT_TRUE(h.admit(rkey(7, 0)).ok());
  for (int i = 0; i < 255; ++i) ASSERT_TRUE(h.next_key(rkey(7, 0)).has_value());
  EXPECT_FALSE(h.next_key(rkey(7, 0)).has_value());
  EXPECT_EQ(h.indices(), 1u);
  EXPECT_EQ(h.admit(rkey(8, 0)).code(), Errc::ResourceExhausted);
}

TEST(KeyHistory, AReturningIndexContinuesFromItsRecordedTag) {
  KeyHistory h(4);
  const std::uint32_t index = 0x00beef;
  ASSERT_TRUE(h.admit(rkey(index, 0x00)).ok());
  std::set<std::uint32_t> keys{rkey(index, 0x00)};
  std::uint32_t cur = rkey(index, 0x00);
  int handed = 0;
  // The window is deallocated and the HCA hands the index out again, every 40 binds, with an
  // initial key of its own choosing (here: tags already used, and the one a reset would give).
  const std::uint32_t reissued[] = {0x00, 0x01, 0x27, 0x80, 0xff, 0x10};
  for (int round = 0; handed < 255; ++round) {
    for (int i = 0; i < 40 && handed < 255; ++i, ++handed) {
      auto k = h.next_key(cur);
      ASSERT_TRUE(k.has_value()) << "bind " << handed;
      EXPECT_EQ(*k >> 8, index);
      EXPECT_TRUE(keys.insert(*k).second) << "key " << std::hex << *k << " reused";
      cur = *k;
    }
    const std::uint32_t again = rkey(index, reissued[round % 6]);
    ASSERT_TRUE(h.admit(again).ok()) << "round " << round;
    cur = again;
  }
  EXPECT_EQ(keys.size(), 256u);
  EXPECT_EQ(h.indices(), 1u);
  EXPECT_EQ(h.keys_used(), 255u);
  EXPECT_FALSE(h.next_key(cur).has_value());
  EXPECT_EQ(h.parked(), 1u);
}

TEST(KeyHistory, KeysUsedCountsEveryIndex) {
  KeyHistory h(8);
  for (std::uint32_t i = 1; i <= 3; ++i) ASSERT_TRUE(h.admit(rkey(i, 0)).ok());
  for (std::uint32_t i = 1; i <= 3; ++i) {
    for (std::uint32_t n = 0; n < i * 2; ++n) ASSERT_TRUE(h.next_key(rkey(i, 0)).has_value());
  }
  EXPECT_EQ(h.keys_used(), 2u + 4u + 6u);
  EXPECT_EQ(h.indices(), 3u);
  EXPECT_EQ(h.parked(), 0u);
}

// ------------------------------------------------------------------------------------------------
// RangeLocks

TEST(RangeLocks, DisjointAndAdjacentRangesDoNotConflict) {
  RangeLocks locks;
  const auto a = locks.try_lock(0x1000, 0x100, true);
  const auto b = locks.try_lock(0x2000, 0x100, true);
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
  const auto c = locks.try_lock(0, 10, true);
  const auto d = locks.try_lock(10, 10, true);
  EXPECT_NE(c, 0u);
  EXPECT_NE(d, 0u);
  EXPECT_EQ(locks.held(), 4u);
}

TEST(RangeLocks, ExclusiveConflictsWithAnyOverlap) {
  RangeLocks locks;
  const auto ex = locks.try_lock(100, 100, true);  // [100, 200)
  ASSERT_NE(ex, 0u);
  EXPECT_EQ(locks.try_lock(100, 100, true), 0u);  // same
  EXPECT_EQ(locks.try_lock(150, 10, true), 0u);   // inside
  EXPECT_EQ(locks.try_lock(50, 300, true), 0u);   // around
  EXPECT_EQ(locks.try_lock(199, 1, true), 0u);    // last byte
  EXPECT_EQ(locks.try_lock(50, 51, true), 0u);    // first byte
  EXPECT_EQ(locks.try_lock(150, 10, false), 0u);  // shared against exclusive
  EXPECT_NE(locks.try_lock(200, 1, true), 0u);    // just past
  EXPECT_NE(locks.try_lock(99, 1, false), 0u);    // just before
  EXPECT_EQ(locks.held(), 3u);
}

TEST(RangeLocks, SharedLocksShareButExcludeExclusive) {
  RangeLocks locks;
  const auto s1 = locks.try_lock(0, 100, false);
  const auto s2 = locks.try_lock(50, 100, false);
  ASSERT_NE(s1, 0u);
  ASSERT_NE(s2, 0u);
  EXPECT_EQ(locks.try_lock(120, 10, true), 0u);  // overlaps s2 only
  locks.unlock(s2);
  const auto ex = locks.try_lock(120, 10, true);
  EXPECT_NE(ex, 0u);
  EXPECT_EQ(locks.try_lock(90, 20, true), 0u);  // still overlaps s1
  locks.unlock(s1);
  EXPECT_NE(locks.try_lock(90, 20, true), 0u);
}

TEST(RangeLocks, UnlockFreesTheRange) {
  RangeLocks locks;
  const auto a = locks.try_lock(0x4000, 0x1000, true);
  ASSERT_NE(a, 0u);
  EXPECT_EQ(locks.held(), 1u);
  EXPECT_EQ(locks.try_lock(0x4800, 8, true), 0u);
  locks.unlock(a);
  EXPECT_EQ(locks.held(), 0u);
  const auto b = locks.try_lock(0x4800, 8, true);
  EXPECT_NE(b, 0u);
  EXPECT_NE(b, a);  // tokens are not reused
  locks.unlock(a);  // a stale token unlocks nothing
  EXPECT_EQ(locks.held(), 1u);
  EXPECT_EQ(locks.try_lock(0x4800, 8, false), 0u);
}

TEST(RangeLocks, EmptyRangesNeverConflict) {
  RangeLocks locks;
  const auto ex = locks.try_lock(100, 100, true);
  ASSERT_NE(ex, 0u);
  const auto z1 = locks.try_lock(150, 0, true);
  const auto z2 = locks.try_lock(150, 0, true);
  EXPECT_NE(z1, 0u);
  EXPECT_NE(z2, 0u);
  EXPECT_EQ(locks.held(), 3u);
  // A held empty range blocks nothing either.
  locks.unlock(ex);
  EXPECT_NE(locks.try_lock(100, 100, true), 0u);
}

TEST(RangeLocks, NearTheTopOfTheAddressSpace) {
  constexpr std::uintptr_t top = std::numeric_limits<std::uintptr_t>::max();
  RangeLocks locks;
  const auto a = locks.try_lock(top - 100, 50, true);  // [top-100, top-50)
  ASSERT_NE(a, 0u);
  EXPECT_EQ(locks.try_lock(top - 60, 10, true), 0u);
  EXPECT_EQ(locks.try_lock(top - 200, 101, false), 0u);
  EXPECT_NE(locks.try_lock(top - 50, 50, true), 0u);  // adjacent above
  EXPECT_NE(locks.try_lock(0, 100, true), 0u);        // the bottom is unrelated
  locks.unlock(a);
  EXPECT_NE(locks.try_lock(top - 60, 10, true), 0u);
}

// A range whose last byte is the top address: begin + length is 2^64, which wraps to 0 in the
// overlap test, so the conflict is missed. Disabled: it fails against range_locks.cpp as it
// stands (reported); run with --gtest_also_run_disabled_tests.
TEST(RangeLocks, ARangeEndingAtTheTopAddressStillConflicts) {
  constexpr std::uintptr_t top = std::numeric_limits<std::uintptr_t>::max();
  RangeLocks locks;
  ASSERT_NE(locks.try_lock(top - 99, 100, true), 0u);  // [top-99, top]
  EXPECT_EQ(locks.try_lock(top - 10, 5, true), 0u);
  EXPECT_EQ(locks.try_lock(top - 10, 11, true), 0u);
}

}  // namespace
}  // namespace orbite::rdma
