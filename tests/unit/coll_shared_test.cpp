// The shm algorithms and the executor's waits on shared memory, with ranks as threads of this
// process over one SharedArea in heap memory and a fake poster in place of the engine (the
// failure watch's receives are requests the test completes). The same algorithms between real
// processes, through a real segment, are in tests/integration/coll_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "coll/algorithms.h"
#include "coll/executor.h"
#include "coll/shared_area.h"
#include "p2p/request.h"

namespace orbite::coll {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kSlot = 4096;

// One rank's engine stand-in: hellos and abort messages complete at once; the failure watch's
// receives (passive) stay open until the test fails them.
struct FakeLinks {
  std::mutex mu;
  std::map<int, std::shared_ptr<detail::RequestState>> watch;  // by peer

  Poster poster() {
    return [this](bool, void*, std::uint64_t, int peer, std::int32_t, bool passive,
                  bool) -> Result<Request> {
      auto s = detail::make_request_state();
      if (passive) {
        std::lock_guard lock(mu);
        watch[peer] = s;
      } else {
        detail::complete_request(*s, {});
      }
      return detail::RequestAccess::make(s);
    };
  }
  void lose(int peer) {
    std::lock_guard lock(mu);
    detail::complete_request(*watch.at(peer),
                             Status::error(Errc::ConnectionLost, "the peer closed the connection"));
  }
};

// The segment's memory shared by the threads, each rank with its own SharedArea (its own
// in-process ticket and step counters, as each process has).
struct Segment {
  explicit Segment(int ranks, std::uint64_t slot = kSlot)
      : ranks_(ranks),
        slot_(slot),
        bytes_(SharedArea::bytes_for(ranks, slot)),
        memory_(static_cast<std::byte*>(std::aligned_alloc(4096, bytes_)), &std::free) {
    std::fill_n(memory_.get(), bytes_, std::byte{0});
    SharedArea(memory_.get(), ranks, slot, nullptr).format();
  }
  std::shared_ptr<SharedArea> view() const {
    return std::make_shared<SharedArea>(memory_.get(), ranks_, slot_, nullptr);
  }
  int ranks_;
  std::uint64_t slot_;
  std::uint64_t bytes_;
  std::unique_ptr<std::byte, decltype(&std::free)> memory_;
};

struct Rank {
  Rank(int rank, int size, const Segment& seg)
      : area(seg.view()),
        executor(std::make_shared<Executor>(rank, size, links.poster(), ScratchHooks{})) {
    // The test's threads outnumber the cores more often than not.
    executor->set_yield_when_idle(true);
  }
  // `first`: the collective's start on this thread (a tiny one may finish there), as the
  // Communicator passes it.
  Result<Request> start(std::string_view kind, Task (*algo)(Ctx&, Args), Args a,
                        Executor::InlineStart first = nullptr) {
    a.area = area;
    return executor->start(kind, algo, std::move(a), 0, {}, first);
  }
  FakeLinks links;
  std::shared_ptr<SharedArea> area;
  std::shared_ptr<Executor> executor;
};

// An int32 sum of `count` elements from `in` to `out` (rooted at `root`).
Args int32_sum(const void* in, void* out, std::uint64_t count, int root = 0) {
  Args a;
  a.in = static_cast<const std::byte*>(in);
  a.out = static_cast<std::byte*>(out);
  a.count = count;
  a.type = DataType::Int32;
  a.op = ReduceOp::Sum;
  a.root = root;
  return a;
}

// Runs `body(rank)` on `n` threads at once.
void on_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

std::int32_t input(int rank, std::uint64_t i) {
  return static_cast<std::int32_t>(i % 977) + 3 * rank;
}

// Every shm collective on 2 and 3 thread ranks (2 ranks combine every chunk whole, from their
// own input; 3 split the large ones into shares), at one slot-sized step and at several chunk
// steps with a remainder, two of each outstanding before the first wait (they take the segment
// in start order), an all_reduce in place among them; integers checked exactly.
class ShmAlgorithmsOn : public ::testing::TestWithParam<int> {};

TEST_P(ShmAlgorithmsOn, EveryCollectiveOnThreadRanksMatchesTheReference) {
  const int kN = GetParam();
  Segment seg(kN);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < kN; ++r) ranks.push_back(std::make_unique<Rank>(r, kN, seg));
  const std::uint64_t rank_sum = 3 * (kN * (kN - 1) / 2);
  for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{7}, kSlot / 4, 3 * kSlot / 4 + 5}) {
    on_threads(kN, [&](int r) {
      Rank& me = *ranks[static_cast<std::size_t>(r)];
      const auto n = static_cast<std::uint64_t>(kN);
      std::vector<std::int32_t> in(count * n), sum(count), sum2(count), red(count), bc(count),
          gathered(count * n), scattered(count), in_place(count), red_in_place(count);
      for (std::uint64_t i = 0; i < in.size(); ++i) in[i] = input(r, i);
      for (std::uint64_t i = 0; i < count; ++i) in_place[i] = red_in_place[i] = input(r, i);
      auto args = [](const void* from, void* to, std::uint64_t c) {
        return int32_sum(from, to, c, 1);
      };
      // A reduce in place to the last rank (from rank 2 on, its own input is overwritten by the
      // first combination unless it reads its slot copy).
      Args last_in_place = args(red_in_place.data(), red_in_place.data(), count);
      last_in_place.root = kN - 1;
      std::vector<Request> reqs;
      for (auto [kind, algo, a] :
           {std::tuple{"all_reduce", &shm_all_reduce, args(in.data(), sum.data(), count)},
            std::tuple{"all_reduce", &shm_all_reduce, args(in.data(), sum2.data(), count)},
            std::tuple{"all_reduce", &shm_all_reduce,
                       args(in_place.data(), in_place.data(), count)},
            std::tuple{"reduce", &shm_reduce,
                       args(in.data(), r == 1 ? red.data() : nullptr, count)},
            std::tuple{"reduce", &shm_reduce, last_in_place},
            std::tuple{"broadcast", &shm_broadcast,
                       args(r == 1 ? in.data() : nullptr, bc.data(), count)},
            std::tuple{"all_gather", &shm_all_gather, args(in.data(), gathered.data(), count)},
            std::tuple{"reduce_scatter", &shm_reduce_scatter,
                       args(in.data(), scattered.data(), count)},
            std::tuple{"barrier", &shm_barrier, Args{}}}) {
        auto req = me.start(kind, algo, a);
        ASSERT_TRUE(req.ok()) << req.status().to_string();
        reqs.push_back(*req);
      }
      for (std::size_t i = reqs.size(); i-- > 0;) {
        ASSERT_TRUE(reqs[i].wait(30s).ok()) << i << ": " << reqs[i].wait(0s).to_string();
      }
      for (std::uint64_t i = 0; i < count; ++i) {
        const auto want = static_cast<std::int32_t>(kN * (i % 977) + rank_sum);
        ASSERT_EQ(sum[i], want) << "all_reduce element " << i;
        ASSERT_EQ(sum2[i], want) << "second all_reduce element " << i;
        ASSERT_EQ(in_place[i], want) << "in-place all_reduce element " << i;
        if (r == 1) {
          ASSERT_EQ(red[i], want) << "reduce element " << i;
        }
        if (r == kN - 1) {
          ASSERT_EQ(red_in_place[i], want) << "in-place reduce element " << i;
        }
        ASSERT_EQ(bc[i], input(1, i)) << "broadcast element " << i;
        const std::uint64_t at = static_cast<std::uint64_t>(r) * count + i;
        ASSERT_EQ(scattered[i], static_cast<std::int32_t>(kN * (at % 977) + rank_sum))
            << "reduce_scatter element " << i;
      }
      for (int k = 0; k < kN; ++k) {
        for (std::uint64_t i = 0; i < count; ++i) {
          ASSERT_EQ(gathered[static_cast<std::uint64_t>(k) * count + i], input(k, i))
              << "all_gather block " << k << " element " << i;
        }
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmAlgorithmsOn, ::testing::Values(2, 3));

// Chunk steps by the ranks' placement: with a 1 MiB slot, a 4 MiB all_reduce and all_gather
// take 256 KiB steps (16 each) where every rank has a core, and 8 steps of 512 KiB where the
// ranks outnumber their cores (SharedArea::crowded); the bytes are the same either way.
TEST(ShmChunks, CrowdedRanksTakeFewerLargerStepsWithTheSameResults) {
  constexpr int kN = 3;
  constexpr std::uint64_t kMiB = 1 << 20;
  constexpr std::uint64_t kCount = 4 * kMiB / sizeof(std::int32_t);
  for (const bool crowded : {false, true}) {
    Segment seg(kN, kMiB);
    std::vector<std::unique_ptr<Rank>> ranks;
    for (int r = 0; r < kN; ++r) {
      ranks.push_back(std::make_unique<Rank>(r, kN, seg));
      ranks.back()->area->set_crowded(crowded);
    }
    on_threads(kN, [&](int r) {
      Rank& me = *ranks[static_cast<std::size_t>(r)];
      std::vector<std::int32_t> in(kCount), sum(kCount), gathered(kCount * kN);
      for (std::uint64_t i = 0; i < kCount; ++i) in[i] = input(r, i);
      Args a = int32_sum(in.data(), sum.data(), kCount);
      auto req = me.start("all_reduce", &shm_all_reduce, a);
      ASSERT_TRUE(req.ok() && req->wait(30s).ok());
      EXPECT_EQ(me.area->step(), crowded ? 8U : 16U) << "all_reduce, crowded " << crowded;
      a.out = reinterpret_cast<std::byte*>(gathered.data());
      req = me.start("all_gather", &shm_all_gather, a);
      ASSERT_TRUE(req.ok() && req->wait(30s).ok());
      EXPECT_EQ(me.area->step(), crowded ? 16U : 32U) << "all_gather, crowded " << crowded;
      for (std::uint64_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(sum[i], static_cast<std::int32_t>(kN * (i % 977) + 3 * (kN * (kN - 1) / 2)))
            << "all_reduce element " << i << ", crowded " << crowded;
      }
      for (int k = 0; k < kN; ++k) {
        for (std::uint64_t i = 0; i < kCount; ++i) {
          ASSERT_EQ(gathered[static_cast<std::uint64_t>(k) * kCount + i], input(k, i))
              << "all_gather block " << k << " element " << i << ", crowded " << crowded;
        }
      }
    });
  }
}

// Two thread ranks call all_reduce with counts[0] and counts[1] int32 elements: each fails with
// InvalidArgument naming the other's call.
void expect_both_fail_naming_the_other(std::uint64_t count0, std::uint64_t count1) {
  constexpr int kN = 2;
  Segment seg(kN);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < kN; ++r) ranks.push_back(std::make_unique<Rank>(r, kN, seg));
  const std::uint64_t counts[] = {count0, count1};
  on_threads(kN, [&](int r) {
    const std::uint64_t count = counts[r];
    std::vector<std::int32_t> in(count, 1), out(count);
    Args a;
    a.in = reinterpret_cast<const std::byte*>(in.data());
    a.out = reinterpret_cast<std::byte*>(out.data());
    a.count = count;
    a.type = DataType::Int32;
    auto req = ranks[static_cast<std::size_t>(r)]->start("all_reduce", &shm_all_reduce, a,
                                                         &shm_all_reduce_inline);
    ASSERT_TRUE(req.ok());
    const Status st = req->wait(30s);
    EXPECT_EQ(st.code(), Errc::InvalidArgument) << st.to_string();
    const std::string theirs = "rank " + std::to_string(1 - r) + " called all_reduce with " +
                               std::to_string(counts[1 - r]) +
                               " elements of int32, sum where this rank called all_reduce with " +
                               std::to_string(count);
    EXPECT_NE(st.message().find(theirs), std::string::npos) << st.message();
  });
}

// Ranks that call different counts or collectives fail with InvalidArgument naming both,
// instead of reading each other's slots as if they matched.
TEST(ShmAlgorithms, RanksCallingDifferentShapesFailWithInvalidArgument) {
  constexpr int kN = 2;
  expect_both_fail_naming_the_other(8, 9);                      // tiny steps
  expect_both_fail_naming_the_other(3 * kSlot, 3 * kSlot + 1);  // slot steps
  // A barrier against a broadcast.
  Segment seg(kN);
  Rank r0(0, kN, seg);
  Rank r1(1, kN, seg);
  std::vector<std::int32_t> v(4, 7);
  Args a;
  a.in = reinterpret_cast<const std::byte*>(v.data());
  a.out = reinterpret_cast<std::byte*>(v.data());
  a.count = v.size();
  a.type = DataType::Int32;
  auto b = r0.start("broadcast", &shm_broadcast, a);
  auto w = r1.start("barrier", &shm_barrier, Args{});
  ASSERT_TRUE(b.ok() && w.ok());
  const Status st = w->wait(30s);
  EXPECT_EQ(st.code(), Errc::InvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("rank 0 called broadcast with 4 elements of int32, root 0 where "
                              "this rank called barrier"),
            std::string::npos)
      << st.message();
}

// A tiny step (a few bytes on the rank's tiny line) against a step through the slots: each rank
// fails with InvalidArgument naming the other's call, the tiny one too (it hears of a rank that
// arrived without a tiny line from that rank's counter, now and then), instead of waiting.
TEST(ShmAlgorithms, ATinyStepAgainstASlotStepFailsOnBothRanks) {
  expect_both_fail_naming_the_other(2, 64);  // 8 bytes (tiny) against 256
}

// A rank whose tiny steps need no one's data (a broadcast's root, reduce's non-roots) finishes
// them on its own thread, up to SharedArea::kTinyLines steps ahead of the slowest reader; the
// next one waits until a reader consumed a step, and every reader then gets every step's bytes.
TEST(ShmTiny, AWriterRunsAheadByTheTinyRingAndEveryReaderGetsEveryStep) {
  constexpr int kN = 2;
  constexpr auto kAhead = static_cast<int>(SharedArea::kTinyLines);
  EXPECT_EQ(kAhead, 16) << "the run-ahead docs/collectives.md describes";
  for (const bool broadcast : {true, false}) {
    SCOPED_TRACE(broadcast ? "broadcast from rank 0" : "reduce to rank 1");
    Segment seg(kN);
    Rank writer(0, kN, seg);
    Rank reader(1, kN, seg);
    const auto algo = broadcast ? &shm_broadcast : &shm_reduce;
    const auto first = broadcast ? &shm_broadcast_inline : &shm_reduce_inline;
    const char* kind = broadcast ? "broadcast" : "reduce";
    auto args = [&](std::vector<std::int32_t>& in, std::vector<std::int32_t>& out) {
      Args a;
      a.in = reinterpret_cast<const std::byte*>(in.data());
      a.out = reinterpret_cast<std::byte*>(out.data());
      a.count = in.size();
      a.type = DataType::Int32;
      a.op = ReduceOp::Sum;
      a.root = broadcast ? 0 : 1;
      return a;
    };
    // The writer's output (a broadcast root's copy) lives as long as its requests.
    std::vector<std::vector<std::int32_t>> sent(kAhead + 1), got(kAhead + 1), own(kAhead + 1);
    std::vector<Request> writes;
    for (int i = 0; i <= kAhead; ++i) {
      const auto k = static_cast<std::size_t>(i);
      sent[k] = {i, 100 + i, -i};
      got[k].assign(3, 0);
      own[k].assign(3, 0);
      auto w = writer.start(kind, algo, args(sent[k], own[k]), first);
      ASSERT_TRUE(w.ok());
      // Done as start returns (no test() or wait()) while the ring has room.
      EXPECT_EQ(w->done(), i < kAhead) << "step " << i;
      writes.push_back(*w);
    }
    for (int i = 0; i <= kAhead; ++i) {
      std::vector<std::int32_t> zero(3, 0);
      auto& out = got[static_cast<std::size_t>(i)];
      auto r = reader.start(kind, algo, broadcast ? args(out, out) : args(zero, out), first);
      ASSERT_TRUE(r.ok());
      EXPECT_TRUE(r->done()) << "step " << i << ": the writer's line is there already";
      ASSERT_TRUE(r->wait(10s).ok());
      EXPECT_EQ(out, sent[static_cast<std::size_t>(i)]) << "step " << i;
      if (i == 0) {
        // One line read: the writer's last step goes on (driven by its own wait here, as its
        // thread would).
        EXPECT_TRUE(writes.back().wait(10s).ok()) << "the last write went on after a read";
      }
    }
    if (broadcast) {
      EXPECT_EQ(own, sent) << "the root's own output";
    }
  }
}

// Tiny collectives posted without waiting begin ahead of their turn: each numbers its step and
// writes its line on the caller's thread (or, with the ring of lines full, once its line is
// free), and stores Arrived and finishes in its turn. On 3 thread ranks, 40 of them in flight
// at once (more than the ring's 16 lines), all_reduce, reduce, broadcast and barrier in turn,
// with a chunk all_reduce in the middle (whose steps are numbered in its turn, so the tiny ones
// after it wait for it to begin theirs): every result exact, the chunk one too, and every
// rank's steps numbered alike (its last step the same on every rank).
TEST(ShmTiny, TinyCollectivesPostedWithoutWaitingBeginAheadAndAllGetTheirBytes) {
  constexpr int kN = 3;
  constexpr int kCalls = 40;
  constexpr int kChunkAt = 20;
  constexpr std::uint64_t kChunkCount = 3 * kSlot / 4 + 5;  // several chunk steps
  Segment seg(kN);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < kN; ++r) ranks.push_back(std::make_unique<Rank>(r, kN, seg));
  std::vector<std::uint64_t> last_step(kN);
  on_threads(kN, [&](int r) {
    Rank& me = *ranks[static_cast<std::size_t>(r)];
    std::vector<std::vector<std::int32_t>> in(kCalls), out(kCalls);
    std::vector<std::int32_t> big_in(kChunkCount), big_out(kChunkCount);
    for (std::uint64_t i = 0; i < kChunkCount; ++i) big_in[i] = input(r, i);
    std::vector<Request> reqs;
    for (int i = 0; i < kCalls; ++i) {
      const auto k = static_cast<std::size_t>(i);
      in[k] = {i + r, 7 * r, -i};
      out[k].assign(3, -1);
      const Args a = int32_sum(in[k].data(), out[k].data(), 3, i % kN);
      Result<Request> req = Status::error(Errc::Internal, "not started");
      switch (i % 4) {
        case 0: req = me.start("all_reduce", &shm_all_reduce, a, &shm_all_reduce_inline); break;
        case 1: req = me.start("reduce", &shm_reduce, a, &shm_reduce_inline); break;
        case 2: req = me.start("broadcast", &shm_broadcast, a, &shm_broadcast_inline); break;
        default: req = me.start("barrier", &shm_barrier, Args{}, &shm_barrier_inline); break;
      }
      ASSERT_TRUE(req.ok()) << i << ": " << req.status().to_string();
      reqs.push_back(*req);
      if (i == kChunkAt) {
        auto big =
            me.start("all_reduce", &shm_all_reduce,
                     int32_sum(big_in.data(), big_out.data(), kChunkCount), &shm_all_reduce_inline);
        ASSERT_TRUE(big.ok());
        reqs.push_back(*big);
      }
    }
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(reqs[i].wait(30s).ok()) << i << ": " << reqs[i].wait(0s).to_string();
    }
    for (int i = 0; i < kCalls; ++i) {
      const auto& o = out[static_cast<std::size_t>(i)];
      const int root = i % kN;
      const std::vector<std::int32_t> sum = {kN * i + kN * (kN - 1) / 2, 7 * kN * (kN - 1) / 2,
                                             -kN * i};
      if (i % 4 == 0 || (i % 4 == 1 && r == root)) {
        EXPECT_EQ(o, sum) << "call " << i << " on rank " << r;
      } else if (i % 4 == 2) {
        EXPECT_EQ(o, (std::vector<std::int32_t>{i + root, 7 * root, -i})) << "call " << i;
      }
    }
    for (std::uint64_t i = 0; i < kChunkCount; ++i) {
      ASSERT_EQ(big_out[i], static_cast<std::int32_t>(kN * (i % 977) + 3 * (kN * (kN - 1) / 2)))
          << "chunk all_reduce element " << i;
    }
    last_step[static_cast<std::size_t>(r)] = me.area->step();
  });
  EXPECT_EQ(last_step[1], last_step[0]);
  EXPECT_EQ(last_step[2], last_step[0]);
}

