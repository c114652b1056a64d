// Reads rank, world size, local rank and the store address from the variables that common
// launchers set. The first source that names a rank wins; within it, every variable is checked.
#include <cstdlib>

#include <orbite/bootstrap.h>

#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"

namespace orbite {
namespace {

struct Source {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;  // may be nullptr
  const char* local_size;  // may be nullptr
};

// Order matters: explicit ORBITE_* first, then launchers from the most to the least specific.
constexpr Source kSources[] = {
    {"orbite", "ORBITE_RANK", "ORBITE_WORLD_SIZE", "ORBITE_LOCAL_RANK", "ORBITE_LOCAL_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

Result<int> read_int(const EnvLookup& env, const char* name, int min, int max, bool required,
                     std::optional<int>& out) {
  auto raw = env(name);
  if (!raw) {
    if (required) {
      return Status::error(Errc::Configuration, std::string(name) + " is not set");
    }
    return 0;
  }
  auto v = parse_int64(*raw);
  if (!v || *v < min || *v > max) {
    return Status::error(Errc::Configuration, std::string(name) + "=" + quote(*raw) +
                                                  " is not an integer in " + std::to_string(min) +
                                                  ".." + std::to_string(max));
  }
  out = static_cast<int>(*v);
  return 0;
}

}  // namespace

Result<LaunchEnvironment> detect_launch_environment(const BootstrapConfig& config,
                                                    const EnvLookup& env) {
  constexpr int kMaxRanks = 1 << 24;
  LaunchEnvironment out;
  out.source = "none";
  for (const Source& src : kSources) {
    if (!env(src.rank)) continue;
    std::optional<int> rank, size, local_rank, local_size;
    ORBITE_RETURN_IF_ERROR(read_int(env, src.rank, 0, kMaxRanks - 1, true, rank).status());
    auto size_read = read_int(env, src.size, 1, kMaxRanks, true, size);
    if (!size_read.ok()) {
      return size_read.status().with_context(std::string(src.rank) + " is set (" + src.name +
                                             " launcher)");
    }
    if (*rank >= *size) {
      return Status::error(Errc::Configuration, std::string(src.rank) + "=" +
                                                    std::to_string(*rank) + " is not below " +
                                                    src.size + "=" + std::to_string(*size));
    }
    if (src.local_rank != nullptr) {
      ORBITE_RETURN_IF_ERROR(
          read_int(env, src.local_rank, 0, kMaxRanks - 1, false, local_rank).status());
    }
    if (src.local_size != nullptr) {
      ORBITE_RETURN_IF_ERROR(
          read_int(env, src.local_size, 1, kMaxRanks, false, local_size).status());
    }
    if (local_rank && local_size && *local_rank >= *local_size) {
      return Status::error(Errc::Configuration, std::string(src.local_rank) + "=" +
                                                    std::to_string(*local_rank) + " is not below " +
                                                    src.local_size + "=" +
                                                    std::to_string(*local_size));
    }
    out.rank = *rank;
    out.world_size = *size;
    out.local_rank = local_rank;
    out.local_size = local_size;
    out.source = src.name;
    break;
  }

  if (!config.store.empty()) {
    out.store_address = config.store;
    out.store_source = "config";
    out.host_store = config.host_store && out.rank == 0;
  } else if (auto store = env("ORBITE_STORE"); store && !store->empty()) {
    out.store_address = *store;
    out.store_source = "ORBITE_STORE";
    out.host_store = config.host_store && out.rank == 0;
  } else if (auto addr = env("MASTER_ADDR"); addr && !addr->empty()) {
    auto port_text = env("MASTER_PORT");
    if (!port_text) {
      return Status::error(Errc::Configuration,
                           "MASTER_ADDR=" + quote(*addr) + " is set but MASTER_PORT is not");
    }
    auto port = parse_uint64(*port_text);
    if (!port || *port == 0 || *port > 65535) {
      return Status::error(Errc::Configuration,
                           "MASTER_PORT=" + quote(*port_text) + " is not a port in 1..65535");
    }
    out.store_address = net::format_host_port(*addr, static_cast<std::uint16_t>(*port));
    out.store_source = "MASTER_ADDR";
    // As with torchrun's TCPStore, rank 0 hosts the store at MASTER_ADDR:MASTER_PORT.
    out.host_store = out.rank == 0;
  }
  if (!out.store_address.empty()) {
    auto parsed = net::parse_host_port(out.store_address);
    if (!parsed.ok()) {
      return Status::error(Errc::Configuration, "store address from " + out.store_source + ": " +
                                                    parsed.status().message());
    }
  } else if (out.world_size > 1) {
    return Status::error(
        Errc::Configuration,
        "rank " + std::to_string(out.rank) + " of " + std::to_string(out.world_size) + " (from " +
            out.source +
            " variables) has no store address: set ORBITE_STORE=host:port (or MASTER_ADDR and "
            "MASTER_PORT), launch with orbite-run, or bootstrap through MPI (orbite/mpi.h)");
  }
  return out;
}

Result<LaunchEnvironment> detect_launch_environment(const BootstrapConfig& config) {
  return detect_launch_environment(config, [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace orbite
