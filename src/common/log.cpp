#include "common/log.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common/strings.h"

namespace orbite::log {
namespace {

constexpr std::array<std::string_view, 5> kLevelNames = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
constexpr std::array<std::string_view, static_cast<size_t>(Subsys::Count)> kSubsysNames = {
    "general", "bootstrap", "topo", "proxy", "rdma", "tcp", "shm", "cuda", "coll", "config"};

std::atomic<int> g_level{static_cast<int>(Level::Warn)};
std::atomic<std::uint32_t> g_mask{~0U};
std::atomic<int> g_rank{-1};
std::once_flag g_env_once;

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}
std::function<void(std::string_view)>& sink() {
  static std::function<void(std::string_view)> s;
  return s;
}

const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return std::string("unknown-host");
    return std::string(buf);
  }();
  return name;
}

std::optional<std::string> getenv_opt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

void ensure_env_read() {
  std::call_once(g_env_once, [] { configure_from_env(); });
}

}  // namespace

std::string_view level_name(Level level) noexcept {
  return kLevelNames[static_cast<size_t>(level)];
}

std::string_view subsys_name(Subsys subsys) noexcept {
  auto i = static_cast<size_t>(subsys);
  return i < kSubsysNames.size() ? kSubsysNames[i] : "general";
}

Result<Settings> parse_settings(const std::optional<std::string>& level,
                                const std::optional<std::string>& subsys) {
  Settings s;
  if (level && !level->empty()) {
    std::string lower = to_lower(trim(*level));
    bool found = false;
    for (size_t i = 0; i < kLevelNames.size(); ++i) {
      if (lower == to_lower(kLevelNames[i])) {
        s.level = static_cast<Level>(i);
        found = true;
      }
    }
    if (!found) {
      return Status::error(
          Errc::Configuration,
          "ORBITE_LOG_LEVEL='" + *level + "' is not one of error, warn, info, debug, trace");
    }
  }
  if (subsys && !subsys->empty()) {
    std::string_view list = trim(*subsys);
    bool invert = false;
    if (!list.empty() && list.front() == '^') {
      invert = true;
      list.remove_prefix(1);
    }
    std::uint32_t mask = 0;
    for (const std::string& raw : split(list, ',')) {
      std::string name = to_lower(trim(raw));
      if (name.empty()) continue;
      if (name == "all") {
        mask = ~0U;
        continue;
      }
      bool found = false;
      for (size_t i = 0; i < kSubsysNames.size(); ++i) {
        if (name == kSubsysNames[i]) {
          mask |= 1U << i;
          found = true;
        }
      }
      if (!found) {
        return Status::error(Errc::Configuration,
                             "ORBITE_LOG_SUBSYS='" + *subsys + "' names unknown subsystem '" +
                                 name +
                                 "' (known: all, general, bootstrap, topo, proxy, rdma, tcp, shm, "
                                 "cuda, coll, config)");
      }
    }
    s.subsys_mask = invert ? ~mask : mask;
  }
  return s;
}

namespace {
void apply(const Settings& settings) {
  g_level.store(static_cast<int>(settings.level), std::memory_order_relaxed);
  g_mask.store(settings.subsys_mask, std::memory_order_relaxed);
}
}  // namespace

void configure(const Settings& settings) {
  // Explicit settings win over the environment read lazily by the first log call.
  std::call_once(g_env_once, [] {});
  apply(settings);
}

void configure_from_env() {
  auto parsed = parse_settings(getenv_opt("ORBITE_LOG_LEVEL"), getenv_opt("ORBITE_LOG_SUBSYS"));
  if (parsed.ok()) {
    apply(*parsed);
  } else {
    apply(Settings{});
    write(Level::Warn, Subsys::General, parsed.status().message() + "; using the defaults");
  }
}

void set_rank(int rank) {
  g_rank.store(rank, std::memory_order_relaxed);
}

bool enabled(Level level, Subsys subsys) noexcept {
  ensure_env_read();
  if (static_cast<int>(level) > g_level.load(std::memory_order_relaxed)) return false;
  return (g_mask.load(std::memory_order_relaxed) >> static_cast<unsigned>(subsys)) & 1U;
}

void write(Level level, Subsys subsys, std::string_view message) {
  int rank = g_rank.load(std::memory_order_relaxed);
  std::string line;
  line.reserve(message.size() + 64);
  line += host_name();
  line += ':';
  line += std::to_string(getpid());
  line += ':';
  line += rank >= 0 ? std::to_string(rank) : std::string("-");
  line += " [";
  line += subsys_name(subsys);
  line += "] ";
  line += level_name(level);
  line += ' ';
  line += message;
  line += '\n';
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (sink()) {
    sink()(line);
  } else {
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
}

void set_sink(std::function<void(std::string_view)> s) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  sink() = std::move(s);
}

}  // namespace orbite::log
