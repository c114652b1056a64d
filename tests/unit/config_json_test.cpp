// EngineConfig: strict JSON parsing, field by field: rejected and accepted values, enum
// spellings, optional fields, priority matrices, unknown and duplicate keys, malformed documents.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <orbite/config.h>

#include "../support/config_test_helpers.h"
#include "common/config_internal.h"
#include "common/config_schema.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::ordered_json;
using rdma::GpuDirectRegistration;
using rdma::RdmaCudaMemory;
using rdma::RdmaHostMemory;
using testing::doc_at;
using testing::object_text_of_size;
using testing::sanitize;
using testing::TempFile;
using testing::value_at;

// ------------------------------------------------------------------------------------------------
// Strict types and ranges, table-driven: each bad value is a Configuration error whose message
// names the JSON path and shows the value.

struct Reject {
  std::string path;   // where the value goes in the document
  std::string value;  // JSON text of the value
  std::string at;     // the path the message names (path, or an element of it)
  std::string shows;  // what the message must show of the value
};

void add_reject(std::vector<Reject>& out, const std::string& path, const std::string& value,
                std::string shows = {}, std::string at = {}) {
  out.push_back({path, value, at.empty() ? path : std::move(at), shows.empty() ? value : shows});
}

std::vector<Reject> reject_cases() {
  std::vector<Reject> r;

  // Booleans take only true/false.
  for (const char* path :
       {"rdma.strict_local_numa", "rdma.disable_gpu_direct_rdma", "rdma.log_slice_affinity",
        "rdma.gpu_source_reuse", "rdma.deadline_bw_arbitration",
        "rdma.priority_promotion_per_entry", "rdma.scheduling.smart_selection", "tcp.nodelay",
        "tcp.keepalive", "shm.enable", "shm.single_copy", "bootstrap.host_store"}) {
    for (const char* bad : {"\"true\"", "1", "0", "null", "\"yes\"", "[true]"}) {
      add_reject(r, path, bad);
    }
  }

  // Unsigned integers: no strings, fractions, negatives, booleans; bounds are inclusive.
  struct UIntField {
    const char* path;
    std::uint64_t min;
    std::uint64_t max;
    bool optional;
  };
  constexpr std::uint64_t u32 = 0xffffffffULL;
  for (const UIntField& f : std::initializer_list<UIntField>{
           {"num_lanes", 1, 64, false},
           {"rdma.port", 1, 255, true},
           {"rdma.gid_index", 0, 255, true},
           {"rdma.preferred_numa_node", 0, 4095, true},
           {"rdma.scheduling.multipath_probe_period", 1, u32, false},
           {"rdma.max_endpoints", 1, u32, false},
           {"rdma.max_grants", 1, u32, false},
           {"rdma.max_send_wr", 1, 65536, false},
           {"rdma.max_cqes", 1, 4194304, false},
           {"rdma.max_cached_mrs", 1, u32, false},
           {"rdma.max_window_key_indices", 1, 1U << 24, false},
           {"rdma.max_rd_atomic", 0, 255, false},
           {"rdma.max_dest_rd_atomic", 0, 255, false},
           {"rdma.signal_interval", 1, 65536, false},
           {"rdma.rail_error_threshold", 1, u32, false},
           {"rdma.max_rail_pairs", 1, u32, false},
           {"tcp.streams_per_peer", 1, 64, false},
       }) {
    for (const char* bad : {"\"16\"", "16.5", "16.0", "-1", "true", "[16]", "\"\""}) {
      add_reject(r, f.path, bad);
    }
    if (!f.optional) add_reject(r, f.path, "null");
    if (f.min > 0) add_reject(r, f.path, std::to_string(f.min - 1));
    add_reject(r, f.path, std::to_string(f.max + 1));
  }

  // Durations are strings with a unit.
  for (const char* path :
       {"rdma.priority_promotion_timeout", "rdma.slot_rotation_interval", "rdma.rail_error_window",
        "rdma.rail_cooldown", "rdma.rail_probe_interval", "rdma.monitor_interval",
        "rdma.destroy_timeout", "tcp.connect_timeout", "tcp.peer_timeout", "bootstrap.timeout",
        "bootstrap.connect_timeout", "bootstrap.shutdown_timeout"}) {
    for (const char* bad : {"10", "10.5", "\"10\"", "\"-1s\"", "\"10 parsecs\"", "\"ms\"", "\"\"",
                            "true", "null", "[\"10ms\"]"}) {
      add_reject(r, path, bad);
    }
    add_reject(r, path, "\"9000h\"", "got 9000h");  // beyond every field's maximum
  }
  add_reject(r, "rdma.slot_rotation_interval", "\"0ms\"", "got 0s");
  add_reject(r, "rdma.slot_rotation_interval", "\"999us\"", "got 999us");
  add_reject(r, "rdma.slot_rotation_interval", "\"11s\"", "got 11s");
  add_reject(r, "rdma.monitor_interval", "\"5ms\"", "got 5ms");
  add_reject(r, "rdma.monitor_interval", "\"61m\"", "got 61m");
  add_reject(r, "rdma.rail_error_window", "\"0s\"", "got 0s");
  add_reject(r, "rdma.rail_cooldown", "\"0s\"", "got 0s");
  add_reject(r, "rdma.destroy_timeout", "\"0s\"", "got 0s");
  add_reject(r, "tcp.connect_timeout", "\"0s\"", "got 0s");
  add_reject(r, "tcp.peer_timeout", "\"0s\"", "got 0s");
  add_reject(r, "bootstrap.timeout", "\"0s\"", "got 0s");
  add_reject(r, "bootstrap.connect_timeout", "\"0s\"", "got 0s");

  // Byte counts: integers or strings with a binary/decimal unit.
  for (const char* path : {"rdma.max_direct_bytes", "rdma.max_staging_bytes",
                           "rdma.max_cached_mr_bytes", "rdma.block_size", "tcp.send_buffer_bytes",
                           "tcp.recv_buffer_bytes", "bootstrap.max_value_bytes"}) {
    for (const char* bad :
         {"-1", "1.5", "true", "null", "\"lots\"", "\"64XB\"", "\"-4KiB\"", "\"1.5\"", "[1]"}) {
      add_reject(r, path, bad);
    }
  }
  add_reject(r, "rdma.max_direct_bytes", "0", "got 0");
  add_reject(r, "rdma.max_staging_bytes", "\"0MiB\"", "got 0");
  add_reject(r, "rdma.max_cached_mr_bytes", "1125899906842625", "got 1125899906842625");
  add_reject(r, "rdma.block_size", "\"2GiB\"", "got 2147483648");
  add_reject(r, "tcp.send_buffer_bytes", "\"3GiB\"", "got 3221225472");
  add_reject(r, "bootstrap.max_value_bytes", "0", "got 0");

  // Real number.
  for (const char* bad : {"\"400\"", "true", "null", "[400]"}) {
    add_reject(r, "rdma.default_bandwidth_gbps", bad);
  }
  add_reject(r, "rdma.default_bandwidth_gbps", "0", "got 0");
  add_reject(r, "rdma.default_bandwidth_gbps", "-1", "got -1");
  add_reject(r, "rdma.default_bandwidth_gbps", "1000001", "got 1000001");

  // Tier weights: exactly three positive numbers.
  const std::string tw = "rdma.scheduling.tier_weights";
  for (const char* bad : {"[1,5]", "[1,5,10,20]", "\"1,5,10\"", "1", "null", "{}"}) {
    add_reject(r, tw, bad);
  }
  add_reject(r, tw, "[1,\"5\",10]", "\"5\"", tw + "[1]");
  add_reject(r, tw, "[1,5,true]", "true", tw + "[2]");
  add_reject(r, tw, "[1,0,10]", "element 1");
  add_reject(r, tw, "[1,5,-10]", "element 2");

  // Enumerations.
  for (const char* bad : {"\"spin\"", "\"eventdriven\"", "\"\"", "1", "null", "true"}) {
    add_reject(r, "progress_mode", bad);
  }
  for (const char* bad : {"\"pinned\"", "\"\"", "0", "null"})
    add_reject(r, "rdma.host_memory", bad);
  for (const char* bad : {"\"gpu\"", "\"gpudirect\"", "true", "null"}) {
    add_reject(r, "rdma.cuda_memory", bad);
  }
  for (const char* bad : {"\"dma_buf\"", "\"nvidia_peermem\"", "\"none\"", "2"}) {
    add_reject(r, "rdma.gpu_direct_registration", bad);
  }

  // Strings.
  const std::string long257(257, 'n');
  const std::string long4097(4097, 'p');
  for (const char* bad : {"5", "true", "[\"mlx5_0\"]", "{}"}) add_reject(r, "rdma.device", bad);
  add_reject(r, "rdma.device", "\"\"", "got ''");
  add_reject(r, "rdma.device", "\"" + long257 + "\"", "got 'nnnnnnnn");
  for (const char* bad : {"7", "false"}) add_reject(r, "rdma.custom_json_path", bad);
  add_reject(r, "rdma.custom_json_path", "\"\"", "got ''");
  add_reject(r, "rdma.custom_json_path", "\"" + long4097 + "\"", "got 'pppppppp");
  for (const char* path : {"tcp.interface", "bootstrap.interface"}) {
    for (const char* bad : {"5", "null", "[\"eth0\"]"}) add_reject(r, path, bad);
    add_reject(r, path, "\"" + long257 + "\"", "got 'nnnnnnnn");
  }
  for (const char* bad : {"1", "null"}) add_reject(r, "topology.hwloc_xml", bad);
  add_reject(r, "topology.hwloc_xml", "\"" + long4097 + "\"", "got 'pppppppp");
  for (const char* bad : {"5", "null", "true"}) add_reject(r, "bootstrap.store", bad);
  add_reject(r, "bootstrap.store", "\"nohost\"", "got 'nohost'");
  add_reject(r, "bootstrap.store", "\"host:99999\"", "got 'host:99999'");
  add_reject(r, "bootstrap.store", "\":29500\"", "got ':29500'");
  for (const char* bad : {"5", "[]"}) add_reject(r, "rdma.shared_quota_shm_path", bad);
  add_reject(r, "rdma.shared_quota_shm_path", "\"a/b\"", "got 'a/b'");
  add_reject(r, "rdma.shared_quota_shm_path", "\"/\"", "got '/'");
  add_reject(r, "rdma.shared_quota_shm_path", "\"/a/b\"", "got '/a/b'");

  // String lists.
  for (const char* path : {"rdma.rdma_whitelist", "rdma.rdma_blacklist"}) {
    for (const char* bad : {"\"mlx5_0\"", "null", "5", "{}"}) add_reject(r, path, bad);
    add_reject(r, path, "[\"mlx5_0\",1]", "1", std::string(path) + "[1]");
    add_reject(r, path, "[\"\"]", "got ''", std::string(path) + "[0]");
  }

  // NIC mask.
  const std::string dm = "rdma.device_mask";
  for (const char* bad : {"3", "\"0,3\"", "{}", "true"}) add_reject(r, dm, bad);
  add_reject(r, dm, "[64]", "64", dm + "[0]");
  add_reject(r, dm, "[0,99]", "99", dm + "[1]");
  add_reject(r, dm, "[-1]", "-1", dm + "[0]");
  add_reject(r, dm, "[\"1\"]", "\"1\"", dm + "[0]");
  add_reject(r, dm, "[1.5]", "1.5", dm + "[0]");
  add_reject(r, dm, "[]", "an empty mask");

  // Inline priority matrix: an object or a string holding one.
  for (const char* bad : {"5", "[1]", "true"}) add_reject(r, "rdma.priority_matrix", bad);
  add_reject(r, "rdma.priority_matrix", "\"[1,2]\"", "not a JSON object");
  add_reject(r, "rdma.priority_matrix", "\"{\\\"cpu:0\\\":\"", "not a JSON object");

  // Sections must be objects.
  for (const auto& [path, bad] :
       std::initializer_list<std::pair<const char*, const char*>>{{"rdma", "5"},
                                                                  {"rdma", "null"},
                                                                  {"tcp", "[]"},
                                                                  {"shm", "null"},
                                                                  {"bootstrap", "\"x\""},
                                                                  {"topology", "true"},
                                                                  {"rdma.scheduling", "1"},
                                                                  {"rdma.scheduling", "[]"}}) {
    add_reject(r, path, bad);
  }
  return r;
}

