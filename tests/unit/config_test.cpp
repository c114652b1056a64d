// EngineConfig: defaults (the guide's), validation of configurations built in code, JSON round
// trip, files, and docs/configuration.md against the generated reference. JSON parsing field by
// field is in config_json_test.cpp.
#include <gtest/gtest.h>
// GCC 12 reports a false -Wmaybe-uninitialized inside std::optional<std::string> when it inlines
// the copy of a Result<EngineConfig> into these tests (the members are constructed; ASan/UBSan
// runs agree). Scoped to this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
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
// Defaults

TEST(ConfigDefaults, RdmaDefaultsAreTheGuides) {
  const EngineConfig c;
  const rdma::RdmaConfig& r = c.rdma;
  // Discovery: nothing pinned, nothing filtered.
  EXPECT_FALSE(r.device.has_value());
  EXPECT_FALSE(r.port.has_value());
  EXPECT_FALSE(r.gid_index.has_value());
  EXPECT_TRUE(r.rdma_whitelist.empty());
  EXPECT_TRUE(r.rdma_blacklist.empty());
  EXPECT_FALSE(r.device_mask.has_value());
  EXPECT_FALSE(r.preferred_numa_node.has_value());
  EXPECT_FALSE(r.strict_local_numa);
  EXPECT_FALSE(r.priority_matrix.has_value());
  EXPECT_FALSE(r.custom_json_path.has_value());
  // Bandwidth-aware selection.
  EXPECT_TRUE(r.scheduling.smart_selection);
  EXPECT_EQ(r.scheduling.tier_weights, (std::array<double, 3>{1.0, 5.0, 10.0}));
  EXPECT_EQ(r.scheduling.multipath_probe_period, 100u);
  // Memory policies and GPU Direct routes.
  EXPECT_EQ(r.host_memory, RdmaHostMemory::Direct);
  EXPECT_EQ(r.cuda_memory, RdmaCudaMemory::Staged);
  EXPECT_EQ(r.gpu_direct_registration, GpuDirectRegistration::Auto);
  EXPECT_FALSE(r.disable_gpu_direct_rdma);
  EXPECT_FALSE(r.log_slice_affinity);
  EXPECT_FALSE(r.gpu_source_reuse);
  // Priority promotion and shared slots.
  EXPECT_FALSE(r.deadline_bw_arbitration);
  EXPECT_EQ(r.priority_promotion_timeout, Duration(10ms));
  EXPECT_FALSE(r.priority_promotion_per_entry);
  EXPECT_FALSE(r.shared_quota_shm_path.has_value());
  EXPECT_EQ(r.slot_rotation_interval, Duration(2ms));
  // Budgets table.
  EXPECT_EQ(r.max_endpoints, 64u);
  EXPECT_EQ(r.max_grants, 64u);
  EXPECT_EQ(r.max_send_wr, 16u);
  EXPECT_EQ(r.max_cqes, 1024u);
  EXPECT_EQ(r.max_direct_bytes, 64ULL * 1024 * 1024);
  EXPECT_EQ(r.max_staging_bytes, 64ULL * 1024 * 1024);
  EXPECT_EQ(r.max_cached_mrs, 64u);
  EXPECT_EQ(r.max_cached_mr_bytes, 64ULL * 1024 * 1024);
  EXPECT_EQ(r.max_window_key_indices, 65536u);
  // Bounce buffers (OrbiTE's, docs/rdma.md): 256 KiB messages through an 8 MiB pool.
  EXPECT_EQ(r.bounce_limit, 256ULL * 1024);
  EXPECT_EQ(r.bounce_pool_bytes, 8ULL * 1024 * 1024);
  // READ depths and signalling.
  EXPECT_EQ(r.max_rd_atomic, 16u);
  EXPECT_EQ(r.max_dest_rd_atomic, 16u);
  EXPECT_EQ(r.signal_interval, 1u);
  // Rail health.
  EXPECT_EQ(r.rail_error_threshold, 3u);
  EXPECT_EQ(r.rail_error_window, Duration(10s));
  EXPECT_EQ(r.rail_cooldown, Duration(30s));
  EXPECT_EQ(r.rail_probe_interval, Duration(1s));
  EXPECT_EQ(r.max_rail_pairs, 4096u);  // OrbiTE's choice; the guide names no number
  // Slicing, rates, monitor and cleanup.
  EXPECT_EQ(r.block_size, 64ULL * 1024);
  EXPECT_EQ(r.default_bandwidth_gbps, 400.0);
  EXPECT_EQ(r.monitor_interval, Duration(1s));
  EXPECT_EQ(r.destroy_timeout, Duration(30s));
}

