// Explicit priority matrices (classic TENT matrix and native {"nics","mems"}) compiled against a
// hand-built inventory: tiers, the "*" row, and every rejection with its JSON path.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <array>
#include <string>
#include <vector>

#include <orbite/config.h>

#include "../support/config_test_helpers.h"
#include "topo/inventory.h"
#include "topo/location.h"
#include "topo/matrix.h"

namespace orbite::topo {
namespace {

using orbite::testing::TempFile;
using Tiers = std::array<std::vector<int>, kTierCount>;

// NICs mlx5_0..mlx5_3 (IDs 0..3, two per NUMA node), NUMA nodes 0 and 1, GPUs cuda:0 and cuda:1.
Inventory test_inventory() {
  Inventory inv;
  inv.source = "test";
  for (int node : {0, 1}) {
    NumaNode numa;
    numa.os_index = node;
    numa.package = node;
    inv.numa_nodes.push_back(numa);
  }
  for (int i = 0; i < 4; ++i) {
    NicInfo nic;
    nic.id = i;
    nic.name = "mlx5_" + std::to_string(i);
    nic.numa = i / 2;
    inv.nics.push_back(nic);
  }
  for (int i = 0; i < 2; ++i) {
    GpuInfo gpu;
    gpu.ordinal = i;
    gpu.cuda_visible = true;
    gpu.numa = i;
    inv.gpus.push_back(gpu);
  }
  return inv;
}

const Inventory& inventory() {
  static const Inventory inv = test_inventory();
  return inv;
}

Result<PriorityTable> inline_matrix(std::string_view text) {
  return parse_priorities(text, "priority_matrix", inventory());
}

Result<PriorityTable> from_file(std::string_view text) {
  return parse_priorities(text, "custom_json_path /x.json", inventory());
}

// The message of a rejection, which must be a configuration error.
std::string error_of(const Result<PriorityTable>& result) {
  EXPECT_FALSE(result.ok()) << "accepted; origin " << (result.ok() ? result->origin : "");
  if (result.ok()) return {};
  EXPECT_EQ(result.status().code(), Errc::Configuration) << result.status().to_string();
  return result.status().message();
}

Tiers tiers_at(const PriorityTable& table, Location where) {
  const LocationTiers* row = table.find(where);
  EXPECT_NE(row, nullptr) << "no row for " << where.to_string();
  return row == nullptr ? Tiers{} : row->tiers;
}

std::vector<Location> locations(const PriorityTable& table) {
  std::vector<Location> out;
  for (const auto& row : table.rows) out.push_back(row.location);
  return out;
}

// --- classic matrix ---------------------------------------------------------------------------

TEST(MatrixClassic, RowsBecomeTiersZeroAndOne) {
  auto table = inline_matrix(R"({"cpu:0": [["mlx5_0"], ["mlx5_1"]],
                                 "cuda:0": [["mlx5_1", "mlx5_2"], ["mlx5_0"]]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(table->origin, "priority_matrix");
  EXPECT_EQ(locations(*table),
            (std::vector<Location>{Location::any(), Location::cpu(0), Location::cuda(0)}));
  EXPECT_EQ(tiers_at(*table, Location::cpu(0)), (Tiers{{{0}, {1}, {}}}));
  EXPECT_EQ(tiers_at(*table, Location::cuda(0)), (Tiers{{{1, 2}, {0}, {}}}));
}

// Each NIC lands in the best tier any row gives it, in order of rows sorted by location.
TEST(MatrixClassic, SynthesizedStarIsTheUnionWithoutRepeats) {
  auto table = inline_matrix(R"({"cuda:1": [["mlx5_2"], ["mlx5_3"]],
                                 "cpu:0": [["mlx5_0"], ["mlx5_2"]]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  ASSERT_FALSE(table->rows.empty());
  EXPECT_EQ(table->rows.front().location, Location::any());
  // mlx5_2 is preferred by cuda:1, so it is not repeated in tier 1 (TENT lists it in both).
  EXPECT_EQ(tiers_at(*table, Location::any()), (Tiers{{{0, 2}, {3}, {}}}));
  EXPECT_EQ(tiers_at(*table, Location::cpu(0)), (Tiers{{{0}, {2}, {}}}));
  EXPECT_EQ(tiers_at(*table, Location::cuda(1)), (Tiers{{{2}, {3}, {}}}));
}

TEST(MatrixClassic, ExplicitStarWins) {
  auto table = inline_matrix(R"({"cpu:0": [["mlx5_0"], ["mlx5_1"]], "*": [["mlx5_3"], []]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(locations(*table), (std::vector<Location>{Location::any(), Location::cpu(0)}));
  EXPECT_EQ(tiers_at(*table, Location::any()), (Tiers{{{3}, {}, {}}}));
}

TEST(MatrixClassic, UnlistedLocationsUseTheStarRow) {
  auto table = inline_matrix(R"({"cpu:0": [["mlx5_0"], []], "*": [["mlx5_3"], []]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(table->find(Location::cuda(1)), nullptr);
  EXPECT_EQ(table->lookup(Location::cuda(1)).location, Location::any());
  EXPECT_EQ(table->lookup(Location::cpu(0)).location, Location::cpu(0));
}

TEST(MatrixClassic, GpuIsAnAliasOfCuda) {
  auto table = inline_matrix(R"({"gpu:1": [["mlx5_3"], ["mlx5_2"]]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(locations(*table), (std::vector<Location>{Location::any(), Location::cuda(1)}));
  EXPECT_EQ(tiers_at(*table, Location::cuda(1)), (Tiers{{{3}, {2}, {}}}));
}

TEST(MatrixClassic, EmptyRowDisablesItsLocation) {
  auto table = inline_matrix(R"({"cpu:1": [[], []], "cpu:0": [["mlx5_0"], []]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  ASSERT_NE(table->find(Location::cpu(1)), nullptr);
  EXPECT_TRUE(table->find(Location::cpu(1))->empty());
  EXPECT_TRUE(table->lookup(Location::cpu(1)).empty());  // no fallback to "*"
  EXPECT_FALSE(table->lookup(Location::cpu(0)).empty());
  EXPECT_EQ(tiers_at(*table, Location::any()), (Tiers{{{0}, {}, {}}}));
}

TEST(MatrixClassic, UnknownNicNamesPathAndKnownNics) {
  EXPECT_EQ(error_of(inline_matrix(R"({"cuda:0": [["mlx5_0"], ["mlx5_9"]]})")),
            "priority_matrix[\"cuda:0\"][1][0]: NIC \"mlx5_9\" is not in the inventory after "
            "filters (known: mlx5_0, mlx5_1, mlx5_2, mlx5_3)");
  EXPECT_CONTAINS(error_of(from_file(R"({"cpu:1": [["mlx5_9"], []]})")),
                  "custom_json_path /x.json: [\"cpu:1\"][0][0]: NIC \"mlx5_9\"");
}

TEST(MatrixClassic, UnknownLocationKindRejected) {
  const auto message = error_of(inline_matrix(R"({"rocm:0": [["mlx5_0"], []]})"));
  EXPECT_CONTAINS(message, "priority_matrix[\"rocm:0\"]: unknown location \"rocm:0\"");
  EXPECT_CONTAINS(message, "\"cuda:N\"");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:x": [[], []]})")), "\"cpu:x\"");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"": [[], []]})")), "priority_matrix[\"\"]");
}

TEST(MatrixClassic, LocationsMustMatchDiscovery) {
  auto cpu = error_of(inline_matrix(R"({"cpu:7": [["mlx5_0"], []]})"));
  EXPECT_CONTAINS(cpu, "priority_matrix[\"cpu:7\"]: location \"cpu:7\" is not a NUMA node");
  EXPECT_CONTAINS(cpu, "must match discovery (known: cpu:0, cpu:1)");
  auto gpu = error_of(inline_matrix(R"({"gpu:2": [["mlx5_0"], []]})"));
  EXPECT_CONTAINS(gpu, "priority_matrix[\"gpu:2\"]: location \"gpu:2\" is not a GPU");
  EXPECT_CONTAINS(gpu, "(known: cuda:0, cuda:1)");
}

TEST(MatrixClassic, RowShapeRejected) {
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [["mlx5_0"], [], []]})")),
                  "priority_matrix[\"cpu:0\"]: expected [[preferred NICs], [available NICs]]");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [["mlx5_0"]]})")),
                  "priority_matrix[\"cpu:0\"]: expected [[preferred NICs]");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": "mlx5_0"})")), "got \"mlx5_0\"");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": {"a": 1}})")), "got {\"a\":1}");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [["mlx5_0"], "mlx5_1"]})")),
                  "priority_matrix[\"cpu:0\"][1]: expected an array of available NIC names, got "
                  "\"mlx5_1\"");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [["mlx5_0", 5], []]})")),
                  "priority_matrix[\"cpu:0\"][0][1]: expected a NIC name (string), got 5");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [[null], []]})")), "got null");
}

