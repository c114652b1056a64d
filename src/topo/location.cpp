#include "topo/location.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace orbite::topo {
namespace {

// A non-negative decimal index without sign, spaces or leading '+'.
bool parse_index(std::string_view text, int& out) {
  if (text.empty() || text.size() > 9) return false;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc{} && ptr == end && out >= 0;
}

}  // namespace

Result<Location> Location::parse(std::string_view text) {
  if (text == "*") return Location::any();
  const auto colon = text.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view kind = text.substr(0, colon);
    int index = 0;
    if (parse_index(text.substr(colon + 1), index)) {
      if (kind == "cpu") return Location::cpu(index);
      // TENT accepts "gpu:N" for CUDA memory in a matrix.
      if (kind == "cuda" || kind == "gpu") return Location::cuda(index);
    }
  }
  return Status::error(Errc::InvalidArgument,
                       "location \"" + std::string(text) +
                           "\" is not one of \"*\", \"cpu:N\" (NUMA node), \"cuda:N\" (CUDA "
                           "ordinal) or \"gpu:N\"");
}

std::string Location::to_string() const {
  switch (kind) {
    case Kind::Cpu: return "cpu:" + std::to_string(index);
    case Kind::Cuda: return "cuda:" + std::to_string(index);
    case Kind::Any: break;
  }
  return "*";
}

MemoryType Location::memory_type() const {
  switch (kind) {
    case Kind::Cpu: return MemoryType::Host;
    case Kind::Cuda: return MemoryType::Cuda;
    case Kind::Any: break;
  }
  return MemoryType::Unknown;
}

Location host_memory_location(const void* addr) {
  const long page = ::sysconf(_SC_PAGESIZE);
  if (addr == nullptr || page <= 0) return Location::any();
  void* pages[1] = {reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(addr) &
                                            ~(static_cast<std::uintptr_t>(page) - 1))};
  int status[1] = {-1};
  // nodes == nullptr: only report where each page is. A kernel without NUMA support answers
  // ENOSYS; a page not resident reports -ENOENT in its status.
  if (::syscall(SYS_move_pages, 0, 1UL, pages, nullptr, status, 0) != 0 || status[0] < 0) {
    return Location::any();
  }
  return Location::cpu(status[0]);
}

Location selection_location(Location owner, std::optional<std::uint32_t> preferred_numa_node) {
  if (!preferred_numa_node || owner.kind == Location::Kind::Cuda) return owner;
  return Location::cpu(static_cast<int>(*preferred_numa_node));
}

bool LocationTiers::empty() const {
  return std::all_of(tiers.begin(), tiers.end(), [](const auto& t) { return t.empty(); });
}

const LocationTiers* PriorityTable::find(Location where) const {
  auto it = std::lower_bound(rows.begin(), rows.end(), where,
                             [](const LocationTiers& row, Location w) { return row.location < w; });
  return it != rows.end() && it->location == where ? &*it : nullptr;
}

const LocationTiers& PriorityTable::lookup(Location where) const {
  if (const LocationTiers* row = find(where)) return *row;
  if (const LocationTiers* star = find(Location::any())) return *star;
  // Every table is built with a "*" row; an empty one stands in for a hand-made table without.
  static const LocationTiers kNone;
  return kNone;
}

}  // namespace orbite::topo
