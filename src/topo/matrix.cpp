#include "topo/matrix.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "topo/tiers.h"

namespace orbite::topo {
namespace {

// Ordered, so that the first error reported is the first one in the text.
using Json = nlohmann::ordered_json;

// Values and keys echoed in messages are cut here: a 1 MiB key must not become a 1 MiB log line.
constexpr std::size_t kShownBytes = 64;
constexpr std::size_t kShownParseError = 240;
// Neither schema nests deeper than 5; anything deeper fails the shape checks anyway, so the
// duplicate-key scan stops following it and its bookkeeping stays small for hostile input.
constexpr std::size_t kTrackedDepth = 16;

constexpr std::string_view kNicKeys[] = {"name", "type", "numa_node", "pci_bus_id", "device_attrs"};
constexpr std::string_view kMemKeys[] = {"name", "type", "numa_node", "device_list"};
constexpr std::string_view kRankKeys[] = {"rank0", "rank1", "rank2"};
constexpr std::string_view kTopKeys[] = {"nics", "mems"};

// Cuts at most `limit` bytes without splitting a UTF-8 sequence.
void cut(std::string& text, std::size_t limit) {
  if (text.size() <= limit) return;
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  text += "...";
}

std::string dumped(const Json& value) {
  // The parser only produces valid UTF-8, but "replace" keeps dump() from ever throwing.
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A JSON string literal of untrusted text, e.g. "mlx5_9".
std::string literal(std::string_view text) {
  std::string out = dumped(Json(std::string(text)));
  cut(out, kShownBytes);
  return out;
}

// Renders only the first levels and bytes of a value: dump() recurses, and a 1 MiB document can
// nest half a million arrays.
void render(const Json& value, std::string& out, int depth) {
  if (out.size() > kShownBytes) return;
  if (!value.is_structured()) {
    out += dumped(value);
    return;
  }
  const bool object = value.is_object();
  out += object ? '{' : '[';
  if (!value.empty() && depth >= 2) out += "...";
  bool first = true;
  for (const auto& item : value.items()) {
    if (depth >= 2 || out.size() > kShownBytes) break;
    if (!first) out += ',';
    first = false;
    if (object) out += dumped(Json(item.key())) + ":";
    render(item.value(), out, depth + 1);
  }
  out += object ? '}' : ']';
}

std::string shown(const Json& value) {
  std::string out;
  render(value, out, 0);
  cut(out, kShownBytes);
  return out;
}

std::string list(const std::vector<std::string>& items) {
  if (items.empty()) return "none";
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

bool plain_key(std::string_view key) {
  if (key.empty() || std::isdigit(static_cast<unsigned char>(key.front()))) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// jq-like paths: .mems[0].device_list.rank1[2], ["cuda:0"][1][0].
std::string member(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (plain_key(key)) return out + "." + std::string(key);
  return out + "[" + literal(key) + "]";
}

std::string element(std::string_view parent, std::size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::string errno_text(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

// The origin, the inventory, and how errors are worded.
class Context {
 public:
  Context(std::string_view origin, const Inventory& inventory)
      : origin_(origin), inventory_(inventory) {}

  [[nodiscard]] const std::string& origin() const { return origin_; }
  [[nodiscard]] const Inventory& inventory() const { return inventory_; }

  [[nodiscard]] Status fail(std::string_view path, std::string_view what) const {
    std::string text = origin_;
    if (path.empty()) {
      text += ": ";
    } else if (origin_.find(' ') == std::string::npos) {
      text += path;  // "priority_matrix" names the JSON value itself
      text += ": ";
    } else {
      text += ": ";
      text += path.front() == '.' ? path.substr(1) : path;
      text += ": ";
    }
    text += what;
    return Status::error(Errc::Configuration, std::move(text));
  }

  // The stable ID of the NIC named by `value`.
  [[nodiscard]] Result<int> nic_id(const std::string& path, const Json& value) const {
    if (!value.is_string()) {
      return fail(path, "expected a NIC name (string), got " + shown(value));
    }
    const auto& name = value.get_ref<const std::string&>();
    const NicInfo* nic = inventory_.nic(name);
    if (nic == nullptr) {
      std::vector<std::string> known;
      for (const auto& n : inventory_.nics) known.push_back(n.name);
      return fail(path, "NIC " + literal(name) +
                            " is not in the inventory after filters (known: " + list(known) + ")");
    }
    return nic->id;
  }

  // Memory locations must match discovery: an explicit row for memory this host does not have
  // is a typo or a file written for another machine.
  [[nodiscard]] Result<Location> location(const std::string& path, const std::string& text) const {
    auto parsed = Location::parse(text);
    if (!parsed.ok()) {
      return fail(path, "unknown location " + literal(text) +
                            " (expected \"*\", \"cpu:N\", \"cuda:N\" or \"gpu:N\")");
    }
    const Location where = *parsed;
    const bool cpu = where.kind == Location::Kind::Cpu;
    const bool known_here =
        cpu ? inventory_.has_numa_node(where.index)
            : where.kind != Location::Kind::Cuda || inventory_.gpu(where.index) != nullptr;
    if (known_here) return where;
    std::vector<std::string> known;
    for (const auto& node : inventory_.numa_nodes) {
      if (cpu && node.os_index >= 0) known.push_back("cpu:" + std::to_string(node.os_index));
    }
    for (const auto& gpu : inventory_.gpus) {
      if (!cpu && gpu.ordinal >= 0) known.push_back("cuda:" + std::to_string(gpu.ordinal));
    }
    return fail(path, "location " + literal(text) + " is not " + (cpu ? "a NUMA node" : "a GPU") +
                          " of the inventory; memory locations must match discovery (known: " +
                          list(known) + ")");
  }

  // Requires an object whose keys are all in `allowed` (the native form is strict so that a
  // misspelt key is not silently ignored).
  [[nodiscard]] Status object_with(const std::string& path, const Json& value,
                                   std::span<const std::string_view> allowed,
                                   std::string_view what) const {
    if (!value.is_object()) {
      return fail(path, "expected " + std::string(what) + " (object), got " + shown(value));
    }
    for (const auto& item : value.items()) {
      const std::string& key = item.key();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return fail(member(path, key),
                    "unknown key " + literal(key) + " (expected one of: " +
                        list(std::vector<std::string>(allowed.begin(), allowed.end())) + ")");
      }
    }
    return {};
  }

 private:
  std::string origin_;
  const Inventory& inventory_;
};

// One row under construction; remembers where each NIC was first listed so that a repeat can
// point at both places.
class RowBuilder {
 public:
  explicit RowBuilder(Location where) { row_.location = where; }

  [[nodiscard]] Status add(const Context& cx, std::size_t tier, int id, const std::string& path) {
    auto [it, inserted] = first_path_.emplace(id, path);
    if (!inserted) {
      const auto& name = cx.inventory().nics[static_cast<std::size_t>(id)].name;
      std::string first = it->second;
      if (!first.empty() && first.front() == '.') first.erase(0, 1);
      return cx.fail(path, "NIC " + literal(name) + " is already listed in this row at " + first);
    }
    row_.tiers[tier].push_back(id);
    return {};
  }
  LocationTiers take() { return std::move(row_); }

 private:
  LocationTiers row_;
  std::map<int, std::string> first_path_;
};

// The "*" row for a matrix without one: each NIC in the best tier any row gives it, in
// first-appearance order over the rows sorted by location. TENT also lists a NIC that some row
// prefers in rank 1 of "*" when another row only makes it available, which counts it in two tiers
// (double weight in the selector); here a NIC sits in one tier only, as in every other row.
LocationTiers synthesize_any(const std::vector<LocationTiers>& rows) {
  LocationTiers any;
  any.location = Location::any();
  std::set<int> placed;
  for (std::size_t tier = 0; tier < kTierCount; ++tier) {
    for (const auto& row : rows) {
      for (int id : row.tiers[tier]) {
        if (placed.insert(id).second) any.tiers[tier].push_back(id);
      }
    }
  }
  return any;
}

PriorityTable finish(const Context& cx, std::vector<LocationTiers> rows) {
  std::sort(rows.begin(), rows.end(),
            [](const LocationTiers& a, const LocationTiers& b) { return a.location < b.location; });
  // Location::Kind::Any orders first, so an explicit "*" row is at the front.
  if (rows.empty() || rows.front().location.kind != Location::Kind::Any) {
    rows.insert(rows.begin(), synthesize_any(rows));
  }
  PriorityTable table;
  table.origin = cx.origin();
  table.rows = std::move(rows);
  return table;
}

// Rejects repeated locations, including the same one spelt twice ("gpu:0" and "cuda:0").
class LocationSet {
 public:
  [[nodiscard]] Status add(const Context& cx, const std::string& path, Location where,
                           const std::string& text) {
    auto [it, inserted] = first_.emplace(where, text);
    if (inserted) return {};
    return cx.fail(path, "location " + literal(text) + " repeats " + literal(it->second) +
                             " (both are " + where.to_string() + ")");
  }

 private:
  std::map<Location, std::string> first_;
};

// Parses with nlohmann, which keeps the last of duplicated keys silently; a strict loader rejects
// them, so the parse callback tracks the path and the keys seen in each open object. The same
// path names the value the parser was reading when it failed: its own errors (a number such as
// 1e400 that overflows a double, truncated text) give a byte offset at best.
Status parse_document(const Context& cx, std::string_view text, Json& out) {
  struct Frame {
    bool object = false;
    bool in_value = false;       // objects: a key was read and its value is not complete yet
    std::size_t next_index = 0;  // arrays: elements started so far
    std::string key;             // objects: the current key
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  std::size_t depth = 0;
  std::string duplicate_path;
  bool duplicate = false;
  const auto path_of = [&frames] {
    std::string path;
    for (const auto& f : frames) {
      path = f.object ? member(path, f.key) : element(path, f.next_index - 1);
    }
    return path;
  };
  // Where the parser stopped: only the innermost tracked level can be between values (an array's
  // next element has not started; an object may be between members).
  const auto failure_path = [&frames, &depth] {
    std::string path;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const Frame& f = frames[i];
      const bool innermost = i + 1 == frames.size() && frames.size() == depth;
      if (f.object) {
        if (innermost && !f.in_value) break;
        path = member(path, f.key);
      } else {
        path = element(path, innermost ? f.next_index : f.next_index - 1);
      }
    }
    return path;
  };
  const auto element_starts = [&] {
    if (frames.size() == depth && !frames.empty() && !frames.back().object) {
      ++frames.back().next_index;
    }
  };
  const auto value_ends = [&] {
    if (frames.size() == depth && !frames.empty() && frames.back().object) {
      frames.back().in_value = false;
    }
  };
  const Json::parser_callback_t callback = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        element_starts();
        if (frames.size() == depth && depth < kTrackedDepth) {
          frames.push_back(Frame{event == Json::parse_event_t::object_start, false, 0, {}, {}});
        }
        ++depth;
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (depth > 0) --depth;
        if (frames.size() > depth) frames.pop_back();
        value_ends();
        break;
      case Json::parse_event_t::key:
        if (frames.size() == depth && !frames.empty() && parsed.is_string()) {
          Frame& f = frames.back();
          f.key = parsed.get<std::string>();
          f.in_value = true;
          if (!f.keys.insert(f.key).second && !duplicate) {
            duplicate = true;
            duplicate_path = path_of();
          }
        }
        break;
      case Json::parse_event_t::value:
        element_starts();
        value_ends();
        break;
    }
    return true;
  };
  try {
    out = Json::parse(text.begin(), text.end(), callback);
  } catch (const Json::parse_error& e) {
    std::string message = e.what();
    cut(message, kShownParseError);
    return cx.fail(failure_path(),
                   "invalid JSON at byte " + std::to_string(e.byte) + ": " + message);
  } catch (const Json::exception& e) {
    // out_of_range 406: a number beyond the range of a double.
    std::string message = e.what();
    cut(message, kShownParseError);
    return cx.fail(failure_path(), "invalid JSON: " + message);
  }
  if (duplicate) {
    return cx.fail(duplicate_path, "duplicate key (each key may appear once in an object)");
  }
  return {};
}

// {"cpu:0": [["mlx5_0"], ["mlx5_1"]], ...}: rank 0 preferred, rank 1 available, tier 2 empty.
Result<PriorityTable> parse_classic(const Context& cx, const Json& doc) {
  if (doc.empty()) {
    return cx.fail("",
                   "the matrix lists no location (expected keys such as \"cpu:0\", "
                   "\"cuda:0\" or \"*\", each with [[preferred NICs], [available NICs]])");
  }
  std::vector<LocationTiers> rows;
  LocationSet seen;
  for (const auto& [key, value] : doc.items()) {
    const std::string path = member("", key);
    ORBITE_ASSIGN_OR_RETURN(const Location where, cx.location(path, key));
    ORBITE_RETURN_IF_ERROR(seen.add(cx, path, where, key));
    if (!value.is_array() || value.size() != 2) {
      return cx.fail(path,
                     "expected [[preferred NICs], [available NICs]] (an array of two arrays "
                     "of NIC names), got " +
                         shown(value));
    }
    RowBuilder row(where);
    for (std::size_t tier = 0; tier < 2; ++tier) {
      const std::string rank_path = element(path, tier);
      const Json& names = value[tier];
      if (!names.is_array()) {
        return cx.fail(rank_path, std::string("expected an array of ") +
                                      (tier == 0 ? "preferred" : "available") + " NIC names, got " +
                                      shown(names));
      }
      for (std::size_t i = 0; i < names.size(); ++i) {
        const std::string name_path = element(rank_path, i);
        ORBITE_ASSIGN_OR_RETURN(const int id, cx.nic_id(name_path, names[i]));
        ORBITE_RETURN_IF_ERROR(row.add(cx, tier, id, name_path));
      }
    }
    rows.push_back(row.take());
  }
  return finish(cx, std::move(rows));
}

[[nodiscard]] Status expect(const Context& cx, const std::string& path, const Json& value,
                            bool matches, std::string_view what) {
  if (matches) return {};
  return cx.fail(path, "expected " + std::string(what) + ", got " + shown(value));
}

[[nodiscard]] Status check_int(const Context& cx, const std::string& path, const Json& value,
                               std::string_view what) {
  return expect(cx, path, value, value.is_number_integer(), std::string(what) + " (integer)");
}

// TENT's NicType code; only RDMA NICs can carry traffic here.
constexpr int kNicTypeRdma = 0;

// The "nics" array: each name resolved to its stable inventory ID, in file order.
Result<std::vector<int>> parse_native_nics(const Context& cx, const Json& doc) {
  std::vector<int> ids;
  const auto it = doc.find("nics");
  if (it == doc.end()) return ids;
  const std::string path = member("", "nics");
  if (!it->is_array()) return cx.fail(path, "expected an array of NIC objects, got " + shown(*it));
  std::map<int, std::size_t> first;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string nic_path = element(path, i);
    const Json& nic = (*it)[i];
    ORBITE_RETURN_IF_ERROR(cx.object_with(nic_path, nic, kNicKeys, "a NIC"));
    if (!nic.contains("name")) return cx.fail(nic_path, "missing required key \"name\"");
    const std::string name_path = member(nic_path, "name");
    ORBITE_ASSIGN_OR_RETURN(const int id, cx.nic_id(name_path, nic["name"]));
    auto [seen, inserted] = first.emplace(id, i);
    if (!inserted) {
      return cx.fail(name_path, "NIC " + literal(nic["name"].get<std::string>()) +
                                    " is already listed at nics[" + std::to_string(seen->second) +
                                    "]");
    }
    if (nic.contains("type")) {
      const std::string type_path = member(nic_path, "type");
      ORBITE_RETURN_IF_ERROR(check_int(cx, type_path, nic["type"], "a NIC type"));
      if (nic["type"] != kNicTypeRdma) {
        return cx.fail(type_path,
                       "NIC type " + shown(nic["type"]) + " is not supported (expected 0: RDMA)");
      }
    }
    // Accepted for TENT compatibility, type-checked, and ignored: JSON never replaces the
    // discovered PCI/NUMA metadata.
    const Json none;
    const Json& numa = nic.contains("numa_node") ? nic["numa_node"] : none;
    const Json& pci = nic.contains("pci_bus_id") ? nic["pci_bus_id"] : none;
    const Json& attrs = nic.contains("device_attrs") ? nic["device_attrs"] : none;
    ORBITE_RETURN_IF_ERROR(expect(cx, member(nic_path, "numa_node"), numa,
                                  numa.is_null() || numa.is_number_integer(),
                                  "a NUMA node (integer)"));
    ORBITE_RETURN_IF_ERROR(expect(cx, member(nic_path, "pci_bus_id"), pci,
                                  pci.is_null() || pci.is_string(), "a PCI bus ID (string)"));
    ORBITE_RETURN_IF_ERROR(expect(cx, member(nic_path, "device_attrs"), attrs,
                                  attrs.is_null() || attrs.is_object(),
                                  "an object of device attributes"));
    ids.push_back(id);
  }
  return ids;
}

// One "mems" entry: {"name": location, "type": code, "device_list": {"rank0": [indices], ...}}.
Result<LocationTiers> parse_native_mem(const Context& cx, const std::string& path, const Json& mem,
                                       const std::vector<int>& nic_ids, LocationSet& seen) {
  ORBITE_RETURN_IF_ERROR(cx.object_with(path, mem, kMemKeys, "a memory entry"));
  if (!mem.contains("name")) return cx.fail(path, "missing required key \"name\"");
  const std::string name_path = member(path, "name");
  const Json& name = mem["name"];
  ORBITE_RETURN_IF_ERROR(expect(cx, name_path, name, name.is_string(), "a location (string)"));
  const auto& text = name.get_ref<const std::string&>();
  ORBITE_ASSIGN_OR_RETURN(const Location where, cx.location(name_path, text));
  ORBITE_RETURN_IF_ERROR(seen.add(cx, name_path, where, text));
  if (mem.contains("type")) {
    const std::string type_path = member(path, "type");
    ORBITE_RETURN_IF_ERROR(check_int(cx, type_path, mem["type"], "a memory type"));
    const int expected = static_cast<int>(where.memory_type());
    if (mem["type"] != expected) {
      return cx.fail(type_path, "memory type " + shown(mem["type"]) + " does not match location " +
                                    literal(text) + " (expected " + std::to_string(expected) +
                                    "; 0 host, 1 CUDA, 4 for \"*\")");
    }
  }
  if (mem.contains("numa_node")) {
    ORBITE_RETURN_IF_ERROR(
        check_int(cx, member(path, "numa_node"), mem["numa_node"], "a NUMA node"));
  }
  RowBuilder row(where);
  if (!mem.contains("device_list")) return row.take();
  const std::string list_path = member(path, "device_list");
  const Json& device_list = mem["device_list"];
  ORBITE_RETURN_IF_ERROR(cx.object_with(list_path, device_list, kRankKeys, "a device list"));
  for (std::size_t tier = 0; tier < kTierCount; ++tier) {
    const std::string rank_key(kRankKeys[tier]);
    if (!device_list.contains(rank_key)) continue;
    const std::string rank_path = member(list_path, rank_key);
    const Json& indices = device_list[rank_key];
    ORBITE_RETURN_IF_ERROR(
        expect(cx, rank_path, indices, indices.is_array(), "an array of indices into nics"));
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const std::string index_path = element(rank_path, i);
      const Json& index = indices[i];
      ORBITE_RETURN_IF_ERROR(check_int(cx, index_path, index, "an index into nics"));
      const std::string count = " (" + std::to_string(nic_ids.size()) + " nics)";
      // nlohmann stores non-negative integers as unsigned, so a signed one is negative.
      if (!index.is_number_unsigned()) {
        return cx.fail(index_path, "index " + shown(index) + " is negative" + count);
      }
      const auto value = index.get<std::uint64_t>();
      if (value >= nic_ids.size()) {
        return cx.fail(index_path, "index " + std::to_string(value) + " is out of range" + count);
      }
      ORBITE_RETURN_IF_ERROR(row.add(cx, tier, nic_ids[value], index_path));
    }
  }
  return row.take();
}

// {"nics": [{"name": ...}], "mems": [{"name": ..., "device_list": {...}}]}: TENT's own format.
// TENT synthesizes no "*" here; we do, as for the classic form, so that an unlisted location
// gets the union of the listed rows instead of no route at all.
Result<PriorityTable> parse_native(const Context& cx, const Json& doc) {
  ORBITE_RETURN_IF_ERROR(cx.object_with("", doc, kTopKeys, "a topology"));
  ORBITE_ASSIGN_OR_RETURN(const std::vector<int> nic_ids, parse_native_nics(cx, doc));
  const std::string path = member("", "mems");
  const auto it = doc.find("mems");
  if (it == doc.end()) {
    return cx.fail("", "missing key \"mems\": the topology lists no memory location");
  }
  if (!it->is_array()) {
    return cx.fail(path, "expected an array of memory entries, got " + shown(*it));
  }
  if (it->empty()) return cx.fail(path, "the topology lists no memory location");
  std::vector<LocationTiers> rows;
  LocationSet seen;
  for (std::size_t i = 0; i < it->size(); ++i) {
    ORBITE_ASSIGN_OR_RETURN(LocationTiers row,
                            parse_native_mem(cx, element(path, i), (*it)[i], nic_ids, seen));
    rows.push_back(std::move(row));
  }
  return finish(cx, std::move(rows));
}

// Reads at most kMaxMatrixBytes + 1 bytes, so an oversized file is refused without reading it.
Result<std::string> read_bounded(const Context& cx, const std::string& path) {
  // O_NONBLOCK only so that opening a FIFO without a writer cannot hang initialization.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return cx.fail("", "cannot open the file: " + errno_text(errno));
  struct Closer {
    int owned;
    ~Closer() { ::close(owned); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return cx.fail("", "cannot stat the file: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) return cx.fail("", "is a directory, expected a JSON file");
  const auto limit = std::to_string(kMaxMatrixBytes) + " bytes (1 MiB)";
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > kMaxMatrixBytes) {
    return cx.fail(
        "", "the file is " + std::to_string(st.st_size) + " bytes, over the limit of " + limit);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string text(kMaxMatrixBytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return cx.fail("", "cannot read the file: " + errno_text(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > kMaxMatrixBytes) {
    return cx.fail("", "the file holds more than the limit of " + limit);
  }
  text.resize(got);
  return text;
}

}  // namespace

Result<PriorityTable> parse_priorities(std::string_view json_text, std::string_view origin,
                                       const Inventory& inventory) {
  const Context cx(origin, inventory);
  if (json_text.size() > kMaxMatrixBytes) {
    return cx.fail("", std::to_string(json_text.size()) + " bytes, over the limit of " +
                           std::to_string(kMaxMatrixBytes) + " bytes (1 MiB)");
  }
  Json doc;
  ORBITE_RETURN_IF_ERROR(parse_document(cx, json_text, doc));
  if (!doc.is_object()) {
    return cx.fail("",
                   "expected a JSON object (a TENT priority matrix or {\"nics\", \"mems\"}), "
                   "got " +
                       shown(doc));
  }
  if (doc.contains("nics") || doc.contains("mems")) return parse_native(cx, doc);
  return parse_classic(cx, doc);
}

Result<PriorityTable> load_priorities(const rdma::RdmaConfig& config, const Inventory& inventory) {
  if (config.priority_matrix) {
    return parse_priorities(*config.priority_matrix, "priority_matrix", inventory);
  }
  if (config.custom_json_path) {
    const std::string origin = "custom_json_path " + *config.custom_json_path;
    ORBITE_ASSIGN_OR_RETURN(const std::string text,
                            read_bounded(Context(origin, inventory), *config.custom_json_path));
    return parse_priorities(text, origin, inventory);
  }
  return discovered_priorities(inventory);
}

}  // namespace orbite::topo