TEST(ConfigDefaults, EngineAndOtherSectionDefaults) {
  const EngineConfig c;
  EXPECT_EQ(c.num_lanes, 1u);
  EXPECT_EQ(c.progress_mode, ProgressMode::Polling);
  // Four 64 KiB eager messages of run-ahead (docs/transports.md, "Credit"), and batches merged.
  EXPECT_EQ(c.eager_credit_bytes, 256ULL * 1024);
  EXPECT_TRUE(c.merge_requests);

  EXPECT_EQ(c.tcp.interface, "");
  EXPECT_EQ(c.tcp.streams_per_peer, 1u);
  EXPECT_TRUE(c.tcp.nodelay);
  EXPECT_TRUE(c.tcp.keepalive);
  EXPECT_EQ(c.tcp.connect_timeout, Duration(30s));
  EXPECT_EQ(c.tcp.peer_timeout, Duration(10s));
  EXPECT_EQ(c.tcp.send_buffer_bytes, 0u);
  EXPECT_EQ(c.tcp.recv_buffer_bytes, 0u);

  EXPECT_TRUE(c.shm.enable);
  EXPECT_TRUE(c.shm.single_copy);
  // Two copies through the ring up to 64 KiB (docs/performance.md, sixteenth session).
  EXPECT_EQ(c.shm.eager_limit, 64ULL * 1024);
  EXPECT_EQ(c.shm.ring_bytes, 1024ULL * 1024);

  EXPECT_EQ(c.bootstrap.store, "");
  EXPECT_FALSE(c.bootstrap.host_store);
  EXPECT_EQ(c.bootstrap.interface, "");
  EXPECT_EQ(c.bootstrap.timeout, Duration(300s));
  EXPECT_EQ(c.bootstrap.connect_timeout, Duration(60s));
  EXPECT_EQ(c.bootstrap.max_value_bytes, 64ULL * 1024 * 1024);
  EXPECT_EQ(c.bootstrap.shutdown_timeout, Duration(10s));

  EXPECT_EQ(c.topology.hwloc_xml, "");
}

TEST(ConfigDefaults, DefaultsValidateAndEqualAnEmptyDocument) {
  const EngineConfig defaults;
  EXPECT_TRUE(defaults.validate().ok()) << defaults.validate().to_string();
  auto parsed = EngineConfig::from_json("{}");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->to_json(), defaults.to_json());
  // Empty sections change nothing either.
  auto sections = EngineConfig::from_json(
      R"({"rdma":{"scheduling":{}},"tcp":{},"shm":{},"bootstrap":{},"topology":{}})");
  ASSERT_TRUE(sections.ok()) << sections.status().to_string();
  EXPECT_EQ(sections->to_json(), defaults.to_json());
}

TEST(ConfigDefaults, PinnedPinsDevicePortOneAndGidZero) {
  const rdma::RdmaConfig pinned = rdma::RdmaConfig::pinned("mlx5_0");
  EXPECT_EQ(pinned.device, std::optional<std::string>("mlx5_0"));
  EXPECT_EQ(pinned.port, std::optional<std::uint32_t>(1));
  EXPECT_EQ(pinned.gid_index, std::optional<std::uint32_t>(0));
  // Everything else keeps its default.
  EngineConfig with_pin;
  with_pin.rdma = pinned;
  EngineConfig expected;
  expected.rdma.device = "mlx5_0";
  expected.rdma.port = 1;
  expected.rdma.gid_index = 0;
  EXPECT_EQ(with_pin.to_json(), expected.to_json());
  EXPECT_TRUE(with_pin.validate().ok());
}

// ------------------------------------------------------------------------------------------------
// Cross-field rule and validate() for configurations built in code.

