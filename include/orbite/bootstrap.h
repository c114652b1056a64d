// Bootstrap: who am I (rank, world size, local rank) and where is the store. MPI, when used, only
// carries the store's address (see orbite/mpi.h); it never carries data.
#pragma once

#include <orbite/config.h>
#include <orbite/export.h>
#include <orbite/status.h>
#include <orbite/store.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace orbite {

// What a launcher told this process through its environment.
struct LaunchEnvironment {
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;
  std::optional<int> local_size;
  // host:port of the store; empty when none was given (allowed only for world_size 1).
  std::string store_address;
  // This rank is expected to start the store server (torchrun-style MASTER_ADDR on rank 0).
  bool host_store = false;
  // Where rank and size came from: "orbite", "openmpi", "pmi", "slurm", "torchrun" or "none".
  std::string source;
  // Where the store address came from: "config", "ORBITE_STORE", "MASTER_ADDR" or "".
  std::string store_source;
};

// Reads a variable; returns nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Detects the launch environment in this order, the first source that names a rank winning:
// ORBITE_RANK/ORBITE_WORLD_SIZE/ORBITE_LOCAL_RANK, Open MPI's OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE
// (MPICH, Intel MPI), Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, then torchrun's
// RANK/WORLD_SIZE/LOCAL_RANK. The store address is config.store, else ORBITE_STORE, else
// MASTER_ADDR:MASTER_PORT. A malformed or inconsistent value is a Configuration error naming the
// variable and its value.
ORBITE_API Result<LaunchEnvironment> detect_launch_environment(const BootstrapConfig& config,
                                                               const EnvLookup& env);
ORBITE_API Result<LaunchEnvironment> detect_launch_environment(const BootstrapConfig& config);

// A store server started for a job, and what its clients need to reach it.
struct HostedStore {
  std::unique_ptr<TcpStoreServer> server;
  std::string address;  // host:port for clients
  std::string token;    // ORBITE_STORE_TOKEN when set, else a fresh random token
};

// Starts a store server for a job: on `listen` (host:port) when given; else on loopback when every
// rank runs on this host; else on an address of config.interface (NCCL_SOCKET_IFNAME syntax).
ORBITE_API Result<HostedStore> host_job_store(const BootstrapConfig& config, bool all_ranks_local,
                                              std::string_view listen = {});
// 32 hex digits from the kernel's random source.
ORBITE_API std::string generate_store_token();

class ORBITE_API Bootstrap {
 public:
  // From the environment (see detect_launch_environment): connects to the store, or starts it
  // first when this rank hosts it. ORBITE_STORE_TOKEN, when set, authenticates with the store.
  // Without an argument the bootstrap section of EngineConfig::load() applies (ORBITE_CONFIG,
  // ORBITE_BOOTSTRAP_* variables).
  static Result<Bootstrap> from_env();
  static Result<Bootstrap> from_env(const BootstrapConfig& config);
  // From a store the caller already has.
  static Result<Bootstrap> from_store(std::shared_ptr<Store> store, int rank, int world_size,
                                      std::optional<int> local_rank = std::nullopt,
                                      const BootstrapConfig& config = {});
  // For bootstraps that host the store server themselves (MPI bootstrap, torchrun-style rank 0).
  static Result<Bootstrap> from_hosted_store(std::unique_ptr<TcpStoreServer> server,
                                             std::shared_ptr<Store> store, int rank, int world_size,
                                             std::optional<int> local_rank, std::string source,
                                             const BootstrapConfig& config);

  [[nodiscard]] int rank() const;
  [[nodiscard]] int world_size() const;
  // The launcher's local rank, when it gave one.
  [[nodiscard]] std::optional<int> local_rank() const;
  [[nodiscard]] const std::shared_ptr<Store>& store() const;
  [[nodiscard]] const std::string& source() const;
  // host:port of a TCP store; empty for another kind of store.
  [[nodiscard]] const std::string& store_address() const;
  [[nodiscard]] const BootstrapConfig& config() const;
  // Whether this process runs the store server.
  [[nodiscard]] bool hosts_store() const;
  // A tag for the nth collective setup made through this bootstrap ("<kind>.<n>"). Ranks that
  // make their setups in the same order (as MPI requires of communicator creation) get the same
  // tags, which keeps their store keys apart.
  [[nodiscard]] std::string next_collective_tag(std::string_view kind) const;

 private:
  struct State;
  explicit Bootstrap(std::shared_ptr<State> state);
  // Shared so that a Communicator keeps the store (and a hosted server) alive; the last owner
  // of a hosted server waits (bootstrap.shutdown_timeout) for the other ranks to disconnect.
  std::shared_ptr<State> state_;
};

}  // namespace orbite