TEST(MatrixClassic, NicTwiceInOneRowRejected) {
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [["mlx5_0", "mlx5_0"], []]})")),
                  "priority_matrix[\"cpu:0\"][0][1]: NIC \"mlx5_0\" is already listed in this row "
                  "at [\"cpu:0\"][0][0]");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [["mlx5_1"], ["mlx5_0", "mlx5_1"]]})")),
                  "priority_matrix[\"cpu:0\"][1][1]: NIC \"mlx5_1\" is already listed");
  // The same NIC in different rows is fine.
  EXPECT_TRUE(inline_matrix(R"({"cpu:0": [["mlx5_0"], []], "cpu:1": [["mlx5_0"], []]})").ok());
}

TEST(MatrixClassic, DuplicateLocationsRejected) {
  EXPECT_CONTAINS(
      error_of(inline_matrix(R"({"cpu:0": [["mlx5_0"], []], "cpu:0": [["mlx5_1"], []]})")),
      "priority_matrix[\"cpu:0\"]: duplicate key");
  EXPECT_CONTAINS(
      error_of(inline_matrix(R"({"cuda:0": [["mlx5_0"], []], "gpu:0": [["mlx5_1"], []]})")),
      "priority_matrix[\"gpu:0\"]: location \"gpu:0\" repeats \"cuda:0\" (both are cuda:0)");
}

