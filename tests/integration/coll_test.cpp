// Collectives between real processes: each scenario of orbite-coll-probe
// (tests/integration/coll_probe.cpp) runs under orbite-run for rank counts 1, 2, 3, 4, 5 and 8
// and for each algorithm setting, with a small pipelining chunk so that the chunk boundaries are
// among the sizes the probe checks. The probe checks results itself and prints one PASS line per
// rank; this test requires every rank's PASS, no FAIL and a zero exit, within a bound.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <orbite/bootstrap.h>
#include <orbite/store.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
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
  // Small pieces and slots, so that the sizes the probe checks cross their boundaries.
  std::map<std::string, std::string> env = {{"ORBITE_COLL_CHUNK_BYTES", "4096"},
                                            {"ORBITE_COLL_PIPELINE_DEPTH", "2"},
                                            {"ORBITE_COLL_SHM_SLOT_BYTES", "4096"}};
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
  } else if (setting.starts_with("hosts")) {
    // "hosts2": rank r claims host r % 2, and the collectives that have it run hierarchically
    // at every size (the rule takes them from 1 MiB only).
    env["COLL_PROBE_HOSTS"] = setting.substr(5);
    env["ORBITE_ALGO"] = "hierarchical";
  } else if (setting != "auto") {
    env["ORBITE_ALGO"] = setting;
  }
  return env;
}

// orbite-run starting `ranks` probes of `scenario`, stopping them 15 s before the test's `bound`,
// after `prefix` (a command that execs the rest).
std::vector<std::string> probe_command(const std::string& scenario, int ranks,
                                       std::chrono::seconds bound,
                                       std::vector<std::string> prefix = {}) {
  for (std::string a :
       {std::string(ORBITE_RUN_BIN), std::string("-n"), std::to_string(ranks),
        std::string("--tag-output"), std::string("--timeout"),
        std::to_string((bound - 15s).count()), std::string("--kill-grace"), std::string("3"),
        std::string("--"), std::string(ORBITE_COLL_PROBE), scenario}) {
    prefix.push_back(std::move(a));
  }
  return prefix;
}

