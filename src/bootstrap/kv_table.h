// The key-value semantics shared by the in-process store and the TCP store server, so both
// behave identically (counters, compare-and-set, erase). Not thread-safe: callers lock.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/strings.h"

namespace orbite {

class KvTable {
 public:
  void set(std::string_view key, std::string value) { map_[std::string(key)] = std::move(value); }

  [[nodiscard]] const std::string* find(std::string_view key) const {
    auto it = map_.find(std::string(key));
    return it == map_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] bool contains(std::string_view key) const { return find(key) != nullptr; }

  Result<std::int64_t> add(std::string_view key, std::int64_t delta) {
    std::string& slot = map_[std::string(key)];
    std::int64_t current = 0;
    if (!slot.empty()) {
      auto parsed = parse_int64(slot);
      if (!parsed) {
        return Status::error(Errc::InvalidArgument, "store key " + quote(key) + " holds " +
                                                        quote(slot) +
                                                        ", not a decimal counter for add()");
      }
      current = *parsed;
    }
    if ((delta > 0 && current > std::numeric_limits<std::int64_t>::max() - delta) ||
        (delta < 0 && current < std::numeric_limits<std::int64_t>::min() - delta)) {
      return Status::error(
          Errc::InvalidArgument,
          "store counter " + quote(key) + " would overflow adding " + std::to_string(delta));
    }
    current += delta;
    slot = std::to_string(current);
    return current;
  }

  // Returns the value held after the operation ("" when the key stays absent).
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) {
    auto it = map_.find(std::string(key));
    if (it == map_.end()) {
      if (!expected.empty()) return std::string();
      map_.emplace(std::string(key), std::string(desired));
      return std::string(desired);
    }
    if (it->second == expected) it->second = std::string(desired);
    return it->second;
  }

  bool erase(std::string_view key) { return map_.erase(std::string(key)) > 0; }

 private:
  std::unordered_map<std::string, std::string> map_;
};

}  // namespace orbite
