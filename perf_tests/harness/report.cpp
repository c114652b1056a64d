// The table and JSON output of the benchmarks (Report in harness.h).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "harness/harness.h"

namespace orbite::perf {
namespace {

std::string json_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return "\"" + out + "\"";
}

std::string json_number(const Cell& v, int precision) {
  if (!v || !std::isfinite(*v)) return "null";
  char buf[64];
  if (precision == 0) {
    std::snprintf(buf, sizeof buf, "%.0f", *v);
  } else {
    std::snprintf(buf, sizeof buf, "%.9g", *v);
  }
  return buf;
}

int column_width(const Column& column) {
  if (column.width > 0) return column.width;
  return std::max<int>(12, static_cast<int>(column.header.size()) + 2);
}

// The label a text column's cell names, or nullptr (not a text column, or no such label).
const std::string* label_of(const Column& column, const Cell& cell) {
  if (column.labels.empty() || !cell || !(*cell >= 0) ||
      *cell >= static_cast<double>(column.labels.size())) {
    return nullptr;
  }
  return &column.labels[static_cast<std::size_t>(*cell)];
}

}  // namespace

Report::Report(RunInfo info, const Options& options, std::vector<Column> columns)
    : info_(std::move(info)), options_(options), columns_(std::move(columns)) {
  if (info_.transport.empty()) info_.transport = options_.transport;
  if (options_.json_path.empty()) return;
  std::FILE* f = std::fopen(options_.json_path.c_str(), "w");
  if (f == nullptr) {
    fatal(0, "cannot write --json " + quoted(options_.json_path) + ": " + std::strerror(errno));
  }
  std::fclose(f);
}

void Report::print_header() const {
  const Options& o = options_;
  std::printf("# %s (%s): ranks %d, transport %s\n", info_.program.c_str(),
              info_.implementation.c_str(), info_.ranks, info_.transport.c_str());
  std::string sizes;
  if (!o.sizes.empty()) {
    for (std::uint64_t s : size_list(o)) sizes += (sizes.empty() ? "" : ",") + format_size(s);
  } else {
    sizes = format_size(o.min_bytes) + ".." + format_size(o.max_bytes) +
            (o.step_factor > 1 ? " x" + std::to_string(o.step_factor)
                               : " +" + format_size(o.step_bytes));
  }
  std::printf("# sizes %s (%zu points), iters %d, warmup_iters %d, check %d", sizes.c_str(),
              size_list(o).size(), o.iters, o.warmup_iters, o.check ? 1 : 0);
  for (const auto& [key, value] : info_.config) {
    std::printf(", %s %lld", key.c_str(), static_cast<long long>(value));
  }
  std::printf("\n");
  for (const std::string& note : info_.notes) std::printf("# %s\n", note.c_str());
  std::printf("#\n");
  print_groups();
  std::printf("#");
  bool first = true;
  for (const Column& column : columns_) {
    if (!column.in_table) continue;
    int width = column_width(column);
    std::printf("%*s", first ? width - 1 : width, column.header.c_str());
    first = false;
  }
  std::printf("\n");
  std::fflush(stdout);
}

void Report::print_groups() const {
  std::string line = "#";
  bool any = false;
  bool first = true;
  for (std::size_t c = 0; c < columns_.size();) {
    if (!columns_[c].in_table) {
      ++c;
      continue;
    }
    // The run of shown columns sharing this one's group, the title centred over it.
    const std::string& group = columns_[c].group;
    int width = 0;
    for (; c < columns_.size() && (!columns_[c].in_table || columns_[c].group == group); ++c) {
      if (columns_[c].in_table) width += column_width(columns_[c]);
    }
    if (first) --width;
    first = false;
    any = any || !group.empty();
    const int title = static_cast<int>(group.size());
    const int left = std::max(0, width - title) / 2 + (width > title ? 1 : 0);
    line += std::string(static_cast<std::size_t>(std::min(left, width)), ' ') + group;
    line += std::string(static_cast<std::size_t>(std::max(0, width - left - title)), ' ');
  }
  while (line.size() > 1 && line.back() == ' ') line.pop_back();
  if (any) std::printf("%s\n", line.c_str());
}