class ConfigJsonReject : public ::testing::TestWithParam<Reject> {};

TEST_P(ConfigJsonReject, IsAConfigurationErrorNamingPathAndValue) {
  const Reject& c = GetParam();
  const std::string doc = doc_at(c.path, c.value);
  auto parsed = EngineConfig::from_json(doc);
  ASSERT_FALSE(parsed.ok()) << "accepted " << doc;
  EXPECT_EQ(parsed.status().code(), Errc::Configuration) << parsed.status().to_string();
  EXPECT_CONTAINS(parsed.status().message(), c.at + ": expected");
  EXPECT_CONTAINS(parsed.status().message(), c.shows);
}

INSTANTIATE_TEST_SUITE_P(Fields, ConfigJsonReject, ::testing::ValuesIn(reject_cases()),
                         [](const ::testing::TestParamInfo<Reject>& p) {
                           std::string value = sanitize(p.param.value);
                           if (value.size() > 24) value = value.substr(0, 24);
                           return std::to_string(p.index) + "_" + sanitize(p.param.path) + "_" +
                                  value;
                         });

// Accepted spellings and the value they produce (as to_json writes it).
struct Accept {
  std::string path;
  std::string value;     // JSON text in the document
  std::string expected;  // JSON text of what to_json reports at that path
};

