// Device configuration: SOFTVERBS_CONFIG names a JSON file; without it there is one device,
// soft_0, on 127.0.0.1, ACTIVE at 100 Gb/s.
//
// {"devices": [{"bind": "127.0.0.1", "rate_gbps": 100, "numa_node": 0,
//               "pci_bus_id": "0000:17:00.0", "port_state": "ACTIVE",
//               "gids": ["::ffff:10.0.0.1", "fe80::1"], "netns": "rail_a",
//               "faults": ["delay 50", "disable mw"], "mw_strict": true, "mw_index_limit": 0}],
//  "port_base": 21000}
// port_base (default 21000) is shared by all devices: see kSlots in internal.h. "netns" puts
// the device's sockets in a network namespace (/var/run/netns/<name>, or an absolute path).
// "faults" are control commands (control.cpp) without the device name, run at first use.
// "mw_strict" (default true) and "mw_index_limit" (default 0, no limit) set the memory window
// keys and indices (mw.cpp), as the commands mw_strict and mw_index_limit do.
//
// Devices are named soft_<index> in file order. GID 0 is always the IPv4-mapped bind address
// (as RoCEv2 builds it from the interface address); "gids" adds entries after it.
#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "internal.h"

namespace softverbs {
namespace {

// Per-lane Gb/s of the IB speed codes and lane counts of the width codes (ibv_port_attr).
struct Code {
  uint8_t code;
  double value;
};
constexpr Code kSpeeds[] = {{1, 2.5},   {2, 5.0},   {4, 10.0},   {16, 14.0},
                            {32, 25.0}, {64, 50.0}, {128, 100.0}};
constexpr Code kWidths[] = {{2, 4}, {1, 1}, {16, 2}, {4, 8}, {8, 12}};  // 4x preferred

bool parse_gid(const std::string& text, ibv_gid* gid) {
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    *gid = ipv4_gid(v4.s_addr);
    return true;
  }
  return inet_pton(AF_INET6, text.c_str(), gid->raw) == 1;
}

bool parse_state(const std::string& s, ibv_port_state* out) {
  if (s == "ACTIVE")
    *out = IBV_PORT_ACTIVE;
  else if (s == "DOWN")
    *out = IBV_PORT_DOWN;
  else if (s == "INIT")
    *out = IBV_PORT_INIT;
  else if (s == "ARMED")
    *out = IBV_PORT_ARMED;
  else
    return false;
  return true;
}

bool finish(DeviceConfig& d, int index, std::string* err) {
  d.name = "soft_" + std::to_string(index);
  in_addr a{};
  if (inet_pton(AF_INET, d.bind.c_str(), &a) != 1) {
    *err = d.name + ": bind '" + d.bind + "' is not an IPv4 address";
    return false;
  }
  d.bind_ip = a.s_addr;
  if (!(d.rate_gbps > 0)) {
    *err = d.name + ": rate_gbps must be positive";
    return false;
  }
  encode_rate(d.rate_gbps, &d.active_speed, &d.active_width);
  for (size_t i = 0; i < d.faults.size(); ++i) {
    // Written without the device: "delay 100" is run as "delay soft_N 100".
    const std::string& f = d.faults[i];
    const size_t sp = f.find(' ');
    const std::string cmd =
        sp == std::string::npos ? f + " " + d.name : f.substr(0, sp) + " " + d.name + f.substr(sp);
    if (std::string e = check_command(cmd); !e.empty()) {
      *err = d.name + ": faults[" + std::to_string(i) + "] \"" + f + "\": " + e;
      return false;
    }
    d.faults[i] = cmd;
  }
  d.gids.insert(d.gids.begin(), ipv4_gid(d.bind_ip));
  if (d.port_base == 0) d.port_base = 21000;
  if (d.port_base + kSlots > 65535) {
    *err = d.name + ": port_base leaves no room for " + std::to_string(kSlots) + " ports";
    return false;
  }
  // GUID: "SV", the device index and the bind address, so it is stable across processes.
  d.guid = (0x5356ULL << 48) | (static_cast<uint64_t>(index & 0xffff) << 32) | ntohl(d.bind_ip);
  return true;
}

using Json = nlohmann::json;

// A value echoed in a message: short, and never throwing on text that is not UTF-8.
std::string shown(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 61) + "..." : s;
}

