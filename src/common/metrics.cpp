#include "common/metrics.h"

#include <cmath>
#include <cstdio>

namespace orbite::detail {

namespace {

bool name_char(char c, bool first, bool label) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (alpha) return true;
  if (!label && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

// Counters and gauges here are integers almost always: printed exactly (a double holds every
// integer below 2^53), the rest with enough digits to round-trip.
std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  }
  return buf;
}

// Help text escapes backslash and newline; a label value also the double quote.
std::string escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

bool valid_metric_name(std::string_view name, bool label) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, label)) return false;
  }
  // Label names starting with __ are reserved for Prometheus itself.
  return !(label && name.starts_with("__"));
}

std::string escape_label_value(std::string_view value) {
  return escape(value, true);
}

void Exposition::counter(std::string_view name, std::string_view help, const MetricLabels& labels,
                         double value) {
  add(MetricType::Counter, name, help, labels, value);
}

void Exposition::gauge(std::string_view name, std::string_view help, const MetricLabels& labels,
                       double value) {
  add(MetricType::Gauge, name, help, labels, value);
}

void Exposition::add(MetricType type, std::string_view name, std::string_view help,
                     const MetricLabels& labels, double value) {
  if (!valid_metric_name(name)) {
    errors_.push_back("invalid metric name " + std::string(name));
    return;
  }
  // In the 0.0.4 format a counter's family is named with its _total (promtool's lint asks for
  // the suffix on the TYPE line's name).
  std::string sample = std::string(name);
  if (!labels.empty()) {
    sample += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!valid_metric_name(k, true)) {
        errors_.push_back("invalid label name " + k + " on " + std::string(name));
        return;
      }
      if (!first) sample += ',';
      first = false;
      sample += k + "=\"" + escape_label_value(v) + '"';
    }
    sample += '}';
  }
  sample += ' ' + format_value(value);
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_.emplace(std::string(name), Family{type, std::string(help), {}}).first;
    order_.emplace_back(name);
  } else if (it->second.type != type) {
    errors_.push_back("metric " + std::string(name) + " added as both counter and gauge");
    return;
  }
  it->second.samples.push_back(std::move(sample));
}

std::string Exposition::render() const {
  std::string out;
  for (const std::string& name : order_) {
    const Family& f = families_.find(name)->second;
    out += "# HELP " + name + ' ' + escape(f.help, false) + '\n';
    out += "# TYPE " + name + (f.type == MetricType::Counter ? " counter\n" : " gauge\n");
    for (const std::string& s : f.samples) out += s + '\n';
  }
  // A bug in a metric's definition must not break the scrape; a comment keeps it visible and
  // the exporter's tests look for it.
  for (const std::string& e : errors_) out += "# orbite metrics error: " + e + '\n';
  return out;
}

}  // namespace orbite::detail