class ConfigJsonAccept : public ::testing::TestWithParam<Accept> {};

TEST_P(ConfigJsonAccept, ProducesTheValue) {
  const Accept& c = GetParam();
  auto parsed = EngineConfig::from_json(doc_at(c.path, c.value));
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(value_at(json::parse(parsed->to_json()), c.path), json::parse(c.expected));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ConfigJsonAccept,
    ::testing::ValuesIn(std::vector<Accept>{
        {"num_lanes", "1", "1"},
        {"num_lanes", "64", "64"},
        {"progress_mode", "\"event_driven\"", "\"event_driven\""},
        {"progress_mode", "\"polling\"", "\"polling\""},
        {"rdma.port", "255", "255"},
        {"rdma.port", "null", "null"},
        {"rdma.gid_index", "0", "0"},
        {"rdma.max_send_wr", "65536", "65536"},
        {"rdma.max_window_key_indices", "16777216", "16777216"},
        {"rdma.max_rd_atomic", "0", "0"},
        {"rdma.max_endpoints", "4294967295", "4294967295"},
        {"rdma.host_memory", "\"staged\"", "\"staged\""},
        {"rdma.cuda_memory", "\"direct\"", "\"direct\""},
        {"rdma.gpu_direct_registration", "\"auto\"", "\"auto\""},
        {"rdma.gpu_direct_registration", "\"dmabuf\"", "\"dmabuf\""},
        {"rdma.gpu_direct_registration", "\"peermem\"", "\"peermem\""},
        {"rdma.priority_promotion_timeout", "\"10ms\"", "\"10ms\""},
        {"rdma.priority_promotion_timeout", "\"0s\"", "\"0s\""},
        {"rdma.rail_cooldown", "\"1.5s\"", "\"1500ms\""},
        {"rdma.rail_cooldown", "\"2m\"", "\"2m\""},
        {"rdma.rail_probe_interval", "\"250us\"", "\"250us\""},
        {"rdma.slot_rotation_interval", "\"1ms\"", "\"1ms\""},
        {"rdma.slot_rotation_interval", "\"10s\"", "\"10s\""},
        {"rdma.monitor_interval", "\"1h\"", "\"1h\""},
        {"rdma.rail_probe_interval", "\"0s\"", "\"0s\""},
        {"rdma.priority_promotion_timeout", "\"100ns\"", "\"100ns\""},
        {"rdma.max_direct_bytes", "67108864", "67108864"},
        {"rdma.max_direct_bytes", "\"64MiB\"", "67108864"},
        {"rdma.max_staging_bytes", "\"1GiB\"", "1073741824"},
        {"rdma.block_size", "\"4KiB\"", "4096"},
        {"rdma.block_size", "\"4096\"", "4096"},
        {"rdma.block_size", "\"1GiB\"", "1073741824"},
        {"tcp.send_buffer_bytes", "0", "0"},
        {"tcp.recv_buffer_bytes", "\"2GiB\"", "2147483648"},
        {"bootstrap.max_value_bytes", "\"1MB\"", "1000000"},
        {"rdma.default_bandwidth_gbps", "200", "200.0"},
        {"rdma.default_bandwidth_gbps", "12.5", "12.5"},
        {"rdma.scheduling.tier_weights", "[1,2.5,4]", "[1.0,2.5,4.0]"},
        {"rdma.device", "\"mlx5_0\"", "\"mlx5_0\""},
        {"rdma.device", "null", "null"},
        {"rdma.rdma_whitelist", "[\"a\",\"b\"]", "[\"a\",\"b\"]"},
        {"rdma.rdma_blacklist", "[]", "[]"},
        {"rdma.device_mask", "[0,3]", "[0,3]"},
        {"rdma.device_mask", "[63,2,2]", "[2,63]"},
        {"rdma.device_mask", "null", "null"},
        {"rdma.shared_quota_shm_path", "\"/orbite-rdma-slots\"", "\"/orbite-rdma-slots\""},
        {"rdma.shared_quota_shm_path", "\"orbite\"", "\"orbite\""},
        {"bootstrap.store", "\"10.0.0.1:29500\"", "\"10.0.0.1:29500\""},
        {"bootstrap.store", "\"[::1]:29500\"", "\"[::1]:29500\""},
        {"bootstrap.store", "\"\"", "\"\""},
        {"tcp.interface", "\"^docker,lo\"", "\"^docker,lo\""},
        {"topology.hwloc_xml", "\"/tmp/topo.xml\"", "\"/tmp/topo.xml\""},
    }),
    [](const ::testing::TestParamInfo<Accept>& p) {
      std::string value = sanitize(p.param.value);
      if (value.size() > 24) value = value.substr(0, 24);
      return std::to_string(p.index) + "_" + sanitize(p.param.path) + "_" + value;
    });