TEST(MatrixClassic, DocumentMustBeANonEmptyObject) {
  EXPECT_CONTAINS(error_of(inline_matrix("[1, 2]")),
                  "priority_matrix: expected a JSON object (a TENT priority matrix");
  EXPECT_CONTAINS(error_of(inline_matrix("\"x\"")), "got \"x\"");
  EXPECT_CONTAINS(error_of(inline_matrix("{}")), "priority_matrix: the matrix lists no location");
}

TEST(MatrixClassic, InvalidJsonReportsParserPosition) {
  const auto empty = error_of(inline_matrix(""));
  EXPECT_CONTAINS(empty, "priority_matrix: invalid JSON at byte");
  EXPECT_CONTAINS(empty, "unexpected end of input");
  const auto truncated = error_of(inline_matrix(R"({"cpu:0": [["mlx5_0"], )"));
  EXPECT_CONTAINS(truncated, "parse error at line 1, column");
  EXPECT_CONTAINS(error_of(inline_matrix("   \n ")), "invalid JSON");
}

// The parser's own failures (a number beyond a double, text that ends early) name the row and
// the element it was reading.
TEST(MatrixClassic, ParserFailuresNameTheElementTheyAreIn) {
  EXPECT_EQ(error_of(inline_matrix(R"({"cpu:0": [["mlx5_0"], [1e400]]})")),
            "priority_matrix[\"cpu:0\"][1][0]: invalid JSON: [json.exception.out_of_range.406] "
            "number overflow parsing '1e400'");
  EXPECT_CONTAINS(
      error_of(inline_matrix(R"({"cpu:0": [["mlx5_0"], ["mlx5_1"]], "cpu:1": -1e999})")),
      "priority_matrix[\"cpu:1\"]: invalid JSON: [json.exception.out_of_range.406] "
      "number overflow parsing '-1e999'");
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [["mlx5_0", )")),
                  "priority_matrix[\"cpu:0\"][0][1]: invalid JSON at byte");
  EXPECT_CONTAINS(error_of(from_file(R"({"cpu:0": [["mlx5_0"], )")),
                  "custom_json_path /x.json: [\"cpu:0\"][1]: invalid JSON at byte");
  // Between the members of the document, the parser is in no row.
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [["mlx5_0"], []] "cpu:1")")),
                  "priority_matrix: invalid JSON at byte");
  // A number where a NIC name belongs.
  EXPECT_CONTAINS(error_of(inline_matrix(R"({"cpu:0": [[1.5], []]})")),
                  "priority_matrix[\"cpu:0\"][0][0]: expected a NIC name (string), got 1.5");
}

