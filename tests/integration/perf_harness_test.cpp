// The benchmark harness of perf_tests/ as real processes: bad flags refused naming them, checked
// sweeps writing their JSON rows, nccl-tests' closing lines, the route each table measured.
#include <gtest/gtest.h>

#include <fstream>
#include <initializer_list>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "../support/subprocess.h"

// A namespace of its own: a unity build puts this file beside tools_test.cpp in one translation
// unit, whose anonymous namespace holds a kBin too.
namespace orbite::perf_harness {
namespace {

using namespace std::chrono_literals;
using testing::Outcome;
using testing::run_program;
using testing::TempDir;

const std::string kBin = ORBITE_BIN_DIR;

// nccl-tests' closing lines, matched as a script written for nccl-tests matches them: the checks'
// count and verdict, the mean bus bandwidth with the blank nccl-tests leaves for its optional
// NCCL_TESTS_MIN_BW verdict, then a lone '#'. Returns the mean; nullopt when they are missing.
std::optional<double> nccl_tests_avg_busbw(const std::string& out, const std::string& verdict) {
  const std::regex closing("\n# Out of bounds values : " + verdict +
                           "\n# Avg bus bandwidth    : ([^ \n]+) \n#\n");
  std::smatch m;
  if (!std::regex_search(out, m, closing)) return std::nullopt;
  return std::stod(m[1].str());
}

// The mean of the rows' cells under `keys`: what the Avg line must report, since nccl-tests
// averages every bus bandwidth it printed (each size, out of place and in place).
double mean_of(const nlohmann::json& rows, std::initializer_list<const char*> keys) {
  double sum = 0;
  int count = 0;
  for (const auto& row : rows) {
    for (const char* key : keys) {
      sum += row[key].get<double>();
      ++count;
    }
  }
  return count > 0 ? sum / count : 0.0;
}

// The Avg line against the JSON rows: %g keeps 6 digits, the JSON file 9.
void expect_avg_busbw(double printed, const nlohmann::json& doc,
                      std::initializer_list<const char*> keys) {
  const double mean = mean_of(doc["rows"], keys);
  EXPECT_GT(mean, 0.0);
  EXPECT_NEAR(printed, mean, 1e-5 * mean);
  EXPECT_NEAR(doc["avg_busbw_gbps"].get<double>(), mean, 1e-7 * mean);
}

// The JSON file a sweep wrote; nullopt when it cannot be opened.
std::optional<nlohmann::json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return nlohmann::json::parse(in);
}

// A 2-rank run of perf_tests/<bench> with `args`, --json and --metrics into temporary files: its
// output, the rows it wrote (nullopt when there are none) and rank 0's metrics snapshot.
struct JsonSweep {
  Outcome run;
  std::optional<nlohmann::json> doc;
  std::string metrics;
};

JsonSweep run_json_sweep(const std::string& bench, const std::vector<std::string>& args) {
  TempDir dir;
  const std::string json_path = dir.path() + "/rows.json";
  std::vector<std::string> argv = {kBin + "/orbite-run",
                                   "-n",
                                   "2",
                                   "--timeout",
                                   "100",
                                   "--",
                                   std::string(ORBITE_BINARY_DIR) + "/perf_tests/" + bench};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string metrics_path = dir.path() + "/rank0.prom";
  argv.insert(argv.end(), {"--json", json_path, "--metrics", metrics_path});
  JsonSweep sweep;
  sweep.run = run_program(argv, 120s);
  sweep.doc = read_json(json_path);
  std::ifstream metrics(metrics_path);
  sweep.metrics.assign(std::istreambuf_iterator<char>(metrics), std::istreambuf_iterator<char>());
  return sweep;
}

// The benchmark harness: bad flags are refused before any rank joins (exit 2, the flag and value
// named), and a small checked sweep writes its rows as JSON.
TEST(PerfHarness, RejectsBadFlagsNamingThem) {
  const std::string bench = std::string(ORBITE_BINARY_DIR) + "/perf_tests/sendrecv_perf";
  struct Case {
    std::vector<std::string> args;
    std::string named;
  };
  for (const Case& c :
       std::vector<Case>{{{"-b", "8x"}, "-b"},
                         {{"--transport", "nvlink"}, "--memory cuda"},
                         {{"-n", "-3"}, "-n"},
                         {{"--bogus"}, "--bogus"},
                         {{"--transport", "shm,tcp", "--json", "x.json"}, "--json"}}) {
    std::vector<std::string> argv = {bench};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    Outcome o = run_program(argv, 30s);
    EXPECT_EQ(o.status, 2) << c.args[0] << "\n" << o.err;
    EXPECT_NE(o.err.find(c.named), std::string::npos) << o.err;
  }
}

// putget_perf --batch: each bandwidth iteration is one batched put (get) of W disjoint ranges;
// every byte of every range is checked on both sides, and the header says so.
TEST(PerfHarness, BatchedPutGetSweepChecksEveryRange) {
#ifndef ORBITE_HAVE_PUTGET_PERF
  GTEST_SKIP() << "putget_perf is built with ORBITE_BUILD_REFERENCES only, which the sanitizer "
                  "presets leave off";
#endif
  Outcome o = run_program({kBin + "/orbite-run",
                           "-n",
                           "2",
                           "--timeout",
                           "100",
                           "--",
                           std::string(ORBITE_BINARY_DIR) + "/perf_tests/putget_perf",
                           "--sizes",
                           "8,70000",
                           "-n",
                           "3",
                           "-w",
                           "1",
                           "-c",
                           "1",
                           "--transport",
                           "tcp",
                           "--window",
                           "5",
                           "--batch"},
                          120s);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("window 5, batch 1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("check: 0 wrong bytes, OK"), std::string::npos) << o.out;
}

TEST(PerfHarness, CheckedSweepWritesJsonRows) {
  const JsonSweep sweep = run_json_sweep("sendrecv_perf", {"--sizes", "8,70000", "-n", "5", "-w",
                                                           "1", "-c", "1", "--transport", "tcp"});
  const Outcome& o = sweep.run;
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("check: 0 wrong bytes, OK"), std::string::npos) << o.out;
  const std::optional<double> avg = nccl_tests_avg_busbw(o.out, "0 OK");
  ASSERT_TRUE(avg) << o.out;
  ASSERT_TRUE(sweep.doc) << o.out;
  const nlohmann::json& doc = *sweep.doc;
  EXPECT_EQ(doc["transport"], "tcp");
  EXPECT_EQ(doc["ok"], true);
  ASSERT_EQ(doc["rows"].size(), 2U);
  EXPECT_EQ(doc["rows"][1]["size"], 70000);
  EXPECT_GT(doc["rows"][1]["lat_us"].get<double>(), 0.0);
  EXPECT_EQ(doc["rows"][1]["wrong"], 0);
  // A point-to-point transfer's bus bandwidth is its algbw (as in nccl-tests' sendrecv_perf).
  expect_avg_busbw(*avg, doc, {"bw_gbps"});
  // --metrics: rank 0's counters after the sweep, its tcp bytes among them.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(sweep.metrics, m,
                                std::regex(R"(\norbite_transport_sent_bytes_total\{[^}]*rank="0")"
                                           R"([^}]*transport="tcp"\} ([0-9]+)\n)")))
      << sweep.metrics.substr(0, 2000);
  EXPECT_GE(std::stoull(m[1].str()), 70000U * 5);
}