TEST(ConfigValidate, CollShmSlotBytesIsZeroOrAMultipleOf64FromAPage) {
  for (const char* bad :
       {R"({"coll":{"shm_slot_bytes":5000}})", R"({"coll":{"shm_slot_bytes":64}})"}) {
    auto c = EngineConfig::from_json(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Errc::Configuration);
    EXPECT_CONTAINS(c.status().message(), "coll.shm_slot_bytes");
  }
  for (const char* good :
       {R"({"coll":{"shm_slot_bytes":0}})", R"({"coll":{"shm_slot_bytes":4096}})",
        R"({"coll":{"shm_slot_bytes":"1MiB"}})"}) {
    auto c = EngineConfig::from_json(good);
    EXPECT_TRUE(c.ok()) << good << ": " << c.status().to_string();
  }
}

TEST(ConfigValidate, DisabledGpuDirectWithDirectCudaMemoryIsAnError) {
  auto both = EngineConfig::from_json(
      R"({"rdma":{"disable_gpu_direct_rdma":true,"cuda_memory":"direct"}})");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(both.status().message(), "rdma.disable_gpu_direct_rdma");
  EXPECT_CONTAINS(both.status().message(), "rdma.cuda_memory");

  auto disabled_only = EngineConfig::from_json(R"({"rdma":{"disable_gpu_direct_rdma":true}})");
  ASSERT_TRUE(disabled_only.ok()) << disabled_only.status().to_string();
  EXPECT_TRUE(disabled_only->rdma.disable_gpu_direct_rdma);
  auto direct_only = EngineConfig::from_json(R"({"rdma":{"cuda_memory":"direct"}})");
  ASSERT_TRUE(direct_only.ok()) << direct_only.status().to_string();
  EXPECT_EQ(direct_only->rdma.cuda_memory, RdmaCudaMemory::Direct);
  auto disabled_staged = EngineConfig::from_json(
      R"({"rdma":{"disable_gpu_direct_rdma":true,"cuda_memory":"staged"}})");
  ASSERT_TRUE(disabled_staged.ok()) << disabled_staged.status().to_string();

  EngineConfig in_code;
  in_code.rdma.disable_gpu_direct_rdma = true;
  EXPECT_TRUE(in_code.validate().ok());
  in_code.rdma.cuda_memory = RdmaCudaMemory::Direct;
  Status s = in_code.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Errc::Configuration);
  EXPECT_CONTAINS(s.message(), "rdma.disable_gpu_direct_rdma");
  in_code.rdma.disable_gpu_direct_rdma = false;
  EXPECT_TRUE(in_code.validate().ok());
}

TEST(ConfigValidate, ABouncePoolSmallerThanOneChunkIsRefusedNamingBothFields) {
  auto small =
      EngineConfig::from_json(R"({"rdma":{"bounce_limit":"1MiB","bounce_pool_bytes":"512KiB"}})");
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(small.status().message(), "rdma.bounce_pool_bytes = 524288");
  EXPECT_CONTAINS(small.status().message(), "rdma.bounce_limit = 1048576");
  // Off, the pool's bound does not matter.
  auto off = EngineConfig::from_json(R"({"rdma":{"bounce_limit":0,"bounce_pool_bytes":0}})");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_EQ(off->rdma.bounce_limit, 0u);
}

struct CodeCase {
  const char* name;
  std::function<void(EngineConfig&)> mutate;
  const char* path;  // named in the message
};