TEST(ConfigJson, EnumSpellingsMapToTheTypedValues) {
  auto c = EngineConfig::from_json(
      R"({"progress_mode":"event_driven","rdma":{"host_memory":"staged","cuda_memory":"direct",
          "gpu_direct_registration":"dmabuf"}})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->progress_mode, ProgressMode::EventDriven);
  EXPECT_EQ(c->rdma.host_memory, RdmaHostMemory::Staged);
  EXPECT_EQ(c->rdma.cuda_memory, RdmaCudaMemory::Direct);
  EXPECT_EQ(c->rdma.gpu_direct_registration, GpuDirectRegistration::Dmabuf);

  for (const auto& [name, value] :
       std::initializer_list<std::pair<const char*, GpuDirectRegistration>>{
           {"auto", GpuDirectRegistration::Auto},
           {"dmabuf", GpuDirectRegistration::Dmabuf},
           {"peermem", GpuDirectRegistration::Peermem}}) {
    auto g = EngineConfig::from_json(
        doc_at("rdma.gpu_direct_registration", std::string("\"") + name + "\""));
    ASSERT_TRUE(g.ok()) << name << ": " << g.status().to_string();
    EXPECT_EQ(g->rdma.gpu_direct_registration, value) << name;
  }
  auto host_direct = EngineConfig::from_json(R"({"rdma":{"host_memory":"direct"}})");
  ASSERT_TRUE(host_direct.ok());
  EXPECT_EQ(host_direct->rdma.host_memory, RdmaHostMemory::Direct);
  auto polling = EngineConfig::from_json(R"({"progress_mode":"polling"})");
  ASSERT_TRUE(polling.ok());
  EXPECT_EQ(polling->progress_mode, ProgressMode::Polling);
}