// Each table names the route it measured: rank 0's per-transport counters over that table alone.
// Between two local ranks the shm table moved its bytes on shm and none on tcp, and the tcp table
// the other way round.
TEST(PerfHarness, EachTableReportsTheRouteItMeasured) {
  Outcome o = run_program({kBin + "/orbite-run", "-n", "2", "--timeout", "100", "--",
                           std::string(ORBITE_BINARY_DIR) + "/perf_tests/sendrecv_perf", "--sizes",
                           "8,70000", "-n", "3", "-w", "1", "-c", "1", "--transport", "shm,tcp"},
                          120s);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  const std::regex line(
      R"(# bytes by transport \(rank 0\): tcp: sent (\d+) B in (\d+) frames, received (\d+) B in )"
      R"((\d+) frames; shm: sent (\d+) B in (\d+) frames, received (\d+) B in (\d+) frames)");
  std::vector<std::array<std::uint64_t, 8>> tables;
  for (auto it = std::sregex_iterator(o.out.begin(), o.out.end(), line);
       it != std::sregex_iterator(); ++it) {
    std::array<std::uint64_t, 8> v{};
    for (std::size_t i = 0; i < 8; ++i) v[i] = std::stoull((*it)[i + 1].str());
    tables.push_back(v);
  }
  ASSERT_EQ(tables.size(), 2U) << o.out;
  // Both sizes, several iterations, both directions: at least one 70000-byte message each way.
  // Over shm a rendezvous is copied by the receiver (single copy), counted where it is copied.
  const auto& shm = tables[0];
  EXPECT_GE(shm[4] + shm[6], 2 * 70000U) << o.out;
  EXPECT_GT(shm[5], 0U);
  EXPECT_EQ(shm[1] + shm[3], 0U) << "tcp frames in the shm table\n" << o.out;
  const auto& tcp = tables[1];
  EXPECT_GE(tcp[0], 70000U) << o.out;
  EXPECT_GE(tcp[2], 70000U) << o.out;
  EXPECT_GT(tcp[1], 0U);
  EXPECT_EQ(tcp[5] + tcp[7], 0U) << "shm frames in the tcp table\n" << o.out;
}

