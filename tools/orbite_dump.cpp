// orbite-dump: asks running OrbiTE processes for their state report (SIGUSR1) and prints it
// (docs/hangs.md). A launcher's pid (orbite-run, mpirun) stands for its ranks: its descendants
// that catch SIGUSR1 are asked.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/strings.h"

namespace {

constexpr const char* kUsage = R"(usage: orbite-dump [--dir DIR] [--timeout SECONDS] PID...

Asks each OrbiTE process PID for its state report and prints it: every engine's links, posted
receives and unexpected messages, requests in flight with their age and transport, RDMA parents,
grants and QPs, and each communicator's collective and step. The process writes the report on
SIGUSR1 (EngineConfig::diagnostics.dump_on_signal) to DIR/orbite-dump.<pid>.txt.

A launcher's PID (orbite-run, mpirun, srun, ...) or one that does not catch SIGUSR1 stands for
its descendants that do: each of those is asked. A process that does not catch SIGUSR1 is never
signalled: the signal's default action would end it.

  --dir DIR          where the processes write (default: their ORBITE_DIAGNOSTICS_DUMP_DIR or
                     ORBITE_DUMP_DIR, else /tmp); needed when a configuration file sets
                     diagnostics.dump_dir
  --timeout SECONDS  how long to wait for each report (default 10)
)";

// Whether `pid` catches SIGUSR1 (its SigCgt mask, /proc/<pid>/status); nullopt: no such process.
std::optional<bool> catches_sigusr1(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return std::nullopt;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return ((mask >> (SIGUSR1 - 1)) & 1ULL) != 0;
  }
  return false;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  // Every process's parent, from /proc/<pid>/stat (field 4, after the parenthesized name): unlike
  // /proc/<pid>/task/<tid>/children, this needs no CONFIG_PROC_CHILDREN.
  DIR* all = ::opendir("/proc");
  if (all == nullptr) return out;
  while (const dirent* e = ::readdir(all)) {
    const auto child = orbite::parse_int64(e->d_name);
    if (!child) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string text;
    std::getline(stat, text);
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    long long parent = 0;
    if (rest >> state >> parent && parent == pid) out.push_back(static_cast<pid_t>(*child));
  }
  ::closedir(all);
  return out;
}

// Launchers forward SIGUSR1 to their ranks (orbite-run does) or ignore it: never a target.
bool is_launcher(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  for (const char* name : {"orbite-run", "mpirun", "mpiexec", "orterun", "prterun", "prted",
                           "orted", "hydra_pmi_proxy", "srun", "slurmstepd"}) {
    if (comm == name) return true;
  }
  return false;
}

// The processes to ask for `pid`: itself when it catches SIGUSR1 and is no launcher, else its
// descendants that are.
void targets_of(pid_t pid, std::vector<pid_t>& out, int depth = 0) {
  const auto caught = catches_sigusr1(pid);
  if (!caught) return;
  if (*caught && !is_launcher(pid)) {
    out.push_back(pid);
    return;
  }
  if (depth > 4) return;
  for (pid_t child : children_of(pid)) targets_of(child, out, depth + 1);
}

std::map<std::string, std::string> environment_of(pid_t pid) {
  std::map<std::string, std::string> env;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

std::string dump_dir_of(pid_t pid, const std::string& forced) {
  if (!forced.empty()) return forced;
  auto env = environment_of(pid);
  for (const char* name : {"ORBITE_DIAGNOSTICS_DUMP_DIR", "ORBITE_DUMP_DIR"}) {
    if (auto it = env.find(name); it != env.end() && !it->second.empty()) return it->second;
  }
  return "/tmp";
}

struct Stamp {
  bool exists = false;
  ino_t inode = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const Stamp&) const = default;
};

Stamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino,
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Signals `pid` and prints its report; false (with a message) when none came.
bool dump_one(pid_t pid, const std::string& forced_dir, std::chrono::milliseconds timeout) {
  const std::string dir = dump_dir_of(pid, forced_dir);
  if (dir == "-") {
    if (::kill(pid, SIGUSR1) != 0) {
      std::fprintf(stderr, "orbite-dump: kill(%d, SIGUSR1) failed: %s\n", pid,
                   std::strerror(errno));
      return false;
    }
    std::printf("==> pid %d writes its report to its standard error (dump_dir \"-\") <==\n", pid);
    return true;
  }
  const std::string path = dir + "/orbite-dump." + std::to_string(pid) + ".txt";
  const Stamp before = stamp_of(path);
  if (::kill(pid, SIGUSR1) != 0) {
    std::fprintf(stderr, "orbite-dump: kill(%d, SIGUSR1) failed: %s\n", pid, std::strerror(errno));
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const Stamp now = stamp_of(path);
    if (now.exists && !(now == before)) {
      const std::string text = read_all(path);
      // Written whole and renamed into place: a new file is complete.
      std::printf("==> pid %d: %s <==\n%s", pid, path.c_str(), text.c_str());
      if (!text.empty() && text.back() != '\n') std::printf("\n");
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr,
               "orbite-dump: pid %d wrote no report to %s within %lld ms (no engine running, "
               "or its diagnostics.dump_dir is elsewhere: --dir)\n",
               pid, path.c_str(), static_cast<long long>(timeout.count()));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::chrono::milliseconds timeout(10'000);
  std::vector<pid_t> pids;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--dir") {
      const char* v = value();
      if (v == nullptr || *v == '\0') {
        std::fprintf(stderr, "orbite-dump: --dir needs a directory\n");
        return 2;
      }
      dir = v;
    } else if (arg == "--timeout") {
      const char* v = value();
      const auto s = v != nullptr ? orbite::parse_double(v) : std::nullopt;
      if (!s || *s <= 0 || *s > 3600) {
        std::fprintf(stderr, "orbite-dump: --timeout must be seconds in (0, 3600], got %s\n",
                     v != nullptr ? orbite::quote(v).c_str() : "nothing");
        return 2;
      }
      timeout = std::chrono::milliseconds(static_cast<long long>(*s * 1000));
    } else {
      const auto pid = orbite::parse_int64(arg);
      if (!pid || *pid <= 0 || *pid > 0x7fffffff) {
        std::fprintf(stderr, "orbite-dump: %s is not a pid\n%s", orbite::quote(arg).c_str(),
                     kUsage);
        return 2;
      }
      pids.push_back(static_cast<pid_t>(*pid));
    }
  }
  if (pids.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  int failed = 0;
  for (pid_t pid : pids) {
    std::vector<pid_t> targets;
    targets_of(pid, targets);
    if (targets.empty()) {
      std::fprintf(stderr, "orbite-dump: pid %d %s\n", pid,
                   catches_sigusr1(pid) ? "and its descendants do not catch SIGUSR1 (no OrbiTE "
                                          "engine running, or diagnostics.dump_on_signal off): "
                                          "not signalled, since SIGUSR1 would end them"
                                        : "does not exist");
      ++failed;
      continue;
    }
    for (pid_t t : targets) {
      if (!dump_one(t, dir, timeout)) ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}
