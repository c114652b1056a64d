#include "harness/harness.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace orbite::perf {
namespace {

// More points than this is a typo (a linear step far too small for the range), not a sweep.
constexpr std::size_t kMaxPoints = 10000;

FatalHook g_fatal_hook = nullptr;

}  // namespace

std::string format_size(std::uint64_t bytes) {
  static constexpr std::pair<std::uint64_t, char> kUnits[] = {
      {1024 * kGiB, 'T'}, {kGiB, 'G'}, {kMiB, 'M'}, {kKiB, 'K'}};
  for (auto [unit, suffix] : kUnits) {
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  }
  return std::to_string(bytes);
}

namespace {

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

struct Parser {
  const Program& program;
  bool print;

  [[noreturn]] void error(const std::string& message) const {
    usage_error(program, print, message);
  }
  std::uint64_t size(const std::string& flag, std::string_view value) const {
    auto v = parse_size(value);
    if (!v || *v == 0) {
      error("flag " + flag + ": expected a size of at least 1 byte (8, 64K, 1M, 1G), got " +
            quoted(value));
    }
    return *v;
  }
  int count(const std::string& flag, std::string_view value, int lowest) const {
    auto v = parse_int(value);
    if (!v || *v < lowest || *v > std::numeric_limits<int>::max()) {
      error("flag " + flag + ": expected an integer >= " + std::to_string(lowest) + ", got " +
            quoted(value));
    }
    return static_cast<int>(*v);
  }
};

// A --help description: `text` (else `fallback`), continuation lines indented under the column.
std::string help_text(const std::string& text, const std::string& fallback) {
  std::string out;
  for (char ch : text.empty() ? fallback : text) {
    out += ch;
    if (ch == '\n') out += std::string(27, ' ');
  }
  return out;
}

void print_usage(const Program& p, const Options& d) {
  std::string default_sizes;
  for (std::uint64_t s : d.sizes) {
    default_sizes += (default_sizes.empty() ? " (default " : ",") + format_size(s);
  }
  if (!default_sizes.empty()) default_sizes += ")";
  std::printf("Usage: %s [flags]\n%s\n\n", p.name.c_str(), p.summary.c_str());
  std::printf(
      "  -b, --minbytes SIZE      smallest message (default %s)\n"
      "  -e, --maxbytes SIZE      largest message (default %s)\n"
      "  -f, --stepfactor F       multiply the size by F at each step (default %llu);\n"
      "                           0 or 1: linear steps of --stepbytes\n"
      "  -i, --stepbytes SIZE     linear step (default %s); given alone, it selects linear steps\n"
      "  -n, --iters N            timed iterations per size (default %d), reduced so that a\n"
      "                           point moves at most %s, but at least %d\n"
      "  -w, --warmup_iters N     untimed iterations before each timed loop (default %d)\n"
      "  -c, --check 0|1          %s (default %d)\n"
      "      --sizes LIST         these sizes (8,1M,64M) instead of -b/-e/-f/-i%s\n"
      "      --transport T        %s\n"
      "      --json FILE          also write the table rows as JSON to FILE\n",
      format_size(d.min_bytes).c_str(), format_size(d.max_bytes).c_str(),
      static_cast<unsigned long long>(d.step_factor), format_size(d.step_bytes).c_str(), d.iters,
      format_size(kPointByteBudget).c_str(), kMinTimedIters, d.warmup_iters,
      help_text(p.check_help, "send a pattern and check every received byte").c_str(),
      d.check ? 1 : 0, default_sizes.c_str(),
      help_text(p.transport_help,
                "unspec, tcp, shm or a list (shm,tcp), one table each\n"
                "(default: OrbiTE measures shm and tcp to a same-host\n"
                "peer, tcp otherwise; MPI: " +
                    d.transport + ", a label only)")
          .c_str());
  for (const ExtraFlag& f : p.extra) {
    std::string left = f.name + " " + f.value_name;
    std::string head = f.short_name != 0 ? std::string("  -") + f.short_name + ", " : "      ";
    std::printf("%s%-20s %s\n", head.c_str(), left.c_str(), help_text(f.help, "").c_str());
  }
  std::printf(
      "  -h, --help               this text\n"
      "SIZE is a byte count with an optional K, M, G or T suffix (powers of 1024).\n");
}

// The long name of a short flag, or "" when it has none.
std::string long_name(char c) {
  switch (c) {
    case 'b': return "--minbytes";
    case 'e': return "--maxbytes";
    case 'f': return "--stepfactor";
    case 'i': return "--stepbytes";
    case 'n': return "--iters";
    case 'w': return "--warmup_iters";
    case 'c': return "--check";
    case 'h': return "--help";
    default: return "";
  }
}

std::string short_to_long(const Program& program, char c) {
  for (const ExtraFlag& f : program.extra) {
    if (f.short_name != 0 && f.short_name == c) return f.name;
  }
  return long_name(c);
}

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t pattern_seed(const PatternKey& k) {
  return splitmix(splitmix(splitmix(static_cast<std::uint64_t>(k.rank)) ^ k.size) ^ k.iteration);
}

// Bytes [8w, 8w + 8) of the pattern, least significant byte first on every host.
void pattern_word(std::uint64_t seed, std::uint64_t w, std::uint8_t out[8]) {
  std::uint64_t v = splitmix(seed + w);
  for (int b = 0; b < 8; ++b) out[b] = static_cast<std::uint8_t>(v >> (8 * b));
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::uint64_t v = 0;
  std::size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  std::string_view suffix = text.substr(i);
  std::uint64_t unit = 1;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K': unit = kKiB; break;
      case 'M': unit = kMiB; break;
      case 'G': unit = kGiB; break;
      case 'T': unit = 1024 * kGiB; break;
      default: break;
    }
    if (unit != 1) suffix.remove_prefix(1);
    if (!suffix.empty() && suffix != "B" && (unit == 1 || suffix != "iB")) return std::nullopt;
  }
  if (v > std::numeric_limits<std::uint64_t>::max() / unit) return std::nullopt;
  return v * unit;
}