void run_probe(const std::string& scenario, int ranks,
               const std::map<std::string, std::string>& env, std::chrono::seconds bound = 300s) {
  const std::vector<std::string> args = probe_command(scenario, ranks, bound);
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
// collective ("shm": the shared segment wherever a collective has it; "ring,chain": ring
// all_reduce/all_gather, chain broadcast/reduce), or run the rule over tcp only (no segment), or
// with event-driven engines.
class CollMatrix : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(CollMatrix, EveryCollectiveTypeOpSizeAndPlacementMatchesTheHostReference) {
  const auto& [setting, ranks] = GetParam();
  if (kSanitized && setting != "auto" &&
      ((setting != "ring,chain" && setting != "shm" && setting != "hosts2") ||
       (ranks != 2 && ranks != 3))) {
    GTEST_SKIP() << "sanitizer builds run the auto setting, and ring,chain, shm and hosts2 on 2 "
                    "and 3 ranks (CI time)";
  }
  run_probe("matrix", ranks, settings_env(setting));
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollMatrix,
                         ::testing::Combine(::testing::Values("auto", "shm", "ring,chain",
                                                              "recursive_doubling,binomial,bruck",
                                                              "tcp", "event", "hierarchical",
                                                              "hosts2", "hosts3"),
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

// "ring": the ring's messages over the shm transport (the rule would take the segment: 16 MiB on
// four ranks is within kShmMax, and ranks that outnumber the cores take it at every size).
// "tcp": the rule's algorithm over tcp (no segment). "shm": the three wait in the shared
// segment for the fourth's flag, and hear of its death through its lost link (the failure
// names the segment). "hosts2": a hierarchical all_reduce on
// two "hosts" ({0, 2} and {1, 3}); the fourth's leader waits for it in their host's segment.
TEST_P(CollKilled, RankKilledMidAllReduceFailsEveryOtherRankWithConnectionLost) {
  constexpr int kRanks = 4;
  std::map<std::string, std::string> env = settings_env(GetParam());
  env.erase("ORBITE_COLL_CHUNK_BYTES");
  testing::DirectJob job =
      testing::start_direct_ranks(kRanks, {ORBITE_COLL_PROBE, "killed_rank"}, env);
  ASSERT_EQ(job.ranks.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(job.ranks.back()->wait(120s), 128 + SIGKILL) << job.shown();
  // The ranks that saw the death themselves name the segment; the others hear of it from them.
  std::size_t segment_named = 0;
  for (int r = 0; r + 1 < kRanks; ++r) {
    // Bounded well below the probe's own wait bound (60 s): detection is not a timeout.
    EXPECT_EQ(job.ranks[static_cast<size_t>(r)]->wait(45s), 0) << "rank " << r << job.shown();
    const std::string& out = job.ranks[static_cast<size_t>(r)]->out();
    EXPECT_EQ(count_of(out, "rank " + std::to_string(r) + ": ConnectionLost after"), 1U)
        << job.shown();
    EXPECT_EQ(count_of(out, "rank " + std::to_string(r) + ": PASS killed_rank"), 1U) << job.shown();
    segment_named += count_of(out, "waited for it in the communicator's shared segment");
  }
  if (GetParam() == "shm" || GetParam() == "hosts2") {
    EXPECT_GE(segment_named, 1U) << job.shown();
  } else {
    EXPECT_EQ(segment_named, 0U) << job.shown();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CollKilled, ::testing::Values("ring", "tcp", "shm", "hosts2"));

// The route of the collectives that have an shm algorithm: the shared segment moves their bytes
// (the engine sends next to nothing), and with the segment off (coll.shm_slot_bytes = 0) the
// engine carries them: the probe checks the engine's byte counters either way.
class CollRoute : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(CollRoute, SegmentCollectivesMoveNoBytesThroughTheEngine) {
  const auto& [expect, ranks] = GetParam();
  std::map<std::string, std::string> env = settings_env("auto");
  env["COLL_PROBE_EXPECT"] = expect;
  if (expect == "segment") {
    env["ORBITE_ALGO"] = "shm";
  } else {
    env["ORBITE_COLL_SHM_SLOT_BYTES"] = "0";
  }
  run_probe("route", ranks, env);
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollRoute,
                         ::testing::Values(std::tuple{"segment", 2}, std::tuple{"segment", 3},
                                           std::tuple{"messages", 3}),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, int>>& p) {
                           return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param));
                         });

// The hierarchical collectives on "hosts" that are ranks claiming different host identities: the
// ranks that lead no host move their bytes through their host's segment, the leaders over
// messages (the probe checks the engine's byte counters of each).
class CollHierarchicalRoute : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CollHierarchicalRoute, OnlyTheHostsLeadersSendBytes) {
  const auto& [hosts, ranks] = GetParam();
  std::map<std::string, std::string> env = settings_env("hosts" + std::to_string(hosts));
  env.erase("ORBITE_ALGO");  // the rule's choice: the probe's 1 MiB collectives nest
  Outcome o = testing::run_program(probe_command("hierarchical_route", ranks, 255s), 255s, env);
  const std::string shown = "\n--- stdout\n" + o.out + "--- stderr\n" + o.err;
  ASSERT_EQ(o.status, 0) << shown;
  for (int r = 0; r < ranks; ++r) {
    const std::string role = r < hosts ? "leader" : "in its host";
    EXPECT_EQ(count_of(o.out, "rank " + std::to_string(r) + ": route hierarchical ok (" + role), 1U)
        << "rank " << r << shown;
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollHierarchicalRoute,
                         ::testing::Values(std::tuple{2, 4}, std::tuple{2, 5}),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& p) {
                           return std::to_string(std::get<0>(p.param)) + "hosts_" +
                                  std::to_string(std::get<1>(p.param)) + "ranks";
                         });

// /dev/shm names "orbite-coll-<creator pid>-..." of these pids.
// Names in /dev/shm that start with `kind` and one of the pids, then "-".
std::vector<std::string> names_of(const std::vector<pid_t>& pids, const std::string& kind) {
  std::vector<std::string> found;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (dirent* e = ::readdir(dir)) {
    for (pid_t pid : pids) {
      if (std::string(e->d_name).starts_with(kind + std::to_string(pid) + "-")) {
        found.emplace_back(e->d_name);
      }
    }
  }
  ::closedir(dir);
  return found;
}

std::vector<std::string> segment_names_of(const std::vector<pid_t>& pids) {
  return names_of(pids, "orbite-coll-");
}

// The segment has no name once the communicator is set up, so a job whose every rank is
// SIGKILLed leaves nothing in /dev/shm; and a name a creator that died during setup left behind
// is removed by the next creator on the host.
// A rank that cannot attach the segment (here: its slot size differs from the creator's, so the
// segment it opens has the wrong size) marks nothing; every rank then sees the mark missing and
// all of them run the collectives over messages, with correct results (the probe checks the
// values and that the engine carried the bytes).
TEST(CollSegment, ARankThatCannotAttachSendsEveryRankToMessages) {
  for (const int odd_one : {0, 2}) {
    std::map<std::string, std::string> env = settings_env("auto");
    env["COLL_PROBE_EXPECT"] = "messages";
    env["COLL_PROBE_RANK_ENV"] = std::to_string(odd_one) + ":ORBITE_COLL_SHM_SLOT_BYTES=8192";
    run_probe("route", 3, env);
  }
}

// A /dev/shm too small for the segment (a container's is 64 MiB by default; here a 3 MiB tmpfs
// in a mount namespace, room for the shm transport's two 1 MiB rings but not for the default
// segment's 8 MiB): the creator's sizing fails with ENOSPC, every rank runs the collectives
// over messages with correct results, and no rank dies of SIGBUS touching pages tmpfs cannot
// give (which is what sizing the object without reserving its pages led to).
TEST(CollSegment, ADevShmTooSmallForTheSegmentSendsEveryRankToMessages) {
  if (testing::run_program({"unshare", "-m", "true"}, 30s, {}).status != 0) {
    GTEST_SKIP() << "'unshare -m' failed: needs CAP_SYS_ADMIN (CI runs as root and runs this)";
  }
  std::map<std::string, std::string> env = settings_env("auto");
  env.erase("ORBITE_COLL_SHM_SLOT_BYTES");  // the default slots
  env["COLL_PROBE_EXPECT"] = "messages";
  env["ORBITE_LOG_LEVEL"] = "info";
  const std::vector<std::string> small_dev_shm = {
      "unshare",
      "-m",
      "--propagation",
      "private",
      "sh",
      "-c",
      "mount -t tmpfs -o size=3m tmpfs /dev/shm && exec \"$0\" \"$@\""};
  Outcome o = testing::run_program(probe_command("route", 2, 135s, small_dev_shm), 135s, env);
  const std::string shown = "\n--- stdout\n" + o.out + "--- stderr\n" + o.err;
  ASSERT_EQ(o.status, 0) << shown;
  EXPECT_EQ(count_of(o.out + o.err, "No space left on device); they run over messages"), 1U)
      << shown;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(count_of(o.out, "rank " + std::to_string(r) + ": PASS route\n"), 1U) << shown;
  }
}

