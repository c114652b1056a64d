// orbite-run's logic: parse the command line, start N local ranks around an embedded store
// server, supervise them and turn their outcome into one exit status. Kept out of main() so the
// parser and the supervisor can be tested as functions.
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace orbite::launcher {

inline constexpr int kMaxRanks = 4096;

// Exit statuses orbite-run chooses itself (a rank's own failure status is passed through).
inline constexpr int kExitUsage = 2;          // bad command line
inline constexpr int kExitLauncherError = 1;  // the store could not be started, pipes, ...
inline constexpr int kExitTimeout = 124;      // --timeout expired (as timeout(1))
inline constexpr int kExitCannotExecute = 127;

struct LaunchOptions {
  int num_ranks = 0;
  // host:port the embedded store listens on; empty: 127.0.0.1 with an ephemeral port.
  std::string store;
  // Whole-job bound; unset: none.
  std::optional<Duration> timeout;
  // Prefix each output line with "[rank] " (ranks' output then goes through pipes).
  bool tag_output = false;
  // Time between SIGTERM and SIGKILL when ranks are stopped.
  Duration kill_grace = std::chrono::seconds(5);
  // Bind rank r to the r-th CPU of orbite-run's affinity mask (as mpirun's --bind-to core).
  // Unset: bind when the ranks fit the CPUs, so that busy-polling ranks never share a core.
  std::optional<bool> bind_to_core;
  // The program and its arguments.
  std::vector<std::string> command;
  // --help was given; nothing else is validated then.
  bool help = false;
};

// Parses the arguments after argv[0]. Errors are InvalidArgument and name the option and value.
Result<LaunchOptions> parse_args(std::span<const std::string> args);
Result<LaunchOptions> parse_args(int argc, const char* const* argv);

// The --help text.
std::string usage(std::string_view program_name = "orbite-run");

// Starts the ranks and supervises them until every one has exited (or was killed); returns
// orbite-run's exit status. Installs process-wide signal handlers (SIGINT, SIGTERM, SIGHUP,
// SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD; SIGPIPE ignored) for its duration and restores them after,
// so at most one run() may be active in a process. Messages go to stderr as "orbite-run: ...".
int run(const LaunchOptions& options);

}  // namespace orbite::launcher
