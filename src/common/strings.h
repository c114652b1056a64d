// Small string helpers shared by configuration, environment and protocol parsing.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orbite {

std::string_view trim(std::string_view s) noexcept;
std::string to_lower(std::string_view s);
std::string to_upper(std::string_view s);
std::vector<std::string> split(std::string_view s, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);

// Strict decimal parsing: the whole string (after trimming) must be a number in range.
std::optional<std::int64_t> parse_int64(std::string_view s) noexcept;
std::optional<std::uint64_t> parse_uint64(std::string_view s) noexcept;
std::optional<double> parse_double(std::string_view s) noexcept;

// "10ms", "1.5s", "250us", "2m", "100ns" -> nanoseconds. A unit is required.
std::optional<std::int64_t> parse_duration_ns(std::string_view s) noexcept;
// A duration for a person to read, in seconds with one decimal ("12.3 s"): the state report's
// ages.
std::string format_seconds(std::int64_t ns);
// The shortest exact spelling of a duration ("30s", "10ms", "1500us").
std::string format_duration_ns(std::int64_t ns);
// "64MiB", "4KiB", "1GiB", "4096" (plain bytes) -> bytes; also "KB/MB/GB" as powers of 1000.
std::optional<std::uint64_t> parse_bytes(std::string_view s) noexcept;

// printf into the end of `out` (reports written for a person: the state report).
void append_format(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Whether the bytes are well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool is_valid_utf8(std::string_view s) noexcept;

// A quoted, escaped rendering of untrusted text for error messages (bounded length).
std::string quote(std::string_view s, size_t max_len = 80);

// quote() for a file path the caller named: bounded by PATH_MAX, not 80, because a path's tail
// (the file's own name) is the part a reader needs, and a checkout's prefix can be long.
std::string quote_path(std::string_view path);

}  // namespace orbite
