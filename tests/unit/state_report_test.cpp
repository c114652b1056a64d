// The state report (TransferEngine::state_report, docs/hangs.md) of two communicators in this
// process: it names a stalled receive with its peer rank and tag, a message no receive took, a
// collective one rank never joined, and a lane whose mutex stays held; and once the job moves
// again, those lines are gone.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <regex>
#include <thread>
#include <vector>

#include <orbite/communicator.h>
#include <orbite/store.h>
#include <orbite/transfer.h>

#include "../support/local_comms.h"
#include "proxy/engine_core.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;

class StateReport : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig config;
    config.tcp.interface = "lo";
    config.bootstrap.timeout = 30s;
    comms_ = testing::local_communicators(2, config);
    ASSERT_EQ(comms_.size(), 2U);
  }
  std::string report_of(int rank) {
    return comms_[static_cast<size_t>(rank)].engine().state_report();
  }
  static bool has(const std::string& text, const std::string& pattern) {
    return std::regex_search(text, std::regex(pattern));
  }
  std::vector<Communicator> comms_;
};

TEST_F(StateReport, NamesTheStalledReceiveTheUnmatchedMessageAndTheCollective) {
  std::vector<char> into(4096), message(100, 'm'), later(4096, 'l');
  std::vector<float> values(256, 1.0f), theirs(256, 2.0f);
  auto stalled = comms_[0].irecv(into.data(), into.size(), 1, 42);
  ASSERT_TRUE(stalled.ok()) << stalled.status().to_string();
  auto unmatched = comms_[1].isend(message.data(), message.size(), 0, 7);
  ASSERT_TRUE(unmatched.ok()) << unmatched.status().to_string();
  ASSERT_TRUE(comms_[0].probe(1, 7, 20s).ok());  // it waits at rank 0 now
  auto alone = comms_[1].all_reduce(values.data(), values.data(), values.size(), DataType::Float32,
                                    ReduceOp::Sum);
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();

  const std::string zero = report_of(0);
  EXPECT_TRUE(has(zero,
                  "posted receive \\(no message matched it yet\\): comm 0x[0-9a-f]{8} "
                  "tag 42 from rank 1 [0-9a-f]{8}, 4096 B, for [0-9.]+ s"))
      << zero;
  EXPECT_TRUE(has(zero,
                  "unexpected message \\(no receive posted for it\\): eager comm "
                  "0x[0-9a-f]{8} tag 7 from [0-9a-f]{8}, 100 B"))
      << zero;
  EXPECT_TRUE(has(zero, "communicator \"[^\"]*\": rank 0 of 2")) << zero;
  const std::string one = report_of(1);
  EXPECT_TRUE(has(one,
                  "collective all_reduce #[0-9]+ \\(tag [0-9]+\\): running for [0-9.]+ s, "
                  "step [0-9]+"))
      << one;
  EXPECT_TRUE(has(one, "collectives: [0-9]+ started, 1 in flight")) << one;
  EXPECT_FALSE(has(one, "tag 42")) << one;

  // The job moves again: every line above goes.
  auto late = comms_[1].isend(later.data(), later.size(), 0, 42);
  auto taken = comms_[0].irecv(message.data(), message.size(), 1, 7);
  auto joined = comms_[0].all_reduce(theirs.data(), theirs.data(), theirs.size(), DataType::Float32,
                                     ReduceOp::Sum);
  ASSERT_TRUE(late.ok() && taken.ok() && joined.ok());
  for (Request* r : {&*stalled, &*unmatched, &*alone, &*late, &*taken, &*joined}) {
    ASSERT_TRUE(r->wait(30s).ok());
  }
  EXPECT_EQ(into, later);
  EXPECT_EQ(values[0], 3.0f);
  const std::string after = report_of(0);
  EXPECT_FALSE(has(after, "posted receive|unexpected message")) << after;
  EXPECT_TRUE(has(report_of(1), "collectives: [0-9]+ started, 0 in flight")) << report_of(1);
}

TEST_F(StateReport, ALaneWhoseMutexStaysHeldIsReportedNotWaitedFor) {
  std::string text;
  {
    auto held = detail::EngineCore::hold_lanes(comms_[0].engine());
    text = report_of(0);
  }
  EXPECT_TRUE(has(text, "lane 0: its mutex stayed held for 0.5 s")) << text;
  EXPECT_TRUE(has(report_of(0), "lane 0: [0-9]+ pass\\(es\\)")) << report_of(0);
}

}  // namespace
}  // namespace orbite