// Without -c nothing is checked and, as nccl-tests with -c 0, the sweep still closes with 0 OK.
TEST(PerfHarness, UncheckedSweepClosesAsNcclTests) {
  const JsonSweep sweep = run_json_sweep(
      "sendrecv_perf", {"--sizes", "4096", "-n", "3", "-w", "1", "--transport", "tcp"});
  const Outcome& o = sweep.run;
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_EQ(o.out.find("# check:"), std::string::npos) << o.out;
  const std::optional<double> avg = nccl_tests_avg_busbw(o.out, "0 OK");
  ASSERT_TRUE(avg) << o.out;
  ASSERT_TRUE(sweep.doc) << o.out;
  const nlohmann::json& doc = *sweep.doc;
  EXPECT_TRUE(doc["wrong_bytes"].is_null());
  expect_avg_busbw(*avg, doc, {"bw_gbps"});
}

// The collective sweeps' own flags fail at parse time, before the job is joined: no collective
// runs, so these stay fast whatever the data path does.
TEST(PerfHarness, CollectiveFlagsNameTheBadValue) {
  const std::string perf = std::string(ORBITE_BINARY_DIR) + "/perf_tests/";
  struct Case {
    std::string bench;
    std::vector<std::string> args;
    std::vector<std::string> named;
  };
  for (const Case& c : std::vector<Case>{
           {"all_reduce_perf", {"-d", "float128"}, {"-d", "float128", "bfloat16"}},
           {"all_reduce_perf", {"--datatype=bogus"}, {"--datatype", "bogus"}},
           {"reduce_perf", {"-o", "xor"}, {"-o", "xor", "avg"}},
           {"all_reduce_perf", {"-z", "2"}, {"-z", "'2'"}},
           {"all_reduce_perf", {"-p", "2"}, {"-p", "'2'"}},
           {"all_reduce_perf", {"-p", "1", "-z", "0"}, {"-p (--percentiles)", "needs -z 1"}},
           {"broadcast_perf", {"-r", "-1"}, {"-r", "'-1'"}},
           {"all_gather_perf", {"--transport", "shm,tcp"}, {"--transport", "one transport"}}}) {
    std::vector<std::string> argv = {perf + c.bench};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    Outcome o = run_program(argv, 30s);
    EXPECT_EQ(o.status, 2) << c.args[0] << "\n" << o.err;
    for (const std::string& text : c.named) {
      EXPECT_NE(o.err.find(text), std::string::npos) << text << " not in: " << o.err;
    }
  }
}

