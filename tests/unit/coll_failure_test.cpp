// A failed collective's messages: the executor keeps the ones still in flight alive (their
// buffers with them) after it reported the failure, and marks its receives passive, since no one
// waits for them any more and the peers they expected were told to stop: an unmatched one must
// not hold the engine's close() until its timeout (the fault campaign's rounds did, 10 s each).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "coll/algorithms.h"
#include "coll/executor.h"
#include "p2p/request.h"

namespace orbite::coll {
namespace {

using namespace std::chrono_literals;

// The executor's reserved tags (the failure watch's abort and hello) are the topmost ones.
constexpr std::int32_t kReservedTags = 0x7ffffff0;

// Rank 0's messages, kept as posted: nothing completes unless the test completes it.
struct Recorder {
  struct Posted {
    std::shared_ptr<detail::RequestState> state;
    bool send = false;
    std::int32_t tag = 0;
  };
  std::mutex mu;
  std::vector<Posted> posted;

  Poster poster() {
    return [this](bool send, void*, std::uint64_t, int, std::int32_t tag, bool passive,
                  bool) -> Result<Request> {
      auto s = detail::make_request_state();
      s->kind = send ? detail::OpKind::Send : detail::OpKind::Recv;
      s->passive = passive;
      std::lock_guard lock(mu);
      posted.push_back(Posted{s, send, tag});
      return detail::RequestAccess::make(s);
    };
  }
};

TEST(CollFailure, AFailedCollectivesReceivesStillPostedBecomePassive) {
  Recorder rec;
  auto executor = std::make_shared<Executor>(0, 2, rec.poster());
  std::vector<float> in(4096, 1.0f), out(4096, 0.0f);
  Args a;
  a.in = reinterpret_cast<const std::byte*>(in.data());
  a.out = reinterpret_cast<std::byte*>(out.data());
  a.count = in.size();
  a.chunk_bytes = 1024;  // several receives posted ahead
  auto req = executor->start("all_reduce", &ring_all_reduce, a, 0);
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  executor->poll();
  // The ring's first receive fails (a message that did not fit, a rail error); the receives it
  // posted ahead stay unmatched, as do its sends.
  std::vector<std::shared_ptr<detail::RequestState>> receives;
  {
    std::lock_guard lock(rec.mu);
    bool failed_one = false;
    for (const auto& p : rec.posted) {
      // The ring's own receives: not the failure watch nor the hellos (reserved tags).
      if (p.send || p.tag >= kReservedTags) continue;
      if (!failed_one) {
        detail::complete_request(*p.state, Status::error(Errc::ConnectionLost, "a rail failed"));
        failed_one = true;
      } else {
        receives.push_back(p.state);
      }
    }
    ASSERT_TRUE(failed_one) << "the ring posted no receive";
  }
  ASSERT_FALSE(receives.empty()) << "the ring posted no receive before its first send failed";
  const Status st = req->wait(20s);
  EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
  for (const auto& r : receives) {
    EXPECT_EQ(r->phase.load(), 0) << "a receive nobody completed ended";
    EXPECT_TRUE(r->passive.load()) << "a receive of the failed collective still holds close()";
  }
  // The messages keep the failed op (and its scratch) alive until they end; end them.
  std::lock_guard lock(rec.mu);
  for (const auto& p : rec.posted) {
    detail::complete_request(*p.state, Status::error(Errc::Cancelled, "the engine closed"));
  }
}

}  // namespace
}  // namespace orbite::coll