TEST(ConfigValidate, RangeChecksApplyToConfigsBuiltInCode) {
  const std::vector<CodeCase> cases = {
      {"num_lanes 0", [](EngineConfig& c) { c.num_lanes = 0; }, "num_lanes"},
      {"num_lanes 65", [](EngineConfig& c) { c.num_lanes = 65; }, "num_lanes"},
      {"port 0", [](EngineConfig& c) { c.rdma.port = 0; }, "rdma.port"},
      {"gid 256", [](EngineConfig& c) { c.rdma.gid_index = 256; }, "rdma.gid_index"},
      {"empty device", [](EngineConfig& c) { c.rdma.device = ""; }, "rdma.device"},
      {"empty whitelist entry",
       [](EngineConfig& c) {
         c.rdma.rdma_whitelist = {"mlx5_0", ""};
       },
       "rdma.rdma_whitelist[1]"},
      {"empty mask", [](EngineConfig& c) { c.rdma.device_mask = 0; }, "rdma.device_mask"},
      {"matrix not an object", [](EngineConfig& c) { c.rdma.priority_matrix = "[1]"; },
       "rdma.priority_matrix"},
      {"matrix too big",
       [](EngineConfig& c) { c.rdma.priority_matrix = object_text_of_size((1 << 20) + 1); },
       "rdma.priority_matrix"},
      {"tier weight zero",
       [](EngineConfig& c) {
         c.rdma.scheduling.tier_weights = {1, 0, 1};
       },
       "rdma.scheduling.tier_weights"},
      {"tier weight NaN",
       [](EngineConfig& c) {
         c.rdma.scheduling.tier_weights = {1, 1, std::numeric_limits<double>::quiet_NaN()};
       },
       "rdma.scheduling.tier_weights"},
      {"probe period 0", [](EngineConfig& c) { c.rdma.scheduling.multipath_probe_period = 0; },
       "rdma.scheduling.multipath_probe_period"},
      {"slot 0", [](EngineConfig& c) { c.rdma.slot_rotation_interval = Duration::zero(); },
       "rdma.slot_rotation_interval"},
      {"negative promotion",
       [](EngineConfig& c) { c.rdma.priority_promotion_timeout = Duration(-1ms); },
       "rdma.priority_promotion_timeout"},
      {"monitor 2h", [](EngineConfig& c) { c.rdma.monitor_interval = 2h; },
       "rdma.monitor_interval"},
      {"max_send_wr 0", [](EngineConfig& c) { c.rdma.max_send_wr = 0; }, "rdma.max_send_wr"},
      {"max_cqes big", [](EngineConfig& c) { c.rdma.max_cqes = 4194305; }, "rdma.max_cqes"},
      {"direct bytes 0", [](EngineConfig& c) { c.rdma.max_direct_bytes = 0; },
       "rdma.max_direct_bytes"},
      {"block 2GiB", [](EngineConfig& c) { c.rdma.block_size = 2 * kGiB; }, "rdma.block_size"},
      {"bandwidth 0", [](EngineConfig& c) { c.rdma.default_bandwidth_gbps = 0; },
       "rdma.default_bandwidth_gbps"},
      {"bandwidth inf",
       [](EngineConfig& c) {
         c.rdma.default_bandwidth_gbps = std::numeric_limits<double>::infinity();
       },
       "rdma.default_bandwidth_gbps"},
      {"shm name", [](EngineConfig& c) { c.rdma.shared_quota_shm_path = "a/b"; },
       "rdma.shared_quota_shm_path"},
      {"streams 0", [](EngineConfig& c) { c.tcp.streams_per_peer = 0; }, "tcp.streams_per_peer"},
      {"peer timeout 0", [](EngineConfig& c) { c.tcp.peer_timeout = Duration::zero(); },
       "tcp.peer_timeout"},
      {"sndbuf 3GiB", [](EngineConfig& c) { c.tcp.send_buffer_bytes = 3 * kGiB; },
       "tcp.send_buffer_bytes"},
      {"store no port", [](EngineConfig& c) { c.bootstrap.store = "nohost"; }, "bootstrap.store"},
      {"value bytes 0", [](EngineConfig& c) { c.bootstrap.max_value_bytes = 0; },
       "bootstrap.max_value_bytes"},
      {"hwloc path long", [](EngineConfig& c) { c.topology.hwloc_xml = std::string(4097, 'x'); },
       "topology.hwloc_xml"},
  };
  for (const CodeCase& c : cases) {
    SCOPED_TRACE(c.name);
    EngineConfig config;
    c.mutate(config);
    Status s = config.validate();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), Errc::Configuration);
    EXPECT_CONTAINS(s.message(), std::string(c.path) + ": expected");
  }
}

// ------------------------------------------------------------------------------------------------
// Round trip.

