// Algorithms that await other algorithms (Task is awaitable) and run steps on sub-groups of
// their ranks (Ctx::subgroup): the building blocks of hierarchical collectives. Ranks are
// threads of this process, each with its own executor, over an in-process message fabric.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "coll/algorithms.h"
#include "coll/executor.h"
#include "p2p/request.h"

namespace orbite::coll {
namespace {

using namespace std::chrono_literals;

// Messages between thread ranks: a send and a receive with the same (from, to, tag) meet in
// posting order, and the bytes are copied when both are there. Passive receives (the failure
// watch) wait like the others; nothing here fails.
class Fabric {
 public:
  Poster poster(int me) {
    return [this, me](bool send, void* data, std::uint64_t bytes, int peer, std::int32_t tag, bool,
                      bool) -> Result<Request> {
      auto s = detail::make_request_state();
      Posted mine{s, data, bytes};
      std::lock_guard lock(mu_);
      const Key key = send ? Key{me, peer, tag} : Key{peer, me, tag};
      auto& other = send ? recvs_[key] : sends_[key];
      if (other.empty()) {
        (send ? sends_[key] : recvs_[key]).push_back(mine);
      } else {
        Posted them = other.front();
        other.pop_front();
        const Posted& from = send ? mine : them;
        const Posted& to = send ? them : mine;
        if (from.bytes != to.bytes) {
          ADD_FAILURE() << "a send of " << from.bytes << " bytes met a receive of " << to.bytes;
        }
        if (from.bytes > 0) std::memcpy(to.data, from.data, std::min(from.bytes, to.bytes));
        detail::complete_request(*from.state, {});
        detail::complete_request(*to.state, {});
      }
      return detail::RequestAccess::make(s);
    };
  }

 private:
  using Key = std::tuple<int, int, std::int32_t>;
  struct Posted {
    std::shared_ptr<detail::RequestState> state;
    void* data;
    std::uint64_t bytes;
  };
  std::mutex mu_;
  std::map<Key, std::deque<Posted>> sends_, recvs_;
};

// Runs `algo` on `n` thread ranks; rank r's input is r + 1 + i at element i.
std::vector<std::vector<float>> run_on_threads(int n, std::uint64_t count,
                                               Executor::Algorithm algo) {
  Fabric fabric;
  std::vector<std::vector<float>> in(static_cast<std::size_t>(n));
  std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    auto& mine = in[static_cast<std::size_t>(r)];
    for (std::uint64_t i = 0; i < count; ++i) mine.push_back(static_cast<float>(r + 1 + i));
    out[static_cast<std::size_t>(r)].assign(count, -1.0f);
  }
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto executor = std::make_shared<Executor>(r, n, fabric.poster(r));
      Args a;
      a.in = reinterpret_cast<const std::byte*>(in[static_cast<std::size_t>(r)].data());
      a.out = reinterpret_cast<std::byte*>(out[static_cast<std::size_t>(r)].data());
      a.count = count;
      a.chunk_bytes = 64;  // several pieces per step: the children suspend often
      auto req = executor->start("nested", algo, a, 0);
      ASSERT_TRUE(req.ok()) << req.status().to_string();
      const Status st = req->wait(20s);
      EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.to_string();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

float sum_over(const std::vector<int>& ranks, std::uint64_t i) {
  float s = 0;
  for (int r : ranks) s += static_cast<float>(r + 1 + i);
  return s;
}

TEST(NestedTasks, AnAlgorithmAwaitsTwoOthersInTurn) {
  constexpr int n = 3;
  constexpr std::uint64_t count = 100;
  auto twice = [](Ctx& c, Args a) -> Task {
    co_await ring_all_reduce(c, a);
    Args again = a;
    again.in = a.out;  // in place
    co_await recursive_doubling_all_reduce(c, again);
  };
  auto out = run_on_threads(n, count, twice);
  for (int r = 0; r < n; ++r) {
    for (std::uint64_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[static_cast<std::size_t>(r)][i], n * sum_over({0, 1, 2}, i))
          << "rank " << r << " element " << i;
    }
  }
}

// A hierarchical all_reduce over messages: inside each "host" (ranks of one parity), then among
// the hosts' leaders, then back inside each host.
TEST(NestedTasks, StepsOnSubGroupsMakeAHierarchicalAllReduce) {
  constexpr int n = 5;  // hosts {0, 2, 4} and {1, 3}
  constexpr std::uint64_t count = 77;
  auto hierarchical = [](Ctx& c, Args a) -> Task {
    std::vector<int> host;
    for (int r = c.rank() % 2; r < c.size(); r += 2) host.push_back(r);
    auto local = c.subgroup(host);
    EXPECT_EQ(local->rank(), c.rank() / 2);
    EXPECT_EQ(local->top_rank(local->rank()), c.rank());
    Args within = a;
    within.root = 0;
    co_await binomial_reduce(*local, within);
    if (local->rank() == 0) {
      auto leaders = c.subgroup({1, 0});  // ordered: rank 1 is the leaders' rank 0
      EXPECT_EQ(leaders->rank(), c.rank() == 1 ? 0 : 1);
      Args across = a;
      across.in = a.out;
      co_await ring_all_reduce(*leaders, across);
    }
    Args back = a;
    back.in = local->rank() == 0 ? a.out : nullptr;
    back.root = 0;
    co_await binomial_broadcast(*local, back);
  };
  auto out = run_on_threads(n, count, hierarchical);
  for (int r = 0; r < n; ++r) {
    for (std::uint64_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[static_cast<std::size_t>(r)][i], sum_over({0, 1, 2, 3, 4}, i))
          << "rank " << r << " element " << i;
    }
  }
}

