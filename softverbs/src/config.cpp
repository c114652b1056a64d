// Device configuration: SOFTVERBS_CONFIG names a JSON file; without it there is one device,
// soft_0, on 127.0.0.1, ACTIVE at 100 Gb/s.
//
// {"devices": [{"bind": "127.0.0.1", "rate_gbps": 100, "numa_node": 0,
//               "pci_bus_id": "0000:17:00.0", "port_state": "ACTIVE",
//               "gids": ["::ffff:10.0.0.1", "fe80::1"], "netns": "rail_a",
//               "faults": ["delay 50", "disable mw"]}],
//  "port_base": 21000}
// port_base (default 21000) is shared by all devices: see kSlots in internal.h. "netns" puts
// the device's sockets in a network namespace (/var/run/netns/<name>, or an absolute path).
// "faults" are control commands (control.cpp) without the device name, run at first use.
//
// Devices are named soft_<index> in file order. GID 0 is always the IPv4-mapped bind address
// (as RoCEv2 builds it from the interface address); "gids" adds entries after it.
#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

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

bool parse_file(const char* path, std::vector<DeviceConfig>* out, std::string* err) {
  std::ifstream in(path);
  if (!in) {
    *err = std::string("cannot read ") + path;
    return false;
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("devices") || !j["devices"].is_array()) {
    *err = std::string(path) + ": expected {\"devices\": [...]}";
    return false;
  }
  uint16_t port_base = 21000;
  if (j.contains("port_base")) {
    if (!j["port_base"].is_number_unsigned() || j["port_base"].get<unsigned>() > 65535) {
      *err = std::string(path) + ": port_base must be a port number";
      return false;
    }
    port_base = j["port_base"].get<uint16_t>();
  }
  int index = 0;
  for (const auto& jd : j["devices"]) {
    DeviceConfig d;
    d.port_base = port_base;
    try {
      if (jd.contains("bind")) d.bind = jd.at("bind").get<std::string>();
      if (jd.contains("rate_gbps")) d.rate_gbps = jd.at("rate_gbps").get<double>();
      if (jd.contains("numa_node")) d.numa_node = jd.at("numa_node").get<int>();
      if (jd.contains("pci_bus_id")) d.pci_bus_id = jd.at("pci_bus_id").get<std::string>();
      if (jd.contains("port_state") &&
          !parse_state(jd.at("port_state").get<std::string>(), &d.port_state)) {
        *err = "device " + std::to_string(index) +
               ": port_state must be ACTIVE, DOWN, "
               "INIT or ARMED";
        return false;
      }
      if (jd.contains("netns")) d.netns = jd.at("netns").get<std::string>();
      if (jd.contains("faults")) d.faults = jd.at("faults").get<std::vector<std::string>>();
      if (jd.contains("gids")) {
        for (const auto& g : jd.at("gids")) {
          ibv_gid gid{};
          if (!parse_gid(g.get<std::string>(), &gid)) {
            *err = "device " + std::to_string(index) + ": bad GID " + g.dump();
            return false;
          }
          d.gids.push_back(gid);
        }
      }
    } catch (const std::exception& e) {
      *err = "device " + std::to_string(index) + ": " + e.what();
      return false;
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
    ok = parse_file(path, &out, &err);
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