void expect_same(const EngineConfig& a, const EngineConfig& b) {
  EXPECT_EQ(a.num_lanes, b.num_lanes);
  EXPECT_EQ(a.progress_mode, b.progress_mode);
  const auto& x = a.rdma;
  const auto& y = b.rdma;
  EXPECT_EQ(x.device, y.device);
  EXPECT_EQ(x.port, y.port);
  EXPECT_EQ(x.gid_index, y.gid_index);
  EXPECT_EQ(x.rdma_whitelist, y.rdma_whitelist);
  EXPECT_EQ(x.rdma_blacklist, y.rdma_blacklist);
  EXPECT_EQ(x.device_mask, y.device_mask);
  EXPECT_EQ(x.preferred_numa_node, y.preferred_numa_node);
  EXPECT_EQ(x.strict_local_numa, y.strict_local_numa);
  EXPECT_EQ(x.priority_matrix, y.priority_matrix);
  EXPECT_EQ(x.custom_json_path, y.custom_json_path);
  EXPECT_EQ(x.scheduling.smart_selection, y.scheduling.smart_selection);
  EXPECT_EQ(x.scheduling.tier_weights, y.scheduling.tier_weights);
  EXPECT_EQ(x.scheduling.multipath_probe_period, y.scheduling.multipath_probe_period);
  EXPECT_EQ(x.host_memory, y.host_memory);
  EXPECT_EQ(x.cuda_memory, y.cuda_memory);
  EXPECT_EQ(x.gpu_direct_registration, y.gpu_direct_registration);
  EXPECT_EQ(x.disable_gpu_direct_rdma, y.disable_gpu_direct_rdma);
  EXPECT_EQ(x.log_slice_affinity, y.log_slice_affinity);
  EXPECT_EQ(x.gpu_source_reuse, y.gpu_source_reuse);
  EXPECT_EQ(x.deadline_bw_arbitration, y.deadline_bw_arbitration);
  EXPECT_EQ(x.priority_promotion_timeout, y.priority_promotion_timeout);
  EXPECT_EQ(x.priority_promotion_per_entry, y.priority_promotion_per_entry);
  EXPECT_EQ(x.shared_quota_shm_path, y.shared_quota_shm_path);
  EXPECT_EQ(x.slot_rotation_interval, y.slot_rotation_interval);
  EXPECT_EQ(x.max_endpoints, y.max_endpoints);
  EXPECT_EQ(x.max_grants, y.max_grants);
  EXPECT_EQ(x.max_send_wr, y.max_send_wr);
  EXPECT_EQ(x.max_cqes, y.max_cqes);
  EXPECT_EQ(x.max_direct_bytes, y.max_direct_bytes);
  EXPECT_EQ(x.max_staging_bytes, y.max_staging_bytes);
  EXPECT_EQ(x.max_cached_mrs, y.max_cached_mrs);
  EXPECT_EQ(x.max_cached_mr_bytes, y.max_cached_mr_bytes);
  EXPECT_EQ(x.max_window_key_indices, y.max_window_key_indices);
  EXPECT_EQ(x.max_rd_atomic, y.max_rd_atomic);
  EXPECT_EQ(x.max_dest_rd_atomic, y.max_dest_rd_atomic);
  EXPECT_EQ(x.signal_interval, y.signal_interval);
  EXPECT_EQ(x.rail_error_threshold, y.rail_error_threshold);
  EXPECT_EQ(x.rail_error_window, y.rail_error_window);
  EXPECT_EQ(x.rail_cooldown, y.rail_cooldown);
  EXPECT_EQ(x.rail_probe_interval, y.rail_probe_interval);
  EXPECT_EQ(x.max_rail_pairs, y.max_rail_pairs);
  EXPECT_EQ(x.block_size, y.block_size);
  EXPECT_EQ(x.default_bandwidth_gbps, y.default_bandwidth_gbps);
  EXPECT_EQ(x.monitor_interval, y.monitor_interval);
  EXPECT_EQ(x.destroy_timeout, y.destroy_timeout);
  EXPECT_EQ(a.tcp.interface, b.tcp.interface);
  EXPECT_EQ(a.tcp.streams_per_peer, b.tcp.streams_per_peer);
  EXPECT_EQ(a.tcp.nodelay, b.tcp.nodelay);
  EXPECT_EQ(a.tcp.keepalive, b.tcp.keepalive);
  EXPECT_EQ(a.tcp.connect_timeout, b.tcp.connect_timeout);
  EXPECT_EQ(a.tcp.peer_timeout, b.tcp.peer_timeout);
  EXPECT_EQ(a.tcp.send_buffer_bytes, b.tcp.send_buffer_bytes);
  EXPECT_EQ(a.tcp.recv_buffer_bytes, b.tcp.recv_buffer_bytes);
  EXPECT_EQ(a.shm.enable, b.shm.enable);
  EXPECT_EQ(a.shm.single_copy, b.shm.single_copy);
  EXPECT_EQ(a.bootstrap.store, b.bootstrap.store);
  EXPECT_EQ(a.bootstrap.host_store, b.bootstrap.host_store);
  EXPECT_EQ(a.bootstrap.interface, b.bootstrap.interface);
  EXPECT_EQ(a.bootstrap.timeout, b.bootstrap.timeout);
  EXPECT_EQ(a.bootstrap.connect_timeout, b.bootstrap.connect_timeout);
  EXPECT_EQ(a.bootstrap.max_value_bytes, b.bootstrap.max_value_bytes);
  EXPECT_EQ(a.bootstrap.shutdown_timeout, b.bootstrap.shutdown_timeout);
  EXPECT_EQ(a.topology.hwloc_xml, b.topology.hwloc_xml);
}

