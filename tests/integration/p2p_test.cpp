// Point-to-point send/recv and put/get between real processes: each scenario of
// orbite-p2p-probe (tests/integration/p2p_probe*.cpp) runs under orbite-run for each transport.
// The probe checks bytes and error codes itself and prints one PASS line per rank; this test
// requires every rank's PASS, no FAIL and a zero exit. Every run is bounded (orbite-run's --timeout
// first, the child's bound behind it), so a hang fails the test instead of hanging ctest.
#include <gtest/gtest.h>

#include <orbite/bootstrap.h>
#include <orbite/store.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../support/direct_ranks.h"
#include "../support/subprocess.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::count_of;
using testing::Outcome;

std::string pass_line(int rank, const std::string& scenario) {
  return "rank " + std::to_string(rank) + ": PASS " + scenario + "\n";
}

// The parameter is P2P_TEST_TRANSPORT: unspec (shm between local ranks), tcp, shm or rdma
// (softverbs' default NIC, where the build has softverbs), optionally with a variant: "+event"
// runs the engines event-driven, "+twocopy" turns single copy off. "unspec" between local ranks
// is shm; sanitizer builds skip it (CI time).
constexpr bool kSanitized = ORBITE_SANITIZED;

class P2p : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (kSanitized && GetParam() == "unspec") {
      GTEST_SKIP() << "sanitizer builds run shm, which unspec picks between local ranks (CI time)";
    }
    if (kSanitized && GetParam() == "rdma+event") {
      GTEST_SKIP() << "sanitizer builds run rdma with polling engines only (CI time)";
    }
  }

  [[nodiscard]] std::map<std::string, std::string> environment() const {
    const std::string& p = GetParam();
    std::map<std::string, std::string> env = {{"P2P_TEST_TRANSPORT", p.substr(0, p.find('+'))}};
    if (p.ends_with("+event")) env["ORBITE_PROGRESS_MODE"] = "event_driven";
    if (p.ends_with("+twocopy")) env["ORBITE_SHM_SINGLE_COPY"] = "false";
#ifdef ORBITE_SOFTVERBS_DIR
    if (p.starts_with("rdma")) {
      env["LD_LIBRARY_PATH"] = ORBITE_SOFTVERBS_DIR;
      env["SOFTVERBS_CONFIG"] = "";  // one soft_0 on 127.0.0.1
      env["ORBITE_RDMA_ENABLE"] = "on";
    }
#endif
    return env;
  }

  // Returns the ranks' output.
  std::string run_scenario(const std::string& scenario, int ranks,
                           std::chrono::seconds bound = std::chrono::seconds(120),
                           bool route = true) {
    // orbite-run stops the ranks itself 15 s before the child's bound, so their output survives.
    const std::vector<std::string> args = {
        ORBITE_RUN_BIN,   "-n",        std::to_string(ranks),
        "--tag-output",   "--timeout", std::to_string((bound - 15s).count()),
        "--kill-grace",   "3",         "--",
        ORBITE_P2P_PROBE, scenario};
    Outcome o = testing::run_program(args, bound, environment());
    const std::string shown = "\n--- stdout\n" + o.out + "--- stderr\n" + o.err;
    EXPECT_EQ(o.status, 0) << scenario << " over " << GetParam() << shown;
    EXPECT_EQ(count_of(o.out, ": FAIL "), 0U) << shown;
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(count_of(o.out, pass_line(r, scenario)), 1U) << "rank " << r << shown;
      // The probe checked the per-transport counters of the route this parameter means.
      if (route) {
        EXPECT_EQ(count_of(o.out, "rank " + std::to_string(r) + ": route ok\n"), 1U)
            << "rank " << r << shown;
      }
    }
    return o.out;
  }
};

