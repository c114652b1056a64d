// orbite-store: a standalone bootstrap store server for jobs whose ranks are started by another
// launcher. Clients use ORBITE_STORE=<address> (and ORBITE_STORE_TOKEN when the server has one).
#include <csignal>
#include <cstdio>
#include <string>

#include <orbite/store.h>

#include "common/strings.h"

namespace {

constexpr const char* kUsage = R"(usage: orbite-store [--listen host:port] [--max-value-bytes N]
                    [--max-connections N] [--max-table-bytes N]

Runs a bootstrap store server until SIGINT or SIGTERM. Prints the address it listens on.

  --listen host:port     where to listen (default 127.0.0.1:29400; port 0 picks a free port)
  --max-value-bytes N    largest value accepted (default 64MiB; suffixes KiB, MiB, GiB)
  --max-connections N    connections open at once, 1..1048576 (default 4096); raise it, and the
                         descriptor limit (ulimit -n), for jobs of more ranks
  --max-table-bytes N    keys and values held at once (default 1GiB, at least 1KiB)

Environment:
  ORBITE_STORE_TOKEN     shared secret every client must present (recommended off loopback)
)";

}  // namespace

int main(int argc, char** argv) {
  orbite::TcpStoreServerOptions options;
  options.listen = "127.0.0.1:29400";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--listen") {
      const char* v = value();
      if (v == nullptr) {
        std::fprintf(stderr, "orbite-store: --listen needs host:port\n");
        return 2;
      }
      options.listen = v;
    } else if (arg == "--max-value-bytes") {
      const char* v = value();
      auto bytes = v != nullptr ? orbite::parse_bytes(v) : std::nullopt;
      if (!bytes) {
        std::fprintf(stderr, "orbite-store: --max-value-bytes needs a byte count, got '%s'\n",
                     v != nullptr ? v : "");
        return 2;
      }
      options.max_value_bytes = *bytes;
    } else if (arg == "--max-table-bytes") {
      const char* v = value();
      // 0 stands for "not a byte count", which the bound refuses too.
      const std::uint64_t bytes =
          (v != nullptr ? orbite::parse_bytes(v) : std::nullopt).value_or(0);
      if (bytes < 1024) {
        std::fprintf(stderr, "orbite-store: --max-table-bytes needs at least 1KiB, got '%s'\n",
                     v != nullptr ? v : "");
        return 2;
      }
      options.max_table_bytes = bytes;
    } else if (arg == "--max-connections") {
      const char* v = value();
      const std::uint64_t count =
          (v != nullptr ? orbite::parse_uint64(v) : std::nullopt).value_or(0);
      if (count == 0 || count > (1U << 20)) {
        std::fprintf(stderr,
                     "orbite-store: --max-connections needs a count in 1..1048576, got '%s'\n",
                     v != nullptr ? v : "");
        return 2;
      }
      options.max_connections = static_cast<std::uint32_t>(count);
    } else {
      std::fprintf(stderr, "orbite-store: unknown option '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  if (const char* token = std::getenv("ORBITE_STORE_TOKEN")) options.token = token;

  // Block the stop signals before the server thread starts so that only sigwait sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto server = orbite::TcpStoreServer::start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "orbite-store: %s\n", server.status().to_string().c_str());
    return 1;
  }
  std::printf("orbite-store listening on %s%s\n", (*server)->address().c_str(),
              options.token.empty() ? "" : " (token required)");
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  (*server)->stop();
  return 0;
}