// Parses the file's text. nlohmann's errors do not say which field they were in (a number such as
// 1e400, beyond a double, reports only the number), so the parse callback keeps the path of the
// value being read: "devices[0].rate_gbps".
bool parse_json(std::istream& in, Json* out, std::string* where, std::string* reason) {
  struct Frame {
    bool object;
    bool in_value;  // objects: a key was read and its value is not complete yet
    size_t next;    // arrays: elements started so far
    std::string key;
  };
  constexpr size_t kTrackedDepth = 16;  // the file nests three levels
  std::vector<Frame> frames;
  size_t depth = 0;
  const auto tracked = [&] { return !frames.empty() && frames.size() == depth; };
  const auto starts = [&] {
    if (tracked() && !frames.back().object) ++frames.back().next;
  };
  const auto ends = [&] {
    if (tracked() && frames.back().object) frames.back().in_value = false;
  };
  const Json::parser_callback_t callback = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        starts();
        if (frames.size() == depth && depth < kTrackedDepth) {
          frames.push_back({event == Json::parse_event_t::object_start, false, 0, {}});
        }
        ++depth;
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (frames.size() == depth) frames.pop_back();
        if (depth > 0) --depth;
        ends();
        break;
      case Json::parse_event_t::key:
        if (tracked() && parsed.is_string()) {
          frames.back().key = parsed.get<std::string>();
          frames.back().in_value = true;
        }
        break;
      case Json::parse_event_t::value:
        starts();
        ends();
        break;
    }
    return true;
  };
  try {
    *out = Json::parse(in, callback);
    return true;
  } catch (const Json::exception& e) {
    *reason = e.what();
  }
  // Only the innermost level can be between values: an array's next element has not started.
  where->clear();
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    const bool innermost = i + 1 == frames.size() && frames.size() == depth;
    if (f.object) {
      if (innermost && !f.in_value) break;
      *where += (where->empty() ? "" : ".") + f.key;
    } else {
      *where += "[" + std::to_string(innermost ? f.next : f.next - 1) + "]";
    }
  }
  return false;
}

// Typed reads of one device's fields. nlohmann's get<>() throws on a wrong type and silently
// truncates 1.5 to an int; here either is an error naming the device, the field and the value.
class Fields {
 public:
  Fields(const Json& object, std::string where, std::string* err)
      : object_(object), where_(std::move(where)), err_(err) {}

