// A rank program for orbite-run's tests. It bootstraps from the launcher's environment, reports
// what it saw, and misbehaves on demand:
//   --exit-rank R --exit-code C  rank R exits with C after the start barrier; the others sleep
//                                --sleep seconds and exit 0 (they never reach the count barrier)
//   --pid-file DIR               each rank writes its pid to DIR/rank.<r>.pid before bootstrap
//   --on-term-print              SIGTERM prints "rank R got SIGTERM" and exits 0
//   --sleep S                    sleep S seconds (default 0) before the count check
// Output: "rank=<r> size=<n> local_rank=<lr> store=<address>", then "count=<n>".
#include <orbite/bootstrap.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/strings.h"

namespace {

using namespace std::chrono_literals;

// Written before the handler is installed and only read by it.
char g_term_message[64];
size_t g_term_message_len = 0;

extern "C" void on_sigterm(int /*signo*/) {
  [[maybe_unused]] ssize_t n = ::write(STDOUT_FILENO, g_term_message, g_term_message_len);
  ::_exit(0);
}

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "rank_probe: %s\n", message.c_str());
  std::exit(2);
}

void sleep_seconds(double seconds) {
  if (seconds <= 0) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

void write_pid_file(const std::string& dir, int rank) {
  std::string path = dir + "/rank." + std::to_string(rank) + ".pid";
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) usage_error("cannot write " + tmp + ": " + std::strerror(errno));
  std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
  std::fclose(f);
  // Readers never see a half-written file.
  if (std::rename(tmp.c_str(), path.c_str()) != 0) usage_error("cannot rename " + tmp);
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<int> exit_rank;
  int exit_code = 0;
  std::string pid_dir;
  bool on_term_print = false;
  double sleep_s = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) usage_error(std::string(arg) + " requires a value");
      return argv[++i];
    };
    if (arg == "--exit-rank") {
      auto v = orbite::parse_int64(value());
      if (!v) usage_error("bad --exit-rank");
      exit_rank = static_cast<int>(*v);
    } else if (arg == "--exit-code") {
      auto v = orbite::parse_int64(value());
      if (!v || *v < 0 || *v > 255) usage_error("bad --exit-code");
      exit_code = static_cast<int>(*v);
    } else if (arg == "--pid-file") {
      pid_dir = value();
    } else if (arg == "--on-term-print") {
      on_term_print = true;
    } else if (arg == "--sleep") {
      auto v = orbite::parse_double(value());
      if (!v || *v < 0) usage_error("bad --sleep");
      sleep_s = *v;
    } else {
      usage_error("unknown argument " + std::string(arg));
    }
  }

  // The rank from the environment, so that the pid file and the SIGTERM message exist before the
  // (possibly slow) bootstrap: a test may stop the job at any moment.
  const char* env_rank = std::getenv("ORBITE_RANK");
  int early_rank = env_rank ? static_cast<int>(orbite::parse_int64(env_rank).value_or(-1)) : -1;
  if (!pid_dir.empty()) write_pid_file(pid_dir, early_rank);
  if (on_term_print) {
    int n =
        std::snprintf(g_term_message, sizeof g_term_message, "rank %d got SIGTERM\n", early_rank);
    g_term_message_len = n > 0 ? static_cast<size_t>(n) : 0;
    struct sigaction action {};
    action.sa_handler = on_sigterm;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, nullptr);
  }

  auto boot = orbite::Bootstrap::from_env();
  if (!boot.ok()) {
    std::fprintf(stderr, "rank_probe: bootstrap failed: %s\n", boot.status().to_string().c_str());
    return 1;
  }
  const int rank = boot->rank();
  const int size = boot->world_size();
  const auto& store = boot->store();
  std::printf("rank=%d size=%d local_rank=%d store=%s\n", rank, size,
              boot->local_rank().value_or(-1), boot->store_address().c_str());
  std::fflush(stdout);

  // Every rank has started (and written its pid file) before anyone exits on purpose.
  if (auto s = store->barrier("probe/start", rank, size, 30s); !s.ok()) {
    std::fprintf(stderr, "rank_probe: start barrier: %s\n", s.to_string().c_str());
    return 1;
  }
  if (exit_rank) {
    if (rank == *exit_rank) return exit_code;
    sleep_seconds(sleep_s);
    return 0;
  }
  sleep_seconds(sleep_s);

  if (auto added = store->add("probe/count", 1); !added.ok()) {
    std::fprintf(stderr, "rank_probe: add: %s\n", added.status().to_string().c_str());
    return 1;
  }
  if (auto s = store->barrier("probe", rank, size, 30s); !s.ok()) {
    std::fprintf(stderr, "rank_probe: barrier: %s\n", s.to_string().c_str());
    return 1;
  }
  auto count = store->get("probe/count", 30s);
  if (!count.ok()) {
    std::fprintf(stderr, "rank_probe: get: %s\n", count.status().to_string().c_str());
    return 1;
  }
  std::printf("count=%s\n", count->c_str());
  std::fflush(stdout);
  if (orbite::parse_int64(*count) != size) {
    std::fprintf(stderr, "rank_probe: count %s != world size %d\n", count->c_str(), size);
    return 1;
  }
  return 0;
}
