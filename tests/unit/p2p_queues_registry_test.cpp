// The data path's in-process building blocks: the lock-free submission queue, the proxy's tiered
// ready queue and the owner's region registry. (The codecs are in p2p_components_test.cpp.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <orbite/transfer.h>

#include "../support/config_test_helpers.h"
#include "common/mpsc_queue.h"
#include "p2p/registry.h"
#include "proxy/tiered_queue.h"

namespace orbite {
namespace {
// ------------------------------------------------------------------------------------------------
// MpscQueue

struct Item : MpscNode {
  int producer = 0;
  int seq = 0;
  std::atomic<int> popped{0};
};

TEST(MpscQueue, SingleThreadIsFifo) {
  MpscQueue q;
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_FALSE(q.maybe_nonempty());
  std::vector<Item> items(100);
  for (int round = 0; round < 3; ++round) {  // the queue is reusable after draining
    for (int i = 0; i < 100; ++i) {
      items[i].seq = i;
      q.push(&items[i]);
    }
    EXPECT_TRUE(q.maybe_nonempty());
    for (int i = 0; i < 100; ++i) {
      MpscNode* n = q.pop();
      ASSERT_NE(n, nullptr) << "round " << round << " item " << i;
      EXPECT_EQ(static_cast<Item*>(n), &items[i]);
    }
    EXPECT_EQ(q.pop(), nullptr);
    EXPECT_FALSE(q.maybe_nonempty());
  }
}

TEST(MpscQueue, InterleavedPushAndPopStayFifo) {
  MpscQueue q;
  std::vector<Item> items(10);
  int next_push = 0;
  int next_pop = 0;
  for (int step = 0; step < 10; ++step) {
    q.push(&items[next_push++]);
    if (step % 3 == 2) {
      while (MpscNode* n = q.pop()) EXPECT_EQ(static_cast<Item*>(n), &items[next_pop++]);
    }
  }
  while (MpscNode* n = q.pop()) EXPECT_EQ(static_cast<Item*>(n), &items[next_pop++]);
  EXPECT_EQ(next_pop, 10);
}

TEST(MpscQueue, FourProducersOneConsumerPopEachNodeOnceInProducerOrder) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 10000;
  std::vector<std::unique_ptr<Item[]>> items;
  for (int p = 0; p < kProducers; ++p) {
    items.push_back(std::make_unique<Item[]>(kPerProducer));
    for (int i = 0; i < kPerProducer; ++i) {
      items[p][i].producer = p;
      items[p][i].seq = i;
    }
  }
  MpscQueue q;
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < kPerProducer; ++i) q.push(&items[p][i]);
    });
  }
  go.store(true, std::memory_order_release);

  std::array<int, kProducers> next{};
  int total = 0;
  int order_errors = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (total < kProducers * kPerProducer && std::chrono::steady_clock::now() < deadline) {
    MpscNode* n = q.pop();
    if (n == nullptr) {
      std::this_thread::yield();
      continue;
    }
    auto* it = static_cast<Item*>(n);
    it->popped.fetch_add(1);
    if (it->seq != next[it->producer]) ++order_errors;
    next[it->producer] = it->seq + 1;
    ++total;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(total, kProducers * kPerProducer);
  EXPECT_EQ(order_errors, 0);
  EXPECT_EQ(q.pop(), nullptr);
  int wrong_count = 0;
  for (int p = 0; p < kProducers; ++p) {
    for (int i = 0; i < kPerProducer; ++i) wrong_count += items[p][i].popped.load() != 1 ? 1 : 0;
  }
  EXPECT_EQ(wrong_count, 0) << "nodes popped other than exactly once";
}

// ------------------------------------------------------------------------------------------------
// TieredQueue

TEST(TieredQueue, HighBeforeMediumBeforeLowFifoWithinATier) {
  proxy::TieredQueue<int> q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(), std::nullopt);
  q.push(Priority::Low, 1);
  q.push(Priority::Medium, 2);
  q.push(Priority::High, 3);
  q.push(Priority::Low, 4);
  q.push(Priority::High, 5);
  q.push(Priority::Medium, 6);
  q.push(Priority::Low, 7);
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.size(), 7U);
  EXPECT_EQ(q.size(Priority::High), 2U);
  EXPECT_EQ(q.size(Priority::Medium), 2U);
  EXPECT_EQ(q.size(Priority::Low), 3U);

  std::vector<int> order;
  while (auto v = q.pop()) order.push_back(*v);
  EXPECT_EQ(order, (std::vector<int>{3, 5, 2, 6, 1, 4, 7}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0U);
}