  // Each returns true when the field is absent (the default stays) or valid.
  bool text(const char* key, std::string* out) {
    const Json* v = find(key);
    if (v == nullptr) return true;
    if (!v->is_string()) return wrong(key, "a string", *v);
    *out = v->get<std::string>();
    return true;
  }
  bool number(const char* key, double* out) {
    const Json* v = find(key);
    if (v == nullptr) return true;
    if (!v->is_number()) return wrong(key, "a number", *v);
    *out = v->get<double>();
    return true;
  }
  bool boolean(const char* key, bool* out) {
    const Json* v = find(key);
    if (v == nullptr) return true;
    if (!v->is_boolean()) return wrong(key, "true or false", *v);
    *out = v->get<bool>();
    return true;
  }
  bool count(const char* key, uint32_t max, uint32_t* out) {
    const Json* v = find(key);
    if (v == nullptr) return true;
    if (!v->is_number_unsigned() || v->get<uint64_t>() > max) {
      return wrong(key, ("an integer 0.." + std::to_string(max)).c_str(), *v);
    }
    *out = static_cast<uint32_t>(v->get<uint64_t>());
    return true;
  }
  bool numa_node(const char* key, int* out) {
    const Json* v = find(key);
    if (v == nullptr) return true;
    const bool fits = (v->is_number_unsigned() && v->get<uint64_t>() <= INT32_MAX) ||
                      (v->is_number_integer() && v->get<int64_t>() == -1);
    if (!fits) return wrong(key, "a NUMA node (an integer, -1 for none)", *v);
    *out = static_cast<int>(v->get<int64_t>());
    return true;
  }
  bool texts(const char* key, std::vector<std::string>* out) {
    const Json* v = find(key);
    if (v == nullptr) return true;
    if (!v->is_array()) return wrong(key, "an array of strings", *v);
    std::vector<std::string> items;
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& item = (*v)[i];
      const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
      if (!item.is_string()) return wrong(at.c_str(), "a string", item);
      items.push_back(item.get<std::string>());
    }
    *out = std::move(items);
    return true;
  }

 private:
  const Json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  bool wrong(const char* key, const char* expected, const Json& got) {
    *err_ = where_ + ": " + key + ": expected " + expected + ", got " + shown(got);
    return false;
  }

  const Json& object_;
  std::string where_;
  std::string* err_;
};

bool parse_file(const char* path, std::vector<DeviceConfig>* out, std::string* err) {
  std::ifstream in(path);
  if (!in) {
    *err = std::string("cannot read ") + path;
    return false;
  }
  Json j;
  std::string where;
  std::string reason;
  if (!parse_json(in, &j, &where, &reason)) {
    *err = std::string(path) + ": invalid JSON" + (where.empty() ? "" : " at " + where) + ": " +
           reason;
    return false;
  }
  if (!j.is_object() || !j.contains("devices") || !j["devices"].is_array()) {
    *err = std::string(path) + ": expected {\"devices\": [...]}";
    return false;
  }
  uint16_t port_base = 21000;
  if (j.contains("port_base")) {
    const Json& v = j["port_base"];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 65535) {
      *err = std::string(path) + ": port_base must be a port number (0 to 65535), got " + shown(v);
      return false;
    }
    port_base = v.get<uint16_t>();
  }
  int index = 0;
  for (const auto& jd : j["devices"]) {
    const std::string where_device = "device " + std::to_string(index);
    if (!jd.is_object()) {
      *err = where_device + ": expected an object, got " + shown(jd);
      return false;
    }
    DeviceConfig d;
    d.port_base = port_base;
    Fields f(jd, where_device, err);
    std::string state;
    std::vector<std::string> gids;
    if (!f.text("bind", &d.bind) || !f.number("rate_gbps", &d.rate_gbps) ||
        !f.numa_node("numa_node", &d.numa_node) || !f.text("pci_bus_id", &d.pci_bus_id) ||
        !f.text("port_state", &state) || !f.text("netns", &d.netns) ||
        !f.texts("faults", &d.faults) || !f.texts("gids", &gids) ||
        !f.boolean("mw_strict", &d.mw_strict) ||
        !f.count("mw_index_limit", kMwIndexCount, &d.mw_index_limit) ||
        !f.count("max_inline_data", 256, &d.max_inline_data)) {
      return false;
    }
    if (jd.contains("port_state") && !parse_state(state, &d.port_state)) {
      *err = where_device + ": port_state must be ACTIVE, DOWN, INIT or ARMED";
      return false;
    }
    for (const std::string& g : gids) {
      ibv_gid gid{};
      if (!parse_gid(g, &gid)) {
        *err = where_device + ": bad GID " + shown(Json(g));
        return false;
      }
      d.gids.push_back(gid);
    }
    if (!finish(d, index, err)) return false;
    out->push_back(std::move(d));
    ++index;
  }
  return true;
}

void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + "." + std::to_string(getpid());
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
  }
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
  }
}