TEST(CollSegment, NoNameOutlivesSetupAndAStaleOneIsRemoved) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string stale = "/dev/shm/orbite-coll-" + std::to_string(dead) + "-00000000deadbeef";
  const int fd = ::open(stale.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << stale << ": " << std::strerror(errno);
  ::close(fd);

  constexpr int kRanks = 3;
  std::map<std::string, std::string> env = settings_env("auto");
  env["ORBITE_ALGO"] = "shm";
  testing::DirectJob job =
      testing::start_direct_ranks(kRanks, {ORBITE_COLL_PROBE, "segment_held"}, env);
  ASSERT_EQ(job.ranks.size(), static_cast<size_t>(kRanks));
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    auto& rank = *job.ranks[static_cast<size_t>(r)];
    pids.push_back(rank.pid());
    const std::string line = "rank " + std::to_string(r) + ": holding the segment";
    ASSERT_TRUE(rank.read_until([&] { return count_of(rank.out(), line) == 1; }, 60s))
        << job.shown();
  }
  EXPECT_EQ(segment_names_of(pids), std::vector<std::string>{}) << "named while in use";
  EXPECT_NE(::access(stale.c_str(), F_OK), 0) << stale << " was not removed";
  for (auto& rank : job.ranks) ::kill(rank->pid(), SIGKILL);
  for (auto& rank : job.ranks) EXPECT_EQ(rank->wait(30s), 128 + SIGKILL) << job.shown();
  EXPECT_EQ(segment_names_of(pids), std::vector<std::string>{});
  ::unlink(stale.c_str());
  // Killed together, the ranks may leave the rings of handshakes they had not finished (both
  // ends died inside one: docs/transports.md); this test made them, so it removes them.
  for (const std::string& name : names_of(pids, "orbite-")) ::unlink(("/dev/shm/" + name).c_str());
}

}  // namespace
}  // namespace orbite