TEST(NestedTasks, ASubGroupOfASubGroupNumbersRanksThroughBoth) {
  std::vector<std::tuple<bool, int>> posted;
  Ctx top(2, 6, [&](bool send, void*, std::uint64_t, int peer) -> Result<Request> {
    posted.emplace_back(send, peer);
    return Status::error(Errc::Internal, "not posted in this test");
  });
  auto sub = top.subgroup({5, 2, 4, 1});  // top rank 2 is the sub-group's rank 1
  ASSERT_EQ(sub->rank(), 1);
  ASSERT_EQ(sub->size(), 4);
  auto inner = sub->subgroup({3, 1});  // sub ranks 3 (top 1) and 1 (top 2)
  ASSERT_EQ(inner->rank(), 1);
  EXPECT_EQ(inner->top_rank(0), 1);
  EXPECT_EQ(inner->top_rank(1), 2);
  inner->send(nullptr, 0, 0);
  sub->recv(nullptr, 0, 2);
  ASSERT_EQ(posted.size(), 2u);
  EXPECT_EQ(posted[0], std::make_tuple(true, 1));
  EXPECT_EQ(posted[1], std::make_tuple(false, 4));
  // The failed post fails the top Ctx, which the executor polls.
  EXPECT_EQ(top.error().code(), Errc::Internal);
  // A wait on memory answers the sub-group's rank; the executor's liveness check sees the top's.
  (void)inner->until([] { return 0; });
  EXPECT_EQ(top.until_rank(), 1);
  (void)sub->until([] { return Ctx::kNoRank; });
  EXPECT_EQ(top.until_rank(), Ctx::kNoRank);
}

// A sub-group must hold the calling rank once and only ranks of its parent: otherwise the
// collective fails (Internal, naming the group) and the group is this rank alone.
TEST(NestedTasks, ASubGroupWithoutThisRankOrWithABadMemberFailsTheCollective) {
  auto post = [](bool, void*, std::uint64_t, int) -> Result<Request> {
    return Status::error(Errc::Internal, "not posted in this test");
  };
  for (const std::vector<int>& members : {std::vector<int>{0, 1}, std::vector<int>{2, 6},
                                          std::vector<int>{2, -1}, std::vector<int>{2, 3, 2}}) {
    Ctx top(2, 6, post);
    auto sub = top.subgroup(members);
    ASSERT_EQ(sub->size(), 1);
    EXPECT_EQ(sub->rank(), 0);
    EXPECT_EQ(sub->top_rank(0), 2);
    EXPECT_EQ(top.error().code(), Errc::Internal);
    EXPECT_NE(top.error().message().find("without rank 2"), std::string::npos)
        << top.error().to_string();
  }
  Ctx top(2, 6, post);
  (void)top.subgroup({4, 2});
  EXPECT_TRUE(top.error().ok()) << top.error().to_string();
}

}  // namespace
}  // namespace orbite::coll
