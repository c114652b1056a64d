// The state behind a Communicator, shared by its setup (communicator.cpp), its collectives
// (collectives.cpp) and split/dup (split.cpp).
#pragma once

#include <orbite/communicator.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "coll/algorithms.h"
#include "coll/executor.h"
#include "coll/select.h"
#include "p2p/endpoint.h"
#include "p2p/request.h"

namespace orbite {

namespace detail {
struct EngineCore;

// Device buffers up to this size are bounced through host memory by send/recv.
inline constexpr std::uint64_t kDeviceBounceBytes = 64 * 1024;
// Attaches a device buffer to a message (a send's source, a receive's destination): bounced when
// small, else the request's device memory (RequestState::device). Host memory changes nothing.
Status attach_device_buffer(RequestState& s, const void* data, std::uint64_t bytes, bool send);
}  // namespace detail

namespace coll {
struct Args;
// Device buffers of a collective (none: an empty answer). The data-movement collectives
// (broadcast, all_gather, all_to_all(v), gather, scatter) whose buffers are all device memory
// move them directly: their messages are device messages (cuda_ipc on one host, staged
// elsewhere) and their local copies device to device. The reductions run on the CPU, and
// all_to_all in place needs host scratch, so those (and a mix of device and host buffers) get
// host stand-ins: a device input copied to host memory before the collective starts, a device
// output written back (before_complete) once it finished, args.in/out rewritten to them.
// `allow_direct` false: host stand-ins even where the buffers could be moved directly (an shm
// algorithm works on host memory).
Result<DeviceBuffers> prepare_device_buffers(Collective kind, Args& args, std::uint64_t in_bytes,
                                             std::uint64_t out_bytes, bool allow_direct = true);
}  // namespace coll

namespace coll {
// A collective as the algorithm rule sees it.
struct Launch {
  Collective kind;
  std::uint64_t bytes;         // the rule's size: bytes of the largest per-rank buffer
  std::uint64_t result_bytes;  // what Request::bytes() reports
  // Bytes this rank reads from `in` and writes to `out` (device buffers are staged by them).
  std::uint64_t in_bytes = 0;
  std::uint64_t out_bytes = 0;
};
}  // namespace coll

struct Communicator::Impl {
  Bootstrap bootstrap;
  EngineConfig config;
  std::string tag;
  int rank = 0;
  std::vector<PeerInfo> peers;
  std::shared_ptr<TransferEngine> engine;
  std::shared_ptr<detail::EngineCore> core;
  // Scope this communicator's messages (p2p and collectives apart): every rank derives the same
  // values from the tag.
  std::uint32_t comm_id = 0;
  std::uint32_t coll_comm_id = 0;
  std::vector<std::shared_ptr<const detail::PeerRef>> endpoints;
  // Each rank's engine id → rank (start_collectives): the source of what a receive from any
  // source or a probe finds.
  std::shared_ptr<const std::unordered_map<std::string, int>> ranks_by_engine;
  std::uint64_t barriers = 0;
  // Communicators made from this one by split() and dup(), for their tags.
  std::uint64_t children = 0;
  coll::AlgoChoice algos;
  std::shared_ptr<coll::Executor> executor;
  // The ranks by host (from the peers' host identities), for the hierarchical collectives.
  std::shared_ptr<const coll::Hosts> hosts;
  // The shared segment of this rank's host (comm/coll_segment.cpp), or null (a host with one
  // rank, or one whose ranks could not all attach). Its in-process state is used under the
  // executor's lock only. On a single-host communicator the flat shm algorithms use it; on one
  // spanning hosts the hierarchical collectives' steps inside the host.
  std::shared_ptr<coll::SharedArea> area;

  // The communicator's part of the engine's state report (its ranks and collectives), added
  // with the executor and removed before the executor goes; 0: none.
  std::uint64_t reporter = 0;

  Impl(Bootstrap b, EngineConfig c) : bootstrap(std::move(b)), config(std::move(c)) {}
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // Appends this communicator's part of the state report.
  void report(std::string& out) const;

  std::string key(std::string_view what) const { return "comm/" + tag + "/" + std::string(what); }

  void set_tag(std::string t);
  Status exchange(const PeerInfo& self);
  // Groups the ranks by host (hosts, and each peer's local_rank and local_size), parses the
  // algorithm setting and creates the collective executor; after peers, endpoints, rank, core
  // and the tag are set.
  Status start_collectives();
  // Whether this rank's host gets a shared segment (several ranks on it, shm enabled, the
  // collectives' transport unspec or shm); the same answer on every rank of a host.
  bool wants_segment() const;
  // Sets up `area` with the other ranks through the store (after peers and the tag are set),
  // and meets them in the store barrier `barrier_key` (which it needs; it is the setup's barrier
  // either way). `area` is left null, with a log line, when some rank cannot attach.
  Status attach_segment(const std::string& barrier_key);
  // The executor's scratch declared to the engine's memory domains (RDMA's MR cache).
  coll::ScratchHooks scratch_hooks() const;
  // A communicator of `members` (this one's ranks, in the new rank order) under `child_tag`.
  Result<std::unique_ptr<Impl>> make_child(const std::vector<int>& members,
                                           std::string child_tag) const;
  // Starts a checked collective with the algorithm the rule (or the override) picks.
  Result<Request> launch(const coll::Launch& l, coll::Args args);

  // A send or receive of this communicator, its buffer still to be set.
  std::shared_ptr<detail::RequestState> message(detail::OpKind kind, std::uint64_t bytes, int peer,
                                                int msg_tag, const TransferOptions& options) const {
    auto s = detail::make_request_state();
    s->kind = kind;
    s->options = options;
    s->peer = endpoints[static_cast<size_t>(peer)];
    s->peer_rank = peer;
    s->length = bytes;
    s->comm = comm_id;
    s->tag = msg_tag;
    return s;
  }
};

}  // namespace orbite