// A small sysfs look-alike so that code reading <ibdev_path>/device finds the configured PCI
// bus id and NUMA node: <root>/<key>/class/infiniband/<name>/device -> ../../../devices/<bus>
// with devices/<bus>/numa_node. <key> hashes what the tree says, so processes with different
// configurations never rewrite each other's trees. Without a pci_bus_id there is no device
// link (not a PCI device, NUMA unknown), as for a virtual device.
void make_sysfs(DeviceConfig& d) {
  const char* env = std::getenv("SOFTVERBS_SYSFS_DIR");
  const std::string base =
      env != nullptr && *env != '\0' ? env : "/tmp/softverbs-" + std::to_string(getuid());
  char key[32];
  std::snprintf(
      key, sizeof(key), "%016zx",
      std::hash<std::string>{}(d.name + "|" + d.pci_bus_id + "|" + std::to_string(d.numa_node)));
  const std::string root = base + "/sysfs-" + key;
  const std::string cls = root + "/class/infiniband/" + d.name;
  make_dirs(cls);
  write_file(cls + "/node_type", "1: CA\n");
  write_file(cls + "/fw_ver", "softverbs 0.1\n");
  write_file(cls + "/board_id", "SOFTVERBS\n");
  if (!d.pci_bus_id.empty()) {
    const std::string devdir = root + "/devices/" + d.pci_bus_id;
    make_dirs(devdir);
    write_file(devdir + "/numa_node", std::to_string(d.numa_node) + "\n");
    const std::string link = cls + "/device";
    const std::string target = "../../../devices/" + d.pci_bus_id;
    char buf[512];
    const ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
    if (n < 0 || std::string(buf, static_cast<size_t>(n)) != target) {
      unlink(link.c_str());
      if (symlink(target.c_str(), link.c_str()) != 0 && errno != EEXIST) return;
    }
  }
  d.sysfs_path = cls;
}

std::vector<DeviceConfig> load() {
  std::vector<DeviceConfig> out;
  std::string err;
  const char* path = std::getenv("SOFTVERBS_CONFIG");
  bool ok = true;
  if (path != nullptr && *path != '\0') {
    // Nothing in parse_file is meant to throw; this keeps anything missed (or std::bad_alloc)
    // from escaping into the verbs program that first listed the devices, which would abort it.
    try {
      ok = parse_file(path, &out, &err);
    } catch (const std::exception& e) {
      err = std::string(path) + ": " + e.what();
      ok = false;
    }
  } else {
    DeviceConfig d;
    ok = finish(d, 0, &err);
    if (ok) out.push_back(d);
  }
  if (!ok) {
    std::fprintf(stderr, "softverbs: %s; no devices\n", err.c_str());
    out.clear();
  }
  for (DeviceConfig& d : out) make_sysfs(d);
  return out;
}

}  // namespace

// The speed and width whose product is the rate, or else the largest product below it.
void encode_rate(double gbps, uint8_t* speed, uint8_t* width) {
  double best = -1.0;
  for (const Code& w : kWidths) {
    for (const Code& s : kSpeeds) {
      const double r = s.value * w.value;
      if (r <= gbps + 1e-9 && r > best + 1e-9) {
        best = r;
        *speed = s.code;
        *width = w.code;
      }
    }
  }
  if (best < 0) {  // below 2.5 Gb/s: report SDR 1x
    *speed = 1;
    *width = 1;
  }
}

// Never destroyed: the control thread and the device state use it until the process ends.
const std::vector<DeviceConfig>& devices() {
  static const auto* list = new std::vector<DeviceConfig>(load());
  return *list;
}

ibv_gid ipv4_gid(uint32_t ip_be) {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  std::memcpy(&g.raw[12], &ip_be, 4);
  return g;
}

bool gid_to_ipv4(const ibv_gid& gid, uint32_t* ip_be) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  if (gid.raw[10] != 0xff || gid.raw[11] != 0xff) return false;
  std::memcpy(ip_be, &gid.raw[12], 4);
  return true;
}

}  // namespace softverbs
