// Environment overrides of configuration fields: ORBITE_<FIELD> for top-level fields and
// ORBITE_<SECTION>_<FIELD> inside sections (ORBITE_RDMA_MAX_SEND_WR, ORBITE_TCP_INTERFACE, ...).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include <orbite/config.h>

#include "common/config_codec.h"
#include "common/config_internal.h"
#include "common/config_schema.h"
#include "common/log.h"
#include "common/strings.h"

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
    Status s = cc::decode_caught(j, value, constraint, path);
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

Result<HcaList> parse_hca_list(std::string_view text) {
  HcaList list;
  std::string_view rest = trim(text);
  if (!rest.empty() && rest.front() == '^') {
    list.exclude = true;
    rest.remove_prefix(1);
  }
  bool exact = false;
  if (!rest.empty() && rest.front() == '=') {
    exact = true;
    rest.remove_prefix(1);
  }
  auto bad = [&](std::string_view entry, std::string why) {
    return Status::error(Errc::Configuration, "RDMA device list " + quote(text) + ": entry " +
                                                  quote(entry) + " " + why +
                                                  " (NCCL_IB_HCA syntax: [^][=]name[:port],...)");
  };
  for (const std::string& raw : split(rest, ',')) {
    const std::string_view entry = trim(raw);
    std::string_view name = entry;
    std::string port;
    if (const auto colon = entry.find(':'); colon != std::string_view::npos) {
      name = entry.substr(0, colon);
      const auto n = parse_uint64(entry.substr(colon + 1));
      if (!n || *n == 0 || *n > 255) return bad(entry, "has a port that is not 1..255");
      port = ":" + std::to_string(*n);
    }
    if (name.empty()) return bad(entry, "has no device name");
    for (char c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
        return bad(entry, "has a character that is not in a device name");
      }
    }
    // NCCL matches plain names as prefixes ("mlx5" is every mlx5_N); "=" asks for exact names.
    list.entries.push_back(std::string(name) + (exact ? "" : "*") + port);
  }
  if (list.entries.empty()) return bad(text, "names no device");
  return list;
}

Status apply_env_overrides(EngineConfig& config, const EnvFn& env,
                           std::vector<std::string>* applied) {
  EnvReader reader(&env, "ORBITE", "", applied, nullptr);
  cs::visit_engine(reader, config);
  ORBITE_RETURN_IF_ERROR(reader.status());
  // NCCL's device list, for users who know it: it replaces both filter lists.
  if (auto hca = env(kHcaVariable); hca && !trim(*hca).empty()) {
    auto list = parse_hca_list(*hca);
    if (!list.ok()) return list.status().with_context(std::string("environment ") + kHcaVariable);
    config.rdma.rdma_whitelist.clear();
    config.rdma.rdma_blacklist.clear();
    (list->exclude ? config.rdma.rdma_blacklist : config.rdma.rdma_whitelist) = list->entries;
    if (applied != nullptr) applied->push_back(std::string(kHcaVariable) + "=" + *hca);
  }
  return {};
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