TEST(MatrixClassic, EchoedTextIsBounded) {
  const std::string key = "cpu:" + std::string(5000, '9');
  const auto message = error_of(inline_matrix("{\"" + key + "\": [[], []]}"));
  EXPECT_CONTAINS(message, "...");
  EXPECT_LT(message.size(), 400u);
  // Deep nesting is rejected by shape, without the parser or the key scan tracking every level.
  const std::string deep =
      "{\"cpu:0\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_CONTAINS(error_of(inline_matrix(deep)), "priority_matrix[\"cpu:0\"]: expected");
  const std::string deepest =
      std::string(kMaxMatrixBytes / 2, '[') + std::string(kMaxMatrixBytes / 2, ']');
  EXPECT_CONTAINS(error_of(inline_matrix(deepest)), "priority_matrix: expected a JSON object");
}

// --- native {"nics", "mems"} --------------------------------------------------------------------

TEST(MatrixNative, GuideExample) {
  auto table = from_file(R"({
    "nics": [{"name": "mlx5_1", "type": 0}, {"name": "mlx5_0", "type": 0}],
    "mems": [{"name": "cuda:0", "type": 1,
              "device_list": {"rank0": [0], "rank1": [1], "rank2": []}}]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(table->origin, "custom_json_path /x.json");
  // Indices refer to the file's nics order; the rows hold inventory IDs.
  EXPECT_EQ(tiers_at(*table, Location::cuda(0)), (Tiers{{{1}, {0}, {}}}));
  EXPECT_EQ(tiers_at(*table, Location::any()), (Tiers{{{1}, {0}, {}}}));
}

TEST(MatrixNative, AllFieldsAndExplicitStar) {
  auto table = from_file(R"({
    "nics": [{"name": "mlx5_2", "type": 0, "numa_node": 7, "pci_bus_id": "0000:ff:00.0",
              "device_attrs": {"anything": [1]}},
             {"name": "mlx5_3"}, {"name": "mlx5_0"}],
    "mems": [{"name": "cpu:1", "type": 0, "numa_node": 1,
              "device_list": {"rank0": [0, 1], "rank2": [2]}},
             {"name": "gpu:1", "device_list": {"rank1": [1]}},
             {"name": "cpu:0"},
             {"name": "*", "type": 4, "device_list": {"rank2": [2, 0]}}]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(locations(*table), (std::vector<Location>{Location::any(), Location::cpu(0),
                                                      Location::cpu(1), Location::cuda(1)}));
  EXPECT_EQ(tiers_at(*table, Location::cpu(1)), (Tiers{{{2, 3}, {}, {0}}}));
  EXPECT_EQ(tiers_at(*table, Location::cuda(1)), (Tiers{{{}, {3}, {}}}));
  EXPECT_TRUE(table->find(Location::cpu(0))->empty());  // no device_list: disabled
  EXPECT_EQ(tiers_at(*table, Location::any()), (Tiers{{{}, {}, {0, 2}}}));
}

TEST(MatrixNative, StarSynthesizedTierByTier) {
  auto table = from_file(R"({"nics": [{"name": "mlx5_0"}, {"name": "mlx5_1"}, {"name": "mlx5_2"}],
    "mems": [{"name": "cpu:0", "device_list": {"rank0": [0], "rank2": [1, 2]}},
             {"name": "cpu:1", "device_list": {"rank0": [2], "rank1": [1]}}]})");
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(tiers_at(*table, Location::any()), (Tiers{{{0, 2}, {1}, {}}}));
}

TEST(MatrixNative, IndexOutOfRangeNamesThePath) {
  const std::string nics =
      R"("nics": [{"name": "mlx5_0"}, {"name": "mlx5_1"}, {"name": "mlx5_2"}])";
  EXPECT_EQ(error_of(from_file("{" + nics + R"(, "mems": [{"name": "cpu:0",
              "device_list": {"rank1": [0, 1, 7]}}]})")),
            "custom_json_path /x.json: mems[0].device_list.rank1[2]: index 7 is out of range "
            "(3 nics)");
  EXPECT_EQ(error_of(inline_matrix("{" + nics + R"(, "mems": [{"name": "cpu:0",
              "device_list": {"rank0": [-1]}}]})")),
            "priority_matrix.mems[0].device_list.rank0[0]: index -1 is negative (3 nics)");
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [{"name": "cpu:0",
              "device_list": {"rank0": [1.0]}}]})")),
                  "mems[0].device_list.rank0[0]: expected an index into nics (integer), got 1.0");
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [{"name": "cpu:0",
              "device_list": {"rank0": ["0"]}}]})")),
                  "got \"0\"");
  EXPECT_CONTAINS(error_of(from_file(R"({"mems": [{"name": "cpu:0",
              "device_list": {"rank0": [0]}}]})")),
                  "mems[0].device_list.rank0[0]: index 0 is out of range (0 nics)");
}

