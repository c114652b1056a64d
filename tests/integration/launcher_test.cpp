// orbite-run: the argument parser as a function, then the real binary supervising real ranks
// (tests/integration/rank_probe.cpp). Every wait is bounded; a hung launcher fails the test and is
// killed rather than hanging ctest.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/subprocess.h"
#include "bootstrap/launcher.h"

namespace orbite::launcher {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::count_of;
using testing::Outcome;
using testing::SteadyClock;
using testing::TempDir;

Outcome run_orbite(std::vector<std::string> args, std::chrono::milliseconds bound = 60s) {
  args.insert(args.begin(), ORBITE_RUN_BIN);
  return testing::run_program(args, bound);
}

std::string probe() {
  return ORBITE_RANK_PROBE;
}

// Whether `pid` is gone (or a zombie waiting for a reaper that is not us) within the bound.
bool gone_soon(pid_t pid, std::chrono::milliseconds bound) {
  auto deadline = SteadyClock::now() + bound;
  do {
    errno = 0;
    if (::kill(pid, 0) == -1 && errno == ESRCH) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    auto paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z')
      return true;
    std::this_thread::sleep_for(20ms);
  } while (SteadyClock::now() < deadline);
  return false;
}

// ---------------------------------------------------------------------------------------------
// The parser

Result<LaunchOptions> parse(std::vector<std::string> args) {
  return parse_args(args);
}

TEST(LauncherArgs, RankCountSpellings) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"-n4", "prog"},
                                                                {"-n", "4", "prog"},
                                                                {"--np", "4", "prog"},
                                                                {"--np=4", "prog"},
                                                                {"-np", "4", "prog"},
                                                                {"-n=4", "prog"}}) {
    auto opts = parse(args);
    ASSERT_TRUE(opts.ok()) << args[0] << ": " << opts.status().to_string();
    EXPECT_EQ(opts->num_ranks, 4) << args[0];
    EXPECT_EQ(opts->command, std::vector<std::string>{"prog"});
  }
}

TEST(LauncherArgs, DefaultsAndAllOptions) {
  auto plain = parse({"-n", "2", "prog"});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->store, "");
  EXPECT_FALSE(plain->timeout.has_value());
  EXPECT_FALSE(plain->tag_output);
  EXPECT_EQ(plain->kill_grace, 5s);
  EXPECT_FALSE(plain->help);

  auto all = parse({"--tag-output", "--store", "127.0.0.1:0", "--timeout", "1.5",
                    "--kill-grace=0.25", "-n", "3", "prog", "a", "b"});
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(all->num_ranks, 3);
  EXPECT_EQ(all->store, "127.0.0.1:0");
  EXPECT_EQ(all->timeout, Duration(1500ms));
  EXPECT_EQ(all->kill_grace, Duration(250ms));
  EXPECT_TRUE(all->tag_output);
  EXPECT_EQ(all->command, (std::vector<std::string>{"prog", "a", "b"}));

  auto units = parse({"-n", "1", "--timeout=2m", "--kill-grace", "0", "prog"});
  ASSERT_TRUE(units.ok()) << units.status().to_string();
  EXPECT_EQ(units->timeout, Duration(120s));
  EXPECT_EQ(units->kill_grace, Duration::zero());
}

TEST(LauncherArgs, BindTo) {
  auto unset = parse({"-n", "2", "prog"});
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->bind_to_core.has_value());
  auto core = parse({"--bind-to", "core", "-n", "2", "prog"});
  ASSERT_TRUE(core.ok());
  EXPECT_EQ(core->bind_to_core, true);
  auto none = parse({"--bind-to=none", "-n", "2", "prog"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->bind_to_core, false);
  auto bad = parse({"--bind-to", "socket", "-n", "2", "prog"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::InvalidArgument);
  EXPECT_NE(bad.status().message().find("--bind-to"), std::string::npos);
  EXPECT_NE(bad.status().message().find("socket"), std::string::npos);
}

TEST(LauncherArgs, ProgramOptionsAreNotOurs) {
  // The first non-option starts the program; what follows is the program's.
  auto first = parse({"-n", "2", "prog", "--timeout", "5", "-n", "9"});
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->timeout.has_value());
  EXPECT_EQ(first->num_ranks, 2);
  EXPECT_EQ(first->command, (std::vector<std::string>{"prog", "--timeout", "5", "-n", "9"}));

  auto dashdash = parse({"-n", "2", "--", "-prog-with-dash", "--help"});
  ASSERT_TRUE(dashdash.ok());
  EXPECT_FALSE(dashdash->help);
  EXPECT_EQ(dashdash->command, (std::vector<std::string>{"-prog-with-dash", "--help"}));
}