// Where a rank posts tiny all_reduces before its peers start any: the first begins in its turn
// (line and Arrived), the next ones ahead: their lines are written at once, their Arrived only
// in their turn; once the peer posts its own, every result is exact.
TEST(ShmTiny, StepsBegunAheadWriteTheirLinesAtOnceAndArriveInTurn) {
  constexpr int kN = 2;
  constexpr int kCalls = 5;
  Segment seg(kN);
  Rank first(0, kN, seg);
  Rank second(1, kN, seg);
  std::vector<std::vector<std::int32_t>> in(2 * kCalls), out(2 * kCalls);
  auto post = [&](Rank& rank, int r) {
    std::vector<Request> reqs;
    for (int i = 0; i < kCalls; ++i) {
      const auto k = static_cast<std::size_t>(r * kCalls + i);
      in[k] = {i, r};
      out[k].assign(2, -1);
      auto req = rank.start("all_reduce", &shm_all_reduce,
                            int32_sum(in[k].data(), out[k].data(), 2), &shm_all_reduce_inline);
      EXPECT_TRUE(req.ok());
      if (req.ok()) reqs.push_back(*req);
    }
    return reqs;
  };
  std::vector<Request> mine = post(first, 0);
  for (std::uint64_t s = 1; s <= kCalls; ++s) {
    EXPECT_EQ(first.area->tiny_seen(0, s), s) << "step " << s << "'s line";
  }
  EXPECT_EQ(first.area->seen(0, SharedArea::Arrived), 1U) << "only the first step arrived";
  std::vector<Request> theirs = post(second, 1);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    ASSERT_TRUE(theirs[i].wait(10s).ok());
    ASSERT_TRUE(mine[i].wait(10s).ok());
  }
  EXPECT_EQ(first.area->seen(0, SharedArea::Arrived), static_cast<std::uint64_t>(kCalls));
  for (std::size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k], (std::vector<std::int32_t>{2 * static_cast<int>(k % kCalls), 1})) << k;
  }
}

