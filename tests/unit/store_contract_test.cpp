// The Store contract, run against every implementation (in-process and TCP).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "../support/store_fixtures.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;

class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "tcp") {
      server_ = testing::start_server();
      ASSERT_NE(server_, nullptr);
    } else {
      shared_ = std::make_shared<InProcessStore>();
    }
  }
  std::shared_ptr<Store> client() {
    if (shared_) return shared_;
    auto c = testing::connect_client(*server_);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::shared_ptr<Store>(*c) : nullptr;
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<InProcessStore> shared_;
};

TEST_P(StoreContract, SetGetOverwriteAndBinaryValues) {
  auto s = client();
  std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(s->set("k", binary).ok());
  auto v = s->get("k", 1s);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, binary);
  ASSERT_TRUE(s->set("k", "second").ok());
  EXPECT_EQ(*s->get("k", 1s), "second");
  ASSERT_TRUE(s->set("empty", "").ok());
  EXPECT_EQ(*s->get("empty", 1s), "");
}

TEST_P(StoreContract, GetWaitsForALaterSet) {
  auto reader = client();
  auto writer = client();
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(writer->set("late", "here").ok());
  });
  auto v = reader->get("late", 10s);
  t.join();
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, "here");
}

TEST_P(StoreContract, GetAndWaitTimeOutNamingTheKeys) {
  auto s = client();
  auto v = s->get("never", 100ms);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Errc::Timeout);
  EXPECT_NE(v.status().message().find("'never'"), std::string::npos);

  ASSERT_TRUE(s->set("present", "1").ok());
  std::vector<std::string> keys = {"present", "absent"};
  Status w = s->wait(keys, 100ms);
  EXPECT_EQ(w.code(), Errc::Timeout);
  EXPECT_NE(w.message().find("'absent'"), std::string::npos);
  EXPECT_EQ(w.message().find("'present'"), std::string::npos);
}

TEST_P(StoreContract, CheckReportsEachKey) {
  auto s = client();
  ASSERT_TRUE(s->set("x", "1").ok());
  std::vector<std::string> keys = {"x", "y", "x"};
  auto present = s->check(keys);
  ASSERT_TRUE(present.ok());
  EXPECT_EQ(*present, (std::vector<bool>{true, false, true}));
}

TEST_P(StoreContract, AddIsACounter) {
  auto s = client();
  EXPECT_EQ(*s->add("n", 5), 5);
  EXPECT_EQ(*s->add("n", -7), -2);
  EXPECT_EQ(*s->get("n", 1s), "-2");
  ASSERT_TRUE(s->set("text", "abc").ok());
  auto bad = s->add("text", 1);
  EXPECT_EQ(bad.status().code(), Errc::InvalidArgument);
  EXPECT_NE(bad.status().message().find("'abc'"), std::string::npos);
  EXPECT_EQ(*s->get("text", 1s), "abc");  // unchanged
  ASSERT_TRUE(s->set("big", "9223372036854775807").ok());
  EXPECT_EQ(s->add("big", 1).status().code(), Errc::InvalidArgument);
}

TEST_P(StoreContract, CompareSetSemantics) {
  auto s = client();
  EXPECT_EQ(*s->compare_set("c", "", "first"), "first");   // absent matches ""
  EXPECT_EQ(*s->compare_set("c", "wrong", "x"), "first");  // mismatch keeps the value
  EXPECT_EQ(*s->compare_set("c", "first", "second"), "second");
  EXPECT_EQ(*s->compare_set("absent", "something", "x"), "");  // absent, nonempty expected
  EXPECT_FALSE((*s->check(std::vector<std::string>{"absent"}))[0]);
}

TEST_P(StoreContract, EraseReportsExistence) {
  auto s = client();
  ASSERT_TRUE(s->set("e", "1").ok());
  EXPECT_TRUE(*s->erase("e"));
  EXPECT_FALSE(*s->erase("e"));
  EXPECT_EQ(s->get("e", 10ms).status().code(), Errc::Timeout);
}

TEST_P(StoreContract, ConcurrentAddsAreAtomic) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 200;
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<Store>> clients;
  for (int t = 0; t < kThreads; ++t) clients.push_back(client());
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i)
        EXPECT_TRUE(clients[static_cast<size_t>(t)]->add("count", 1).ok());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(*clients[0]->get("count", 1s), std::to_string(kThreads * kAdds));
}

TEST_P(StoreContract, CompareSetRaceHasOneWinner) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<Store>> clients;
  for (int t = 0; t < kThreads; ++t) clients.push_back(client());
  std::atomic<int> winners{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string mine = "rank" + std::to_string(t);
      auto after = clients[static_cast<size_t>(t)]->compare_set("leader", "", mine);
      ASSERT_TRUE(after.ok());
      if (*after == mine) winners++;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST_P(StoreContract, BarrierReleasesEveryoneTogether) {
  constexpr int kRanks = 5;
  std::vector<std::thread> threads;
  std::atomic<int> arrived{0};
  std::atomic<int> passed_early{0};
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r, s = client()] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * r));
      arrived++;
      Status st = s->barrier("b1", r, kRanks, 10s);
      EXPECT_TRUE(st.ok()) << st.to_string();
      if (arrived.load() != kRanks) passed_early++;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(passed_early.load(), 0);
}

TEST_P(StoreContract, BarrierTimeoutNamesMissingRanks) {
  auto s = client();
  Status st = s->barrier("lonely", 1, 4, 100ms);
  EXPECT_EQ(st.code(), Errc::Timeout);
  EXPECT_NE(st.message().find("3 of 4 ranks did not arrive (ranks 0,2,3)"), std::string::npos)
      << st.message();
}

TEST_P(StoreContract, BarrierRejectsBadRanksAndReuse) {
  auto s = client();
  EXPECT_EQ(s->barrier("x", 2, 2, 1s).code(), Errc::InvalidArgument);
  ASSERT_TRUE(s->barrier("once", 0, 1, 1s).ok());
  EXPECT_EQ(s->barrier("once", 0, 1, 1s).code(), Errc::InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreContract, ::testing::Values("in_process", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param;
                         });

}  // namespace
}  // namespace orbite