TEST(ConfigJson, TypedValuesOfAcceptedFields) {
  auto c = EngineConfig::from_json(R"({
    "num_lanes": 8,
    "rdma": {
      "device": "mlx5_1", "port": 2, "gid_index": 3,
      "rdma_whitelist": ["mlx5_0", "mlx5_1"], "rdma_blacklist": ["mlx5_9"],
      "device_mask": [0, 3, 63], "preferred_numa_node": 1,
      "max_send_wr": 32, "max_direct_bytes": "128MiB", "block_size": 131072,
      "rail_cooldown": "45s", "priority_promotion_timeout": "1500us",
      "default_bandwidth_gbps": 100,
      "scheduling": {"smart_selection": false, "tier_weights": [1, 2, 3],
                     "multipath_probe_period": 7}
    },
    "tcp": {"peer_timeout": "2m", "send_buffer_bytes": "4MiB"}
  })");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_lanes, 8u);
  EXPECT_EQ(c->rdma.device, std::optional<std::string>("mlx5_1"));
  EXPECT_EQ(c->rdma.port, std::optional<std::uint32_t>(2));
  EXPECT_EQ(c->rdma.gid_index, std::optional<std::uint32_t>(3));
  EXPECT_EQ(c->rdma.rdma_whitelist, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(c->rdma.rdma_blacklist, (std::vector<std::string>{"mlx5_9"}));
  EXPECT_EQ(c->rdma.device_mask,
            std::optional<std::uint64_t>((1ULL << 0) | (1ULL << 3) | (1ULL << 63)));
  EXPECT_EQ(c->rdma.preferred_numa_node, std::optional<std::uint32_t>(1));
  EXPECT_EQ(c->rdma.max_send_wr, 32u);
  EXPECT_EQ(c->rdma.max_direct_bytes, 128 * kMiB);
  EXPECT_EQ(c->rdma.block_size, 128 * kKiB);
  EXPECT_EQ(c->rdma.rail_cooldown, Duration(45s));
  EXPECT_EQ(c->rdma.priority_promotion_timeout, Duration(1500us));
  EXPECT_EQ(c->rdma.default_bandwidth_gbps, 100.0);
  EXPECT_FALSE(c->rdma.scheduling.smart_selection);
  EXPECT_EQ(c->rdma.scheduling.tier_weights, (std::array<double, 3>{1, 2, 3}));
  EXPECT_EQ(c->rdma.scheduling.multipath_probe_period, 7u);
  EXPECT_EQ(c->tcp.peer_timeout, Duration(2min));
  EXPECT_EQ(c->tcp.send_buffer_bytes, 4 * kMiB);
  // Fields not named keep their defaults.
  EXPECT_EQ(c->rdma.max_cqes, 1024u);
  EXPECT_EQ(c->rdma.cuda_memory, RdmaCudaMemory::Staged);
}

TEST(ConfigJson, NullUnsetsOptionalFields) {
  auto c = EngineConfig::from_json(
      R"({"rdma":{"device":null,"port":null,"gid_index":null,"device_mask":null,
          "preferred_numa_node":null,"priority_matrix":null,"custom_json_path":null,
          "shared_quota_shm_path":null}})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->rdma.device);
  EXPECT_FALSE(c->rdma.port);
  EXPECT_FALSE(c->rdma.gid_index);
  EXPECT_FALSE(c->rdma.device_mask);
  EXPECT_FALSE(c->rdma.preferred_numa_node);
  EXPECT_FALSE(c->rdma.priority_matrix);
  EXPECT_FALSE(c->rdma.custom_json_path);
  EXPECT_FALSE(c->rdma.shared_quota_shm_path);
}