// A step of up to kTinyBytes (488) per rank goes through the tiny lines, its data running on
// past the line's first cache line; one element more takes a chunk step through the slots.
TEST(ShmTiny, StepsOfUpToTheTinyBytesGoThroughTheLinesAndLargerOnesThroughTheSlots) {
  constexpr int kN = 2;
  static_assert(SharedArea::kTinyBytes == 488);
  const std::uint64_t tiny_count = SharedArea::kTinyBytes / sizeof(std::int32_t);
  Segment seg(kN);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < kN; ++r) ranks.push_back(std::make_unique<Rank>(r, kN, seg));
  std::vector<std::vector<std::int32_t>> out(kN);
  for (const std::uint64_t count : {tiny_count, tiny_count + 1}) {
    on_threads(kN, [&](int r) {
      Rank& me = *ranks[static_cast<std::size_t>(r)];
      std::vector<std::int32_t> in(count);
      for (std::uint64_t i = 0; i < count; ++i) in[i] = input(r, i);
      out[static_cast<std::size_t>(r)].assign(count, -1);
      auto req = me.start("all_reduce", &shm_all_reduce,
                          int32_sum(in.data(), out[static_cast<std::size_t>(r)].data(), count),
                          &shm_all_reduce_inline);
      ASSERT_TRUE(req.ok());
      ASSERT_TRUE(req->wait(10s).ok());
    });
    for (int r = 0; r < kN; ++r) {
      for (std::uint64_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[static_cast<std::size_t>(r)][i], input(0, i) + input(1, i))
            << "count " << count << ", rank " << r << ", element " << i;
      }
    }
  }
  // Step 1 (488 bytes) was a tiny step on both ranks; step 2 (492 bytes) a chunk step.
  for (int r = 0; r < kN; ++r) {
    EXPECT_EQ(ranks[0]->area->tiny_seen(r, 1), 1U) << "rank " << r << "'s tiny line of step 1";
    EXPECT_LT(ranks[0]->area->tiny_seen(r, 2), 2U) << "rank " << r << "'s tiny line of step 2";
    EXPECT_EQ(ranks[0]->area->seen(r, SharedArea::Consumed), 2U) << "rank " << r;
  }
}

