// The Prometheus text exposition format (version 0.0.4): families of samples gathered from any
// number of sources and rendered with each family's HELP and TYPE once, its samples together, as
// the format requires even when several engines of one process report the same family.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace orbite::detail {

// Label name and value; values are escaped when rendered.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType : std::uint8_t { Counter, Gauge };

class Exposition {
 public:
  // Adds one sample. `name` is the full sample name (a counter's ends in _total); a family seen
  // again keeps its first help text. Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and label names
  // [a-zA-Z_][a-zA-Z0-9_]* (checked: a bad one is a bug, reported by render()).
  void counter(std::string_view name, std::string_view help, const MetricLabels& labels,
               double value);
  void gauge(std::string_view name, std::string_view help, const MetricLabels& labels,
             double value);
  // The exposition text, families in the order they were first added, ending in a newline.
  [[nodiscard]] std::string render() const;
  [[nodiscard]] bool empty() const { return order_.empty(); }

  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct Family {
    MetricType type;
    std::string help;
    std::vector<std::string> samples;  // rendered "name{labels} value" lines
  };
  void add(MetricType type, std::string_view name, std::string_view help,
           const MetricLabels& labels, double value);
  std::map<std::string, Family, std::less<>> families_;
  std::vector<std::string> order_;
  std::vector<std::string> errors_;  // invalid names: rendered as comments, and a test fails
};

// Whether `name` is a valid metric (or, with label = true, label) name.
bool valid_metric_name(std::string_view name, bool label = false);
// A label value as the format writes it: backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view value);

}  // namespace orbite::detail