void Report::add_row(std::vector<Cell> cells) {
  cells.resize(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    const Column& column = columns_[c];
    if (!column.in_table) continue;
    int width = column_width(column);
    if (const std::string* label = label_of(column, cells[c])) {
      std::printf("%*s", width, label->c_str());
    } else if (!cells[c] || !std::isfinite(*cells[c])) {
      std::printf("%*s", width, "N/A");
    } else {
      std::printf("%*.*f", width, column.precision, *cells[c]);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  rows_.push_back(std::move(cells));
}

void Report::add_summary(std::string key, std::string line) {
  summary_.push_back({std::move(key), std::move(line)});
}

std::optional<double> Report::average_bus_bandwidth() const {
  // nccl-tests averages the bus bandwidth of every measurement it printed: each size, out of
  // place and in place, the small sizes' near-zero figures included. Every cell of every
  // bus-bandwidth column is that here too (the collectives' two busbw columns, sendrecv's algbw,
  // putget's put and get), less the N/A ones, which nccl-tests never prints.
  bool any = false;
  double sum = 0;
  std::size_t count = 0;
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    if (!columns_[c].bus_bandwidth) continue;
    any = true;
    for (const std::vector<Cell>& row : rows_) {
      if (row[c] && std::isfinite(*row[c])) {
        sum += *row[c];
        ++count;
      }
    }
  }
  if (!any) return std::nullopt;
  return count > 0 ? sum / static_cast<double>(count) : 0.0;
}

bool Report::finish(std::uint64_t wrong_bytes) {
  bool ok = true;
  for (const SummaryLine& s : summary_) std::printf("# %s: %s\n", s.key.c_str(), s.line.c_str());
  if (options_.check) {
    std::printf("# check: %llu wrong %s, %s\n", static_cast<unsigned long long>(wrong_bytes),
                info_.wrong_unit.c_str(), wrong_bytes == 0 ? "OK" : "FAILED");
    ok = wrong_bytes == 0;
  }
  const std::optional<double> avg_busbw = average_bus_bandwidth();
  if (avg_busbw) {
    // Spelled as nccl-tests prints them, spaces included: its Avg line keeps the blank before
    // the verdict it adds under NCCL_TESTS_MIN_BW. Its count is of the checks that failed, ours
    // of the wrong bytes (elements), so both are 0 exactly when every check passed, and without
    // -c both say 0 OK.
    const std::uint64_t out_of_bounds = options_.check ? wrong_bytes : 0;
    std::printf("# Out of bounds values : %llu %s\n",
                static_cast<unsigned long long>(out_of_bounds),
                out_of_bounds == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %g \n", *avg_busbw);
    std::printf("#\n");
  }
  std::fflush(stdout);
  if (options_.json_path.empty()) return ok;

  const Options& o = options_;
  std::string j = "{\n";
  j += "  \"program\": " + json_escape(info_.program) + ",\n";
  j += "  \"implementation\": " + json_escape(info_.implementation) + ",\n";
  j += "  \"transport\": " + json_escape(info_.transport) + ",\n";
  j += "  \"ranks\": " + std::to_string(info_.ranks) + ",\n";
  j += "  \"config\": {\"minbytes\": " + std::to_string(o.min_bytes) +
       ", \"maxbytes\": " + std::to_string(o.max_bytes) +
       ", \"stepfactor\": " + std::to_string(o.step_factor) +
       ", \"stepbytes\": " + std::to_string(o.step_bytes) + ", \"sizes\": [";
  auto sizes = size_list(o);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    j += (i ? ", " : "") + std::to_string(sizes[i]);
  }
  j += "], \"iters\": " + std::to_string(o.iters) +
       ", \"warmup_iters\": " + std::to_string(o.warmup_iters) +
       ", \"check\": " + std::to_string(o.check ? 1 : 0);
  for (const auto& [key, value] : info_.config) {
    j += ", " + json_escape(key) + ": " + std::to_string(value);
  }
  j += "},\n  \"columns\": [";
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    j += (c ? ", " : "") + std::string("{\"key\": ") + json_escape(columns_[c].key) +
         ", \"header\": " + json_escape(columns_[c].header) + "}";
  }
  j += "],\n  \"rows\": [";
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    j += r ? ",\n    {" : "\n    {";
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      const std::string* label = label_of(columns_[c], rows_[r][c]);
      j += (c ? ", " : "") + json_escape(columns_[c].key) + ": " +
           (label ? json_escape(*label) : json_number(rows_[r][c], columns_[c].precision));
    }
    j += "}";
  }
  j += rows_.empty() ? "],\n" : "\n  ],\n";
  j += "  \"summary\": {";
  for (std::size_t i = 0; i < summary_.size(); ++i) {
    j += (i ? ", " : "") + json_escape(summary_[i].key) + ": " + json_escape(summary_[i].line);
  }
  j += "},\n  \"avg_busbw_gbps\": " + json_number(avg_busbw, 9);
  j += ",\n  " + json_escape("wrong_" + info_.wrong_unit) + ": " +
       (o.check ? std::to_string(wrong_bytes) : std::string("null"));
  j += ",\n  \"ok\": " + std::string(ok ? "true" : "false") + "\n}\n";

  std::FILE* f = std::fopen(o.json_path.c_str(), "w");
  bool written = f != nullptr && std::fwrite(j.data(), 1, j.size(), f) == j.size();
  if (f != nullptr && std::fclose(f) != 0) written = false;
  if (!written) {
    report_error(0, "cannot write --json " + quoted(o.json_path) + ": " + std::strerror(errno));
    return false;
  }
  return ok;
}

std::vector<Column> sendrecv_columns() {
  return {{"size(B)", "size", 0},
          {"lat(us)", "lat_us", 2},
          {.header = "algbw(GB/s)", .key = "bw_gbps", .bus_bandwidth = true},
          {"#wrong", "wrong", 0},
          {"lat_iters", "lat_iters", 0, false},
          {"bw_iters", "bw_iters", 0, false}};
}

std::vector<Column> putget_columns() {
  return {{"size(B)", "size", 0},
          {"put(us)", "put_lat_us", 2},
          {"get(us)", "get_lat_us", 2},
          {.header = "put(GB/s)", .key = "put_bw_gbps", .bus_bandwidth = true},
          {.header = "get(GB/s)", .key = "get_bw_gbps", .bus_bandwidth = true},
          {"#wrong", "wrong", 0},
          {"lat_iters", "lat_iters", 0, false},
          {"bw_iters", "bw_iters", 0, false}};
}

}  // namespace orbite::perf