TEST(ConfigJson, DeviceMaskArrayBecomesABitmask) {
  auto c = EngineConfig::from_json(R"({"rdma":{"device_mask":[0,3]}})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->rdma.device_mask, std::optional<std::uint64_t>(0b1001));
  auto top = EngineConfig::from_json(R"({"rdma":{"device_mask":[63]}})");
  ASSERT_TRUE(top.ok()) << top.status().to_string();
  EXPECT_EQ(top->rdma.device_mask, std::optional<std::uint64_t>(1ULL << 63));

  auto too_high = EngineConfig::from_json(R"({"rdma":{"device_mask":[1,64]}})");
  ASSERT_FALSE(too_high.ok());
  EXPECT_EQ(too_high.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(too_high.status().message(), "rdma.device_mask[1]");
  auto empty = EngineConfig::from_json(R"({"rdma":{"device_mask":[]}})");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(empty.status().message(), "rdma.device_mask");
}

TEST(ConfigJson, PriorityMatrixAcceptsAnObjectOrAStringHoldingOne) {
  const std::string matrix =
      R"({"cpu:0":[["mlx5_0"],["mlx5_1"]],"cuda:0":[["mlx5_1"],["mlx5_0"]]})";
  auto as_object = EngineConfig::from_json(R"({"rdma":{"priority_matrix":)" + matrix + "}}");
  ASSERT_TRUE(as_object.ok()) << as_object.status().to_string();
  ASSERT_TRUE(as_object->rdma.priority_matrix.has_value());
  EXPECT_EQ(json::parse(*as_object->rdma.priority_matrix), json::parse(matrix));

  json doc;
  doc["rdma"]["priority_matrix"] = matrix;  // a string holding the object
  auto as_string = EngineConfig::from_json(doc.dump());
  ASSERT_TRUE(as_string.ok()) << as_string.status().to_string();
  EXPECT_EQ(as_string->rdma.priority_matrix, std::optional<std::string>(matrix));
}

TEST(ConfigJson, PriorityMatrixIsLimitedToOneMiB) {
  constexpr size_t kLimit = 1 << 20;
  for (bool as_string : {true, false}) {
    SCOPED_TRACE(as_string ? "string form" : "object form");
    json at_limit;
    json over_limit;
    if (as_string) {
      at_limit["rdma"]["priority_matrix"] = object_text_of_size(kLimit);
      over_limit["rdma"]["priority_matrix"] = object_text_of_size(kLimit + 1);
    } else {
      at_limit["rdma"]["priority_matrix"] = json::parse(object_text_of_size(kLimit));
      over_limit["rdma"]["priority_matrix"] = json::parse(object_text_of_size(kLimit + 1));
    }
    auto ok = EngineConfig::from_json(at_limit.dump());
    ASSERT_TRUE(ok.ok()) << ok.status().to_string();
    EXPECT_EQ(ok->rdma.priority_matrix->size(), kLimit);

    auto too_big = EngineConfig::from_json(over_limit.dump());
    ASSERT_FALSE(too_big.ok());
    EXPECT_EQ(too_big.status().code(), Errc::Configuration);
    EXPECT_CONTAINS(too_big.status().message(), "rdma.priority_matrix");
    EXPECT_CONTAINS(too_big.status().message(), std::to_string(kLimit + 1));
  }
}

// A priority_matrix string that is not a JSON object is reported with the text itself.
TEST(ConfigJson, PriorityMatrixErrorShowsTheBadText) {
  auto bad = EngineConfig::from_json(R"({"rdma":{"priority_matrix":"not json"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(bad.status().message(), "rdma.priority_matrix");
  EXPECT_CONTAINS(bad.status().message(), "not json");
}

TEST(ConfigJson, ErrorMessageShowsExpectationAndValue) {
  auto c = EngineConfig::from_json(R"({"rdma":{"max_send_wr":"16"}})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(c.status().message(), "rdma.max_send_wr");
  EXPECT_CONTAINS(c.status().message(), "\"16\"");
  EXPECT_CONTAINS(c.status().message(), "[1, 65536]");
}

// ------------------------------------------------------------------------------------------------
// Unknown keys, duplicate keys, documents that are not objects.

struct UnknownKey {
  const char* doc;
  const char* key_path;    // the full path the message must name
  const char* suggestion;  // full path suggested, or nullptr for none
};

class ConfigUnknownKey : public ::testing::TestWithParam<UnknownKey> {};

TEST_P(ConfigUnknownKey, IsRejectedWithItsFullPath) {
  const UnknownKey& c = GetParam();
  auto parsed = EngineConfig::from_json(c.doc);
  ASSERT_FALSE(parsed.ok()) << "accepted " << c.doc;
  EXPECT_EQ(parsed.status().code(), Errc::Configuration);
  const std::string& message = parsed.status().message();
  EXPECT_CONTAINS(message, std::string("unknown key ") + c.key_path);
  if (c.suggestion != nullptr) {
    EXPECT_CONTAINS(message, std::string("did you mean ") + c.suggestion + "?");
  } else {
    EXPECT_EQ(message.find("did you mean"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Keys, ConfigUnknownKey,
    ::testing::Values(
        UnknownKey{R"({"num_lane":2})", "num_lane", "num_lanes"},
        UnknownKey{R"({"num_lanes":2,"progres_mode":"polling"})", "progres_mode", "progress_mode"},
        UnknownKey{R"({"rmda":{}})", "rmda", "rdma"},
        UnknownKey{R"({"completely_unrelated_key":1})", "completely_unrelated_key", nullptr},
        UnknownKey{R"({"rdma":{"max_send_wrs":8}})", "rdma.max_send_wrs", "rdma.max_send_wr"},
        UnknownKey{R"({"rdma":{"devic":"mlx5_0"}})", "rdma.devic", "rdma.device"},
        UnknownKey{R"({"rdma":{"num_lanes":2}})", "rdma.num_lanes", nullptr},
        UnknownKey{R"({"rdma":{"scheduling":{"smart_selectoin":false}}})",
                   "rdma.scheduling.smart_selectoin", "rdma.scheduling.smart_selection"},
        UnknownKey{R"({"rdma":{"scheduling":{"zzzzzzzzzzzz":1}}})", "rdma.scheduling.zzzzzzzzzzzz",
                   nullptr},
        UnknownKey{R"({"tcp":{"nodelayy":true}})", "tcp.nodelayy", "tcp.nodelay"},
        UnknownKey{R"({"shm":{"enabled":true}})", "shm.enabled", "shm.enable"},
        UnknownKey{R"({"bootstrap":{"timout":"1s"}})", "bootstrap.timout", "bootstrap.timeout"},
        UnknownKey{R"({"topology":{"hwlocxml":"/x"}})", "topology.hwlocxml",
                   "topology.hwloc_xml"}));

TEST(ConfigJson, DuplicateKeysAreRejected) {
  for (const char* doc :
       {R"({"num_lanes":1,"num_lanes":2})", R"({"rdma":{"max_send_wr":8,"max_send_wr":8}})",
        R"({"rdma":{},"rdma":{}})",
        R"({"rdma":{"scheduling":{"smart_selection":true,"smart_selection":false}}})"}) {
    auto parsed = EngineConfig::from_json(doc);
    ASSERT_FALSE(parsed.ok()) << "accepted " << doc;
    EXPECT_EQ(parsed.status().code(), Errc::Configuration) << doc;
    EXPECT_CONTAINS(parsed.status().message(), "more than once");
  }
  auto message = EngineConfig::from_json(R"({"rdma":{"max_send_wr":8,"max_send_wr":9}})");
  ASSERT_FALSE(message.ok());
  EXPECT_CONTAINS(message.status().message(), "max_send_wr");
  // The same key in two different objects is fine.
  auto distinct = EngineConfig::from_json(
      R"({"tcp":{"interface":"eth0","connect_timeout":"1s"},
          "bootstrap":{"interface":"eth1","connect_timeout":"2s"}})");
  ASSERT_TRUE(distinct.ok()) << distinct.status().to_string();
  EXPECT_EQ(distinct->tcp.interface, "eth0");
  EXPECT_EQ(distinct->bootstrap.interface, "eth1");
}

TEST(ConfigJson, NonObjectDocumentsAreRejected) {
  for (const char* doc : {"[]", "[{}]", "42", "\"{}\"", "null", "true"}) {
    auto parsed = EngineConfig::from_json(doc);
    ASSERT_FALSE(parsed.ok()) << "accepted " << doc;
    EXPECT_EQ(parsed.status().code(), Errc::Configuration) << doc;
    EXPECT_CONTAINS(parsed.status().message(), "must be a JSON object");
  }
}

// ------------------------------------------------------------------------------------------------
// Every class of parser failure is a Configuration error naming the field, never an exception.
// nlohmann's parser itself throws out_of_range 406 for a number beyond a double (1e400), and its
// parse errors name a byte, not a field.

struct Unparsable {
  std::string kind;   // the class of failure (the test's name)
  std::string doc;    // the whole document
  std::string at;     // the field the message must name
  std::string shows;  // what else it must show: the value, the parser's reason
};

class ConfigJsonFailure : public ::testing::TestWithParam<Unparsable> {};

TEST_P(ConfigJsonFailure, IsAConfigurationErrorNamingTheField) {
  const Unparsable& c = GetParam();
  std::string thrown;
  try {
    auto parsed = EngineConfig::from_json(c.doc);
    ASSERT_FALSE(parsed.ok()) << "accepted " << c.doc;
    EXPECT_EQ(parsed.status().code(), Errc::Configuration) << parsed.status().to_string();
    EXPECT_CONTAINS(parsed.status().message(), "config: " + c.at + ": ");
    EXPECT_CONTAINS(parsed.status().message(), c.shows);
  } catch (const std::exception& e) {
    thrown = e.what();
  }
  EXPECT_EQ(thrown, "") << "from_json threw for " << c.doc;
}

const std::string kOverflow = "invalid JSON: [json.exception.out_of_range.406] number overflow";

INSTANTIATE_TEST_SUITE_P(
    Classes, ConfigJsonFailure,
    ::testing::ValuesIn(std::vector<Unparsable>{
        // A number beyond a double, for every kind of numeric field and at every depth.
        {"IntegerOverflow", R"({"rdma": {"max_grants": 1e400}})", "rdma.max_grants",
         kOverflow + " parsing '1e400'"},
        {"NegativeIntegerOverflow", R"({"rdma": {"max_grants": -1e400}})", "rdma.max_grants",
         "parsing '-1e400'"},
        {"TopLevelIntegerOverflow", R"({"num_lanes": 1e400})", "num_lanes", kOverflow},
        {"NestedIntegerOverflow", R"({"rdma": {"scheduling": {"multipath_probe_period": 1E+999}}})",
         "rdma.scheduling.multipath_probe_period", "parsing '1E+999'"},
        {"FloatOverflow", R"({"rdma": {"default_bandwidth_gbps": 1e400}})",
         "rdma.default_bandwidth_gbps", kOverflow + " parsing '1e400'"},
        {"NegativeFloatOverflow", R"({"rdma": {"default_bandwidth_gbps": -1e400}})",
         "rdma.default_bandwidth_gbps", "parsing '-1e400'"},
        {"ByteCountOverflow", R"({"rdma": {"max_direct_bytes": 1e400}})", "rdma.max_direct_bytes",
         kOverflow},
        {"FloatArrayElementOverflow",
         R"({"rdma": {"scheduling": {"tier_weights": [1, 1e400, 2]}}})",
         "rdma.scheduling.tier_weights[1]", kOverflow},
        {"IntegerArrayElementOverflow", R"({"rdma": {"device_mask": [0, 3, 1e400]}})",
         "rdma.device_mask[2]", kOverflow},
        {"OverflowInsideAnInlineMatrix",
         R"({"rdma": {"priority_matrix": {"cpu:0": [["mlx5_0"], [1e400]]}}})",
         "rdma.priority_matrix.cpu:0[1][0]", kOverflow},
        {"OverflowInsideAMatrixString",
         R"({"rdma": {"priority_matrix": "{\"cpu:0\": [[\"mlx5_0\"], [1e400]]}"}})",
         "rdma.priority_matrix", "which is not a JSON object (" + kOverflow + " parsing '1e400'"},
        // Integers beyond 64 bits parse as doubles, which an integer field rejects with its range.
        {"IntegerBeyondUint64", R"({"rdma": {"max_grants": 18446744073709551616}})",
         "rdma.max_grants",
         "expected an unsigned integer in [1, 4294967295], got 1.8446744073709552e+19 (number)"},
        {"IntegerBelowInt64", R"({"rdma": {"max_direct_bytes": -9223372036854775809}})",
         "rdma.max_direct_bytes", "got -9.223372036854776e+18 (number)"},
        // Numbers of the wrong kind.
        {"NegativeForUnsigned", R"({"rdma": {"max_grants": -1}})", "rdma.max_grants",
         "got -1 (number)"},
        {"NegativeByteCount", R"({"rdma": {"max_staging_bytes": -4096}})", "rdma.max_staging_bytes",
         "got -4096 (number)"},
        {"FloatForInteger", R"({"rdma": {"max_grants": 2.5}})", "rdma.max_grants",
         "got 2.5 (number)"},
        {"ExponentForInteger", R"({"rdma": {"max_grants": 1e3}})", "rdma.max_grants",
         "got 1000.0 (number)"},
        {"StringForInteger", R"({"rdma": {"max_grants": "16"}})", "rdma.max_grants",
         "got \"16\" (string)"},
        {"StringForFloat", R"({"rdma": {"default_bandwidth_gbps": "100"}})",
         "rdma.default_bandwidth_gbps", "got \"100\" (string)"},
        {"StringForFloatElement", R"({"rdma": {"scheduling": {"tier_weights": [1, "5", 10]}}})",
         "rdma.scheduling.tier_weights[1]", "got \"5\" (string)"},
        // Structure.
        {"ArrayForSection", R"({"rdma": [1]})", "rdma", "expected an object, got [1] (array)"},
        {"NumberForNestedSection", R"({"rdma": {"scheduling": 7}})", "rdma.scheduling",
         "expected an object, got 7 (number)"},
        // Malformed text: the field the parser was reading when it stopped.
        {"TruncatedInAValue", R"({"rdma": {"max_grants": )", "rdma.max_grants",
         "invalid JSON: [json.exception.parse_error.101] parse error at line 1, column 25"},
        {"TruncatedAfterAValue", R"({"rdma": {"max_grants": 16)", "rdma",
         "unexpected end of input"},
        {"TruncatedInAString", R"({"tcp": {"interface": "eth0)", "tcp.interface",
         "missing closing quote"},
        {"TruncatedInAnArray", R"({"rdma": {"rdma_whitelist": ["mlx5_0", )",
         "rdma.rdma_whitelist[1]", "unexpected end of input"},
        {"BadLiteralInAValue", R"({"rdma": {"strict_local_numa": tru}})", "rdma.strict_local_numa",
         "invalid literal"},
    }),
    [](const ::testing::TestParamInfo<Unparsable>& p) { return p.param.kind; });

TEST(ConfigJson, OverflowingNumberNamesTheFieldTheTextAndTheReason) {
  auto parsed = EngineConfig::from_json(R"({"rdma": {"max_grants": 1e400}})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), Errc::Configuration);
  EXPECT_EQ(parsed.status().message(),
            "config: rdma.max_grants: invalid JSON: [json.exception.out_of_range.406] number "
            "overflow parsing '1e400'");
}

// The parser quotes the token it stopped at: a megabyte of digits or bytes that are not UTF-8
// must not come back verbatim.
TEST(ConfigJson, ParserMessagesAreBoundedPrintableText) {
  for (const std::string& doc : {R"({"rdma": {"max_grants": 1)" + std::string(100000, '0') + "}}",
                                 std::string(R"({"tcp": {"interface": ")") + "eth\xff\x01\"}}"}) {
    auto parsed = EngineConfig::from_json(doc);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), Errc::Configuration);
    const std::string& message = parsed.status().message();
    EXPECT_LT(message.size(), 400u) << message.substr(0, 400);
    EXPECT_TRUE(std::all_of(message.begin(), message.end(), [](char c) {
      return c >= 0x20 && c < 0x7f;
    })) << message;
  }
  auto long_number =
      EngineConfig::from_json(R"({"rdma": {"max_grants": 1)" + std::string(100000, '0') + "}}");
  EXPECT_CONTAINS(long_number.status().message(), "config: rdma.max_grants: invalid JSON");
  EXPECT_CONTAINS(long_number.status().message(), "...");
  auto not_utf8 =
      EngineConfig::from_json(std::string(R"({"tcp": {"interface": ")") + "eth\xff\x01\"}}");
  EXPECT_CONTAINS(not_utf8.status().message(), "config: tcp.interface: invalid JSON");
  EXPECT_CONTAINS(not_utf8.status().message(), "\\xff");
}

TEST(ConfigJson, InvalidJsonIsRejected) {
  for (const char* doc : {"", "   ", "{", "{\"num_lanes\": }", "{'num_lanes': 1}",
                          "{\"num_lanes\":1,}", "{} {}", "// comment\n{}", "{\"num_lanes\":01}"}) {
    auto parsed = EngineConfig::from_json(doc);
    ASSERT_FALSE(parsed.ok()) << "accepted " << doc;
    EXPECT_EQ(parsed.status().code(), Errc::Configuration) << doc;
    EXPECT_CONTAINS(parsed.status().message(), "invalid JSON");
  }
}

}  // namespace
}  // namespace orbite