// Each kind of bad number in the native form's integer fields, named by its path.
TEST(MatrixNative, NumbersOfTheWrongKindNameTheirPath) {
  const std::string nics = R"("nics": [{"name": "mlx5_0"}, {"name": "mlx5_1"}])";
  const auto mem_with = [&](const std::string& field) {
    return from_file("{" + nics + R"(, "mems": [{"name": "cpu:0", )" + field + "}]}");
  };
  // Beyond a double: the parser fails in the field.
  EXPECT_EQ(error_of(mem_with(R"("device_list": {"rank0": [0, 1e400]})")),
            "custom_json_path /x.json: mems[0].device_list.rank0[1]: invalid JSON: "
            "[json.exception.out_of_range.406] number overflow parsing '1e400'");
  EXPECT_CONTAINS(error_of(mem_with(R"("numa_node": 1e400)")),
                  "mems[0].numa_node: invalid JSON: [json.exception.out_of_range.406]");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": [{"name": "mlx5_0", "type": -1e400}]})")),
                  "nics[0].type: invalid JSON: [json.exception.out_of_range.406]");
  // Beyond 64 bits: parsed as a double, which is not an integer.
  EXPECT_CONTAINS(error_of(mem_with(R"("device_list": {"rank0": [18446744073709551616]})")),
                  "mems[0].device_list.rank0[0]: expected an index into nics (integer), got "
                  "1.8446744073709552e+19");
  // A fraction, a string, a negative number.
  EXPECT_CONTAINS(error_of(mem_with(R"("type": 0.5)")),
                  "mems[0].type: expected a memory type (integer), got 0.5");
  EXPECT_CONTAINS(error_of(mem_with(R"("numa_node": "0")")),
                  "mems[0].numa_node: expected a NUMA node (integer), got \"0\"");
  EXPECT_CONTAINS(error_of(mem_with(R"("device_list": {"rank2": [-3]})")),
                  "mems[0].device_list.rank2[0]: index -3 is negative (2 nics)");
  // Something else where an object belongs.
  EXPECT_CONTAINS(error_of(mem_with(R"("device_list": [0])")),
                  "mems[0].device_list: expected a device list (object), got [0]");
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [5]})")),
                  "mems[0]: expected a memory entry (object), got 5");
  // A value missing inside an entry.
  EXPECT_CONTAINS(error_of(mem_with(R"("device_list": {"rank1": [1, )")),
                  "mems[0].device_list.rank1[1]: invalid JSON at byte");
}

