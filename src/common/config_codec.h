// Codecs for configuration fields: JSON in and out, environment text in, range checks and a
// description for the reference. One overload set per (value type, constraint) pair of
// config_schema.h. Errors name the JSON path, the offending value and what was expected.
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <bit>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "common/config_schema.h"
#include "common/net.h"
#include "common/strings.h"

namespace orbite::config_codec {

using json = nlohmann::ordered_json;
namespace cs = config_schema;

inline std::string shown(const json& j) {
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text + " (" + std::string(j.type_name()) + ")";
}

// Parser messages are echoed into Status messages: bounded, and printable ASCII only, since the
// token they quote may be invalid UTF-8 or a megabyte long.
inline std::string printable(std::string_view text, size_t limit = 240) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    if (out.size() >= limit) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

inline Status bad(const std::string& path, const std::string& expected, const json& got) {
  return Status::error(Errc::Configuration,
                       "config: " + path + ": expected " + expected + ", got " + shown(got));
}

inline Status out_of_range(const std::string& path, const std::string& expected,
                           const std::string& got) {
  return Status::error(Errc::Configuration,
                       "config: " + path + ": expected " + expected + ", got " + got);
}

// ---- descriptions (also used in error messages) ----
inline std::string describe(const cs::UInt& c) {
  return "an unsigned integer in [" + std::to_string(c.min) + ", " + std::to_string(c.max) + "]";
}
inline std::string describe(const cs::Real& c) {
  auto fmt = [](double d) {
    std::string s = std::to_string(d);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  return std::string("a number in ") + (c.min_exclusive ? "(" : "[") + fmt(c.min) + ", " +
         fmt(c.max) + "]";
}
inline std::string describe(const cs::Dur& c) {
  return "a duration string with a unit (ns, us, ms, s, m, h) in [" +
         format_duration_ns(c.min.count()) + ", " + format_duration_ns(c.max.count()) + "]";
}
inline std::string describe(const cs::Bytes& c) {
  return "a byte count (integer, or a string such as \"64MiB\") in [" + std::to_string(c.min) +
         ", " + std::to_string(c.max) + "]";
}
inline std::string describe(const cs::Text& c) {
  return std::string(c.allow_empty ? "a string" : "a nonempty string") + " of at most " +
         std::to_string(c.max_len) + " characters";
}
inline std::string describe(const cs::HostPortText&) {
  return "\"\" or a \"host:port\" string";
}
inline std::string describe(const cs::ShmName&) {
  return "a shared-memory name (\"/name\", no other '/')";
}
inline std::string describe(const cs::NicMask&) {
  return "an array of NIC IDs in [0, 63]";
}
inline std::string describe(const cs::JsonText&) {
  return "a JSON object (or a string holding one)";
}
inline std::string describe(const cs::Weights3&) {
  return "an array of 3 positive numbers";
}
inline std::string describe(const std::monostate&) {
  return "a boolean (true or false)";
}
template <class E>
std::string describe(const cs::Enum<E>& c) {
  std::string out = "one of";
  for (size_t i = 0; i < c.names.size(); ++i) {
    out += (i == 0 ? " \"" : ", \"") + std::string(c.names[i].second) + "\"";
  }
  return out;
}

// ---- range checks of a typed value ----
inline Status check(bool, const std::monostate&, const std::string&) {
  return {};
}
template <class T>
requires std::is_unsigned_v<T> Status check(T v, const cs::UInt& c, const std::string& path) {
  if (v < c.min || v > c.max) return out_of_range(path, describe(c), std::to_string(v));
  return {};
}
inline Status check(double v, const cs::Real& c, const std::string& path) {
  bool low = c.min_exclusive ? v <= c.min : v < c.min;
  if (!std::isfinite(v) || low || v > c.max)
    return out_of_range(path, describe(c), std::to_string(v));
  return {};
}
inline Status check(Duration v, const cs::Dur& c, const std::string& path) {
  if (v < c.min || v > c.max) {
    return out_of_range(path, describe(c), format_duration_ns(v.count()));
  }
  return {};
}
inline Status check(std::uint64_t v, const cs::Bytes& c, const std::string& path) {
  if (v < c.min || v > c.max) return out_of_range(path, describe(c), std::to_string(v));
  return {};
}
inline Status check_utf8(const std::string& v, const std::string& path) {
  if (!is_valid_utf8(v)) return out_of_range(path, "UTF-8 text", quote(v));
  return {};
}
inline Status check(const std::string& v, const cs::Text& c, const std::string& path) {
  if (v.size() > c.max_len || (!c.allow_empty && v.empty())) {
    return out_of_range(path, describe(c), quote(v));
  }
  return check_utf8(v, path);
}
inline Status check(const std::string& v, const cs::HostPortText& c, const std::string& path) {
  if (!v.empty() && !net::parse_host_port(v).ok()) return out_of_range(path, describe(c), quote(v));
  return check_utf8(v, path);
}
inline Status check(const std::string& v, const cs::ShmName& c, const std::string& path) {
  std::string_view name = v;
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  if (v.size() > 255 || (!v.empty() && name.empty()) || name.find('/') != std::string_view::npos) {
    return out_of_range(path, describe(c), quote(v));
  }
  return check_utf8(v, path);
}
inline Status check(const std::string& v, const cs::JsonText& c, const std::string& path) {
  if (v.size() > c.max_bytes) {
    return out_of_range(path, "at most " + std::to_string(c.max_bytes) + " bytes",
                        std::to_string(v.size()) + " bytes");
  }
  // The throwing form, for the parser's reason (a number beyond a double, where the text ends).
  json parsed;
  std::string reason;
  try {
    parsed = json::parse(v);
  } catch (const json::exception& e) {
    reason = " (invalid JSON: " + printable(e.what()) + ")";
  }
  if (!reason.empty() || !parsed.is_object()) {
    return out_of_range(path, "a JSON object", quote(v) + ", which is not a JSON object" + reason);
  }
  return {};
}
inline Status check(std::uint64_t v, const cs::NicMask&, const std::string& path) {
  if (v == 0) {
    return out_of_range(path, "at least one NIC ID (use null to allow every NIC)", "an empty mask");
  }
  return {};
}
inline Status check(const std::array<double, 3>& v, const cs::Weights3& c,
                    const std::string& path) {
  for (size_t i = 0; i < 3; ++i) {
    if (!std::isfinite(v[i]) || v[i] <= 0) {
      return out_of_range(path, describe(c),
                          "element " + std::to_string(i) + " = " + std::to_string(v[i]));
    }
  }
  return {};
}
template <class E>
Status check(E v, const cs::Enum<E>& c, const std::string& path) {
  for (const auto& [value, name] : c.names) {
    if (value == v) return {};
  }
  return out_of_range(path, describe(c), "enumerator " + std::to_string(static_cast<int>(v)));
}
template <class T, class C>
Status check(const std::optional<T>& v, const C& c, const std::string& path) {
  return v ? check(*v, c, path) : Status();
}
template <class C>
Status check(const std::vector<std::string>& v, const C& c, const std::string& path) {
  for (size_t i = 0; i < v.size(); ++i) {
    ORBITE_RETURN_IF_ERROR(check(v[i], c, path + "[" + std::to_string(i) + "]"));
  }
  return {};
}

// ---- JSON -> value (then check) ----
inline Status decode(const json& j, bool& out, const std::monostate& c, const std::string& path) {
  if (!j.is_boolean()) return bad(path, describe(c), j);
  out = j.get<bool>();
  return {};
}
template <class T>
requires std::is_unsigned_v<T> Status decode(const json& j, T& out, const cs::UInt& c,
                                             const std::string& path) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<std::int64_t>() >= 0)) {
    return bad(path, describe(c), j);
  }
  auto v = j.get<std::uint64_t>();
  if (v < c.min || v > c.max) return bad(path, describe(c), j);
  out = static_cast<T>(v);
  return {};
}
inline Status decode(const json& j, double& out, const cs::Real& c, const std::string& path) {
  if (!j.is_number()) return bad(path, describe(c), j);
  double v = j.get<double>();
  ORBITE_RETURN_IF_ERROR(check(v, c, path));
  out = v;
  return {};
}
inline Status decode(const json& j, Duration& out, const cs::Dur& c, const std::string& path) {
  if (!j.is_string()) return bad(path, describe(c), j);
  auto ns = parse_duration_ns(j.get<std::string>());
  if (!ns) return bad(path, describe(c), j);
  ORBITE_RETURN_IF_ERROR(check(Duration(*ns), c, path));
  out = Duration(*ns);
  return {};
}
inline Status decode(const json& j, std::uint64_t& out, const cs::Bytes& c,
                     const std::string& path) {
  std::optional<std::uint64_t> v;
  if (j.is_number_unsigned()) v = j.get<std::uint64_t>();
  if (j.is_string()) v = parse_bytes(j.get<std::string>());
  if (!v) return bad(path, describe(c), j);
  ORBITE_RETURN_IF_ERROR(check(*v, c, path));
  out = *v;
  return {};
}
template <class C>
requires(std::is_same_v<C, cs::Text> || std::is_same_v<C, cs::HostPortText> ||
         std::is_same_v<C, cs::ShmName>) Status
    decode(const json& j, std::string& out, const C& c, const std::string& path) {
  if (!j.is_string()) return bad(path, describe(c), j);
  auto v = j.get<std::string>();
  ORBITE_RETURN_IF_ERROR(check(v, c, path));
  out = std::move(v);
  return {};
}
inline Status decode(const json& j, std::string& out, const cs::JsonText& c,
                     const std::string& path) {
  std::string text;
  if (j.is_object()) {
    text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  } else if (j.is_string()) {
    text = j.get<std::string>();
  } else {
    return bad(path, describe(c), j);
  }
  ORBITE_RETURN_IF_ERROR(check(text, c, path));
  out = std::move(text);
  return {};
}
inline Status decode(const json& j, std::uint64_t& out, const cs::NicMask& c,
                     const std::string& path) {
  if (!j.is_array()) return bad(path, describe(c), j);
  std::uint64_t mask = 0;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    if (!e.is_number_unsigned() || e.get<std::uint64_t>() > 63) {
      return bad(path + "[" + std::to_string(i) + "]", "a NIC ID in [0, 63]", e);
    }
    mask |= 1ULL << e.get<std::uint64_t>();
  }
  ORBITE_RETURN_IF_ERROR(check(mask, c, path));
  out = mask;
  return {};
}
inline Status decode(const json& j, std::array<double, 3>& out, const cs::Weights3& c,
                     const std::string& path) {
  if (!j.is_array() || j.size() != 3) return bad(path, describe(c), j);
  std::array<double, 3> v{};
  for (size_t i = 0; i < 3; ++i) {
    if (!j[i].is_number()) return bad(path + "[" + std::to_string(i) + "]", "a number", j[i]);
    v[i] = j[i].get<double>();
  }
  ORBITE_RETURN_IF_ERROR(check(v, c, path));
  out = v;
  return {};
}
template <class E>
Status decode(const json& j, E& out, const cs::Enum<E>& c, const std::string& path) {
  if (j.is_string()) {
    for (const auto& [value, name] : c.names) {
      if (j.get<std::string>() == name) {
        out = value;
        return {};
      }
    }
  }
  return bad(path, describe(c), j);
}
template <class T, class C>
Status decode(const json& j, std::optional<T>& out, const C& c, const std::string& path) {
  if (j.is_null()) {
    out.reset();
    return {};
  }
  T v{};
  ORBITE_RETURN_IF_ERROR(decode(j, v, c, path));
  out = std::move(v);
  return {};
}
inline Status decode(const json& j, std::vector<std::string>& out, const cs::Text& c,
                     const std::string& path) {
  if (!j.is_array()) return bad(path, "an array of strings", j);
  std::vector<std::string> v;
  for (size_t i = 0; i < j.size(); ++i) {
    std::string s;
    ORBITE_RETURN_IF_ERROR(decode(j[i], s, c, path + "[" + std::to_string(i) + "]"));
    v.push_back(std::move(s));
  }
  out = std::move(v);
  return {};
}