EngineConfig non_default_config() {
  EngineConfig c;
  c.num_lanes = 7;
  c.progress_mode = ProgressMode::EventDriven;
  auto& r = c.rdma;
  r.device = "mlx5_3";
  r.port = 2;
  r.gid_index = 5;
  r.rdma_whitelist = {"mlx5_0", "mlx5_3"};
  r.rdma_blacklist = {"mlx5_9"};
  r.device_mask = (1ULL << 0) | (1ULL << 3) | (1ULL << 63);
  r.preferred_numa_node = 1;
  r.strict_local_numa = true;
  r.priority_matrix = R"({"cpu:0":[["mlx5_0"],["mlx5_1"]],"cuda:0":[["mlx5_1"],["mlx5_0"]]})";
  r.custom_json_path = "/etc/orbite/topology.json";
  r.scheduling.smart_selection = false;
  r.scheduling.tier_weights = {1.5, 2.25, 8.125};
  r.scheduling.multipath_probe_period = 7;
  r.host_memory = RdmaHostMemory::Staged;
  r.cuda_memory = RdmaCudaMemory::Direct;
  r.gpu_direct_registration = GpuDirectRegistration::Peermem;
  r.log_slice_affinity = true;
  r.gpu_source_reuse = true;
  r.deadline_bw_arbitration = true;
  r.priority_promotion_timeout = 1500us;
  r.priority_promotion_per_entry = true;
  r.shared_quota_shm_path = "/orbite-rdma-slots";
  r.slot_rotation_interval = 5ms;
  r.max_endpoints = 128;
  r.max_grants = 96;
  r.max_send_wr = 32;
  r.max_cqes = 4096;
  r.max_direct_bytes = 3 * kGiB;
  r.max_staging_bytes = 128 * kMiB + 1;
  r.max_cached_mrs = 17;
  r.max_cached_mr_bytes = kGiB;
  r.max_window_key_indices = 1 << 20;
  r.max_rd_atomic = 0;
  r.max_dest_rd_atomic = 8;
  r.signal_interval = 4;
  r.rail_error_threshold = 5;
  r.rail_error_window = 2min;
  r.rail_cooldown = 45s;
  r.rail_probe_interval = Duration::zero();
  r.max_rail_pairs = 100;
  r.block_size = 128 * kKiB;
  r.default_bandwidth_gbps = 212.5;
  r.monitor_interval = 250ms;
  r.destroy_timeout = Duration(90s) + Duration(7ns);
  c.tcp.interface = "^docker,lo";
  c.tcp.streams_per_peer = 4;
  c.tcp.nodelay = false;
  c.tcp.keepalive = false;
  c.tcp.connect_timeout = 5s;
  c.tcp.peer_timeout = 2500ms;
  c.tcp.send_buffer_bytes = 4 * kMiB;
  c.tcp.recv_buffer_bytes = 1;
  c.shm.enable = false;
  c.shm.single_copy = false;
  c.bootstrap.store = "10.0.0.1:29500";
  c.bootstrap.host_store = true;
  c.bootstrap.interface = "eth0";
  c.bootstrap.timeout = 90s;
  c.bootstrap.connect_timeout = 15s;
  c.bootstrap.max_value_bytes = kMiB;
  c.bootstrap.shutdown_timeout = Duration::zero();
  c.topology.hwloc_xml = "/tmp/topology.xml";
  return c;
}