TEST(MatrixNative, MemoryTypeMustMatchLocation) {
  const std::string nics = R"("nics": [{"name": "mlx5_0"}])";
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [{"name": "cuda:0", "type": 0}]})")),
                  "custom_json_path /x.json: mems[0].type: memory type 0 does not match location "
                  "\"cuda:0\" (expected 1");
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [{"name": "*", "type": 0}]})")),
                  "mems[0].type: memory type 0 does not match location \"*\" (expected 4");
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [{"name": "cpu:0", "type": 1}]})")),
                  "(expected 0");
  EXPECT_CONTAINS(
      error_of(from_file("{" + nics + R"(, "mems": [{"name": "cpu:0", "type": "0"}]})")),
      "mems[0].type: expected a memory type (integer), got \"0\"");
}

TEST(MatrixNative, NicEntriesChecked) {
  EXPECT_CONTAINS(
      error_of(from_file(R"({"nics": [{"name": "mlx5_0", "type": 1}], "mems": [{"name": "*"}]})")),
      "nics[0].type: NIC type 1 is not supported (expected 0: RDMA)");
  EXPECT_CONTAINS(
      error_of(from_file(R"({"nics": [{"name": "mlx5_0"}, {"name": "mlx5_0"}], "mems": []})")),
      "nics[1].name: NIC \"mlx5_0\" is already listed at nics[0]");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": [{"name": "ib9"}], "mems": []})")),
                  "nics[0].name: NIC \"ib9\" is not in the inventory after filters");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": [{"type": 0}], "mems": []})")),
                  "nics[0]: missing required key \"name\"");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": [{"name": "mlx5_0", "numa_node": "1"}]})")),
                  "nics[0].numa_node: expected a NUMA node (integer)");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": [{"name": "mlx5_0", "pci_bus_id": 3}]})")),
                  "nics[0].pci_bus_id: expected a PCI bus ID (string)");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": ["mlx5_0"]})")),
                  "nics[0]: expected a NIC (object), got \"mlx5_0\"");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": {}, "mems": []})")),
                  "nics: expected an array of NIC objects");
}