ExtraFlag int_flag(std::string name, std::string help, int* target, int lowest, int highest) {
  ExtraFlag f;
  f.name = std::move(name);
  f.value_name = "N";
  f.help = std::move(help);
  f.set = [target, lowest, highest](std::string_view value) -> std::string {
    auto v = parse_int(value);
    if (!v || *v < lowest || *v > highest) {
      return "expected an integer from " + std::to_string(lowest) + " to " +
             std::to_string(highest);
    }
    *target = static_cast<int>(*v);
    return "";
  };
  return f;
}

ExtraFlag switch_flag(std::string name, std::string help, bool* target, char short_name) {
  ExtraFlag f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.short_name = short_name;
  f.takes_value = false;
  f.set = [target](std::string_view) {
    *target = true;
    return std::string();
  };
  return f;
}

void usage_error(const Program& program, bool print_messages, const std::string& message) {
  if (print_messages) {
    std::fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n", program.name.c_str(),
                 message.c_str(), program.name.c_str());
  }
  std::exit(2);
}

int launcher_size() {
  for (const char* name :
       {"ORBITE_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE"}) {
    if (const char* v = std::getenv(name)) {
      if (auto r = parse_int(v); r && *r >= 1 && *r <= std::numeric_limits<int>::max()) {
        return static_cast<int>(*r);
      }
    }
  }
  return -1;
}

int launcher_rank() {
  for (const char* name :
       {"ORBITE_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    if (const char* v = std::getenv(name)) {
      if (auto r = parse_int(v); r && *r >= 0 && *r <= std::numeric_limits<int>::max()) {
        return static_cast<int>(*r);
      }
    }
  }
  return -1;
}

