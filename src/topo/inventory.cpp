#include <algorithm>
#include <charconv>
#include <cstdio>

#include "common/strings.h"
#include "topo/inventory.h"

namespace orbite::topo {
namespace {

bool parse_hex(std::string_view text, std::size_t max_digits, std::uint32_t& out) {
  if (text.empty() || text.size() > max_digits) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out, 16);
  return ec == std::errc{} && ptr == end;
}

// One filter entry: "name", "prefix*", either with ":PORT".
bool entry_matches(std::string_view entry, std::string_view name, std::uint32_t port) {
  if (const auto colon = entry.rfind(':'); colon != std::string_view::npos) {
    const auto wanted = parse_uint64(entry.substr(colon + 1));
    if (!wanted || *wanted != port) return false;
    entry = entry.substr(0, colon);
  }
  if (!entry.empty() && entry.back() == '*') {
    return name.substr(0, entry.size() - 1) == entry.substr(0, entry.size() - 1);
  }
  return entry == name;
}

}  // namespace

std::optional<PciAddress> PciAddress::parse(std::string_view text) {
  // dddd:bb:dd.f, or bb:dd.f for domain 0. Domains wider than 4 digits exist (VMD: 10000).
  const auto dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::uint32_t fn = 0, dev = 0, bus = 0, domain = 0;
  if (!parse_hex(text.substr(dot + 1), 1, fn) || fn > 7) return std::nullopt;
  std::string_view head = text.substr(0, dot);
  const auto c2 = head.rfind(':');
  if (c2 == std::string_view::npos || !parse_hex(head.substr(c2 + 1), 2, dev) || dev > 0x1f) {
    return std::nullopt;
  }
  head = head.substr(0, c2);
  const auto c1 = head.rfind(':');
  if (c1 == std::string_view::npos) {
    if (!parse_hex(head, 2, bus)) return std::nullopt;
  } else if (!parse_hex(head.substr(c1 + 1), 2, bus) || !parse_hex(head.substr(0, c1), 8, domain)) {
    return std::nullopt;
  }
  return PciAddress{domain, static_cast<std::uint8_t>(bus), static_cast<std::uint8_t>(dev),
                    static_cast<std::uint8_t>(fn)};
}

std::string PciAddress::to_string() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, device, function);
  return buf;
}

bool filter_allows(const NicFilter& filter, std::string_view name, std::uint32_t port) {
  auto any = [&](const std::vector<std::string>& list) {
    return std::any_of(list.begin(), list.end(),
                       [&](const std::string& e) { return entry_matches(e, name, port); });
  };
  if (!filter.whitelist.empty()) return any(filter.whitelist);
  return !any(filter.blacklist);
}

const NicInfo* Inventory::nic(std::string_view name) const {
  auto it =
      std::find_if(nics.begin(), nics.end(), [&](const NicInfo& n) { return n.name == name; });
  return it != nics.end() ? &*it : nullptr;
}

const GpuInfo* Inventory::gpu(int ordinal) const {
  if (ordinal < 0) return nullptr;
  auto it = std::find_if(gpus.begin(), gpus.end(),
                         [&](const GpuInfo& g) { return g.ordinal == ordinal; });
  return it != gpus.end() ? &*it : nullptr;
}

bool Inventory::has_numa_node(int os_index) const {
  return std::any_of(numa_nodes.begin(), numa_nodes.end(),
                     [&](const NumaNode& n) { return n.os_index == os_index; });
}

std::string port_state_name(std::uint64_t state) {
  static constexpr const char* kStates[] = {"NOP",   "DOWN",   "INIT",
                                            "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  return state < std::size(kStates) ? kStates[state] : std::to_string(state);
}

}  // namespace orbite::topo
