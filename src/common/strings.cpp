#include "common/strings.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>

namespace orbite {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string to_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.emplace_back(s.substr(start));
      break;
    }
    parts.emplace_back(s.substr(start, pos - start));
    start = pos + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

std::optional<std::int64_t> parse_int64(std::string_view s) noexcept {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> parse_uint64(std::string_view s) noexcept {
  s = trim(s);
  if (s.empty() || s.front() == '-') return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) noexcept {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

struct Unit {
  std::string_view suffix;
  double scale;
};

std::optional<double> parse_with_units(std::string_view s, const Unit* units, size_t n,
                                       bool unit_required) {
  s = trim(s);
  size_t split_at = s.size();
  while (split_at > 0 && std::isalpha(static_cast<unsigned char>(s[split_at - 1]))) --split_at;
  std::string_view number = trim(s.substr(0, split_at));
  std::string_view suffix = s.substr(split_at);
  double scale = 0;
  if (suffix.empty()) {
    if (unit_required) return std::nullopt;
    scale = 1;
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (suffix == units[i].suffix) scale = units[i].scale;
    }
    if (scale == 0) return std::nullopt;
  }
  auto value = parse_double(number);
  if (!value || *value < 0) return std::nullopt;
  return *value * scale;
}

}  // namespace

std::optional<std::int64_t> parse_duration_ns(std::string_view s) noexcept {
  static constexpr Unit kUnits[] = {{"ns", 1},   {"us", 1e3},   {"ms", 1e6},  {"s", 1e9},
                                    {"m", 60e9}, {"min", 60e9}, {"h", 3600e9}};
  auto v = parse_with_units(s, kUnits, std::size(kUnits), /*unit_required=*/true);
  if (!v) return std::nullopt;
  double rounded = std::round(*v);
  if (rounded > static_cast<double>(std::numeric_limits<std::int64_t>::max() / 2)) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(rounded);
}

std::string format_duration_ns(std::int64_t ns) {
  struct {
    std::int64_t scale;
    const char* suffix;
  } static constexpr kSteps[] = {{3600'000'000'000, "h"},
                                 {60'000'000'000, "m"},
                                 {1'000'000'000, "s"},
                                 {1'000'000, "ms"},
                                 {1'000, "us"}};
  if (ns == 0) return "0s";
  for (const auto& step : kSteps) {
    if (ns % step.scale == 0) return std::to_string(ns / step.scale) + step.suffix;
  }
  return std::to_string(ns) + "ns";
}

std::optional<std::uint64_t> parse_bytes(std::string_view s) noexcept {
  static constexpr Unit kUnits[] = {{"B", 1},
                                    {"KiB", 1024.0},
                                    {"MiB", 1048576.0},
                                    {"GiB", 1073741824.0},
                                    {"TiB", 1099511627776.0},
                                    {"KB", 1e3},
                                    {"MB", 1e6},
                                    {"GB", 1e9},
                                    {"TB", 1e12},
                                    {"K", 1024.0},
                                    {"M", 1048576.0},
                                    {"G", 1073741824.0}};
  auto v = parse_with_units(s, kUnits, std::size(kUnits), /*unit_required=*/false);
  if (!v || *v != std::floor(*v) || *v > 1.8e19) return std::nullopt;
  return static_cast<std::uint64_t>(*v);
}

bool is_valid_utf8(std::string_view s) noexcept {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

std::string quote(std::string_view s, size_t max_len) {
  std::string out = "'";
  size_t n = 0;
  for (char c : s) {
    if (n++ >= max_len) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\'' && c != '\\') {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  out += "'";
  return out;
}

std::string quote_path(std::string_view path) {
  constexpr size_t kPathMax = 4096;  // Linux PATH_MAX
  return quote(path, kPathMax);
}

std::string format_seconds(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

void append_format(std::string& out, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  if (n > 0) {
    const std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(n) + 1);
    std::vsnprintf(out.data() + at, static_cast<std::size_t>(n) + 1, fmt, again);
    out.resize(at + static_cast<std::size_t>(n));
  }
  va_end(again);
}

}  // namespace orbite
