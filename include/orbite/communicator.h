// Communicator: a group of ranks that know each other. Creating one starts (or shares) the
// process's TransferEngine and exchanges every rank's host identity and engine address through the
// bootstrap store. Point-to-point send/recv is scoped to the communicator; put/get go through
// engine() with registered memory.
#pragma once

#include <orbite/bootstrap.h>
#include <orbite/config.h>
#include <orbite/export.h>
#include <orbite/status.h>
#include <orbite/transfer.h>

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
  // host:port where this rank's engine accepts control connections, and the engine's identity.
  std::string control_address;
  std::string engine_id;
};

class ORBITE_API Communicator {
 public:
  // Collective over the bootstrap's ranks. Bounded by config.bootstrap.timeout; on timeout the
  // error names the ranks that did not arrive.
  static Result<Communicator> create(const Bootstrap& bootstrap, const EngineConfig& config);
  // Same, with EngineConfig::load() (ORBITE_CONFIG and ORBITE_<FIELD> overrides).
  static Result<Communicator> create(const Bootstrap& bootstrap);
  // Shares an existing engine (its configuration wins).
  static Result<Communicator> create(const Bootstrap& bootstrap,
                                     std::shared_ptr<TransferEngine> engine);

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

  // The engine that carries this communicator's data (shared by communicators created with it).
  [[nodiscard]] TransferEngine& engine() const;
  [[nodiscard]] std::shared_ptr<TransferEngine> shared_engine() const;

  // Point-to-point messages, ordered per (peer, tag) as in MPI. Any byte count, zero included.
  // A message longer than the posted receive fails that receive with InvalidArgument (truncation)
  // and the send with InvalidArgument; nothing is overrun. Request::bytes() of a receive is the
  // size received. tag must be >= 0; peer may be this rank.
  Result<Request> isend(const void* data, std::uint64_t bytes, int peer, int tag,
                        const TransferOptions& options = {});
  Result<Request> irecv(void* data, std::uint64_t bytes, int peer, int tag,
                        const TransferOptions& options = {});
  // Blocking forms: isend/irecv then wait(timeout). recv stores the received size if asked.
  Status send(const void* data, std::uint64_t bytes, int peer, int tag,
              Duration timeout = Duration::max());
  Status recv(void* data, std::uint64_t bytes, int peer, int tag, std::uint64_t* received = nullptr,
              Duration timeout = Duration::max());

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
