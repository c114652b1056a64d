// The shared side of the benchmarks: nccl-tests' command line, the size sweep, the table and JSON
// output, medians and a checkable data pattern (the collectives add coll_driver.h on top). It
// links no communication library, so the OrbiTE binaries and their Open MPI references parse,
// count and print identically; the binaries move the bytes themselves.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace orbite::perf {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;

// A point moves at most this many bytes in its timed loop (and again at most in its warm-up), so
// that a 64 MiB point takes bounded time; it still runs at least kMinTimedIters iterations.
inline constexpr std::uint64_t kPointByteBudget = 2 * kGiB;
inline constexpr int kMinTimedIters = 3;

struct Options {
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 64 * kMiB;
  // Geometric steps when > 1; otherwise linear steps of step_bytes (as nccl-tests).
  std::uint64_t step_factor = 2;
  std::uint64_t step_bytes = 1 * kMiB;
  // --sizes: an explicit list that replaces -b/-e/-f/-i.
  std::vector<std::uint64_t> sizes;
  int iters = 100;
  int warmup_iters = 10;
  bool check = false;
  std::string transport = "unspec";  // unspec, tcp or shm: the one this table measures
  // --transport as given: one or more of unspec, tcp, shm (comma-separated). Empty when the flag
  // was not given: the OrbiTE binaries then measure every transport that reaches the peer.
  std::vector<std::string> transports;
  std::string json_path;
};

// A flag that only one binary has (--window). `set` returns an error text, or "" when accepted.
struct ExtraFlag {
  std::string name;        // "--window"
  std::string value_name;  // "W"
  std::string help;
  std::function<std::string(std::string_view value)> set;
  char short_name = 0;      // 'd' for "-d"; 0: the long name only
  bool takes_value = true;  // false: a switch ("-v"), set("") when given
};

// An integer flag in [lowest, highest] stored in *target.
ExtraFlag int_flag(std::string name, std::string help, int* target, int lowest, int highest);
// A switch: *target becomes true when the flag is given.
ExtraFlag switch_flag(std::string name, std::string help, bool* target, char short_name = 0);

struct Program {
  std::string name;     // "sendrecv_perf"
  std::string summary;  // what it measures, for --help
  std::vector<ExtraFlag> extra = {};
  // --help lines of -c and --transport where the point-to-point wording does not fit; empty: the
  // default text. A line break continues under the description column.
  std::string check_help = {};
  std::string transport_help = {};
  // The binary measures one transport per run: a list given to --transport is a usage error.
  bool single_transport = false;
  // --transport also accepts rdma (the binary runs over RDMA: softverbs where no NIC is).
  bool rdma = false;
  // --transport also accepts nvlink (cuda_ipc: put/get of device memory on one host).
  bool nvlink = false;
};

// Parses the command line over `defaults`. -h prints the usage and exits 0; a bad flag prints an
// error naming the flag and the value and exits 2. Only a process with `print_messages` prints,
// so that N ranks do not repeat the same text N times.
Options parse_options(int argc, char** argv, const Program& program, bool print_messages,
                      Options defaults = {});

// Prints "NAME: MESSAGE" and the --help hint (when `print_messages`), then exits 2, as
// parse_options does: for checks a binary makes after parsing.
[[noreturn]] void usage_error(const Program& program, bool print_messages,
                              const std::string& message);

// The rank a launcher gave this process through its environment (OrbiTE, Open MPI, PMI, Slurm,
// torchrun), or -1: lets a binary choose who prints before it has a communicator.
int launcher_rank();
// The job's size from the same variables, or -1: lets a binary check a rank argument (a root)
// before it joins the job.
int launcher_size();

// "64M" for an exact multiple of a unit, else the plain byte count.
std::string format_size(std::uint64_t bytes);
// A value as the harness's errors show it: in single quotes.
inline std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

// Parses "8", "64M", "1G", "4KiB", "512B": K/M/G/T are powers of 1024.
std::optional<std::uint64_t> parse_size(std::string_view text);

// The message sizes of the sweep, ascending.
std::vector<std::uint64_t> size_list(const Options& options);

// Iterations for a loop that moves bytes_per_iter per iteration: `requested`, reduced to fit
// kPointByteBudget but never below min(requested, floor).
int scaled_iters(int requested, std::uint64_t bytes_per_iter, int floor);

// The median of the samples (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> samples);

using PerfClock = std::chrono::steady_clock;
inline double micros_since(PerfClock::time_point start) {
  return std::chrono::duration<double, std::micro>(PerfClock::now() - start).count();
}
// GB/s (1e9 bytes per second) of `bytes` moved in `micros`.
inline double gbps(double bytes, double micros) {
  return micros > 0 ? bytes / micros / 1e3 : 0;
}

// Page-aligned memory, zero-filled so that every page is faulted in before anything is timed.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::uint64_t bytes);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] std::span<std::byte> span(std::uint64_t offset, std::uint64_t bytes) const {
    return {data_ + offset, static_cast<std::size_t>(bytes)};
  }

 private:
  std::byte* data_ = nullptr;
  std::uint64_t size_ = 0;
};

