// Communicator: a group of ranks that know each other. Creating one exchanges every rank's host
// identity and control address through the bootstrap store. Data operations (send/recv, put/get,
// collectives) arrive with the data path.
#pragma once

#include <orbite/bootstrap.h>
#include <orbite/config.h>
#include <orbite/export.h>
#include <orbite/status.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace orbite {

struct PeerInfo {
  int rank = 0;
  // Host name, and the identity used to decide "same host" (hostname + boot id, or ORBITE_HOSTID).
  std::string hostname;
  std::string host_id;
  std::int64_t pid = 0;
  // Position and count of ranks sharing this host, ordered by rank.
  int local_rank = 0;
  int local_size = 1;
  // host:port where this rank's engine accepts control connections.
  std::string control_address;
};

class ORBITE_API Communicator {
 public:
  // Collective over the bootstrap's ranks. Bounded by config.bootstrap.timeout; on timeout the
  // error names the ranks that did not arrive.
  static Result<Communicator> create(const Bootstrap& bootstrap, const EngineConfig& config);
  // Same, with EngineConfig::load() (ORBITE_CONFIG and ORBITE_<FIELD> overrides).
  static Result<Communicator> create(const Bootstrap& bootstrap);

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  [[nodiscard]] int rank() const;
  [[nodiscard]] int size() const;
  [[nodiscard]] int local_rank() const;
  [[nodiscard]] int local_size() const;
  [[nodiscard]] std::span<const PeerInfo> peers() const;
  // Precondition: 0 <= rank < size(); otherwise the process aborts with a message.
  [[nodiscard]] const PeerInfo& peer(int rank) const;
  [[nodiscard]] bool same_host(int rank) const;
  [[nodiscard]] const EngineConfig& config() const;
  [[nodiscard]] const Bootstrap& bootstrap() const;

  // A barrier through the bootstrap store (bounded by config.bootstrap.timeout). It is slow and
  // meant for setup and teardown, not for the data path.
  Status store_barrier();

  // A human-readable view of this rank's communicator, one peer per line.
  [[nodiscard]] std::string describe() const;

 private:
  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orbite
