// Internal entry points of the configuration loader (used by tests and tools).
#pragma once

#include <orbite/config.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orbite::config_internal {

using EnvFn = std::function<std::optional<std::string>(std::string_view)>;

// Applies ORBITE_<SECTION>_<FIELD> (and alias) overrides found through `env` to `config`.
// `applied` receives "NAME=value" for each override used.
Status apply_env_overrides(EngineConfig& config, const EnvFn& env,
                           std::vector<std::string>* applied = nullptr);

// ORBITE_RDMA_HCA: NCCL_IB_HCA's syntax ("mlx5_0,mlx5_1", "^mlx5_2" excludes, "=mlx5_0" exact,
// ":1" a port). Plain names are prefixes as in NCCL, written "name*" in the filter lists.
inline constexpr const char* kHcaVariable = "ORBITE_RDMA_HCA";
struct HcaList {
  bool exclude = false;              // "^": the entries go to rdma_blacklist
  std::vector<std::string> entries;  // "mlx5_0" (exact), "mlx5*" (prefix), either with ":PORT"
};
Result<HcaList> parse_hca_list(std::string_view text);

// EngineConfig::load() with an injectable environment.
Result<EngineConfig> load(const EnvFn& env);

// Every environment variable name that maps to a configuration field, aliases included.
std::vector<std::string> env_variable_names();

// ORBITE_* names from `names` that OrbiTE does not read, each with a suggestion when one is close.
std::vector<std::string> unknown_orbite_variables(const std::vector<std::string>& names);

// Edit distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace orbite::config_internal
