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
  // `max_bytes` bounds the keys and values held together; a write that would pass it is refused
  // (ResourceExhausted naming the limit) and changes nothing.
  explicit KvTable(std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max())
      : max_bytes_(max_bytes) {}

  Status set(std::string_view key, std::string value) {
    auto it = map_.find(std::string(key));
    const std::uint64_t held = it == map_.end() ? 0 : key.size() + it->second.size();
    ORBITE_RETURN_IF_ERROR(room_for(key, held, key.size() + value.size()));
    bytes_ = bytes_ - held + key.size() + value.size();
    if (it == map_.end()) {
      map_.emplace(std::string(key), std::move(value));
    } else {
      it->second = std::move(value);
    }
    return {};
  }

  [[nodiscard]] const std::string* find(std::string_view key) const {
    auto it = map_.find(std::string(key));
    return it == map_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] bool contains(std::string_view key) const { return find(key) != nullptr; }

  Result<std::int64_t> add(std::string_view key, std::int64_t delta) {
    const std::string* existing = find(key);
    const std::string slot = existing != nullptr ? *existing : std::string();
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
    ORBITE_RETURN_IF_ERROR(set(key, std::to_string(current)));
    return current;
  }

  // Returns the value held after the operation ("" when the key stays absent).
  Result<std::string> compare_set(std::string_view key, std::string_view expected,
                                  std::string_view desired) {
    const std::string* held = find(key);
    if (held == nullptr ? !expected.empty() : *held != expected) {
      return held == nullptr ? std::string() : *held;
    }
    ORBITE_RETURN_IF_ERROR(set(key, std::string(desired)));
    return std::string(desired);
  }

  bool erase(std::string_view key) {
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return false;
    bytes_ -= key.size() + it->second.size();
    map_.erase(it);
    return true;
  }

  // Bytes of keys and values held now.
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }

 private:
  Status room_for(std::string_view key, std::uint64_t held, std::uint64_t wanted) const {
    if (wanted <= held || bytes_ - held + wanted <= max_bytes_) return {};
    return Status::error(Errc::ResourceExhausted,
                         "store key " + quote(key) + ": " + std::to_string(wanted) +
                             " bytes of key and value do not fit: the table holds " +
                             std::to_string(bytes_) + " of its max_table_bytes " +
                             std::to_string(max_bytes_));
  }

  std::unordered_map<std::string, std::string> map_;
  std::uint64_t max_bytes_;
  std::uint64_t bytes_ = 0;  // keys and values in map_
};

}  // namespace orbite
