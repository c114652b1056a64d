// orbite-run's command line: parsing (errors name the option and value) and the --help text.
#include <cmath>

#include "bootstrap/launcher.h"
#include "common/net.h"
#include "common/strings.h"

namespace orbite::launcher {
namespace {

// ---------------------------------------------------------------------------------------------
// Command line

// Bounds durations so that seconds -> nanoseconds never overflows.
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

Status usage_error(std::string message) {
  return Status::error(Errc::InvalidArgument, std::move(message));
}

// "30", "1.5" (seconds) or a duration with a unit ("500ms", "2m").
std::optional<Duration> parse_seconds(std::string_view text) {
  if (auto seconds = parse_double(text)) {
    if (*seconds < 0 || *seconds > kMaxSeconds) return std::nullopt;
    return Duration(static_cast<std::int64_t>(std::llround(*seconds * 1e9)));
  }
  if (auto ns = parse_duration_ns(text)) {
    if (static_cast<double>(*ns) > kMaxSeconds * 1e9) return std::nullopt;
    return Duration(*ns);
  }
  return std::nullopt;
}

}  // namespace

Result<LaunchOptions> parse_args(std::span<const std::string> args) {
  LaunchOptions opts;
  bool have_ranks = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    // The first argument that is not an option is the program; its own options follow it.
    if (arg.size() < 2 || arg[0] != '-') {
      if (arg == "-") return usage_error("unknown option '-'");
      break;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (arg.starts_with("--")) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
    } else if (arg.starts_with("-n") && arg != "-np" && arg.size() > 2) {  // -n4, -n=4
      name = "-n";
      inline_value = arg.substr(arg[2] == '=' ? 3 : 2);
    }
    auto take_value = [&]() -> Result<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) return usage_error("option " + name + " requires a value");
      return args[++i];
    };
    auto flag_only = [&]() -> Status {
      if (inline_value) return usage_error("option " + name + " takes no value, got " + quote(arg));
      return ok_status();
    };

    if (name == "-h" || name == "--help") {
      ORBITE_RETURN_IF_ERROR(flag_only());
      LaunchOptions help;
      help.help = true;
      return help;
    }
    if (name == "-n" || name == "-np" || name == "--np") {
      ORBITE_ASSIGN_OR_RETURN(std::string value, take_value());
      auto n = parse_int64(value);
      if (!n || *n < 1 || *n > kMaxRanks) {
        return usage_error("option " + name + ": expected a number of ranks from 1 to " +
                           std::to_string(kMaxRanks) + ", got " + quote(value));
      }
      opts.num_ranks = static_cast<int>(*n);
      have_ranks = true;
    } else if (name == "--store") {
      ORBITE_ASSIGN_OR_RETURN(std::string value, take_value());
      auto where = net::parse_host_port(value);
      if (!where.ok()) {
        return usage_error("option --store: expected host:port, got " + quote(value) + " (" +
                           where.status().message() + ")");
      }
      opts.store = value;
    } else if (name == "--timeout") {
      ORBITE_ASSIGN_OR_RETURN(std::string value, take_value());
      auto d = parse_seconds(value);
      if (!d || *d <= Duration::zero()) {
        return usage_error(
            "option --timeout: expected a positive number of seconds (30, 1.5, "
            "500ms), got " +
            quote(value));
      }
      opts.timeout = *d;
    } else if (name == "--kill-grace") {
      ORBITE_ASSIGN_OR_RETURN(std::string value, take_value());
      auto d = parse_seconds(value);
      if (!d) {
        return usage_error(
            "option --kill-grace: expected a number of seconds >= 0 (5, 0.5, "
            "500ms), got " +
            quote(value));
      }
      opts.kill_grace = *d;
    } else if (name == "--bind-to") {
      ORBITE_ASSIGN_OR_RETURN(std::string value, take_value());
      if (value != "core" && value != "none") {
        return usage_error("option --bind-to: expected core or none, got " + quote(value));
      }
      opts.bind_to_core = value == "core";
    } else if (name == "--tag-output") {
      ORBITE_RETURN_IF_ERROR(flag_only());
      opts.tag_output = true;
    } else {
      return usage_error("unknown option " + quote(arg));
    }
  }
  opts.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (!have_ranks) return usage_error("missing -n N (the number of ranks to start)");
  if (opts.command.empty()) return usage_error("missing the program to run");
  if (opts.command.front().empty()) return usage_error("the program name is empty");
  return opts;
}

Result<LaunchOptions> parse_args(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i] ? argv[i] : "");
  return parse_args(args);
}

std::string usage(std::string_view program_name) {
  std::string p(program_name);
  return "Usage: " + p +
         " -n N [options] [--] program [args...]\n"
         "\n"
         "Starts N ranks of `program` on this host around an embedded OrbiTE store server, "
         "supervises\n"
         "them and exits when all of them have exited.\n"
         "\n"
         "Options:\n"
         "  -n N, -nN, -np N, --np N\n"
         "                     number of ranks, 1 to " +
         std::to_string(kMaxRanks) +
         " (required)\n"
         "  --store HOST:PORT  address the store server listens on\n"
         "                     (default 127.0.0.1 with a free port)\n"
         "  --timeout S        stop the job if it still runs after S seconds; exit status 124\n"
         "  --kill-grace S     seconds between SIGTERM and SIGKILL when ranks are stopped (default "
         "5)\n"
         "  --tag-output       prefix every line a rank prints with \"[rank] \"; stdout stays on\n"
         "                     stdout and stderr on stderr\n"
         "  --bind-to core|none\n"
         "                     bind rank r to the r-th CPU orbite-run may use (default: core when\n"
         "                     the ranks fit the CPUs, none otherwise), as mpirun does\n"
         "  -h, --help         print this help and exit\n"
         "  --                 end of options; the first non-option argument also starts the "
         "program\n"
         "Seconds may be fractional (1.5) or carry a unit (500ms, 2m).\n"
         "\n"
         "Each rank runs in its own process group with orbite-run's environment plus:\n"
         "  ORBITE_STORE=host:port  ORBITE_STORE_TOKEN=token (ORBITE_STORE_TOKEN if set, else "
         "random)\n"
         "  ORBITE_RANK=r  ORBITE_WORLD_SIZE=N  ORBITE_LOCAL_RANK=r  ORBITE_LOCAL_SIZE=N\n"
         "Rank 0 inherits stdin unless it is a terminal; the other ranks read /dev/null.\n"
         "\n"
         "Failures and signals:\n"
         "  - When a rank exits non-zero or is killed by a signal, the other ranks get SIGTERM, "
         "then\n"
         "    SIGKILL after the kill grace; orbite-run exits with the first failing rank's status\n"
         "    (128+signal for a signal).\n"
         "  - SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to every rank's\n"
         "    process group. After SIGINT, SIGTERM, SIGHUP or SIGQUIT the ranks still alive after "
         "the\n"
         "    kill grace get SIGKILL; a second such signal sends SIGKILL at once. If every rank "
         "then\n"
         "    exits 0, orbite-run exits 128+signal. Signals ignored when orbite-run starts "
         "(nohup)\n"
         "    stay ignored and are not forwarded.\n"
         "  - A program that cannot be executed: the others are stopped; exit status 127.\n"
         "\n"
         "Exit status: 0 when every rank exits 0; the first failing rank's status; 124 on "
         "--timeout;\n"
         "127 when the program cannot be executed; 2 for a bad command line; 1 when the store "
         "server\n"
         "cannot start.\n";
}

}  // namespace orbite::launcher
