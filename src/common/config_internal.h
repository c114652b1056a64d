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

// EngineConfig::load() with an injectable environment.
Result<EngineConfig> load(const EnvFn& env);

// Every environment variable name that maps to a configuration field, aliases included.
std::vector<std::string> env_variable_names();

// ORBITE_* names from `names` that OrbiTE does not read, each with a suggestion when one is close.
std::vector<std::string> unknown_orbite_variables(const std::vector<std::string>& names);

// Edit distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace orbite::config_internal