// A rank whose link is lost while another waits for its flag: the wait fails with
// ConnectionLost naming it, within the liveness slice, not at the caller's timeout.
TEST(ShmWaits, ALostRankFailsTheWaitOnItsFlag) {
  Segment seg(2);
  Rank r0(0, 2, seg);
  std::vector<std::int32_t> v(8, 1), out(8);
  Args a;
  a.in = reinterpret_cast<const std::byte*>(v.data());
  a.out = reinterpret_cast<std::byte*>(out.data());
  a.count = v.size();
  a.type = DataType::Int32;
  auto req = r0.start("all_reduce", &shm_all_reduce, a);
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->wait(50ms).code(), Errc::Timeout) << "rank 1 never arrives";
  r0.links.lose(1);
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = req->wait(20s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
  EXPECT_NE(st.message().find("rank 1 was lost"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("shared segment"), std::string::npos) << st.message();
  // The communicator's collectives stay broken.
  auto again = r0.start("barrier", &shm_barrier, Args{});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Errc::ConnectionLost);
}

// A rank that wrote its flag and then left (its link closed, as at an orderly exit) fails
// nothing: the wait is already over.
TEST(ShmWaits, ARankThatLeftAfterWritingItsFlagFailsNothing) {
  Segment seg(2);
  Rank r0(0, 2, seg);
  Rank r1(1, 2, seg);
  auto b0 = r0.start("barrier", &shm_barrier, Args{});
  ASSERT_TRUE(b0.ok());
  auto b1 = r1.start("barrier", &shm_barrier, Args{});
  ASSERT_TRUE(b1.ok());
  ASSERT_TRUE(b1->wait(10s).ok());
  r0.links.lose(1);
  const Status st = b0->wait(10s);
  EXPECT_TRUE(st.ok()) << st.to_string();
}