TEST(MatrixNative, MemEntriesChecked) {
  const std::string nics = R"({"nics": [{"name": "mlx5_0"}, {"name": "mlx5_1"}], )";
  EXPECT_CONTAINS(error_of(from_file(nics + R"("mems": [{"name": "cpu:0",
              "device_list": {"rank0": [0], "rank2": [1, 0]}}]})")),
                  "mems[0].device_list.rank2[1]: NIC \"mlx5_0\" is already listed in this row at "
                  "mems[0].device_list.rank0[0]");
  EXPECT_CONTAINS(error_of(from_file(nics + R"("mems": [{"name": "cpu:0"}, {"name": "cpu:0"}]})")),
                  "mems[1].name: location \"cpu:0\" repeats \"cpu:0\"");
  EXPECT_CONTAINS(error_of(from_file(nics + R"("mems": [{"name": "rocm:0"}]})")),
                  "mems[0].name: unknown location \"rocm:0\"");
  EXPECT_CONTAINS(error_of(from_file(nics + R"("mems": [{"name": "cuda:3"}]})")),
                  "mems[0].name: location \"cuda:3\" is not a GPU of the inventory");
  EXPECT_CONTAINS(error_of(from_file(nics + R"("mems": [{"type": 0}]})")),
                  "mems[0]: missing required key \"name\"");
  EXPECT_CONTAINS(error_of(from_file(nics + R"("mems": [{"name": 0}]})")),
                  "mems[0].name: expected a location (string), got 0");
  EXPECT_CONTAINS(error_of(from_file(nics + R"("mems": [{"name": "cpu:0",
              "device_list": {"rank0": 0}}]})")),
                  "mems[0].device_list.rank0: expected an array of indices into nics, got 0");
  EXPECT_CONTAINS(error_of(from_file(nics + R"("mems": []})")),
                  "custom_json_path /x.json: mems: the topology lists no memory location");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": [{"name": "mlx5_0"}]})")), "missing key \"mems\"");
}

TEST(MatrixNative, UnknownKeysRejected) {
  const std::string nics = R"("nics": [{"name": "mlx5_0"}])";
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [], "version": 2})")),
                  "custom_json_path /x.json: version: unknown key \"version\" (expected one of: "
                  "nics, mems)");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": [{"name": "mlx5_0", "speed": 100}]})")),
                  "nics[0].speed: unknown key \"speed\"");
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [{"name": "*", "ranks": []}]})")),
                  "mems[0].ranks: unknown key \"ranks\"");
  EXPECT_CONTAINS(error_of(from_file("{" + nics + R"(, "mems": [{"name": "*",
              "device_list": {"rank3": [0]}}]})")),
                  "mems[0].device_list.rank3: unknown key \"rank3\" (expected one of: rank0, "
                  "rank1, rank2)");
  EXPECT_CONTAINS(error_of(inline_matrix("{" + nics + R"(, "mems": [{"name": "*",
              "device list": {}}]})")),
                  "priority_matrix.mems[0][\"device list\"]: unknown key");
  EXPECT_CONTAINS(error_of(from_file(R"({"nics": [{"name": "mlx5_0", "name": "mlx5_1"}]})")),
                  "nics[0].name: duplicate key");
}

// --- limits and loading -----------------------------------------------------------------------

// A valid matrix padded with spaces to exactly `size` bytes.
std::string matrix_of_size(std::size_t size) {
  std::string text = R"({"cpu:0": [["mlx5_0"], ["mlx5_1"]]})";
  text.append(size - text.size(), ' ');
  return text;
}

TEST(MatrixLimits, InlineOneMebibyteAcceptedOneMoreByteRejected) {
  rdma::RdmaConfig config;
  config.priority_matrix = matrix_of_size(kMaxMatrixBytes);
  auto at_limit = load_priorities(config, inventory());
  ASSERT_TRUE(at_limit.ok()) << at_limit.status().to_string();
  EXPECT_EQ(at_limit->origin, "priority_matrix");
  config.priority_matrix = matrix_of_size(kMaxMatrixBytes + 1);
  EXPECT_EQ(error_of(load_priorities(config, inventory())),
            "priority_matrix: 1048577 bytes, over the limit of 1048576 bytes (1 MiB)");
}

TEST(MatrixLimits, FileOneMebibyteAcceptedOneMoreByteRejected) {
  TempFile at_limit(matrix_of_size(kMaxMatrixBytes));
  rdma::RdmaConfig config;
  config.custom_json_path = at_limit.path();
  auto ok = load_priorities(config, inventory());
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->origin, "custom_json_path " + at_limit.path());
  EXPECT_EQ(tiers_at(*ok, Location::cpu(0)), (Tiers{{{0}, {1}, {}}}));

  TempFile over(matrix_of_size(kMaxMatrixBytes + 1));
  config.custom_json_path = over.path();
  EXPECT_EQ(error_of(load_priorities(config, inventory())),
            "custom_json_path " + over.path() +
                ": the file is 1048577 bytes, over the limit of 1048576 bytes (1 MiB)");
}

