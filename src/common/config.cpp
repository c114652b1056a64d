// JSON loading, JSON output and validation of EngineConfig (visitors over config_schema.h).
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <orbite/config.h>

#include "common/config_codec.h"
#include "common/config_internal.h"
#include "common/config_schema.h"

namespace orbite {

namespace cs = config_schema;
namespace cc = config_codec;
using json = cc::json;

namespace {

std::string join_path(const std::string& prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : prefix + "." + std::string(name);
}

// Reads fields present in a JSON object; remembers which keys it used so that the rest can be
// reported as unknown.
class JsonReader {
 public:
  JsonReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

  template <class T, class C>
  void field(std::string_view name, T& value, const C& constraint, std::string_view /*doc*/) {
    known_.emplace_back(name);
    if (!status_.ok()) return;
    auto it = object_.find(std::string(name));
    if (it == object_.end()) return;
    status_ = cc::decode(*it, value, constraint, join_path(path_, name));
  }

  template <class Fn>
  void section(std::string_view name, Fn&& fn) {
    known_.emplace_back(name);
    if (!status_.ok()) return;
    auto it = object_.find(std::string(name));
    if (it == object_.end()) return;
    std::string path = join_path(path_, name);
    if (!it->is_object()) {
      status_ = cc::bad(path, "an object", *it);
      return;
    }
    JsonReader sub(*it, path);
    fn(sub);
    sub.finish();
    status_ = sub.status_;
  }

  // Reports the first key that no field or section claimed.
  void finish() {
    if (!status_.ok()) return;
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
      std::string message = "config: unknown key " + join_path(path_, it.key());
      std::string best;
      size_t best_distance = 4;
      for (const auto& k : known_) {
        size_t d = config_internal::edit_distance(k, it.key());
        if (d < best_distance) {
          best_distance = d;
          best = k;
        }
      }
      if (!best.empty()) message += " (did you mean " + join_path(path_, best) + "?)";
      status_ = Status::error(Errc::Configuration, message);
      return;
    }
  }

  [[nodiscard]] const Status& status() const { return status_; }

 private:
  const json& object_;
  std::string path_;
  std::vector<std::string> known_;
  Status status_;
};

class JsonWriter {
 public:
  explicit JsonWriter(json& out) : out_(out) {}

  template <class T, class C>
  void field(std::string_view name, const T& value, const C& constraint, std::string_view) {
    out_[std::string(name)] = cc::encode(value, constraint);
  }
  template <class Fn>
  void section(std::string_view name, Fn&& fn) {
    json sub = json::object();
    JsonWriter writer(sub);
    fn(writer);
    out_[std::string(name)] = std::move(sub);
  }

 private:
  json& out_;
};

// Range checks for configurations built in code rather than parsed.
class RangeChecker {
 public:
  explicit RangeChecker(std::string path = {}) : path_(std::move(path)) {}
  template <class T, class C>
  void field(std::string_view name, const T& value, const C& constraint, std::string_view) {
    if (status_.ok()) status_ = cc::check(value, constraint, join_path(path_, name));
  }
  template <class Fn>
  void section(std::string_view name, Fn&& fn) {
    if (!status_.ok()) return;
    RangeChecker sub(join_path(path_, name));
    fn(sub);
    status_ = sub.status_;
  }
  [[nodiscard]] const Status& status() const { return status_; }

 private:
  std::string path_;
  Status status_;
};

// nlohmann keeps the last of duplicated keys silently; a strict loader rejects them.
Status parse_strict(std::string_view text, json& out) {
  std::vector<std::set<std::string>> seen;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: seen.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        break;
      case json::parse_event_t::key:
        if (!seen.empty() && !seen.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default: break;
    }
    return true;
  };
  try {
    out = json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    return Status::error(Errc::Configuration, std::string("config: invalid JSON: ") + e.what());
  }
  if (!duplicate.empty()) {
    return Status::error(Errc::Configuration, "config: key " + quote(duplicate) +
                                                  " appears more than once in one object");
  }
  if (!out.is_object()) {
    return Status::error(Errc::Configuration,
                         "config: the document must be a JSON object, got " + cc::shown(out));
  }
  return {};
}

}  // namespace

rdma::RdmaConfig rdma::RdmaConfig::pinned(std::string device_name) {
  RdmaConfig c;
  c.device = std::move(device_name);
  c.port = 1;
  c.gid_index = 0;
  return c;
}

Status EngineConfig::validate() const {
  RangeChecker checker;
  cs::visit_engine(checker, *this);
  ORBITE_RETURN_IF_ERROR(checker.status());
  if (rdma.disable_gpu_direct_rdma && rdma.cuda_memory == rdma::RdmaCudaMemory::Direct) {
    return Status::error(Errc::Configuration,
                         "config: rdma.disable_gpu_direct_rdma is true while rdma.cuda_memory is "
                         "\"direct\": GPUDirect RDMA cannot be both disabled and required");
  }
  if ((shm.ring_bytes & (shm.ring_bytes - 1)) != 0) {
    return Status::error(
        Errc::Configuration,
        "config: shm.ring_bytes = " + std::to_string(shm.ring_bytes) + " is not a power of two");
  }
  if (shm.eager_limit > shm.ring_bytes / 4) {
    return Status::error(Errc::Configuration,
                         "config: shm.eager_limit = " + std::to_string(shm.eager_limit) +
                             " exceeds a quarter of shm.ring_bytes (" +
                             std::to_string(shm.ring_bytes) + ")");
  }
  return {};
}

Result<EngineConfig> EngineConfig::from_json(std::string_view json_text) {
  json doc;
  ORBITE_RETURN_IF_ERROR(parse_strict(json_text, doc));
  EngineConfig config;
  JsonReader reader(doc, "");
  cs::visit_engine(reader, config);
  reader.finish();
  ORBITE_RETURN_IF_ERROR(reader.status());
  ORBITE_RETURN_IF_ERROR(config.validate());
  return config;
}

Result<EngineConfig> EngineConfig::from_file(const std::string& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!in || !std::filesystem::is_regular_file(path, ec)) {
    return Status::error(Errc::Configuration, "config: cannot read file " + quote(path, 200));
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = from_json(text.str());
  if (!parsed.ok()) return parsed.status().with_context(path);
  return parsed;
}

std::string EngineConfig::to_json(int indent) const {
  json out = json::object();
  JsonWriter writer(out);
  cs::visit_engine(writer, *this);
  // validate() guarantees UTF-8 text; replacement only guards configurations never validated.
  return out.dump(indent, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace orbite