// Every decode() checks a value's type before reading it, so none throws; this boundary keeps a
// case that was missed a Configuration error naming the field, not an exception crossing the
// public API.
template <class T, class C>
Status decode_caught(const json& j, T& out, const C& c, const std::string& path) {
  try {
    return decode(j, out, c, path);
  } catch (const json::exception& e) {
    return Status::error(Errc::Configuration, "config: " + path + ": cannot read " + shown(j) +
                                                  ": " + printable(e.what()));
  }
}

// ---- value -> JSON ----
inline json encode(bool v, const std::monostate&) {
  return v;
}
template <class T>
requires std::is_unsigned_v<T> json encode(T v, const cs::UInt&) {
  return v;
}
inline json encode(double v, const cs::Real&) {
  return v;
}
inline json encode(Duration v, const cs::Dur&) {
  return format_duration_ns(v.count());
}
inline json encode(std::uint64_t v, const cs::Bytes&) {
  return v;
}
template <class C>
requires(std::is_same_v<C, cs::Text> || std::is_same_v<C, cs::HostPortText> ||
         std::is_same_v<C, cs::ShmName>) json encode(const std::string& v, const C&) {
  return v;
}
inline json encode(const std::string& v, const cs::JsonText&) {
  json parsed = json::parse(v, nullptr, false);
  return parsed.is_discarded() ? json(v) : parsed;
}
inline json encode(std::uint64_t mask, const cs::NicMask&) {
  json out = json::array();
  for (unsigned i = 0; i < 64; ++i) {
    if ((mask >> i) & 1U) out.push_back(i);
  }
  return out;
}
inline json encode(const std::array<double, 3>& v, const cs::Weights3&) {
  return json::array({v[0], v[1], v[2]});
}
template <class E>
json encode(E v, const cs::Enum<E>& c) {
  for (const auto& [value, name] : c.names) {
    if (value == v) return std::string(name);
  }
  return nullptr;
}
template <class T, class C>
json encode(const std::optional<T>& v, const C& c) {
  return v ? encode(*v, c) : json(nullptr);
}
inline json encode(const std::vector<std::string>& v, const cs::Text&) {
  return v;
}

