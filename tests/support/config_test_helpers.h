// Helpers shared by the configuration tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace orbite::testing {

inline ::testing::AssertionResult Contains(const char* hay_expr, const char* needle_expr,
                                           const std::string& hay, const std::string& needle) {
  if (hay.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << hay_expr << " does not contain " << needle_expr
                                       << "\n  text:   " << hay << "\n  wanted: " << needle;
}
#define EXPECT_CONTAINS(hay, needle) EXPECT_PRED_FORMAT2(::orbite::testing::Contains, hay, needle)

// The value at a dotted path of a JSON document, or a "<missing ...>" string.
inline nlohmann::ordered_json value_at(const nlohmann::ordered_json& doc, const std::string& path) {
  const nlohmann::ordered_json* node = &doc;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(key)) {
      return nlohmann::ordered_json("<missing " + path + ">");
    }
    node = &(*node)[key];
    if (dot == std::string::npos) return *node;
    start = dot + 1;
  }
}

// A test-name-safe spelling of arbitrary text.
inline std::string sanitize(const std::string& text) {
  std::string out;
  for (char c : text) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// {"a":{"b":VALUE}} for path "a.b".
inline std::string doc_at(const std::string& path, const std::string& value) {
  std::string open;
  std::string close;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    open += "{\"" + key + "\":";
    close += "}";
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return open + value + close;
}

// Text of a JSON object of exactly `size` bytes: {"k":"xxx...x"}.
inline std::string object_text_of_size(size_t size) {
  return "{\"k\":\"" + std::string(size - 8, 'x') + "\"}";
}

// A file holding `content`, removed when the object goes away.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    static int counter = 0;
    path_ = ::testing::TempDir() + "orbite_config_" + std::to_string(getpid()) + "_" +
            std::to_string(counter++) + ".json";
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace orbite::testing