TEST(ConfigRoundTrip, FromJsonOfToJsonReproducesEveryField) {
  const EngineConfig original = non_default_config();
  ASSERT_TRUE(original.validate().ok()) << original.validate().to_string();
  const std::string text = original.to_json();
  auto parsed = EngineConfig::from_json(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string() << "\n" << text;
  expect_same(*parsed, original);
  EXPECT_EQ(parsed->to_json(), text);
  // The non-default values really differ from the defaults (the test would catch a field that
  // to_json or from_json drops).
  EXPECT_NE(text, EngineConfig().to_json());
}

TEST(ConfigRoundTrip, OtherEnumValuesAndCompactOutput) {
  EngineConfig c;
  c.rdma.disable_gpu_direct_rdma = true;
  c.rdma.gpu_direct_registration = GpuDirectRegistration::Dmabuf;
  c.rdma.shared_quota_shm_path = "";
  c.rdma.device_mask = ~0ULL;
  for (int indent : {-1, 0, 2, 4}) {
    SCOPED_TRACE(indent);
    auto parsed = EngineConfig::from_json(c.to_json(indent));
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    expect_same(*parsed, c);
  }
  auto defaults = EngineConfig::from_json(EngineConfig().to_json());
  ASSERT_TRUE(defaults.ok()) << defaults.status().to_string();
  expect_same(*defaults, EngineConfig());
}

TEST(ConfigRoundTrip, FormattedPriorityMatrixKeepsItsContent) {
  // to_json writes the matrix as a JSON object, so whitespace inside the original text is not
  // kept; its content is.
  EngineConfig c;
  c.rdma.priority_matrix = "{\n  \"cpu:0\": [[\"mlx5_0\"], [\"mlx5_1\"]]\n}";
  auto parsed = EngineConfig::from_json(c.to_json());
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  ASSERT_TRUE(parsed->rdma.priority_matrix.has_value());
  EXPECT_EQ(json::parse(*parsed->rdma.priority_matrix), json::parse(*c.rdma.priority_matrix));
}

// ------------------------------------------------------------------------------------------------
// Files.

TEST(ConfigFile, LoadsAValidFile) {
  TempFile file(R"({"num_lanes": 3, "rdma": {"max_send_wr": 64, "cuda_memory": "direct"}})");
  auto c = EngineConfig::from_file(file.path());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_lanes, 3u);
  EXPECT_EQ(c->rdma.max_send_wr, 64u);
  EXPECT_EQ(c->rdma.cuda_memory, RdmaCudaMemory::Direct);
}

