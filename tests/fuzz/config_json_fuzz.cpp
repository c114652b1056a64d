// Fuzz target: the configuration JSON a user or a launcher hands an engine
// (EngineConfig::from_json). An accepted document must round-trip: its effective configuration as
// JSON (to_json) is accepted again and says the same.
#include <orbite/config.h>

#include <string_view>

#include "fuzz_target.h"

namespace orbite::fuzz {

std::vector<std::string> seeds() {
  return {
      "{}",
      R"({"num_lanes": 2, "progress_mode": "event_driven", "tcp": {"streams_per_peer": 2}})",
      R"({"num_lanes": 4, "rdma": {"rdma_whitelist": ["mlx5_0", "mlx5_1"], "cuda_memory": "direct",
          "max_staging_bytes": "256MiB", "rail_cooldown": "10s", "rail_error_threshold": 5,
          "device_mask": [0, 1], "scheduling": {"tier_weights": [1, 4, 8]}},
          "tcp": {"interface": "^docker,lo", "peer_timeout": "30s"}, "bootstrap": {"timeout": "2m"}})",
      R"({"shm": {"ring_bytes": 2097152, "eager_limit": 16384}})",
      R"({"rdma": {"priority_matrix": {"cpu:0": [["mlx5_0"], [], []]}}})",
  };
}

}  // namespace orbite::fuzz

bool orbite::fuzz::accepts(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = orbite::EngineConfig::from_json(text);
  if (!cfg.ok()) return false;
  const std::string json = cfg->to_json();
  auto again = orbite::EngineConfig::from_json(json);
  require(again.ok(), "to_json() of an accepted configuration is refused");
  require(again->to_json() == json, "the configuration does not round-trip");
  return true;
}
