// Collectives between real processes: each scenario of orbite-coll-probe
// (tests/integration/coll_probe.cpp) runs under orbite-run for rank counts 1, 2, 3, 4, 5 and 8
// and for each algorithm setting, with a small pipelining chunk so that the chunk boundaries are
// among the sizes the probe checks. The probe checks results itself and prints one PASS line per
// rank; this test requires every rank's PASS, no FAIL and a zero exit, within a bound.
#include <gtest/gtest.h>

#include <orbite/bootstrap.h>
#include <orbite/store.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../support/direct_ranks.h"
#include "../support/subprocess.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::count_of;
using testing::Outcome;

// Sanitizer builds run the matrix's reduced form (every collective, type and size; the five ops
// on a subset of types) under the size rule on every rank count, and with ring/chain forced on 2
// and 3 ranks, which keeps CI in its budget.
constexpr bool kSanitized = ORBITE_SANITIZED;

std::map<std::string, std::string> settings_env(const std::string& setting) {
  std::map<std::string, std::string> env = {{"ORBITE_COLL_CHUNK_BYTES", "4096"},
                                            {"ORBITE_COLL_PIPELINE_DEPTH", "2"}};
  if (kSanitized) env["COLL_PROBE_QUICK"] = "1";
  if (setting == "tcp") {
    env["ORBITE_SHM_ENABLE"] = "false";
  } else if (setting == "event") {
    env["ORBITE_PROGRESS_MODE"] = "event_driven";
  } else if (setting.starts_with("rdma")) {
#ifdef ORBITE_SOFTVERBS_DIR
    env["LD_LIBRARY_PATH"] = ORBITE_SOFTVERBS_DIR;
    env["SOFTVERBS_CONFIG"] = "";  // one soft_0 on 127.0.0.1
    env["ORBITE_RDMA_ENABLE"] = "on";
    env["ORBITE_COLL_TRANSPORT"] = "rdma";
    env["COLL_PROBE_ROUTE"] = "rdma";
    if (setting.ends_with("+event")) env["ORBITE_PROGRESS_MODE"] = "event_driven";
#endif
  } else if (setting != "auto") {
    env["ORBITE_ALGO"] = setting;
  }
  return env;
}

void run_probe(const std::string& scenario, int ranks,
               const std::map<std::string, std::string>& env, std::chrono::seconds bound = 300s) {
  const std::vector<std::string> args = {
      ORBITE_RUN_BIN,    "-n",        std::to_string(ranks),
      "--tag-output",    "--timeout", std::to_string((bound - 15s).count()),
      "--kill-grace",    "3",         "--",
      ORBITE_COLL_PROBE, scenario};
  Outcome o = testing::run_program(args, bound, env);
  const std::string shown = "\n--- stdout\n" + o.out + "--- stderr\n" + o.err;
  EXPECT_EQ(o.status, 0) << scenario << " on " << ranks << " ranks" << shown;
  EXPECT_EQ(count_of(o.out, ": FAIL "), 0U) << shown;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(count_of(o.out, "rank " + std::to_string(r) + ": PASS " + scenario + "\n"), 1U)
        << "rank " << r << shown;
    if (env.count("COLL_PROBE_ROUTE") != 0 && ranks > 1) {
      EXPECT_EQ(count_of(o.out, "rank " + std::to_string(r) + ": route rdma ok"), 1U)
          << "rank " << r << shown;
    }
  }
}

// (algorithm setting, ranks). "auto" is the size rule; the others force one algorithm per
// collective ("ring,chain": ring all_reduce/all_gather, chain broadcast/reduce), or run the rule
// over tcp only, or with event-driven engines.
class CollMatrix : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(CollMatrix, EveryCollectiveTypeOpSizeAndPlacementMatchesTheHostReference) {
  const auto& [setting, ranks] = GetParam();
  if (kSanitized && setting != "auto" && (setting != "ring,chain" || (ranks != 2 && ranks != 3))) {
    GTEST_SKIP() << "sanitizer builds run the auto setting, and ring,chain on 2 and 3 ranks (CI "
                    "time)";
  }
  run_probe("matrix", ranks, settings_env(setting));
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollMatrix,
                         ::testing::Combine(::testing::Values("auto", "ring,chain",
                                                              "recursive_doubling,binomial,bruck",
                                                              "tcp", "event"),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, int>>& p) {
                           std::string name =
                               std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param));
                           std::replace(name.begin(), name.end(), ',', '_');
                           return name;
                         });