TEST(TieredQueue, AHigherTierArrivingLaterStillGoesFirst) {
  proxy::TieredQueue<std::unique_ptr<int>> q;  // move-only items
  q.push(Priority::Low, std::make_unique<int>(1));
  auto first = q.pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(**first, 1);
  q.push(Priority::Low, std::make_unique<int>(2));
  q.push(Priority::Medium, std::make_unique<int>(3));
  EXPECT_EQ(q.size(Priority::Low), 1U);
  EXPECT_EQ(**q.pop(), 3);
  q.push(Priority::High, std::make_unique<int>(4));
  EXPECT_EQ(**q.pop(), 4);
  EXPECT_EQ(**q.pop(), 2);
  EXPECT_FALSE(q.pop().has_value());
}

// ------------------------------------------------------------------------------------------------
// RegionRegistry

class Registry : public ::testing::Test {
 protected:
  std::shared_ptr<detail::RegionRecord> add(Access access = {}) {
    auto r = regions_.prepare({}, memory_.data(), memory_.size(), MemoryKind::Host, access);
    regions_.publish(r);
    return r;
  }
  void expect_refused(std::uint64_t id, std::uint64_t gen, std::uint64_t off, std::uint64_t len,
                      bool write, const std::string& names) {
    auto r = regions_.authorize(id, gen, off, len, write, p2p::TransportId::Tcp);
    ASSERT_FALSE(r.ok()) << "offset " << off << " length " << len;
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument);
    EXPECT_CONTAINS(r.status().message(), names);
  }
  std::vector<std::byte> memory_ = std::vector<std::byte>(4096);
  p2p::RegionRegistry regions_;
};

TEST_F(Registry, InRangeAccessIsAuthorized) {
  auto rec = add();
  EXPECT_EQ(regions_.size(), 1U);
  for (auto [off, len] : {std::pair<std::uint64_t, std::uint64_t>{0, 4096}, {4095, 1}, {100, 0}}) {
    for (bool write : {false, true}) {
      auto r = regions_.authorize(rec->id, rec->generation, off, len, write, p2p::TransportId::Tcp);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->get(), rec.get());
    }
  }
}

TEST_F(Registry, OneBytePastTheEndIsRefused) {
  auto rec = add();
  expect_refused(rec->id, rec->generation, 0, 4097, false, "exceeds its 4096 bytes");
  expect_refused(rec->id, rec->generation, 4096, 1, true, "offset 4096 length 1");
  expect_refused(rec->id, rec->generation, 1, 4096, true, "offset 1 length 4096");
}

TEST_F(Registry, OffsetOverflowIsRefused) {
  auto rec = add();
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  expect_refused(rec->id, rec->generation, max, 2, false, "offset " + std::to_string(max));
  expect_refused(rec->id, rec->generation, max, 0, false, "offset " + std::to_string(max));
  expect_refused(rec->id, rec->generation, 1, max, true, "length " + std::to_string(max));
}

TEST_F(Registry, RightsAreEnforced) {
  auto read_only = add(Access{true, false});
  auto write_only = add(Access{false, true});
  EXPECT_TRUE(
      regions_.authorize(read_only->id, read_only->generation, 0, 8, false, p2p::TransportId::Tcp)
          .ok());
  expect_refused(read_only->id, read_only->generation, 0, 8, true, "write (put)");
  EXPECT_TRUE(
      regions_.authorize(write_only->id, write_only->generation, 0, 8, true, p2p::TransportId::Tcp)
          .ok());
  expect_refused(write_only->id, write_only->generation, 0, 8, false, "read (get)");
}

TEST_F(Registry, StaleIdsAndGenerationsAreRefused) {
  auto rec = add();
  const std::string region = "region " + std::to_string(rec->id + 1000);
  expect_refused(rec->id + 1000, rec->generation, 0, 1, false, region);
  expect_refused(rec->id + 1000, rec->generation, 0, 1, false, "not registered");
  expect_refused(rec->id, rec->generation + 1, 0, 1, false, "not registered");
  expect_refused(0, 0, 0, 1, false, "not registered");

  const std::uint64_t old = rec->id;
  regions_.remove(old);
  EXPECT_EQ(regions_.size(), 0U);
  expect_refused(old, rec->generation, 0, 1, false, "not registered");
  auto again = add();  // ids are never reused
  EXPECT_GT(again->id, old);
  expect_refused(old, rec->generation, 0, 1, false, "not registered");
}

TEST_F(Registry, DeadRegionsAreRefused) {
  auto rec = add();
  rec->dead.store(true);
  expect_refused(rec->id, rec->generation, 0, 1, true, "not registered");

  auto a = add();
  auto b = add();
  EXPECT_TRUE(a->pin());
  a->unpin();
  regions_.kill_all();
  expect_refused(a->id, a->generation, 0, 1, false, "not registered");
  expect_refused(b->id, b->generation, 0, 1, true, "not registered");
  EXPECT_FALSE(b->pin()) << "a dead region takes no new pins";
  EXPECT_EQ(b->pins.load(), 0);
}

}  // namespace
}  // namespace orbite