Options parse_options(int argc, char** argv, const Program& program, bool print_messages,
                      Options defaults) {
  Parser p{program, print_messages};
  Options o = defaults;  // defaults stays for --help
  bool sweep_flag = false, factor_given = false, step_given = false, sizes_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string name;
    std::optional<std::string> value;
    if (arg.starts_with("--")) {
      auto eq = arg.find('=');
      name = arg.substr(0, eq);
      if (eq != std::string_view::npos) value = std::string(arg.substr(eq + 1));
    } else if (arg.size() >= 2 && arg[0] == '-' && !short_to_long(program, arg[1]).empty()) {
      // getopt style: "-b 8", "-b8".
      name = short_to_long(program, arg[1]);
      if (arg.size() > 2) value = std::string(arg.substr(2));
    } else {
      p.error(arg.starts_with("-") ? "unknown flag " + quoted(arg)
                                   : "unexpected argument " + quoted(arg));
    }
    // Messages name the flag as it was written ("-b" or "--minbytes").
    std::string shown = arg.starts_with("--") ? name : std::string(arg.substr(0, 2));

    if (name == "--help") {
      if (print_messages) print_usage(program, defaults);
      std::exit(0);
    }
    const ExtraFlag* extra = nullptr;
    for (const ExtraFlag& f : program.extra) {
      if (f.name == name) extra = &f;
    }
    static constexpr std::string_view kKnown[] = {
        "--minbytes",     "--maxbytes", "--stepfactor", "--stepbytes", "--iters",
        "--warmup_iters", "--check",    "--sizes",      "--transport", "--json"};
    if (!extra && std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown)) {
      p.error("unknown flag " + quoted(arg));
    }
    if (extra && !extra->takes_value) {
      if (value) p.error("flag " + shown + " takes no value, got " + quoted(*value));
      extra->set("");
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) p.error("flag " + shown + " needs a value");
      value = argv[++i];
    }
    const std::string& v = *value;
    if (extra) {
      std::string why = extra->set(v);
      if (!why.empty()) p.error("flag " + shown + ": " + why + ", got " + quoted(v));
    } else if (name == "--minbytes") {
      o.min_bytes = p.size(shown, v);
      sweep_flag = true;
    } else if (name == "--maxbytes") {
      o.max_bytes = p.size(shown, v);
      sweep_flag = true;
    } else if (name == "--stepfactor") {
      o.step_factor = static_cast<std::uint64_t>(p.count(shown, v, 0));
      sweep_flag = factor_given = true;
    } else if (name == "--stepbytes") {
      o.step_bytes = p.size(shown, v);
      sweep_flag = step_given = true;
    } else if (name == "--iters") {
      o.iters = p.count(shown, v, 1);
    } else if (name == "--warmup_iters") {
      o.warmup_iters = p.count(shown, v, 0);
    } else if (name == "--check") {
      if (v != "0" && v != "1") p.error("flag " + shown + ": expected 0 or 1, got " + quoted(v));
      o.check = v == "1";
    } else if (name == "--sizes") {
      o.sizes.clear();
      std::string_view rest = v;
      while (true) {
        auto comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        auto s = parse_size(item);
        if (!s || *s == 0) {
          p.error("flag " + shown + ": expected sizes of at least 1 byte separated by commas " +
                  "(8,1M,64M), got " + quoted(v));
        }
        o.sizes.push_back(*s);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      sizes_given = true;
    } else if (name == "--transport") {
      o.transports.clear();
      std::string_view rest = v;
      while (true) {
        const auto comma = rest.find(',');
        const std::string one(rest.substr(0, comma));
        if (one != "unspec" && one != "tcp" && one != "shm" && (one != "rdma" || !program.rdma) &&
            (one != "nvlink" || !program.nvlink)) {
          p.error("flag " + shown + ": expected unspec, tcp, shm" +
                  std::string(program.rdma ? ", rdma" : "") +
                  std::string(program.nvlink ? ", nvlink" : "") +
                  " or a list such as shm,tcp, got " + quoted(v));
        }
        o.transports.push_back(one);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      o.transport = o.transports.front();
    } else if (name == "--json") {
      if (v.empty()) p.error("flag " + shown + ": expected a file name, got ''");
      o.json_path = v;
    }
  }
  if (program.single_transport && o.transports.size() > 1) {
    p.error("--transport: this benchmark measures one transport per run, got " +
            std::to_string(o.transports.size()));
  }
  if (!o.json_path.empty() && o.transports.size() > 1) {
    p.error("--json writes one table: give a single --transport with it");
  }
  if (sizes_given && sweep_flag) {
    p.error("--sizes replaces -b/-e/-f/-i: give either the list or the sweep");
  }
  if (sweep_flag) o.sizes.clear();
  if (step_given && !factor_given) o.step_factor = 0;
  if (step_given && factor_given && o.step_factor > 1) {
    p.error("-i (--stepbytes) sets linear steps but -f " + std::to_string(o.step_factor) +
            " sets geometric ones: drop one, or give -f 0");
  }
  if (o.sizes.empty() && o.max_bytes < o.min_bytes) {
    p.error("-e (--maxbytes) " + std::to_string(o.max_bytes) + " is below -b (--minbytes) " +
            std::to_string(o.min_bytes));
  }
  if (o.sizes.empty()) {
    // Count the points without building a huge list.
    std::size_t points = 0;
    for (std::uint64_t s = o.min_bytes; points <= kMaxPoints;) {
      ++points;
      std::uint64_t next = o.step_factor > 1 ? s * o.step_factor : s + o.step_bytes;
      bool overflow = o.step_factor > 1 ? s > o.max_bytes / o.step_factor
                                        : s > o.max_bytes - std::min(o.max_bytes, o.step_bytes);
      if (overflow || next > o.max_bytes) break;
      s = next;
    }
    if (points > kMaxPoints) {
      p.error("the sweep " + format_size(o.min_bytes) + ".." + format_size(o.max_bytes) +
              " has more than " + std::to_string(kMaxPoints) + " sizes: raise -i or -f");
    }
  }
  return o;
}