// Sanitizer builds run these on 2, 3 and 5 ranks (a power of two, the smallest odd count and a
// non-power-of-two fold): eight ranks under a sanitizer on two cores cost minutes of CI.
class CollScenario : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (kSanitized && GetParam() != 2 && GetParam() != 3 && GetParam() != 5) {
      GTEST_SKIP() << "sanitizer builds run the scenarios on 2, 3 and 5 ranks (CI time)";
    }
  }
};

TEST_P(CollScenario, SplitDupAndOutstandingCollectivesRunConcurrently) {
  run_probe("concurrent", GetParam(), settings_env("auto"));
}

TEST_P(CollScenario, LocallyDetectableErrorsAreInvalidArgumentAndChangeNothing) {
  run_probe("invalid", GetParam(), settings_env("auto"));
}

TEST_P(CollScenario, FloatResultsAreBitIdenticalAcrossRanksAndRuns) {
  run_probe("determinism", GetParam(), settings_env("auto"));
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollScenario, ::testing::Values(1, 2, 3, 4, 5, 8));

#ifdef ORBITE_SOFTVERBS_DIR
// Every collective of the matrix over RDMA (coll.transport = rdma on softverbs' default NIC), on
// four ranks, polling and event-driven; the probe checks that RDMA carried every message.
class CollRdma : public ::testing::TestWithParam<std::string> {};

TEST_P(CollRdma, EveryCollectiveOfTheMatrixRunsOverRdma) {
  if (kSanitized) {
    GTEST_SKIP() << "sanitizer builds leave the 4-rank RDMA matrix to the default build (CI "
                    "time); p2p_test's rdma column runs the RDMA frames and rendezvous there";
  }
  const std::map<std::string, std::string> env = settings_env(GetParam());
  run_probe("matrix", 4, env);
}

INSTANTIATE_TEST_SUITE_P(Transports, CollRdma, ::testing::Values("rdma", "rdma+event"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '+', '_');
                           return name;
                         });
#endif

// Four ranks started by the test (tests/support/direct_ranks.h). Three ranks are in the middle
// of a 16 MiB all_reduce that cannot finish without the fourth, which kills itself; the three
// must fail with ConnectionLost.
class CollKilled : public ::testing::TestWithParam<std::string> {};

TEST_P(CollKilled, RankKilledMidAllReduceFailsEveryOtherRankWithConnectionLost) {
  constexpr int kRanks = 4;
  std::map<std::string, std::string> env = settings_env(GetParam());
  env.erase("ORBITE_COLL_CHUNK_BYTES");
  testing::DirectJob job =
      testing::start_direct_ranks(kRanks, {ORBITE_COLL_PROBE, "killed_rank"}, env);
  ASSERT_EQ(job.ranks.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(job.ranks.back()->wait(120s), 128 + SIGKILL) << job.shown();
  for (int r = 0; r + 1 < kRanks; ++r) {
    // Bounded well below the probe's own wait bound (60 s): detection is not a timeout.
    EXPECT_EQ(job.ranks[static_cast<size_t>(r)]->wait(45s), 0) << "rank " << r << job.shown();
    const std::string& out = job.ranks[static_cast<size_t>(r)]->out();
    EXPECT_EQ(count_of(out, "rank " + std::to_string(r) + ": ConnectionLost after"), 1U)
        << job.shown();
    EXPECT_EQ(count_of(out, "rank " + std::to_string(r) + ": PASS killed_rank"), 1U) << job.shown();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CollKilled, ::testing::Values("auto", "tcp"));

}  // namespace
}  // namespace orbite
