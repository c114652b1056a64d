// Environment overrides of configuration fields: ORBITE_<FIELD> for top-level fields and
// ORBITE_<SECTION>_<FIELD> inside sections (ORBITE_RDMA_MAX_SEND_WR, ORBITE_TCP_INTERFACE, ...).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <orbite/config.h>

#include "common/config_codec.h"
#include "common/config_internal.h"
#include "common/config_schema.h"
#include "common/log.h"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace orbite {

namespace cs = config_schema;
namespace cc = config_codec;

namespace config_internal {
namespace {

std::string path_join(const std::string& a, std::string_view b) {
  return a.empty() ? std::string(b) : a + "." + std::string(b);
}

class EnvReader {
 public:
  EnvReader(const EnvFn* env, std::string prefix, std::string path,
            std::vector<std::string>* applied, std::vector<std::string>* names)
      : env_(env),
        prefix_(std::move(prefix)),
        path_(std::move(path)),
        applied_(applied),
        names_(names) {}

  template <class T, class C>
  void field(std::string_view name, T& value, const C& constraint, std::string_view) {
    std::string var = prefix_ + "_" + to_upper(name);
    std::string path = path_join(path_, name);
    if (names_ != nullptr) names_->push_back(var);
    if (env_ == nullptr || !status_.ok()) return;
    std::optional<std::string> text = (*env_)(var);
    std::string used = var;
    if (!text) {
      for (const auto& [alias, target] : cs::kEnvAliases) {
        if (target == path && (text = (*env_)(alias))) {
          used = std::string(alias);
          break;
        }
      }
    }
    if (!text) return;
    cc::json j = cc::env_json(*text, &value, constraint);
    Status s = cc::decode(j, value, constraint, path);
    if (!s.ok()) {
      status_ = s.with_context("environment " + used + "=" + quote(*text));
      return;
    }
    if (applied_ != nullptr) applied_->push_back(used + "=" + *text);
  }

  template <class Fn>
  void section(std::string_view name, Fn&& fn) {
    EnvReader sub(env_, prefix_ + "_" + to_upper(name), path_join(path_, name), applied_, names_);
    fn(sub);
    if (status_.ok()) status_ = sub.status_;
  }

  [[nodiscard]] const Status& status() const { return status_; }

 private:
  const EnvFn* env_;
  std::string prefix_;
  std::string path_;
  std::vector<std::string>* applied_;
  std::vector<std::string>* names_;
  Status status_;
};

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

Status apply_env_overrides(EngineConfig& config, const EnvFn& env,
                           std::vector<std::string>* applied) {
  EnvReader reader(&env, "ORBITE", "", applied, nullptr);
  cs::visit_engine(reader, config);
  return reader.status();
}

std::vector<std::string> env_variable_names() {
  std::vector<std::string> names;
  EngineConfig scratch;
  EnvReader reader(nullptr, "ORBITE", "", nullptr, &names);
  cs::visit_engine(reader, scratch);
  for (const auto& [alias, target] : cs::kEnvAliases) names.emplace_back(alias);
  return names;
}

std::vector<std::string> unknown_orbite_variables(const std::vector<std::string>& names) {
  std::vector<std::string> known = env_variable_names();
  for (auto other : cs::kOtherEnv) known.emplace_back(other);
  std::vector<std::string> out;
  for (const auto& name : names) {
    if (!name.starts_with("ORBITE_")) continue;
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string message = name;
    std::string best;
    size_t best_distance = 4;
    for (const auto& k : known) {
      size_t d = edit_distance(k, name);
      if (d < best_distance) {
        best_distance = d;
        best = k;
      }
    }
    if (!best.empty()) message += " (did you mean " + best + "?)";
    out.push_back(message);
  }
  return out;
}

Result<EngineConfig> load(const EnvFn& env) {
  EngineConfig config;
  if (auto file = env("ORBITE_CONFIG"); file && !file->empty()) {
    auto loaded = EngineConfig::from_file(*file);
    if (!loaded.ok()) return loaded.status().with_context("ORBITE_CONFIG");
    config = std::move(*loaded);
    ORBITE_LOG(Info, Config) << "configuration loaded from ORBITE_CONFIG=" << *file;
  }
  std::vector<std::string> applied;
  ORBITE_RETURN_IF_ERROR(apply_env_overrides(config, env, &applied));
  for (const auto& a : applied) ORBITE_LOG(Info, Config) << "set by environment: " << a;
  ORBITE_RETURN_IF_ERROR(config.validate());
  return config;
}

}  // namespace config_internal

Result<EngineConfig> EngineConfig::load() {
  // Bootstrap and communicator both load the configuration: warn about typos once per process.
  static std::once_flag warned;
  std::call_once(warned, [] {
    std::vector<std::string> present;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      present.emplace_back(entry.substr(0, entry.find('=')));
    }
    for (const auto& unknown : config_internal::unknown_orbite_variables(present)) {
      ORBITE_LOG(Warn, Config) << "ignoring unknown environment variable " << unknown;
    }
  });
  return config_internal::load([](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace orbite