TEST(MatrixLoad, MissingFileNamesPathAndErrno) {
  rdma::RdmaConfig config;
  config.custom_json_path = ::testing::TempDir() + "orbite_matrix_no_such_file.json";
  EXPECT_EQ(error_of(load_priorities(config, inventory())),
            "custom_json_path " + *config.custom_json_path +
                ": cannot open the file: No such file or directory (errno 2)");
}

TEST(MatrixLoad, DirectoryRejected) {
  rdma::RdmaConfig config;
  config.custom_json_path = ::testing::TempDir();
  EXPECT_CONTAINS(error_of(load_priorities(config, inventory())), "is a directory");
}

TEST(MatrixLoad, InvalidFileFailsWithoutFallback) {
  TempFile empty("");
  rdma::RdmaConfig config;
  config.custom_json_path = empty.path();
  EXPECT_CONTAINS(error_of(load_priorities(config, inventory())),
                  "custom_json_path " + empty.path() + ": invalid JSON at byte");
  TempFile bad(R"({"cpu:0": [["mlx5_7"], []]})");
  config.custom_json_path = bad.path();
  EXPECT_CONTAINS(error_of(load_priorities(config, inventory())),
                  "custom_json_path " + bad.path() + ": [\"cpu:0\"][0][0]: NIC \"mlx5_7\"");
}

TEST(MatrixLoad, OverflowingNumberInTheFileNamesTheFileAndTheElement) {
  TempFile file(R"({"cpu:0": [["mlx5_0"], [1e400]]})");
  rdma::RdmaConfig config;
  config.custom_json_path = file.path();
  EXPECT_EQ(error_of(load_priorities(config, inventory())),
            "custom_json_path " + file.path() +
                ": [\"cpu:0\"][1][0]: invalid JSON: [json.exception.out_of_range.406] number "
                "overflow parsing '1e400'");
}

TEST(MatrixLoad, NativeFile) {
  TempFile file(R"({"nics": [{"name": "mlx5_3", "type": 0}],
                    "mems": [{"name": "cuda:1", "type": 1, "device_list": {"rank0": [0]}}]})");
  rdma::RdmaConfig config;
  config.custom_json_path = file.path();
  auto table = load_priorities(config, inventory());
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(tiers_at(*table, Location::cuda(1)), (Tiers{{{3}, {}, {}}}));
}

TEST(MatrixLoad, InlineWinsAndTheFileIsNotRead) {
  TempFile invalid("this is not JSON");
  rdma::RdmaConfig config;
  config.priority_matrix = R"({"cpu:1": [["mlx5_2"], ["mlx5_3"]]})";
  for (const std::string& path :
       {invalid.path(), ::testing::TempDir() + "orbite_matrix_no_such_file.json"}) {
    config.custom_json_path = path;
    auto table = load_priorities(config, inventory());
    ASSERT_TRUE(table.ok()) << table.status().to_string();
    EXPECT_EQ(table->origin, "priority_matrix");
    EXPECT_EQ(tiers_at(*table, Location::cpu(1)), (Tiers{{{2}, {3}, {}}}));
  }
  // An invalid inline matrix is an error even with a valid file: no fallback.
  TempFile valid(R"({"cpu:0": [["mlx5_0"], []]})");
  config.custom_json_path = valid.path();
  config.priority_matrix = "";
  EXPECT_CONTAINS(error_of(load_priorities(config, inventory())), "priority_matrix: invalid JSON");
}

TEST(MatrixLoad, WithoutConfigurationUsesDiscovery) {
  auto table = load_priorities(rdma::RdmaConfig{}, inventory());
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(table->origin, "discovery");
}

}  // namespace
}  // namespace orbite::topo