TEST_P(P2p, OrderingPerPeerAndTag) {
  run_scenario("ordering", 2);
}
TEST_P(P2p, ZeroByteMessages) {
  run_scenario("zero_bytes", 2);
}
TEST_P(P2p, TruncationFailsBothSidesAndWritesNothingOutside) {
  run_scenario("truncation", 2);
}
TEST_P(P2p, OddSizesAtUnalignedAddresses) {
  run_scenario("sizes", 2);
}
TEST_P(P2p, ManyOutstandingSendsBeforeTheReceives) {
  run_scenario("outstanding", 2);
}
TEST_P(P2p, AWindowOfReceivesIntoOneBufferCompletesWithOneMessageWhole) {
  run_scenario("same_buffer", 2);
}
TEST_P(P2p, BidirectionalRendezvousDoesNotDeadlock) {
  run_scenario("bidirectional", 2);
}
// Eight ranks on a small machine: slower, hence the larger bound. Sanitizer builds run it over
// tcp and shm only (the engine variants change nothing that eight ranks add).
TEST_P(P2p, AllToAllEightRanks) {
  if (kSanitized && GetParam() != "tcp" && GetParam() != "shm") {
    GTEST_SKIP() << "sanitizer builds run eight ranks over tcp and shm only (CI time)";
  }
  run_scenario("alltoall", 8, std::chrono::seconds(300));
}
TEST_P(P2p, SendToSelf) {
  run_scenario("self", 2);
}
TEST_P(P2p, PutGetBoundsRightsBatchesAndStaleDescriptors) {
  run_scenario("putget", 2);
}
TEST_P(P2p, UnregisterWhilePutsStreamIn) {
  run_scenario("unregister_busy", 2);
}

// A rank that sends and closes at once: what arrived whole is still received after the link is
// down (the scenario has no route check: rank 1 leaves before it could agree on one).
TEST_P(P2p, MessagesThatArrivedBeforeTheSenderLeftAreStillDelivered) {
  run_scenario("sender_left", 2, std::chrono::seconds(120), false);
}

// A receive from a peer that died before any connection fails instead of waiting forever.
TEST_P(P2p, AReceiveFromAPeerThatDiedBeforeConnectingFailsWithConnectionLost) {
  run_scenario("died_before_connecting", 2, std::chrono::seconds(120), false);
}

// Connections that cross, then both processes end without closing their engines: no
// shared-memory ring name of theirs stays in /dev/shm.
TEST_P(P2p, CrossedConnectionsLeaveNoRingNameBehindAProcessThatEndsWithoutClosing) {
  const std::string out = run_scenario("crossed_exit", 2, std::chrono::seconds(120), false);
  std::vector<std::string> prefixes;
  for (std::size_t at = out.find(": pid "); at != std::string::npos;
       at = out.find(": pid ", at + 1)) {
    prefixes.push_back("orbite-" + std::to_string(std::atoi(out.c_str() + at + 6)) + "-");
  }
  ASSERT_EQ(prefixes.size(), 2U) << out;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    for (const std::string& p : prefixes) {
      EXPECT_FALSE(name.starts_with(p)) << "left in /dev/shm: " << name << "\n" << out;
    }
  }
}

// Three ranks started by the test (tests/support/direct_ranks.h): orbite-run would stop the
// whole job when one rank dies.
TEST_P(P2p, KilledPeerFailsItsRequestsAndSparesTheOthers) {
  testing::DirectJob job =
      testing::start_direct_ranks(3, {ORBITE_P2P_PROBE, "killed_peer"}, environment());
  ASSERT_EQ(job.ranks.size(), 3U);
  auto& ranks = job.ranks;
  auto shown = [&] { return job.shown(); };

  Child& victim = *ranks[2];
  ASSERT_TRUE(victim.read_until(
      [&] { return victim.out().find("rank 2: streaming\n") != std::string::npos; }, 90s))
      << shown();
  ASSERT_EQ(::kill(victim.pid(), SIGKILL), 0);
  EXPECT_EQ(victim.wait(30s), 128 + SIGKILL) << shown();

  const int status0 = ranks[0]->wait(150s);
  const int status1 = ranks[1]->wait(60s);
  EXPECT_EQ(status0, 0) << shown();
  EXPECT_EQ(status1, 0) << shown();
  EXPECT_EQ(count_of(ranks[0]->out(), pass_line(0, "killed_peer")), 1U) << shown();
  EXPECT_EQ(count_of(ranks[1]->out(), pass_line(1, "killed_peer")), 1U) << shown();
  EXPECT_EQ(count_of(ranks[0]->out(), "rank 0: ConnectionLost from rank 2"), 1U) << shown();
}

INSTANTIATE_TEST_SUITE_P(Transports, P2p,
                         ::testing::Values("unspec", "tcp", "shm", "unspec+event", "shm+twocopy"
#ifdef ORBITE_SOFTVERBS_DIR
                                           ,
                                           "rdma", "rdma+event"
#endif
                                           ),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '+', '_');
                           return name;
                         });

}  // namespace
}  // namespace orbite
