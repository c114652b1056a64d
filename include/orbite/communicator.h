// Communicator: a group of ranks that know each other. Creating one starts (or shares) the
// process's TransferEngine and exchanges every rank's host identity and engine address through the
// bootstrap store. Point-to-point send/recv is scoped to the communicator; put/get go through
// engine() with registered memory.
#pragma once

#include <orbite/bootstrap.h>
#include <orbite/collectives.h>
#include <orbite/config.h>
#include <orbite/export.h>
#include <orbite/status.h>
#include <orbite/transfer.h>

#include <cstdint>
#include <memory>
#include <optional>
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

// Wildcards of a receive or a probe (MPI_ANY_SOURCE, MPI_ANY_TAG).
inline constexpr int kAnySource = -1;
inline constexpr int kAnyTag = -1;

// A message waiting to be received, as probe() finds it (MPI_Status of MPI_Probe).
struct MessageInfo {
  int source = -1;
  int tag = -1;
  std::uint64_t bytes = 0;
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
  //
  // A receive may name kAnySource as its peer and kAnyTag as its tag. Matching follows MPI: a
  // message goes to the earliest posted receive it matches (wildcard or not); messages of one
  // sender are matched in the order they were sent; between senders the order is unspecified.
  // Request::source() and Request::tag() then say which message matched. A receive from
  // kAnySource stays posted when a peer fails (another may still send), so bound its wait.
  Result<Request> isend(const void* data, std::uint64_t bytes, int peer, int tag,
                        const TransferOptions& options = {});
  Result<Request> irecv(void* data, std::uint64_t bytes, int peer, int tag,
                        const TransferOptions& options = {});
  // Blocking forms: isend/irecv then wait(timeout). recv stores the received size if asked.
  Status send(const void* data, std::uint64_t bytes, int peer, int tag,
              Duration timeout = Duration::max());
  Status recv(void* data, std::uint64_t bytes, int peer, int tag, std::uint64_t* received = nullptr,
              Duration timeout = Duration::max());

  // Whether a message from `source` (or kAnySource) with `tag` (or kAnyTag) has arrived and
  // waits for a receive, without receiving it (MPI_Iprobe); each call makes progress. A receive
  // posted next with the returned source and tag gets that message, unless another thread's
  // receive takes it first. probe() waits for one (MPI_Probe), up to `timeout` (Timeout after).
  Result<std::optional<MessageInfo>> iprobe(int source, int tag);
  Result<MessageInfo> probe(int source, int tag, Duration timeout = Duration::max());

  // Collectives (NCCL and MPI semantics). Every rank calls the same collectives in the same order
  // with matching counts, types, ops and roots; several may be outstanding at once and complete
  // in any order. Each returns at once with a Request (the first messages are already posted);
  // the collective advances when a thread waits on or tests one of the communicator's collective
  // Requests (MPI's progress rule: a rank that never waits holds up the others). Counts are in
  // elements. Buffers stay borrowed until the Request is done.
  //
  // Arguments a rank can check alone (null buffer with a nonzero count, root outside 0..size-1,
  // partially overlapping buffers, a vector of the wrong length, a count overflowing the address
  // space) are InvalidArgument before anything is sent. A count that differs between ranks fails
  // with InvalidArgument (truncation) where it is detected. After a collective fails, the
  // communicator is broken: the ranks still in it are told, their collectives fail with the
  // first error, and so do later ones (as after ncclCommAbort; p2p keeps working).
  //
  // In place, as NCCL: all_reduce, reduce and broadcast with send == recv; all_gather with
  // send == recv + rank * send_count; reduce_scatter with recv == send + rank * recv_count;
  // gather (root) with send == recv + root * count; scatter (root) with recv == send + root *
  // count; all_to_all with send == recv.
  //
  // Algorithms are chosen by size and rank count (docs/collectives.md); the `algo` setting
  // (ORBITE_ALGO) overrides the choice.
  Result<Request> all_reduce(const void* send, void* recv, std::uint64_t count, DataType type,
                             ReduceOp op);
  // recv is used at root only (may be null elsewhere).
  Result<Request> reduce(const void* send, void* recv, std::uint64_t count, DataType type,
                         ReduceOp op, int root);
  // The root sends from send (into its own recv too, unless send == recv); the others receive
  // into recv (their send is ignored).
  Result<Request> broadcast(const void* send, void* recv, std::uint64_t count, DataType type,
                            int root);
  // recv holds size() * send_count elements, rank r's block at r * send_count.
  Result<Request> all_gather(const void* send, void* recv, std::uint64_t send_count, DataType type);
  // send holds size() * recv_count elements; rank r receives the reduction of block r.
  Result<Request> reduce_scatter(const void* send, void* recv, std::uint64_t recv_count,
                                 DataType type, ReduceOp op);
  // Block r of send (count elements at r * count) goes to rank r, whose block from this rank
  // lands at rank() * count of its recv.
  Result<Request> all_to_all(const void* send, void* recv, std::uint64_t count, DataType type);
  // Per-peer counts and displacements (in elements), each of length size(), as MPI_Alltoallv.
  Result<Request> all_to_allv(const void* send, std::span<const std::uint64_t> send_counts,
                              std::span<const std::uint64_t> send_displs, void* recv,
                              std::span<const std::uint64_t> recv_counts,
                              std::span<const std::uint64_t> recv_displs, DataType type);
  // The root's recv holds size() * send_count elements (ignored elsewhere).
  Result<Request> gather(const void* send, void* recv, std::uint64_t send_count, DataType type,
                         int root);
  // The root's send holds size() * recv_count elements (ignored elsewhere).
  Result<Request> scatter(const void* send, void* recv, std::uint64_t recv_count, DataType type,
                          int root);
  Result<Request> barrier();

  // New communicators over this one's ranks, sharing its engine; their traffic (p2p and
  // collectives) never mixes with this one's. Both are collective over this communicator, called
  // in the same order as its collectives. split: ranks with the same colour form one
  // communicator, ordered by (key, old rank); kUndefinedColor joins none (nullopt).
  Result<std::optional<Communicator>> split(int color, int key);
  Result<Communicator> dup();

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