// ---- environment text -> JSON (then decode) ----
// Scalars keep their text; lists are comma-separated; an empty value unsets an optional field.
inline json env_json(std::string_view text, const bool*, const std::monostate&) {
  std::string t = to_lower(trim(text));
  if (t == "true" || t == "1") return true;
  if (t == "false" || t == "0") return false;
  return std::string(text);
}
template <class T, class C>
json env_json(std::string_view text, const T*, const C&) {
  if constexpr (std::is_same_v<C, cs::UInt>) {
    if (auto v = parse_uint64(text)) return *v;
    return std::string(text);
  } else if constexpr (std::is_same_v<C, cs::Real>) {
    if (auto v = parse_double(text)) return *v;
    return std::string(text);
  } else if constexpr (std::is_same_v<C, cs::NicMask>) {
    json arr = json::array();
    for (const auto& part : split(text, ',')) {
      auto v = parse_uint64(part);
      arr.push_back(v ? json(*v) : json(part));
    }
    return arr;
  } else if constexpr (std::is_same_v<C, cs::Weights3>) {
    json arr = json::array();
    for (const auto& part : split(text, ',')) {
      auto v = parse_double(part);
      arr.push_back(v ? json(*v) : json(part));
    }
    return arr;
  } else {
    return std::string(trim(text));
  }
}
template <class T, class C>
json env_json(std::string_view text, const std::optional<T>*, const C& c) {
  if (trim(text).empty()) return nullptr;
  return env_json(text, static_cast<const T*>(nullptr), c);
}
inline json env_json(std::string_view text, const std::vector<std::string>*, const cs::Text&) {
  json arr = json::array();
  if (trim(text).empty()) return arr;
  for (const auto& part : split(text, ',')) arr.push_back(std::string(trim(part)));
  return arr;
}

}  // namespace orbite::config_codec