TEST(LauncherArgs, Help) {
  for (const char* flag : {"--help", "-h"}) {
    auto opts = parse({flag});
    ASSERT_TRUE(opts.ok()) << flag;
    EXPECT_TRUE(opts->help);
  }
  std::string text = usage();
  for (const char* word : {"-n N", "--store", "--timeout", "--tag-output", "--kill-grace", "--",
                           "ORBITE_STORE", "ORBITE_RANK", "124", "127", "SIGKILL"}) {
    EXPECT_NE(text.find(word), std::string::npos) << word;
  }
}

TEST(LauncherArgs, ErrorsNameTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {{"-n", "0", "prog"}, {"-n", "'0'", "1 to 4096"}},
      {{"-n", "4097", "prog"}, {"-n", "'4097'"}},
      {{"-n", "abc", "prog"}, {"-n", "'abc'"}},
      {{"--np", "-3", "prog"}, {"--np", "'-3'"}},
      {{"-n"}, {"-n", "requires a value"}},
      {{"-n", "2", "--timeout"}, {"--timeout", "requires a value"}},
      {{"-n", "2", "--timeout", "0", "prog"}, {"--timeout", "'0'"}},
      {{"-n", "2", "--timeout", "soon", "prog"}, {"--timeout", "'soon'"}},
      {{"-n", "2", "--kill-grace", "-1", "prog"}, {"--kill-grace", "'-1'"}},
      {{"-n", "2", "--store", "nowhere", "prog"}, {"--store", "'nowhere'"}},
      {{"-n", "2", "--tag-output=yes", "prog"}, {"--tag-output", "takes no value"}},
      {{"-n", "2", "--bogus", "prog"}, {"unknown option", "'--bogus'"}},
      {{"-x", "prog"}, {"unknown option", "'-x'"}},
      {{"-n", "2"}, {"missing the program"}},
      {{"-n", "2", "--"}, {"missing the program"}},
      {{"prog"}, {"missing -n"}},
  };
  for (const Case& c : cases) {
    auto opts = parse(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    ASSERT_FALSE(opts.ok()) << joined;
    EXPECT_EQ(opts.status().code(), Errc::InvalidArgument) << joined;
    for (const auto& m : c.mentions) {
      EXPECT_NE(opts.status().message().find(m), std::string::npos)
          << joined << "-> " << opts.status().message() << " (expected to mention " << m << ")";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// run() in this process, with a shell as the rank program

TEST(LauncherRun, RanksGetTheirEnvironment) {
  LaunchOptions opts;
  opts.num_ranks = 3;
  opts.command = {
      "/bin/sh", "-c",
      "test \"$ORBITE_WORLD_SIZE\" = 3 && test \"$ORBITE_LOCAL_SIZE\" = 3 && "
      "test \"$ORBITE_RANK\" = \"$ORBITE_LOCAL_RANK\" && test \"$ORBITE_RANK\" -lt 3 && "
      "test -n \"$ORBITE_STORE\" && test -n \"$ORBITE_STORE_TOKEN\""};
  EXPECT_EQ(run(opts), 0);
}

TEST(LauncherRun, SignalledRankStopsTheWholeGroupOfTheOthers) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  LaunchOptions opts;
  opts.num_ranks = 3;
  opts.kill_grace = 2s;
  // The sleeps are the shells' children: only signalling process groups stops them.
  opts.command = {"/bin/sh", "-c",
                  "sleep 60 & echo $! > " + dir.path() +
                      "/sleep.$ORBITE_RANK.tmp && "
                      "mv " +
                      dir.path() + "/sleep.$ORBITE_RANK.tmp " + dir.path() +
                      "/sleep.$ORBITE_RANK; "
                      "if [ \"$ORBITE_RANK\" = 1 ]; then "
                      "  while [ ! -e " +
                      dir.path() + "/sleep.0 ] || [ ! -e " + dir.path() +
                      "/sleep.2 ]; do sleep 0.05; done; kill -KILL $$; "
                      "fi; wait"};
  auto start = SteadyClock::now();
  EXPECT_EQ(run(opts), 128 + SIGKILL);
  EXPECT_LT(SteadyClock::now() - start, 30s);
  // Rank 1's own leftover too: a failed rank's process group is stopped with the others.
  for (int r : {0, 1, 2}) {
    std::ifstream f(dir.path() + "/sleep." + std::to_string(r));
    pid_t pid = 0;
    ASSERT_TRUE(f >> pid) << "rank " << r << " wrote no pid";
    if (!gone_soon(pid, 5s)) {
      ADD_FAILURE() << "rank " << r << "'s child " << pid << " survived";
      ::kill(pid, SIGKILL);  // the shell's own sleep, not to be left behind by a failing test
    }
  }
}

TEST(LauncherRun, MissingProgramIs127) {
  LaunchOptions opts;
  opts.num_ranks = 2;
  opts.command = {"orbite-no-such-program-for-launcher-test"};
  EXPECT_EQ(run(opts), kExitCannotExecute);
}

// ---------------------------------------------------------------------------------------------
// The orbite-run binary with the rank probe

TEST(LauncherBinary, FourRanksShareOneStore) {
  Outcome o = run_orbite({"-n", "4", "--tag-output", "--", probe()});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  std::regex line(R"(^\[(\d+)\] rank=(\d+) size=(\d+) local_rank=(-?\d+) store=(\S*)$)");
  std::set<int> ranks;
  std::set<std::string> stores;
  std::istringstream in(o.out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    int prefix = std::stoi(m[1]);
    int rank = std::stoi(m[2]);
    EXPECT_EQ(prefix, rank) << l;
    EXPECT_EQ(m[3], "4") << l;
    EXPECT_EQ(std::stoi(m[4]), rank) << l;
    EXPECT_TRUE(ranks.insert(rank).second) << "rank printed twice: " << l;
    stores.insert(m[5]);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << o.out;
  ASSERT_EQ(stores.size(), 1U) << o.out;
  EXPECT_FALSE(stores.begin()->empty());
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(count_of(o.out, "[" + std::to_string(r) + "] count=4\n"), 1U) << o.out;
  }
}

TEST(LauncherBinary, FailingRankStopsTheOthersAndSetsTheStatus) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Outcome o = run_orbite({"-n", "4", "--kill-grace", "2", probe(), "--exit-rank", "1",
                          "--exit-code", "3", "--sleep", "60", "--pid-file", dir.path()});
  EXPECT_EQ(o.status, 3) << o.err;
  EXPECT_LT(o.elapsed, 30s) << "a bound, not a measurement";
  EXPECT_NE(o.err.find("exited with status 3; stopping the other ranks"), std::string::npos)
      << o.err;
  for (int r = 0; r < 4; ++r) {
    std::ifstream f(dir.path() + "/rank." + std::to_string(r) + ".pid");
    pid_t pid = 0;
    ASSERT_TRUE(f >> pid) << "no pid file for rank " << r;
    ASSERT_GT(pid, 0);
    errno = 0;
    EXPECT_TRUE(::kill(pid, 0) == -1 && errno == ESRCH)
        << "rank " << r << " (pid " << pid << ") is still alive";
    if (r == 1) {
      EXPECT_NE(o.err.find("rank 1 (pid " + std::to_string(pid) + ")"), std::string::npos) << o.err;
    }
  }
}

TEST(LauncherBinary, SigtermIsForwardedToTheRanks) {
  Child child({ORBITE_RUN_BIN, "-n", "4", "--tag-output", "--kill-grace", "10", probe(),
               "--on-term-print", "--sleep", "60"});
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(child.read_until([&] { return count_of(child.out(), " rank=") == 4; }, 30s))
      << child.out() << child.err();
  ASSERT_EQ(::kill(child.pid(), SIGTERM), 0);
  auto start = SteadyClock::now();
  int status = child.wait(30s);
  // The ranks exit 0 from their handlers well before the 10 s grace; the job was interrupted.
  EXPECT_EQ(status, 128 + SIGTERM) << child.err();
  EXPECT_LT(SteadyClock::now() - start, 8s) << "the ranks were SIGKILLed, not SIGTERMed";
  for (int r = 0; r < 4; ++r) {
    std::string rs = std::to_string(r);
    EXPECT_EQ(count_of(child.out(), "[" + rs + "] rank " + rs + " got SIGTERM\n"), 1U)
        << child.out();
  }
}

TEST(LauncherBinary, TimeoutExits124) {
  Outcome o =
      run_orbite({"-n", "2", "--timeout", "1", "--kill-grace", "1", probe(), "--sleep", "60"});
  EXPECT_EQ(o.status, kExitTimeout) << o.err;
  EXPECT_NE(o.err.find("orbite-run: timeout after 1 s; stopping 2 ranks"), std::string::npos)
      << o.err;
  EXPECT_LT(o.elapsed, 30s);
}

TEST(LauncherBinary, UnexecutableProgramExits127) {
  const std::string missing = "/nonexistent/orbite-no-such-program";
  Outcome o = run_orbite({"-n", "3", missing, "arg"});
  EXPECT_EQ(o.status, kExitCannotExecute) << o.err;
  EXPECT_NE(o.err.find("orbite-run: cannot execute '" + missing + "': No such file or directory"),
            std::string::npos)
      << o.err;
}

TEST(LauncherBinary, TagOutputKeepsStreamsApartAndFlushesPartialLines) {
  Outcome o = run_orbite({"-n", "2", "--tag-output", "/bin/sh", "-c",
                          "echo \"out $ORBITE_RANK\"; echo \"err $ORBITE_RANK\" >&2; "
                          "printf 'tail %s' \"$ORBITE_RANK\""});
  ASSERT_EQ(o.status, 0) << o.err;
  for (const std::string r : {"0", "1"}) {
    EXPECT_EQ(count_of(o.out, "[" + r + "] out " + r + "\n"), 1U) << o.out;
    EXPECT_EQ(count_of(o.out, "[" + r + "] tail " + r + "\n"), 1U) << o.out;
    EXPECT_EQ(count_of(o.err, "[" + r + "] err " + r + "\n"), 1U) << o.err;
    EXPECT_EQ(count_of(o.out, "err " + r), 0U) << o.out;
  }
}

// --bind-to core gives each rank one CPU of orbite-run's mask, a different one per rank while
// they fit; --bind-to none leaves them the whole mask.
TEST(LauncherBinary, BindToCorePinsEachRankToItsOwnCpu) {
  cpu_set_t mask;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mask), &mask), 0);
  const int cpus = CPU_COUNT(&mask);
  const std::vector<std::string> show = {"sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  auto run = [&](const char* mode) {
    std::vector<std::string> args = {"-n", "2", "--tag-output", "--bind-to", mode, "--"};
    args.insert(args.end(), show.begin(), show.end());
    return run_orbite(args);
  };
  auto allowed = [](const std::string& out, int rank) {
    std::regex line("\\[" + std::to_string(rank) + "\\] Cpus_allowed_list:\\s*(\\S+)");
    std::smatch m;
    return std::regex_search(out, m, line) ? m[1].str() : std::string("?");
  };
  Outcome core = run("core");
  ASSERT_EQ(core.status, 0) << core.err;
  const std::string r0 = allowed(core.out, 0);
  const std::string r1 = allowed(core.out, 1);
  EXPECT_EQ(r0.find_first_of(",-"), std::string::npos) << "rank 0 allowed " << r0;
  EXPECT_EQ(r1.find_first_of(",-"), std::string::npos) << "rank 1 allowed " << r1;
  if (cpus >= 2) {
    EXPECT_NE(r0, r1);
  }

  Outcome none = run("none");
  ASSERT_EQ(none.status, 0) << none.err;
  if (cpus >= 2) {
    EXPECT_NE(allowed(none.out, 0).find_first_of(",-"), std::string::npos) << none.out;
  }
}

TEST(LauncherBinary, HelpExitsZero) {
  Outcome o = run_orbite({"--help"});
  EXPECT_EQ(o.status, 0);
  EXPECT_NE(o.out.find("Usage: orbite-run -n N"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--tag-output"), std::string::npos) << o.out;
}

TEST(LauncherBinary, BadUsageExits2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-n", "0", "true"}, "'0'"},
      {{"-n", "abc", "true"}, "'abc'"},
      {{"-n", "2", "--frobnicate", "true"}, "'--frobnicate'"},
      {{"-n", "2"}, "missing the program"},
  };
  for (const auto& [args, mention] : cases) {
    Outcome o = run_orbite(args, 30s);
    EXPECT_EQ(o.status, kExitUsage) << args[0] << " " << args[1];
    EXPECT_NE(o.err.find(mention), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("--help"), std::string::npos) << o.err;
  }
}

}  // namespace
}  // namespace orbite::launcher