// A collective waiting for its turn behind an earlier one names no rank: a lost link does not
// fail it; the earlier one, which waits for that rank, does, and the later one fails with it.
// Whether a thread polling the segment yields at once: decided from the CPUs each rank marked.
TEST(ShmPlacement, RanksOutnumberingTheirCpusAreOversubscribed) {
  struct Mark {
    int cpus;
    int only_cpu;
  };
  auto oversubscribed = [](std::vector<Mark> marks) {
    Segment seg(static_cast<int>(marks.size()));
    auto area = seg.view();
    for (std::size_t r = 0; r < marks.size(); ++r) {
      area->mark_attached(static_cast<int>(r), marks[r].cpus, marks[r].only_cpu);
    }
    EXPECT_EQ(area->first_unattached(), -1);
    return area->oversubscribed();
  };
  // Bound one per CPU (orbite-run when the ranks fit): each has its core.
  EXPECT_FALSE(oversubscribed({{1, 0}, {1, 1}}));
  EXPECT_FALSE(oversubscribed({{1, 3}, {1, 0}, {1, 7}, {1, 5}}));
  // Two bound to one CPU.
  EXPECT_TRUE(oversubscribed({{1, 0}, {1, 1}, {1, 0}}));
  // Unbound: the widest mask against the ranks.
  EXPECT_FALSE(oversubscribed({{2, -1}, {2, -1}}));
  EXPECT_TRUE(oversubscribed({{2, -1}, {2, -1}, {2, -1}, {2, -1}}));
  // Mixed: one bound, one free over two CPUs, a third: three ranks on two CPUs.
  EXPECT_TRUE(oversubscribed({{1, 0}, {2, -1}, {2, -1}}));
  EXPECT_FALSE(oversubscribed({{1, 0}, {16, -1}, {16, -1}}));
}

TEST(ShmPlacement, ARankThatMarkedNothingIsUnattached) {
  Segment seg(3);
  auto area = seg.view();
  area->mark_attached(0, 1, 0);
  area->mark_attached(2, 4, -1);
  EXPECT_EQ(area->first_unattached(), 1);
}

TEST(ShmWaits, AWaitForTheTurnNamesNoRankButFailsWithTheCommunicator) {
  Segment seg(2);
  Rank r0(0, 2, seg);
  auto first = r0.start("barrier", &shm_barrier, Args{});
  auto second = r0.start("barrier", &shm_barrier, Args{});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(second->wait(30ms).code(), Errc::Timeout);
  r0.links.lose(1);
  EXPECT_EQ(first->wait(10s).code(), Errc::ConnectionLost);
  const Status st = second->wait(10s);
  EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
  EXPECT_NE(st.message().find("failed because"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace orbite::coll
