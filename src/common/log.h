// Logging facade: levels error..trace, one subsystem per line, selected by ORBITE_LOG_LEVEL and
// ORBITE_LOG_SUBSYS. Lines go to stderr prefixed "host:pid:rank [subsys] LEVEL ".
//
// Rule: debug and trace lines never print memory keys (lkey/rkey/MW keys), tokens or addresses
// of registered memory. Print registration IDs and lengths instead.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace orbite::log {

enum class Level : std::uint8_t { Error = 0, Warn, Info, Debug, Trace };
enum class Subsys : std::uint8_t {
  General = 0,
  Bootstrap,
  Topo,
  Proxy,
  Rdma,
  Tcp,
  Shm,
  Cuda,
  Coll,
  Config,
  Count
};

std::string_view level_name(Level level) noexcept;
std::string_view subsys_name(Subsys subsys) noexcept;

struct Settings {
  Level level = Level::Warn;
  std::uint32_t subsys_mask = ~0U;  // bit i enables Subsys(i)
};

// Parses ORBITE_LOG_LEVEL and ORBITE_LOG_SUBSYS values ("info"; "bootstrap,tcp", "all",
// "^rdma" to exclude). Unknown names are Configuration errors naming the variable and value.
Result<Settings> parse_settings(const std::optional<std::string>& level,
                                const std::optional<std::string>& subsys);

// Applies settings (the first log call otherwise reads them from the environment).
void configure(const Settings& settings);
// Re-reads ORBITE_LOG_LEVEL / ORBITE_LOG_SUBSYS; a bad value keeps the defaults and warns.
void configure_from_env();
// The rank shown in every line once known (-1: unknown, printed as '-').
void set_rank(int rank);

bool enabled(Level level, Subsys subsys) noexcept;
void write(Level level, Subsys subsys, std::string_view message);

// Redirects output (tests). An empty function restores stderr.
void set_sink(std::function<void(std::string_view line)> sink);

// Collects one line; the destructor writes it.
class Line {
 public:
  Line(Level level, Subsys subsys) : level_(level), subsys_(subsys) {}
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  ~Line() { write(level_, subsys_, stream_.str()); }
  std::ostream& stream() { return stream_; }

 private:
  Level level_;
  Subsys subsys_;
  std::ostringstream stream_;
};

}  // namespace orbite::log

// ORBITE_LOG(Warn, Bootstrap) << "store at " << addr << " refused the token";
// The message expression is not evaluated when the level or subsystem is disabled.
#define ORBITE_LOG(level, subsys)                                                            \
  if (!::orbite::log::enabled(::orbite::log::Level::level, ::orbite::log::Subsys::subsys)) { \
  } else                                                                                     \
    ::orbite::log::Line(::orbite::log::Level::level, ::orbite::log::Subsys::subsys).stream()
