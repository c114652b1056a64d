// The device's egress token bucket (softverbs/src/token_bucket.h), driven with made-up times.
#include "token_bucket.h"

#include <gtest/gtest.h>

namespace {

using softverbs::TokenBucket;

constexpr uint64_t kMs = 1'000'000;  // ns
constexpr uint64_t kT0 = 1'000'000'000;

TEST(TokenBucket, StartsFullWithAtLeast256KiB) {
  TokenBucket b;
  b.set_rate(1e6, kT0);  // 1 MB/s: 1 ms is 1000 bytes, below the 256 KiB floor
  EXPECT_EQ(b.take(kT0, 1 << 20), 256u << 10);
  EXPECT_EQ(b.take(kT0, 1), 0u);
}

TEST(TokenBucket, RefillsAtTheRateUpToTheBurst) {
  TokenBucket b;
  b.set_rate(1e9, kT0);  // 1 GB/s: burst 1 ms = 1e6 bytes
  EXPECT_EQ(b.take(kT0, 2'000'000), 1'000'000u);
  EXPECT_EQ(b.take(kT0 + kMs / 2, 2'000'000), 500'000u);
  // An idle second refills only to the burst.
  EXPECT_EQ(b.take(kT0 + 1000 * kMs, 5'000'000), 1'000'000u);
}

TEST(TokenBucket, WaitIsTheTimeToRefillWhatIsAsked) {
  TokenBucket b;
  b.set_rate(1e9, kT0);
  ASSERT_EQ(b.take(kT0, 1'000'000), 1'000'000u);
  EXPECT_EQ(b.wait_ns(kT0, 0), 0u);
  const uint64_t w = b.wait_ns(kT0, 100'000);  // 100 us at 1 GB/s
  EXPECT_GE(w, 100'000u);
  EXPECT_LE(w, 100'002u);
  // Asking more than the burst waits for the burst only.
  EXPECT_LE(b.wait_ns(kT0, 50'000'000), 1'000'002u);
  EXPECT_EQ(b.take(kT0 + w, 100'000), 100'000u);
}

TEST(TokenBucket, GiveBackIsCappedAtTheBurst) {
  TokenBucket b;
  b.set_rate(1e9, kT0);
  ASSERT_EQ(b.take(kT0, 600'000), 600'000u);
  b.give_back(200'000);
  EXPECT_EQ(b.take(kT0, 2'000'000), 600'000u);
  b.give_back(5'000'000);
  EXPECT_EQ(b.take(kT0, 5'000'000), 1'000'000u);
}

TEST(TokenBucket, LoweringTheRateClampsTheTokens) {
  TokenBucket b;
  b.set_rate(10e9, kT0);  // burst 10 MB
  b.set_rate(1e8, kT0);   // burst 256 KiB (1 ms is only 100 KB)
  EXPECT_DOUBLE_EQ(b.rate(), 1e8);
  EXPECT_EQ(b.take(kT0, 20'000'000), 256u << 10);
}

TEST(TokenBucket, TimeGoingBackwardsAddsNothing) {
  TokenBucket b;
  b.set_rate(1e9, kT0);
  ASSERT_EQ(b.take(kT0, 1'000'000), 1'000'000u);
  EXPECT_EQ(b.take(kT0 - 10 * kMs, 1000), 0u);
  EXPECT_EQ(b.take(kT0 + kMs / 1000, 1000), 1000u);
}

}  // namespace