// A root outside the job the launcher describes is refused before joining it.
TEST(PerfHarness, CollectiveRootOutsideTheJobIsRefused) {
  const std::string bench = std::string(ORBITE_BINARY_DIR) + "/perf_tests/broadcast_perf";
  Outcome o =
      run_program({bench, "-r", "2"}, 30s, {{"ORBITE_RANK", "0"}, {"ORBITE_WORLD_SIZE", "2"}});
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_NE(o.err.find("-r"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("2-rank job"), std::string::npos) << o.err;
  // all_reduce has no root: the flag is accepted and ignored.
  Outcome help = run_program(
      {std::string(ORBITE_BINARY_DIR) + "/perf_tests/all_reduce_perf", "-r", "7", "--help"}, 30s,
      {{"ORBITE_RANK", "0"}, {"ORBITE_WORLD_SIZE", "2"}});
  EXPECT_EQ(help.status, 0) << help.err;
  EXPECT_NE(help.out.find("-d, --datatype"), std::string::npos) << help.out;
}

// The table and JSON contract scripts/plot.py and compare-mpi.sh read: nccl-tests' columns, both
// placements per row, the bus bandwidth and the checked results.
TEST(PerfHarness, CheckedCollectiveSweepWritesJsonRows) {
  const JsonSweep sweep = run_json_sweep(
      "all_reduce_perf",
      {"--sizes", "8,70000", "-n", "3", "-w", "1", "-c", "1", "-d", "bfloat16", "-o", "max"});
  const Outcome& o = sweep.run;
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("check: 0 wrong elements, OK"), std::string::npos) << o.out;
  const std::optional<double> avg = nccl_tests_avg_busbw(o.out, "0 OK");
  ASSERT_TRUE(avg) << o.out;
  ASSERT_TRUE(sweep.doc) << o.out;
  const nlohmann::json& doc = *sweep.doc;
  EXPECT_EQ(doc["program"], "all_reduce_perf");
  EXPECT_EQ(doc["ranks"], 2);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["wrong_elements"], 0);
  ASSERT_EQ(doc["rows"].size(), 2U);
  const auto& row = doc["rows"][1];
  EXPECT_EQ(row["size"], 70000);
  EXPECT_EQ(row["count"], 35000);
  EXPECT_EQ(row["type"], "bfloat16");
  EXPECT_EQ(row["redop"], "max");
  EXPECT_EQ(row["root"], -1);
  EXPECT_EQ(row["wrong"], 0);
  EXPECT_EQ(row["inplace_wrong"], 0);
  // 2 ranks: busbw = algbw * 2(n-1)/n = algbw.
  EXPECT_GT(row["busbw_gbps"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>());
  EXPECT_GT(row["inplace_time_us"].get<double>(), 0.0);
  // Both placements of every size, as nccl-tests averages them.
  expect_avg_busbw(*avg, doc, {"busbw_gbps", "inplace_busbw_gbps"});
  // No percentile columns unless asked for.
  EXPECT_FALSE(row.contains("p50_us")) << row.dump();
}

// -p 1: the per-call time's percentiles, ordered, beside the loop's mean, in table and JSON.
TEST(PerfHarness, PercentilesOfThePerCallTimeAreReportedWhenAskedFor) {
  const JsonSweep sweep = run_json_sweep(
      "all_reduce_perf", {"--sizes", "8,70000", "-n", "50", "-w", "1", "-c", "1", "-p", "1"});
  const Outcome& o = sweep.run;
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("p99(us)"), std::string::npos) << o.out;
  ASSERT_TRUE(sweep.doc) << o.out;
  const nlohmann::json& doc = *sweep.doc;
  ASSERT_EQ(doc["rows"].size(), 2U);
  for (const auto& row : doc["rows"]) {
    const double p50 = row["p50_us"].get<double>();
    const double p90 = row["p90_us"].get<double>();
    const double p99 = row["p99_us"].get<double>();
    EXPECT_GT(p50, 0.0) << row.dump();
    EXPECT_LE(p50, p90) << row.dump();
    EXPECT_LE(p90, p99) << row.dump();
    EXPECT_EQ(row["wrong"], 0) << row.dump();
  }
}

}  // namespace
}  // namespace orbite::perf_harness
