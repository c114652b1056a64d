// Helpers shared by the RDMA integration tests on softverbs (rdma_test.cpp, rdma_setup_test.cpp):
// the environment that points a rank at softverbs, running the probe's ranks under orbite-run,
// and the PASS check.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "../support/subprocess.h"

namespace orbite::rdma_test {

using namespace std::chrono_literals;
using testing::count_of;
using testing::Outcome;

inline std::map<std::string, std::string> softverbs_env(
    std::map<std::string, std::string> extra = {}) {
  extra.insert({"LD_LIBRARY_PATH", ORBITE_SOFTVERBS_DIR});
  // A default config: one soft_0 on 127.0.0.1 (unless a case names a file).
  extra.insert({"SOFTVERBS_CONFIG", ""});
  extra.insert({"ORBITE_RDMA_ENABLE", "on"});
  return extra;
}

inline std::string pass_line(int rank, const std::string& scenario) {
  return "rank " + std::to_string(rank) + ": PASS " + scenario + "\n";
}

inline Outcome run_ranks(const std::string& scenario, const std::map<std::string, std::string>& env,
                         int ranks = 2, std::chrono::seconds bound = 180s) {
  const std::vector<std::string> args = {
      ORBITE_RUN_BIN,    "-n",        std::to_string(ranks),
      "--tag-output",    "--timeout", std::to_string((bound - 15s).count()),
      "--kill-grace",    "3",         "--",
      ORBITE_RDMA_PROBE, scenario};
  return testing::run_program(args, bound, softverbs_env(env));
}

// Two ranks of the probe, each reading its own softverbs config, DIR/rank<N>.json (ORBITE_RANK
// picks it), so that the two ends of a rail can differ.
inline Outcome run_per_rank_configs(const std::string& dir, const std::string& scenario,
                                    const std::map<std::string, std::string>& env) {
  const std::vector<std::string> args = {
      ORBITE_RUN_BIN,
      "-n",
      "2",
      "--tag-output",
      "--timeout",
      "165",
      "--kill-grace",
      "3",
      "--",
      "/bin/sh",
      "-c",
      "SOFTVERBS_CONFIG=" + dir + "/rank$ORBITE_RANK.json exec " ORBITE_RDMA_PROBE " " + scenario};
  return testing::run_program(args, 180s, softverbs_env(env));
}

inline void expect_pass(const Outcome& o, const std::string& scenario, int ranks = 2) {
  const std::string shown = "\n--- stdout\n" + o.out + "--- stderr\n" + o.err;
  EXPECT_EQ(o.status, 0) << scenario << shown;
  EXPECT_EQ(count_of(o.out, ": FAIL "), 0U) << shown;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(count_of(o.out, pass_line(r, scenario)), 1U) << "rank " << r << shown;
  }
}

// One run of the loader probe (a single process) with this environment.
inline Outcome loader(const std::map<std::string, std::string>& env,
                      std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {ORBITE_RDMA_LOADER_PROBE};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run_program(argv, 60s, env);
}

}  // namespace orbite::rdma_test
