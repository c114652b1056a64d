// Environment overrides of the configuration (ORBITE_<FIELD>, ORBITE_<SECTION>_<FIELD>, aliases,
// ORBITE_CONFIG) through an injected environment, and the unknown-variable check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
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
using config_internal::EnvFn;
using testing::sanitize;
using testing::TempFile;
using testing::value_at;

using Vars = std::map<std::string, std::string>;

EnvFn fake_env(Vars vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// ------------------------------------------------------------------------------------------------
// Accepted overrides, table-driven: variable, value, JSON path, what to_json then reports there.

struct EnvAccept {
  std::string var;
  std::string value;
  std::string path;
  std::string expected;  // JSON text
};

class ConfigEnvAccept : public ::testing::TestWithParam<EnvAccept> {};

TEST_P(ConfigEnvAccept, SetsTheField) {
  const EnvAccept& c = GetParam();
  EngineConfig config;
  std::vector<std::string> applied;
  Status s = config_internal::apply_env_overrides(config, fake_env({{c.var, c.value}}), &applied);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(value_at(json::parse(config.to_json()), c.path), json::parse(c.expected));
  EXPECT_EQ(applied, std::vector<std::string>{c.var + "=" + c.value});
}

INSTANTIATE_TEST_SUITE_P(
    Variables, ConfigEnvAccept,
    ::testing::ValuesIn(std::vector<EnvAccept>{
        {"ORBITE_NUM_LANES", "4", "num_lanes", "4"},
        {"ORBITE_NUM_LANES", " 8 ", "num_lanes", "8"},
        {"ORBITE_PROGRESS_MODE", "event_driven", "progress_mode", "\"event_driven\""},
        {"ORBITE_RDMA_DEVICE", "mlx5_1", "rdma.device", "\"mlx5_1\""},
        {"ORBITE_RDMA_PORT", "2", "rdma.port", "2"},
        {"ORBITE_RDMA_GID_INDEX", "3", "rdma.gid_index", "3"},
        {"ORBITE_RDMA_RDMA_WHITELIST", "a,b", "rdma.rdma_whitelist", "[\"a\",\"b\"]"},
        {"ORBITE_RDMA_RDMA_BLACKLIST", " mlx5_2 , mlx5_3 ", "rdma.rdma_blacklist",
         "[\"mlx5_2\",\"mlx5_3\"]"},
        {"ORBITE_RDMA_DEVICE_MASK", "0,3", "rdma.device_mask", "[0,3]"},
        {"ORBITE_RDMA_DEVICE_MASK", "63", "rdma.device_mask", "[63]"},
        {"ORBITE_RDMA_PREFERRED_NUMA_NODE", "1", "rdma.preferred_numa_node", "1"},
        {"ORBITE_RDMA_STRICT_LOCAL_NUMA", "1", "rdma.strict_local_numa", "true"},
        {"ORBITE_RDMA_STRICT_LOCAL_NUMA", "TRUE", "rdma.strict_local_numa", "true"},
        {"ORBITE_RDMA_PRIORITY_MATRIX", R"({"cpu:0":[["mlx5_0"],["mlx5_1"]]})",
         "rdma.priority_matrix", R"({"cpu:0":[["mlx5_0"],["mlx5_1"]]})"},
        {"ORBITE_RDMA_CUSTOM_JSON_PATH", "/etc/orbite/topo.json", "rdma.custom_json_path",
         "\"/etc/orbite/topo.json\""},
        {"ORBITE_RDMA_SCHEDULING_SMART_SELECTION", "false", "rdma.scheduling.smart_selection",
         "false"},
        {"ORBITE_RDMA_SCHEDULING_SMART_SELECTION", "0", "rdma.scheduling.smart_selection", "false"},
        {"ORBITE_RDMA_SCHEDULING_TIER_WEIGHTS", "1,2.5,4", "rdma.scheduling.tier_weights",
         "[1.0,2.5,4.0]"},
        {"ORBITE_RDMA_SCHEDULING_MULTIPATH_PROBE_PERIOD", "50",
         "rdma.scheduling.multipath_probe_period", "50"},
        {"ORBITE_RDMA_HOST_MEMORY", "staged", "rdma.host_memory", "\"staged\""},
        {"ORBITE_RDMA_CUDA_MEMORY", "direct", "rdma.cuda_memory", "\"direct\""},
        {"ORBITE_RDMA_GPU_DIRECT_REGISTRATION", "peermem", "rdma.gpu_direct_registration",
         "\"peermem\""},
        {"ORBITE_RDMA_DISABLE_GPU_DIRECT_RDMA", "true", "rdma.disable_gpu_direct_rdma", "true"},
        {"ORBITE_RDMA_LOG_SLICE_AFFINITY", "1", "rdma.log_slice_affinity", "true"},
        {"ORBITE_RDMA_GPU_SOURCE_REUSE", "true", "rdma.gpu_source_reuse", "true"},
        {"ORBITE_RDMA_DEADLINE_BW_ARBITRATION", "true", "rdma.deadline_bw_arbitration", "true"},
        {"ORBITE_RDMA_PRIORITY_PROMOTION_TIMEOUT", "20ms", "rdma.priority_promotion_timeout",
         "\"20ms\""},
        {"ORBITE_RDMA_PRIORITY_PROMOTION_PER_ENTRY", "true", "rdma.priority_promotion_per_entry",
         "true"},
        {"ORBITE_RDMA_SHARED_QUOTA_SHM_PATH", "/orbite-slots", "rdma.shared_quota_shm_path",
         "\"/orbite-slots\""},
        {"ORBITE_RDMA_SLOT_ROTATION_INTERVAL", "4ms", "rdma.slot_rotation_interval", "\"4ms\""},
        {"ORBITE_RDMA_MAX_ENDPOINTS", "256", "rdma.max_endpoints", "256"},
        {"ORBITE_RDMA_MAX_SEND_WR", "32", "rdma.max_send_wr", "32"},
        {"ORBITE_RDMA_MAX_CQES", "4096", "rdma.max_cqes", "4096"},
        {"ORBITE_RDMA_MAX_STAGING_BYTES", "128MiB", "rdma.max_staging_bytes", "134217728"},
        {"ORBITE_RDMA_MAX_STAGING_BYTES", "4096", "rdma.max_staging_bytes", "4096"},
        {"ORBITE_RDMA_MAX_CACHED_MR_BYTES", "1GiB", "rdma.max_cached_mr_bytes", "1073741824"},
        {"ORBITE_RDMA_MAX_RD_ATOMIC", "0", "rdma.max_rd_atomic", "0"},
        {"ORBITE_RDMA_SIGNAL_INTERVAL", "8", "rdma.signal_interval", "8"},
        {"ORBITE_RDMA_RAIL_ERROR_THRESHOLD", "5", "rdma.rail_error_threshold", "5"},
        {"ORBITE_RDMA_RAIL_ERROR_WINDOW", "1m", "rdma.rail_error_window", "\"1m\""},
        {"ORBITE_RDMA_RAIL_COOLDOWN", "1.5s", "rdma.rail_cooldown", "\"1500ms\""},
        {"ORBITE_RDMA_RAIL_PROBE_INTERVAL", "0s", "rdma.rail_probe_interval", "\"0s\""},
        {"ORBITE_RDMA_MAX_RAIL_PAIRS", "100", "rdma.max_rail_pairs", "100"},
        {"ORBITE_RDMA_BLOCK_SIZE", "1MiB", "rdma.block_size", "1048576"},
        {"ORBITE_RDMA_DEFAULT_BANDWIDTH_GBPS", "200.5", "rdma.default_bandwidth_gbps", "200.5"},
        {"ORBITE_RDMA_MONITOR_INTERVAL", "500ms", "rdma.monitor_interval", "\"500ms\""},
        {"ORBITE_RDMA_DESTROY_TIMEOUT", "1m", "rdma.destroy_timeout", "\"1m\""},
        {"ORBITE_TCP_INTERFACE", "eth0", "tcp.interface", "\"eth0\""},
        {"ORBITE_TCP_STREAMS_PER_PEER", "4", "tcp.streams_per_peer", "4"},
        {"ORBITE_TCP_NODELAY", "0", "tcp.nodelay", "false"},
        {"ORBITE_TCP_KEEPALIVE", "False", "tcp.keepalive", "false"},
        {"ORBITE_TCP_CONNECT_TIMEOUT", "5s", "tcp.connect_timeout", "\"5s\""},
        {"ORBITE_TCP_PEER_TIMEOUT", "2m", "tcp.peer_timeout", "\"2m\""},
        {"ORBITE_TCP_SEND_BUFFER_BYTES", "4MiB", "tcp.send_buffer_bytes", "4194304"},
        {"ORBITE_TCP_RECV_BUFFER_BYTES", "0", "tcp.recv_buffer_bytes", "0"},
        {"ORBITE_SHM_ENABLE", "false", "shm.enable", "false"},
        {"ORBITE_SHM_SINGLE_COPY", "0", "shm.single_copy", "false"},
        {"ORBITE_BOOTSTRAP_STORE", "10.0.0.1:29500", "bootstrap.store", "\"10.0.0.1:29500\""},
        {"ORBITE_BOOTSTRAP_HOST_STORE", "true", "bootstrap.host_store", "true"},
        {"ORBITE_BOOTSTRAP_INTERFACE", "ib0", "bootstrap.interface", "\"ib0\""},
        {"ORBITE_BOOTSTRAP_TIMEOUT", "90s", "bootstrap.timeout", "\"90s\""},
        {"ORBITE_BOOTSTRAP_CONNECT_TIMEOUT", "15s", "bootstrap.connect_timeout", "\"15s\""},
        {"ORBITE_BOOTSTRAP_MAX_VALUE_BYTES", "1MiB", "bootstrap.max_value_bytes", "1048576"},
        {"ORBITE_BOOTSTRAP_SHUTDOWN_TIMEOUT", "0s", "bootstrap.shutdown_timeout", "\"0s\""},
        {"ORBITE_TOPOLOGY_HWLOC_XML", "/tmp/t.xml", "topology.hwloc_xml", "\"/tmp/t.xml\""},
        {"ORBITE_SOCKET_IFNAME", "ib0", "tcp.interface", "\"ib0\""},
        {"ORBITE_TOPO_XML", "/tmp/alias.xml", "topology.hwloc_xml", "\"/tmp/alias.xml\""},
    }),
    [](const ::testing::TestParamInfo<EnvAccept>& p) {
      return std::to_string(p.index) + "_" + sanitize(p.param.var);
    });

// ------------------------------------------------------------------------------------------------
// Rejected overrides: an error naming the variable, the value and the JSON path.

struct EnvReject {
  std::string var;
  std::string value;
  std::string path;
};

class ConfigEnvReject : public ::testing::TestWithParam<EnvReject> {};

TEST_P(ConfigEnvReject, IsAnErrorNamingVariableAndValue) {
  const EnvReject& c = GetParam();
  EngineConfig config;
  Status s = config_internal::apply_env_overrides(config, fake_env({{c.var, c.value}}));
  ASSERT_FALSE(s.ok()) << c.var << "=" << c.value << " accepted";
  EXPECT_EQ(s.code(), Errc::Configuration);
  EXPECT_CONTAINS(s.message(), c.var);
  EXPECT_CONTAINS(s.message(), c.value.substr(0, 40));
  EXPECT_CONTAINS(s.message(), c.path);
  // Through load() as well.
  auto loaded = config_internal::load(fake_env({{c.var, c.value}}));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(loaded.status().message(), c.var);
}

INSTANTIATE_TEST_SUITE_P(
    Variables, ConfigEnvReject,
    ::testing::ValuesIn(std::vector<EnvReject>{
        {"ORBITE_NUM_LANES", "0", "num_lanes"},
        {"ORBITE_NUM_LANES", "65", "num_lanes"},
        {"ORBITE_NUM_LANES", "4.5", "num_lanes"},
        {"ORBITE_NUM_LANES", "four", "num_lanes"},
        {"ORBITE_NUM_LANES", "-1", "num_lanes"},
        {"ORBITE_NUM_LANES", "", "num_lanes"},
        {"ORBITE_PROGRESS_MODE", "spin", "progress_mode"},
        {"ORBITE_RDMA_PORT", "0", "rdma.port"},
        {"ORBITE_RDMA_MAX_SEND_WR", "abc", "rdma.max_send_wr"},
        {"ORBITE_RDMA_MAX_SEND_WR", "65537", "rdma.max_send_wr"},
        {"ORBITE_RDMA_STRICT_LOCAL_NUMA", "yes", "rdma.strict_local_numa"},
        {"ORBITE_RDMA_STRICT_LOCAL_NUMA", "2", "rdma.strict_local_numa"},
        {"ORBITE_RDMA_SCHEDULING_SMART_SELECTION", "off", "rdma.scheduling.smart_selection"},
        {"ORBITE_RDMA_SCHEDULING_TIER_WEIGHTS", "1,2", "rdma.scheduling.tier_weights"},
        {"ORBITE_RDMA_SCHEDULING_TIER_WEIGHTS", "1,0,2", "rdma.scheduling.tier_weights"},
        {"ORBITE_RDMA_SCHEDULING_TIER_WEIGHTS", "1,x,2", "rdma.scheduling.tier_weights"},
        {"ORBITE_RDMA_RAIL_COOLDOWN", "30", "rdma.rail_cooldown"},
        {"ORBITE_RDMA_RAIL_COOLDOWN", "0s", "rdma.rail_cooldown"},
        {"ORBITE_RDMA_SLOT_ROTATION_INTERVAL", "20s", "rdma.slot_rotation_interval"},
        {"ORBITE_RDMA_DEVICE_MASK", "0,64", "rdma.device_mask"},
        {"ORBITE_RDMA_DEVICE_MASK", "a", "rdma.device_mask"},
        {"ORBITE_RDMA_DEVICE_MASK", "0,,1", "rdma.device_mask"},
        {"ORBITE_RDMA_CUDA_MEMORY", "gpu", "rdma.cuda_memory"},
        {"ORBITE_RDMA_GPU_DIRECT_REGISTRATION", "dma-buf", "rdma.gpu_direct_registration"},
        {"ORBITE_RDMA_MAX_STAGING_BYTES", "lots", "rdma.max_staging_bytes"},
        {"ORBITE_RDMA_MAX_STAGING_BYTES", "0", "rdma.max_staging_bytes"},
        {"ORBITE_RDMA_DEFAULT_BANDWIDTH_GBPS", "fast", "rdma.default_bandwidth_gbps"},
        {"ORBITE_RDMA_DEFAULT_BANDWIDTH_GBPS", "0", "rdma.default_bandwidth_gbps"},
        {"ORBITE_RDMA_RDMA_WHITELIST", "a,,b", "rdma.rdma_whitelist"},
        {"ORBITE_RDMA_PRIORITY_MATRIX", "[1,2]", "rdma.priority_matrix"},
        {"ORBITE_RDMA_SHARED_QUOTA_SHM_PATH", "a/b", "rdma.shared_quota_shm_path"},
        {"ORBITE_TCP_STREAMS_PER_PEER", "-1", "tcp.streams_per_peer"},
        {"ORBITE_TCP_PEER_TIMEOUT", "10", "tcp.peer_timeout"},
        {"ORBITE_SHM_ENABLE", "enabled", "shm.enable"},
        {"ORBITE_BOOTSTRAP_STORE", "nohost", "bootstrap.store"},
        {"ORBITE_BOOTSTRAP_MAX_VALUE_BYTES", "2GiB", "bootstrap.max_value_bytes"},
        {"ORBITE_TOPOLOGY_HWLOC_XML", std::string(4097, 'x'), "topology.hwloc_xml"},
        {"ORBITE_SOCKET_IFNAME", std::string(300, 'e'), "tcp.interface"},
        // Numbers beyond their type: an integer beyond 64 bits or 1e400 is not an integer, and
        // a number beyond a double is not a number.
        {"ORBITE_RDMA_MAX_GRANTS", "1e400", "rdma.max_grants"},
        {"ORBITE_RDMA_MAX_GRANTS", "18446744073709551616", "rdma.max_grants"},
        {"ORBITE_RDMA_MAX_GRANTS", "2.5", "rdma.max_grants"},
        {"ORBITE_RDMA_MAX_DIRECT_BYTES", "1e400", "rdma.max_direct_bytes"},
        {"ORBITE_RDMA_DEFAULT_BANDWIDTH_GBPS", "1e400", "rdma.default_bandwidth_gbps"},
        {"ORBITE_RDMA_DEFAULT_BANDWIDTH_GBPS", "-1e400", "rdma.default_bandwidth_gbps"},
        {"ORBITE_RDMA_SCHEDULING_TIER_WEIGHTS", "1,1e400,2", "rdma.scheduling.tier_weights[1]"},
        {"ORBITE_RDMA_DEVICE_MASK", "0,1e400", "rdma.device_mask[1]"},
        {"ORBITE_RDMA_PRIORITY_MATRIX", R"({"cpu:0": [["mlx5_0"], [1e400]]})",
         "rdma.priority_matrix"},
        {"ORBITE_RDMA_PRIORITY_MATRIX", R"({"cpu:0": [["mlx5_0"], )", "rdma.priority_matrix"},
    }),
    [](const ::testing::TestParamInfo<EnvReject>& p) {
      return std::to_string(p.index) + "_" + sanitize(p.param.var);
    });

// ------------------------------------------------------------------------------------------------
// The specific overrides of the issue, typed.

TEST(ConfigEnv, OverridesReachTheTypedFields) {
  auto c = config_internal::load(fake_env({
      {"ORBITE_NUM_LANES", "4"},
      {"ORBITE_RDMA_MAX_SEND_WR", "32"},
      {"ORBITE_RDMA_CUDA_MEMORY", "direct"},
      {"ORBITE_RDMA_DEVICE_MASK", "0,3"},
      {"ORBITE_RDMA_RDMA_WHITELIST", "a,b"},
      {"ORBITE_RDMA_SCHEDULING_SMART_SELECTION", "false"},
      {"ORBITE_RDMA_RAIL_COOLDOWN", "45s"},
      {"ORBITE_RDMA_PRIORITY_PROMOTION_TIMEOUT", "250us"},
      {"ORBITE_TCP_PEER_TIMEOUT", "1500ms"},
      {"ORBITE_BOOTSTRAP_TIMEOUT", "2m"},
  }));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_lanes, 4u);
  EXPECT_EQ(c->rdma.max_send_wr, 32u);
  EXPECT_EQ(c->rdma.cuda_memory, rdma::RdmaCudaMemory::Direct);
  EXPECT_EQ(c->rdma.device_mask, std::optional<std::uint64_t>(0b1001));
  EXPECT_EQ(c->rdma.rdma_whitelist, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(c->rdma.scheduling.smart_selection);
  EXPECT_EQ(c->rdma.rail_cooldown, Duration(45s));
  EXPECT_EQ(c->rdma.priority_promotion_timeout, Duration(250us));
  EXPECT_EQ(c->tcp.peer_timeout, Duration(1500ms));
  EXPECT_EQ(c->bootstrap.timeout, Duration(2min));
  // Untouched fields keep their defaults.
  EXPECT_EQ(c->rdma.max_cqes, 1024u);
  EXPECT_EQ(c->rdma.max_grants, 64u);
}

TEST(ConfigEnv, NoVariablesMeansDefaults) {
  auto c = config_internal::load(fake_env({{"PATH", "/usr/bin"}, {"NCCL_SOCKET_IFNAME", "eth9"}}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->to_json(), EngineConfig().to_json());

  EngineConfig config;
  std::vector<std::string> applied;
  ASSERT_TRUE(config_internal::apply_env_overrides(config, fake_env({}), &applied).ok());
  EXPECT_TRUE(applied.empty());
  EXPECT_EQ(config.to_json(), EngineConfig().to_json());
}

TEST(ConfigEnv, EmptyValueUnsetsAnOptionalField) {
  EngineConfig config;
  config.rdma = rdma::RdmaConfig::pinned("mlx5_0");
  config.rdma.device_mask = 0b11;
  config.rdma.preferred_numa_node = 1;
  config.rdma.priority_matrix = "{}";
  config.rdma.rdma_whitelist = {"mlx5_0"};
  Status s = config_internal::apply_env_overrides(config,
                                                  fake_env({{"ORBITE_RDMA_DEVICE", ""},
                                                            {"ORBITE_RDMA_PORT", ""},
                                                            {"ORBITE_RDMA_GID_INDEX", " "},
                                                            {"ORBITE_RDMA_DEVICE_MASK", ""},
                                                            {"ORBITE_RDMA_PREFERRED_NUMA_NODE", ""},
                                                            {"ORBITE_RDMA_PRIORITY_MATRIX", ""},
                                                            {"ORBITE_RDMA_RDMA_WHITELIST", ""}}));
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_FALSE(config.rdma.device);
  EXPECT_FALSE(config.rdma.port);
  EXPECT_FALSE(config.rdma.gid_index);
  EXPECT_FALSE(config.rdma.device_mask);
  EXPECT_FALSE(config.rdma.preferred_numa_node);
  EXPECT_FALSE(config.rdma.priority_matrix);
  EXPECT_TRUE(config.rdma.rdma_whitelist.empty());
}

TEST(ConfigEnv, AliasesSetTheirFieldsAndTheCanonicalNameWins) {
  auto alias_only = config_internal::load(
      fake_env({{"ORBITE_SOCKET_IFNAME", "eth1"}, {"ORBITE_TOPO_XML", "/tmp/alias.xml"}}));
  ASSERT_TRUE(alias_only.ok()) << alias_only.status().to_string();
  EXPECT_EQ(alias_only->tcp.interface, "eth1");
  EXPECT_EQ(alias_only->topology.hwloc_xml, "/tmp/alias.xml");
  // ORBITE_SOCKET_IFNAME is tcp.interface only; the bootstrap interface is separate.
  EXPECT_EQ(alias_only->bootstrap.interface, "");

  auto both =
      config_internal::load(fake_env({{"ORBITE_SOCKET_IFNAME", "eth1"},
                                      {"ORBITE_TCP_INTERFACE", "eth2"},
                                      {"ORBITE_TOPO_XML", "/tmp/alias.xml"},
                                      {"ORBITE_TOPOLOGY_HWLOC_XML", "/tmp/canonical.xml"}}));
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->tcp.interface, "eth2");
  EXPECT_EQ(both->topology.hwloc_xml, "/tmp/canonical.xml");

  // The canonical name wins even when the alias holds a value that would be rejected.
  auto bad_alias = config_internal::load(fake_env(
      {{"ORBITE_SOCKET_IFNAME", std::string(300, 'e')}, {"ORBITE_TCP_INTERFACE", "eth2"}}));
  ASSERT_TRUE(bad_alias.ok()) << bad_alias.status().to_string();
  EXPECT_EQ(bad_alias->tcp.interface, "eth2");

  // applied names the variable that was used.
  EngineConfig config;
  std::vector<std::string> applied;
  ASSERT_TRUE(config_internal::apply_env_overrides(
                  config, fake_env({{"ORBITE_SOCKET_IFNAME", "eth1"}}), &applied)
                  .ok());
  EXPECT_EQ(applied, std::vector<std::string>{"ORBITE_SOCKET_IFNAME=eth1"});
}

TEST(ConfigEnv, ConfigFileThenEnvironmentOnTop) {
  TempFile file(R"({"num_lanes": 2, "rdma": {"max_send_wr": 8, "device": "mlx5_0"},
                    "tcp": {"interface": "eth0"}})");
  auto c = config_internal::load(fake_env({{"ORBITE_CONFIG", file.path()},
                                           {"ORBITE_RDMA_MAX_SEND_WR", "32"},
                                           {"ORBITE_RDMA_DEVICE", ""}}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_lanes, 2u);          // from the file
  EXPECT_EQ(c->rdma.max_send_wr, 32u);  // the environment wins over the file
  EXPECT_FALSE(c->rdma.device);         // an empty value unsets what the file set
  EXPECT_EQ(c->tcp.interface, "eth0");  // from the file
  EXPECT_EQ(c->rdma.max_cqes, 1024u);   // default

  // An empty ORBITE_CONFIG reads no file.
  auto none = config_internal::load(fake_env({{"ORBITE_CONFIG", ""}}));
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ(none->to_json(), EngineConfig().to_json());
}

TEST(ConfigEnv, ConfigFileErrorsNameOrbiteConfigAndTheFile) {
  const std::string missing = ::testing::TempDir() + "orbite_config_env_test_missing.json";
  auto m = config_internal::load(fake_env({{"ORBITE_CONFIG", missing}}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(m.status().message(), "ORBITE_CONFIG");
  EXPECT_CONTAINS(m.status().message(), missing);

  TempFile bad(R"({"rdma": {"max_send_wr": "lots"}})");
  auto b = config_internal::load(fake_env({{"ORBITE_CONFIG", bad.path()}}));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(b.status().message(), "ORBITE_CONFIG");
  EXPECT_CONTAINS(b.status().message(), bad.path());
  EXPECT_CONTAINS(b.status().message(), "rdma.max_send_wr");
}

// The issue's case: a file that every rank loads through ORBITE_CONFIG.
TEST(ConfigEnv, OverflowingNumberInOrbiteConfigIsAnErrorNotAnException) {
  TempFile file(R"({"rdma": {"max_grants": 1e400}})");
  std::string thrown;
  try {
    auto loaded = config_internal::load(fake_env({{"ORBITE_CONFIG", file.path()}}));
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), Errc::Configuration);
    EXPECT_EQ(loaded.status().message(),
              "ORBITE_CONFIG: " + file.path() +
                  ": config: rdma.max_grants: invalid JSON: [json.exception.out_of_range.406] "
                  "number overflow parsing '1e400'");
  } catch (const std::exception& e) {
    thrown = e.what();
  }
  EXPECT_EQ(thrown, "") << "load() threw";
}

// The parser's reason for an inline matrix that is not JSON, not just "not a JSON object".
TEST(ConfigEnv, PriorityMatrixThatIsNotJsonShowsTheParsersReason) {
  auto loaded = config_internal::load(
      fake_env({{"ORBITE_RDMA_PRIORITY_MATRIX", R"({"cpu:0": [["mlx5_0"], [1e400]]})"}}));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(loaded.status().message(), "ORBITE_RDMA_PRIORITY_MATRIX");
  EXPECT_CONTAINS(loaded.status().message(),
                  "config: rdma.priority_matrix: expected a JSON object");
  EXPECT_CONTAINS(loaded.status().message(), "number overflow parsing '1e400'");
}

TEST(ConfigEnv, BadValueNamesVariableValueAndPath) {
  auto c = config_internal::load(fake_env({{"ORBITE_RDMA_MAX_SEND_WR", "abc"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(c.status().message(), "ORBITE_RDMA_MAX_SEND_WR");
  EXPECT_CONTAINS(c.status().message(), "abc");
  EXPECT_CONTAINS(c.status().message(), "rdma.max_send_wr");

  auto alias = config_internal::load(fake_env({{"ORBITE_SOCKET_IFNAME", std::string(300, 'e')}}));
  ASSERT_FALSE(alias.ok());
  EXPECT_CONTAINS(alias.status().message(), "ORBITE_SOCKET_IFNAME");
  EXPECT_CONTAINS(alias.status().message(), "tcp.interface");
}

TEST(ConfigEnv, CrossFieldRuleAppliesAfterOverrides) {
  auto env_only = config_internal::load(fake_env(
      {{"ORBITE_RDMA_DISABLE_GPU_DIRECT_RDMA", "1"}, {"ORBITE_RDMA_CUDA_MEMORY", "direct"}}));
  ASSERT_FALSE(env_only.ok());
  EXPECT_EQ(env_only.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(env_only.status().message(), "rdma.disable_gpu_direct_rdma");

  // The file asks for Direct, the environment disables GPU Direct: the combination is an error.
  TempFile direct(R"({"rdma": {"cuda_memory": "direct"}})");
  auto mixed = config_internal::load(fake_env(
      {{"ORBITE_CONFIG", direct.path()}, {"ORBITE_RDMA_DISABLE_GPU_DIRECT_RDMA", "true"}}));
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(mixed.status().message(), "rdma.cuda_memory");

  // And the environment can resolve a conflict the file alone would not have (staged wins).
  TempFile disabled(R"({"rdma": {"disable_gpu_direct_rdma": true}})");
  auto fine = config_internal::load(
      fake_env({{"ORBITE_CONFIG", disabled.path()}, {"ORBITE_RDMA_CUDA_MEMORY", "staged"}}));
  ASSERT_TRUE(fine.ok()) << fine.status().to_string();
  EXPECT_TRUE(fine->rdma.disable_gpu_direct_rdma);
}

// An environment value that is not valid UTF-8 is a Configuration error naming the variable;
// no exception may cross the public API (EngineConfig::load() reaches this path).
TEST(ConfigEnv, InvalidUtf8ValueIsAnErrorNotAnException) {
  for (const char* var :
       {"ORBITE_NUM_LANES", "ORBITE_RDMA_CUDA_MEMORY", "ORBITE_RDMA_RAIL_COOLDOWN",
        "ORBITE_RDMA_STRICT_LOCAL_NUMA", "ORBITE_RDMA_DEVICE_MASK"}) {
    SCOPED_TRACE(var);
    std::string thrown;
    try {
      auto loaded = config_internal::load(fake_env({{var, "\xff"}}));
      ASSERT_FALSE(loaded.ok());
      EXPECT_EQ(loaded.status().code(), Errc::Configuration);
      EXPECT_CONTAINS(loaded.status().message(), var);
    } catch (const std::exception& e) {
      thrown = e.what();
    }
    EXPECT_EQ(thrown, "") << "load() threw";
  }
}

// Text that is not valid UTF-8 is rejected by the loader and validate(), and to_json() never
// throws.
TEST(ConfigEnv, TextThatIsNotUtf8IsRejectedOrSerializable) {
  std::string from_env;
  try {
    auto loaded = config_internal::load(fake_env({{"ORBITE_TCP_INTERFACE", "eth\xff"}}));
    EXPECT_FALSE(loaded.ok()) << "text that is not UTF-8 must be rejected";
    EXPECT_CONTAINS(loaded.status().message(), "ORBITE_TCP_INTERFACE");
    if (loaded.ok()) (void)loaded->to_json();
  } catch (const std::exception& e) {
    from_env = e.what();
  }
  EXPECT_EQ(from_env, "") << "ORBITE_TCP_INTERFACE: an exception escaped";

  std::string in_code;
  try {
    EngineConfig config;
    config.topology.hwloc_xml = "/tmp/\xfe.xml";
    if (config.validate().ok()) (void)config.to_json();
  } catch (const std::exception& e) {
    in_code = e.what();
  }
  EXPECT_EQ(in_code, "") << "topology.hwloc_xml set in code: an exception escaped";
}

// ------------------------------------------------------------------------------------------------
// Variable names and the unknown-variable check.

TEST(ConfigEnvNames, CoverEveryFieldAndTheAliases) {
  const std::vector<std::string> names = config_internal::env_variable_names();
  const std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size()) << "two fields share an environment variable";
  for (const char* expected :
       {"ORBITE_NUM_LANES", "ORBITE_PROGRESS_MODE", "ORBITE_RDMA_DEVICE", "ORBITE_RDMA_DEVICE_MASK",
        "ORBITE_RDMA_RDMA_WHITELIST", "ORBITE_RDMA_MAX_SEND_WR",
        "ORBITE_RDMA_SCHEDULING_SMART_SELECTION", "ORBITE_RDMA_SCHEDULING_TIER_WEIGHTS",
        "ORBITE_TCP_INTERFACE", "ORBITE_SHM_ENABLE", "ORBITE_BOOTSTRAP_STORE",
        "ORBITE_TOPOLOGY_HWLOC_XML", "ORBITE_SOCKET_IFNAME", "ORBITE_TOPO_XML"}) {
    EXPECT_EQ(unique.count(expected), 1u) << expected;
  }
  // No configuration variable collides with a variable read elsewhere.
  for (std::string_view other : config_schema::kOtherEnv) {
    EXPECT_EQ(unique.count(std::string(other)), 0u) << other;
  }
  // One variable per field in to_json plus the aliases.
  size_t fields = 0;
  std::function<void(const json&)> count = [&](const json& j) {
    for (const auto& [key, value] : j.items()) {
      if (value.is_object() && key != "priority_matrix") {
        count(value);
      } else {
        ++fields;
      }
    }
  };
  count(json::parse(EngineConfig().to_json()));
  EXPECT_EQ(names.size(), fields + std::size(config_schema::kEnvAliases));
}

TEST(ConfigEnvNames, UnknownVariablesAreFlaggedWithASuggestion) {
  std::vector<std::string> present = {"ORBITE_RDMA_DEVIC",
                                      "ORBITE_RANK",
                                      "ORBITE_STORE",
                                      "ORBITE_STORE_TOKEN",
                                      "ORBITE_WORLD_SIZE",
                                      "ORBITE_LOCAL_RANK",
                                      "ORBITE_LOCAL_SIZE",
                                      "ORBITE_LOG_LEVEL",
                                      "ORBITE_LOG_SUBSYS",
                                      "ORBITE_HOSTID",
                                      "ORBITE_CONFIG",
                                      "ORBITE_SOCKET_IFNAME",
                                      "ORBITE_TOPO_XML",
                                      "ORBITE_RDMA_MAX_SEND_WR",
                                      "PATH",
                                      "NCCL_SOCKET_IFNAME",
                                      "ORBITEX_SOMETHING"};
  const std::vector<std::string> unknown = config_internal::unknown_orbite_variables(present);
  ASSERT_EQ(unknown.size(), 1u) << (unknown.empty() ? "" : unknown.back());
  EXPECT_EQ(unknown[0], "ORBITE_RDMA_DEVIC (did you mean ORBITE_RDMA_DEVICE?)");

  auto far = config_internal::unknown_orbite_variables({"ORBITE_SOMETHING_ELSE_ENTIRELY"});
  ASSERT_EQ(far.size(), 1u);
  EXPECT_EQ(far[0], "ORBITE_SOMETHING_ELSE_ENTIRELY");

  auto near = config_internal::unknown_orbite_variables(
      {"ORBITE_SOCKET_IFNAM", "ORBITE_RDMA_MAX_SEND_WRS", "ORBITE_LOG_LEVL"});
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[0], "ORBITE_SOCKET_IFNAM (did you mean ORBITE_SOCKET_IFNAME?)");
  EXPECT_EQ(near[1], "ORBITE_RDMA_MAX_SEND_WRS (did you mean ORBITE_RDMA_MAX_SEND_WR?)");
  EXPECT_EQ(near[2], "ORBITE_LOG_LEVL (did you mean ORBITE_LOG_LEVEL?)");
}

TEST(ConfigEnvNames, NoKnownVariableIsFlagged) {
  std::vector<std::string> all = config_internal::env_variable_names();
  for (std::string_view other : config_schema::kOtherEnv) all.emplace_back(other);
  EXPECT_TRUE(config_internal::unknown_orbite_variables(all).empty());
}

TEST(ConfigEnvNames, EditDistance) {
  EXPECT_EQ(config_internal::edit_distance("", ""), 0u);
  EXPECT_EQ(config_internal::edit_distance("abc", ""), 3u);
  EXPECT_EQ(config_internal::edit_distance("", "abc"), 3u);
  EXPECT_EQ(config_internal::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(config_internal::edit_distance("device", "devic"), 1u);
  EXPECT_EQ(config_internal::edit_distance("rdma", "rmda"), 2u);
  EXPECT_EQ(config_internal::edit_distance("same", "same"), 0u);
}

}  // namespace
}  // namespace orbite