// Deterministic bytes from (rank, size, iteration, offset): what `rank` sends as its
// `iteration`th message of `size` bytes. Different messages differ almost everywhere, so a
// message delivered to the wrong buffer or from the wrong size is caught as well as corruption.
struct PatternKey {
  int rank = 0;
  std::uint64_t size = 0;
  std::uint64_t iteration = 0;
};
void fill_pattern(std::span<std::byte> buffer, const PatternKey& key);

struct Mismatch {
  std::uint64_t wrong = 0;  // bytes that differ
  std::uint64_t first = 0;  // offset of the first
  std::uint8_t expected = 0;
  std::uint8_t actual = 0;
};
// Compares every byte of the buffer with the pattern.
Mismatch check_pattern(std::span<const std::byte> buffer, const PatternKey& key);
// "3 wrong bytes of 4096, first at offset 17: expected 0x5c, got 0x00".
std::string describe(const Mismatch& m, std::uint64_t bytes);

// Errors. Every message goes to stderr prefixed with the rank (when >= 0). fatal() then runs the
// hook (the MPI binaries abort the job with it) and exits 1.
using FatalHook = void (*)();
void set_fatal_hook(FatalHook hook);
void report_error(int rank, std::string_view message);
[[noreturn]] void fatal(int rank, std::string_view message);

// One table column; its key names the field in the JSON rows.
struct Column {
  std::string header;  // "lat(us)"
  std::string key;     // "lat_us"
  int precision = 2;   // digits after the point; 0 prints an integer
  bool in_table = true;
  int width = 0;  // characters; 0: max(12, header + 2)
  // A text column: the cell holds an index into labels, printed (and written to JSON) as that
  // label. Lets a row carry a type or an operator name while cells stay numbers.
  std::vector<std::string> labels = {};

  // A title printed above a run of adjacent columns with the same group ("out-of-place").
  std::string group = {};
  // A bus bandwidth (GB/s) in nccl-tests' sense: a table with such columns ends with nccl-tests'
  // closing lines, whose "Avg bus bandwidth" is the mean of these cells (see Report::finish).
  bool bus_bandwidth = false;
};

// The table layouts of the point-to-point sweeps, shared by OrbiTE's and the MPI references' so
// that compare-mpi.sh reads the same keys from both. One transfer between two ranks: its bus
// bandwidth is its bandwidth (nccl-tests' sendrecv_perf counts busbw = algbw); putget's closing
// Avg line averages put and get alike, as nccl-tests averages out of place and in place.
std::vector<Column> sendrecv_columns();
std::vector<Column> putget_columns();

// A value, or nullopt: printed "N/A" and written as JSON null.
using Cell = std::optional<double>;

struct RunInfo {
  std::string program;         // "sendrecv_perf"
  std::string implementation;  // "orbite", "mpi" or "reference"
  int ranks = 0;
  // The transport named in the header and the JSON; empty: the --transport flag.
  std::string transport;
  // Binary-specific configuration for the header and the JSON "config" object (window).
  std::vector<std::pair<std::string, std::int64_t>> config = {};
  // Lines explaining the columns, printed after the configuration ('#' is added).
  std::vector<std::string> notes = {};
  // What the check counts: the summary says "N wrong bytes" and the JSON has "wrong_bytes".
  std::string wrong_unit = "bytes";
};

// The table (stdout, as nccl-tests: '#' header lines, then one row per size) and the --json file.
// Only the printing rank makes one. The constructor creates the --json file, so that a path
// that cannot be written fails before the sweep rather than after it.
class Report {
 public:
  Report(RunInfo info, const Options& options, std::vector<Column> columns);
  void print_header() const;
  // Prints the row at once (so a slow sweep shows progress) and keeps it for the JSON file.
  void add_row(std::vector<Cell> cells);
  // Adds a line to the summary printed by finish() ("# key: line"), kept in the JSON file too.
  void add_summary(std::string key, std::string line);
  // Prints the summary (and the check result when -c 1), then, in a table with bus-bandwidth
  // columns, nccl-tests' closing lines, so that scripts written for nccl-tests read our sweeps:
  //   # Out of bounds values : 0 OK
  //   # Avg bus bandwidth    : 4.21
  //   #
  // Writes --json if asked ("avg_busbw_gbps": that mean, null without such columns). Returns
  // false, after printing why, if the check failed or the file could not be written.
  bool finish(std::uint64_t wrong_bytes);

 private:
  // The line of group titles above the headers (none when no column has a group).
  void print_groups() const;

  RunInfo info_;
  Options options_;
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
  // The mean of the bus-bandwidth cells, or nullopt when the table has no such column.
  [[nodiscard]] std::optional<double> average_bus_bandwidth() const;

  struct SummaryLine {
    std::string key;
    std::string line;
  };
  std::vector<SummaryLine> summary_;
};

}  // namespace orbite::perf
