// JSON loading, JSON output and validation of EngineConfig (visitors over config_schema.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

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
    status_ = cc::decode_caught(*it, value, constraint, join_path(path_, name));
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

// Strict parsing. nlohmann keeps the last of duplicated keys silently, and its errors (a number
// such as 1e400 that overflows a double, a truncated document) name a byte offset at best, never
// the field; the parse callback tracks the path of the value being read for both.
Status parse_strict(std::string_view text, json& out) {
  // The schema nests four levels (an inline priority matrix five or six); beyond this the path
  // stops growing, so hostile nesting costs no bookkeeping.
  constexpr size_t kTrackedDepth = 32;
  struct Frame {
    bool object = false;
    bool in_value = false;  // objects: a key was read and its value is not complete yet
    size_t elements = 0;    // arrays: elements begun so far
    std::string key;        // objects: the last key read
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  size_t depth = 0;
  std::string duplicate;
  const auto tracked = [&] { return !frames.empty() && frames.size() == depth; };
  // A value (scalar or container) begins in the innermost open container.
  const auto value_begins = [&] {
    if (tracked() && !frames.back().object) ++frames.back().elements;
  };
  const auto value_ends = [&] {
    if (tracked() && frames.back().object) frames.back().in_value = false;
  };
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        value_begins();
        if (frames.size() == depth && depth < kTrackedDepth) {
          frames.push_back(Frame{event == json::parse_event_t::object_start, false, 0, {}, {}});
        }
        ++depth;
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (frames.size() == depth) frames.pop_back();
        if (depth > 0) --depth;
        value_ends();
        break;
      case json::parse_event_t::key:
        if (tracked() && parsed.is_string()) {
          Frame& f = frames.back();
          f.key = parsed.get_ref<const std::string&>();
          f.in_value = true;
          if (!f.keys.insert(f.key).second && duplicate.empty()) duplicate = f.key;
        }
        break;
      case json::parse_event_t::value:
        value_begins();
        value_ends();
        break;
    }
    return true;
  };
  // The value the parser was reading when it stopped: "rdma.max_grants", "rdma.device_mask[1]";
  // empty when it stopped between the members of the document itself.
  const auto where = [&] {
    std::string path;
    for (size_t i = 0; i < frames.size(); ++i) {
      const Frame& f = frames[i];
      // Only the innermost tracked level can be between values; outer ones hold the open child.
      const bool innermost = i + 1 == frames.size() && frames.size() == depth;
      if (f.object) {
        if (innermost && !f.in_value) break;
        path = join_path(path, f.key);
      } else {
        path += "[" + std::to_string(innermost ? f.elements : f.elements - 1) + "]";
      }
    }
    return cc::printable(path, 200);
  };
  try {
    out = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    // parse_error for syntax, out_of_range 406 for a number beyond a double.
    const std::string path = where();
    return Status::error(Errc::Configuration, "config: " + (path.empty() ? "" : path + ": ") +
                                                  "invalid JSON: " + cc::printable(e.what()));
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

// Sixteen times the largest inline priority matrix: room for any real configuration, and a bound
// on what a mistyped path (a log, a disk image) makes the loader read into memory.
constexpr size_t kMaxConfigFileBytes = 16 << 20;

std::string errno_text(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

// Reads at most kMaxConfigFileBytes + 1 bytes of a regular file.
Result<std::string> read_config_file(const std::string& path) {
  const std::string name = "config: cannot read file " + quote_path(path);
  // O_NONBLOCK only so that opening a FIFO without a writer cannot hang the loader.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::error(Errc::Configuration, name + ": " + errno_text(errno));
  struct Closer {
    int owned;
    ~Closer() { ::close(owned); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return Status::error(Errc::Configuration, name + ": " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::error(
        Errc::Configuration,
        name + (S_ISDIR(st.st_mode) ? ": it is a directory" : ": not a regular file"));
  }
  const std::string limit =
      "the limit of " + std::to_string(kMaxConfigFileBytes) + " bytes (16 MiB)";
  if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigFileBytes) {
    return Status::error(Errc::Configuration,
                         name + ": it is " + std::to_string(st.st_size) + " bytes, over " + limit);
  }
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  // A file that grows while it is read is still bounded: one byte past the limit is enough.
  while (true) {
    if (got == text.size()) {
      if (text.size() > kMaxConfigFileBytes) break;
      text.resize(std::min(text.size() * 2 + 4096, kMaxConfigFileBytes + 1));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::error(Errc::Configuration, name + ": " + errno_text(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxConfigFileBytes) {
    return Status::error(Errc::Configuration, name + ": it holds more than " + limit);
  }
  text.resize(got);
  return text;
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
  if (cuda.staging_chunk_bytes > rdma.max_staging_bytes) {
    return Status::error(
        Errc::Configuration,
        "config: cuda.staging_chunk_bytes = " + std::to_string(cuda.staging_chunk_bytes) +
            " exceeds rdma.max_staging_bytes (" + std::to_string(rdma.max_staging_bytes) +
            "), the staging pool's bound");
  }
  if (rdma.bounce_limit != 0 && rdma.bounce_pool_bytes < rdma.bounce_limit) {
    return Status::error(
        Errc::Configuration,
        "config: rdma.bounce_pool_bytes = " + std::to_string(rdma.bounce_pool_bytes) +
            " cannot hold one chunk of rdma.bounce_limit = " + std::to_string(rdma.bounce_limit) +
            " (set bounce_limit to 0 instead)");
  }
  if (cuda.staging_chunk_bytes % 64 != 0) {
    return Status::error(Errc::Configuration, "config: cuda.staging_chunk_bytes = " +
                                                  std::to_string(cuda.staging_chunk_bytes) +
                                                  " is not a multiple of 64");
  }
  if (coll.shm_slot_bytes != 0 && (coll.shm_slot_bytes % 64 != 0 || coll.shm_slot_bytes < 4096)) {
    return Status::error(Errc::Configuration,
                         "config: coll.shm_slot_bytes = " + std::to_string(coll.shm_slot_bytes) +
                             " is neither 0 (no shared segment) nor a multiple of 64 from 4096");
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
  auto text = read_config_file(path);
  if (!text.ok()) return text.status().with_context(path);
  auto parsed = from_json(*text);
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