std::vector<std::uint64_t> size_list(const Options& o) {
  std::vector<std::uint64_t> out;
  if (!o.sizes.empty()) {
    out = o.sizes;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  for (std::uint64_t s = o.min_bytes; s <= o.max_bytes && out.size() <= kMaxPoints;) {
    out.push_back(s);
    if (o.step_factor > 1) {
      if (s > o.max_bytes / o.step_factor) break;
      s *= o.step_factor;
    } else {
      if (o.step_bytes > o.max_bytes - s) break;
      s += o.step_bytes;
    }
  }
  return out;
}

int scaled_iters(int requested, std::uint64_t bytes_per_iter, int floor) {
  if (requested <= 0 || bytes_per_iter == 0) return std::max(requested, 0);
  std::uint64_t fit = kPointByteBudget / bytes_per_iter;
  if (fit >= static_cast<std::uint64_t>(requested)) return requested;
  return std::max(std::min(requested, floor), static_cast<int>(fit));
}

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid),
                   samples.end());
  double upper = samples[mid];
  if (samples.size() % 2 == 1) return upper;
  double lower =
      *std::max_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

Buffer::Buffer(std::uint64_t bytes) : size_(bytes) {
  constexpr std::uint64_t kPage = 4096;
  std::uint64_t rounded = (std::max<std::uint64_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  data_ = static_cast<std::byte*>(std::aligned_alloc(kPage, rounded));
  if (data_ == nullptr)
    fatal(launcher_rank(), "cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(data_, 0, rounded);
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Buffer::~Buffer() {
  std::free(data_);
}

void fill_pattern(std::span<std::byte> buffer, const PatternKey& key) {
  std::uint64_t seed = pattern_seed(key);
  std::uint8_t word[8];
  std::size_t n = buffer.size();
  for (std::size_t off = 0; off < n; off += 8) {
    pattern_word(seed, off / 8, word);
    std::memcpy(buffer.data() + off, word, std::min<std::size_t>(8, n - off));
  }
}

Mismatch check_pattern(std::span<const std::byte> buffer, const PatternKey& key) {
  Mismatch m;
  std::uint64_t seed = pattern_seed(key);
  std::uint8_t word[8];
  std::size_t n = buffer.size();
  for (std::size_t off = 0; off < n; off += 8) {
    pattern_word(seed, off / 8, word);
    std::size_t len = std::min<std::size_t>(8, n - off);
    if (std::memcmp(buffer.data() + off, word, len) == 0) continue;
    for (std::size_t b = 0; b < len; ++b) {
      auto actual = static_cast<std::uint8_t>(buffer[off + b]);
      if (actual == word[b]) continue;
      if (m.wrong++ == 0) {
        m.first = off + b;
        m.expected = word[b];
        m.actual = actual;
      }
    }
  }
  return m;
}

std::string describe(const Mismatch& m, std::uint64_t bytes) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%llu wrong bytes of %llu, first at offset %llu: expected 0x%02x, got 0x%02x",
                static_cast<unsigned long long>(m.wrong), static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(m.first), m.expected, m.actual);
  return buf;
}

void set_fatal_hook(FatalHook hook) {
  g_fatal_hook = hook;
}

void report_error(int rank, std::string_view message) {
  // One write per message keeps lines of different ranks from interleaving.
  std::string line = rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string("error: ");
  line.append(message);
  line += '\n';
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void fatal(int rank, std::string_view message) {
  report_error(rank, message);
  if (g_fatal_hook) g_fatal_hook();
  std::exit(1);
}

}  // namespace orbite::perf
