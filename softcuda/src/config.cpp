// Device configuration: SOFTCUDA_CONFIG names a JSON file, or is the JSON text itself (it starts
// with '{'). Without it there is one device. Every field is optional:
//
// {"driver_version": 13000, "copy_engines": 2,
//  "devices": [{"name": "softcuda H200", "pci_bus_id": "0000:4E:00.0", "numa_node": 0,
//               "uuid": "GPU-0f6c2a19-3c4e-4d7a-9a61-1d2c3b4a5e60", "memory_gib": 80,
//               "compute_capability": "9.0", "sm_count": 132,
//               "dma_buf": true, "gpudirect": true, "vmm": true, "ipc": true, "peermem": false}],
//  "faults": ["fail cuMemAlloc 2"]}
//
// "faults" are control commands (control.cpp) run at cuInit. CUDA_VISIBLE_DEVICES then selects
// and orders the devices as the driver does: indices or UUIDs (GPU-..., a unique prefix is
// enough), separated by commas; the list ends at the first entry that matches no device.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "internal.h"

namespace softcuda {
namespace {

using nlohmann::json;

bool parse_bus_id(const std::string& text, DeviceConfig* d) {
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  // "dddd:bb:dd.f" (NVML's 8-digit domain too).
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 || bus > 0xff ||
      dev > 0x1f || fn > 7 || dom > 0xffff) {
    return false;
  }
  d->pci_domain = static_cast<int>(dom);
  d->pci_bus = static_cast<int>(bus);
  d->pci_device = static_cast<int>(dev);
  d->pci_function = static_cast<int>(fn);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04X:%02X:%02X.%X", dom, bus, dev, fn);
  d->pci_bus_id = buf;
  return true;
}

bool parse_uuid(const std::string& text, std::array<unsigned char, 16>* out) {
  std::string hex;
  std::string s = text.rfind("GPU-", 0) == 0 ? text.substr(4) : text;
  for (char c : s) {
    if (c == '-') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    hex += c;
  }
  if (hex.size() != 32) return false;
  for (int i = 0; i < 16; ++i) {
    (*out)[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return true;
}

// A default identity for device i: bus 0x1b + 0x10 * i, a UUID that names softcuda.
DeviceConfig default_device(int i) {
  DeviceConfig d;
  char bus[32];
  std::snprintf(bus, sizeof bus, "0000:%02X:00.0", 0x1b + 0x10 * i);
  parse_bus_id(bus, &d);
  const unsigned char uuid[16] = {
      0x50, 0xf7, 0xc0, 0xda, 0x50, 0x46, 0x4c, 0x00,
      0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, static_cast<unsigned char>(i)};
  std::memcpy(d.uuid.data(), uuid, 16);
  return d;
}

bool read_text(const char* value, std::string* text, std::string* error) {
  if (value[0] == '{') {
    *text = value;
    return true;
  }
  std::ifstream in(value);
  if (!in) {
    *error = std::string("SOFTCUDA_CONFIG: cannot read '") + value + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  *text = ss.str();
  return true;
}

template <typename T>
bool get(const json& j, const char* key, T* out, const std::string& where, std::string* error) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  try {
    *out = it->get<T>();
  } catch (const std::exception&) {
    *error = "SOFTCUDA_CONFIG: " + where + key + " has the wrong type (" + it->dump() + ")";
    return false;
  }
  return true;
}

bool parse_device(const json& j, int i, DeviceConfig* d, std::string* error) {
  const std::string where = "devices[" + std::to_string(i) + "].";
  if (!j.is_object()) {
    *error = "SOFTCUDA_CONFIG: devices[" + std::to_string(i) + "] is not an object";
    return false;
  }
  static const std::set<std::string> known = {"name",
                                              "pci_bus_id",
                                              "numa_node",
                                              "uuid",
                                              "memory_gib",
                                              "memory_bytes",
                                              "compute_capability",
                                              "sm_count",
                                              "dma_buf",
                                              "gpudirect",
                                              "vmm",
                                              "ipc",
                                              "peermem"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (known.count(it.key()) == 0) {
      *error = "SOFTCUDA_CONFIG: unknown field " + where + it.key();
      return false;
    }
  }
  std::string bus, uuid, cc;
  double gib = 0;
  if (!get(j, "name", &d->name, where, error) || !get(j, "pci_bus_id", &bus, where, error) ||
      !get(j, "numa_node", &d->numa_node, where, error) || !get(j, "uuid", &uuid, where, error) ||
      !get(j, "memory_gib", &gib, where, error) ||
      !get(j, "memory_bytes", &d->memory_bytes, where, error) ||
      !get(j, "compute_capability", &cc, where, error) ||
      !get(j, "sm_count", &d->sm_count, where, error) ||
      !get(j, "dma_buf", &d->dma_buf, where, error) ||
      !get(j, "gpudirect", &d->gpudirect, where, error) || !get(j, "vmm", &d->vmm, where, error) ||
      !get(j, "ipc", &d->ipc, where, error) || !get(j, "peermem", &d->peermem, where, error)) {
    return false;
  }
  if (!bus.empty() && !parse_bus_id(bus, d)) {
    *error = "SOFTCUDA_CONFIG: " + where + "pci_bus_id '" + bus + "' is not dddd:bb:dd.f";
    return false;
  }
  if (!uuid.empty() && !parse_uuid(uuid, &d->uuid)) {
    *error = "SOFTCUDA_CONFIG: " + where + "uuid '" + uuid + "' is not GPU-<32 hex digits>";
    return false;
  }
  if (gib > 0) d->memory_bytes = static_cast<std::uint64_t>(gib * double(1ull << 30));
  if (d->memory_bytes < (64ull << 20) || d->memory_bytes > (4ull << 40)) {
    *error = "SOFTCUDA_CONFIG: " + where + "memory of " + std::to_string(d->memory_bytes) +
             " bytes is outside [64 MiB, 4 TiB]";
    return false;
  }
  if (!cc.empty() && std::sscanf(cc.c_str(), "%d.%d", &d->cc_major, &d->cc_minor) != 2) {
    *error = "SOFTCUDA_CONFIG: " + where + "compute_capability '" + cc + "' is not MAJOR.MINOR";
    return false;
  }
  if (d->sm_count <= 0 || d->numa_node < -1) {
    *error = "SOFTCUDA_CONFIG: " + where + "sm_count must be positive and numa_node >= -1";
    return false;
  }
  return true;
}

}  // namespace

std::string format_uuid(const std::array<unsigned char, 16>& u) {
  char buf[64];
  std::snprintf(buf, sizeof buf,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  return buf;
}

bool load_config(Config* out, std::string* error) {
  Config c;
  const char* value = std::getenv("SOFTCUDA_CONFIG");
  if (value == nullptr || *value == '\0') {
    c.devices.push_back(default_device(0));
    *out = c;
    return true;
  }
  std::string text;
  if (!read_text(value, &text, error)) return false;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "SOFTCUDA_CONFIG: not a JSON object";
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "driver_version" && it.key() != "copy_engines" && it.key() != "devices" &&
        it.key() != "faults") {
      *error = "SOFTCUDA_CONFIG: unknown field " + it.key();
      return false;
    }
  }
  if (!get(j, "driver_version", &c.driver_version, "", error) ||
      !get(j, "copy_engines", &c.copy_engines, "", error) ||
      !get(j, "faults", &c.faults, "", error)) {
    return false;
  }
  if (c.driver_version < 11030 || c.driver_version % 10 != 0) {
    *error = "SOFTCUDA_CONFIG: driver_version " + std::to_string(c.driver_version) +
             " is not a CUDA version >= 11030 (1000 * major + 10 * minor)";
    return false;
  }
  if (c.copy_engines < 1 || c.copy_engines > 16) {
    *error =
        "SOFTCUDA_CONFIG: copy_engines " + std::to_string(c.copy_engines) + " is outside [1, 16]";
    return false;
  }
  if (auto it = j.find("devices"); it != j.end()) {
    if (!it->is_array() || it->size() > 64) {
      *error = "SOFTCUDA_CONFIG: devices must be an array of at most 64 objects";
      return false;
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
      DeviceConfig d = default_device(static_cast<int>(i));
      if (!parse_device((*it)[i], static_cast<int>(i), &d, error)) return false;
      c.devices.push_back(d);
    }
  } else {
    c.devices.push_back(default_device(0));
  }
  *out = c;
  return true;
}

std::vector<int> visible_devices(const Config& config, const char* env) {
  std::vector<int> all(config.devices.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  if (env == nullptr) return all;
  std::vector<int> out;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int match = -1;
    if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos) {
      const long v = std::strtol(item.c_str(), nullptr, 10);
      if (v >= 0 && v < static_cast<long>(config.devices.size())) match = static_cast<int>(v);
    } else if (item.rfind("GPU-", 0) == 0) {
      for (std::size_t i = 0; i < config.devices.size(); ++i) {
        if (format_uuid(config.devices[i].uuid).rfind(item, 0) == 0) {
          if (match != -1) {  // ambiguous prefix
            match = -1;
            break;
          }
          match = static_cast<int>(i);
        }
      }
    }
    // The driver stops at the first invalid entry, and a device listed twice is invalid.
    if (match == -1 || std::find(out.begin(), out.end(), match) != out.end()) break;
    out.push_back(match);
  }
  return out;
}

}  // namespace softcuda