TEST(ConfigFile, MissingFileIsAConfigurationErrorNamingTheFile) {
  const std::string path = ::testing::TempDir() + "orbite_config_test_no_such_file.json";
  auto c = EngineConfig::from_file(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(c.status().message(), path);
}

TEST(ConfigFile, AnErrorNamesTheFileAndThePath) {
  TempFile bad_value(R"({"rdma": {"max_send_wr": 0}})");
  auto c = EngineConfig::from_file(bad_value.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(c.status().message(), bad_value.path());
  EXPECT_CONTAINS(c.status().message(), "rdma.max_send_wr");

  TempFile unknown(R"({"tcp": {"ifname": "eth0"}})");
  auto u = EngineConfig::from_file(unknown.path());
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(u.status().message(), unknown.path());
  EXPECT_CONTAINS(u.status().message(), "tcp.ifname");

  TempFile broken("{\"num_lanes\": ");
  auto b = EngineConfig::from_file(broken.path());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(b.status().message(), broken.path());

  TempFile cross(R"({"rdma": {"cuda_memory": "direct", "disable_gpu_direct_rdma": true}})");
  auto x = EngineConfig::from_file(cross.path());
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(x.status().message(), cross.path());
}

TEST(ConfigFile, OverflowingNumberNamesTheFileAndTheField) {
  TempFile file(R"({"rdma": {"max_grants": 1e400}})");
  std::string thrown;
  try {
    auto c = EngineConfig::from_file(file.path());
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Errc::Configuration);
    EXPECT_EQ(c.status().message(), file.path() +
                                        ": config: rdma.max_grants: invalid JSON: "
                                        "[json.exception.out_of_range.406] number overflow "
                                        "parsing '1e400'");
  } catch (const std::exception& e) {
    thrown = e.what();
  }
  EXPECT_EQ(thrown, "") << "from_file threw";
}

// In an array the path names the element the parser was reading or expected next.
TEST(ConfigFile, TruncatedFileNamesTheFieldItEndsIn) {
  TempFile file("{\"rdma\": {\"scheduling\": {\"tier_weights\": [1, 5");
  auto c = EngineConfig::from_file(file.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(c.status().message(), file.path());
  EXPECT_CONTAINS(c.status().message(), "config: rdma.scheduling.tier_weights[2]: invalid JSON");
  EXPECT_CONTAINS(c.status().message(), "unexpected end of input");
}

TEST(ConfigFile, MissingFileNamesTheSystemsReason) {
  const std::string path = ::testing::TempDir() + "orbite_config_test_no_such_file.json";
  auto c = EngineConfig::from_file(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(c.status().message(),
                  "config: cannot read file '" + path + "': No such file or directory (errno 2)");
}

// Neither is a configuration; a FIFO without a writer must not hang the loader either.
TEST(ConfigFile, DirectoriesAndFifosAreRejected) {
  auto dir = EngineConfig::from_file(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(dir.status().message(), "it is a directory");

  const std::string fifo =
      ::testing::TempDir() + "orbite_config_test_fifo_" + std::to_string(getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  auto f = EngineConfig::from_file(fifo);
  std::remove(fifo.c_str());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(f.status().message(), fifo);
  EXPECT_CONTAINS(f.status().message(), "not a regular file");
}

TEST(ConfigFile, SixteenMebibytesAcceptedOneMoreByteRejected) {
  constexpr size_t kLimit = 16 << 20;
  TempFile at_limit("{\"num_lanes\": 3}" + std::string(kLimit - 16, ' '));
  auto ok = EngineConfig::from_file(at_limit.path());
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->num_lanes, 3u);

  TempFile over("");
  ASSERT_EQ(::truncate(over.path().c_str(), kLimit + 1), 0) << std::strerror(errno);
  auto big = EngineConfig::from_file(over.path());
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(big.status().message(), over.path());
  EXPECT_CONTAINS(big.status().message(),
                  "it is 16777217 bytes, over the limit of 16777216 bytes (16 MiB)");
}

// ------------------------------------------------------------------------------------------------
// The reference and docs/configuration.md.

TEST(ConfigReference, ListsEveryFieldOnce) {
  const std::string reference = configuration_reference_markdown();
  std::vector<std::string> names = config_internal::env_variable_names();
  size_t rows = 0;
  for (size_t pos = 0; (pos = reference.find("\n| `", pos)) != std::string::npos; ++pos) ++rows;
  // Every field has exactly one row and one variable; the two aliases have no row of their own.
  EXPECT_EQ(rows + std::size(config_schema::kEnvAliases), names.size());
  for (const std::string& name : names) {
    bool alias = false;
    for (const auto& [a, target] : config_schema::kEnvAliases) alias = alias || a == name;
    if (alias) continue;
    EXPECT_CONTAINS(reference, "`" + name + "`");
  }
  for (const char* path :
       {"`num_lanes`", "`rdma.max_send_wr`", "`rdma.scheduling.tier_weights`", "`tcp.interface`",
        "`shm.enable`", "`bootstrap.store`", "`topology.hwloc_xml`"}) {
    EXPECT_CONTAINS(reference, path);
  }
}

TEST(ConfigReference, DocsContainTheGeneratedTableVerbatim) {
  const std::string path = ORBITE_SOURCE_DIR "/docs/configuration.md";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  const std::string docs = text.str();
  const std::string reference = configuration_reference_markdown();
  EXPECT_NE(docs.find(reference), std::string::npos)
      << path << " is out of date: regenerate the table with orbite-info --config-reference";
  // And exactly that table sits between the markers.
  const std::string begin = "<!-- BEGIN GENERATED: orbite-info --config-reference -->\n";
  const std::string end = "<!-- END GENERATED -->";
  size_t b = docs.find(begin);
  size_t e = docs.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  ASSERT_LT(b, e);
  std::string between = docs.substr(b + begin.size(), e - b - begin.size());
  while (!between.empty() && between.front() == '\n') between.erase(0, 1);
  while (between.size() > 1 && between[between.size() - 1] == '\n' &&
         between[between.size() - 2] == '\n') {
    between.pop_back();
  }
  EXPECT_EQ(between, reference);
}

}  // namespace
}  // namespace orbite
