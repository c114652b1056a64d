// Staging: how device memory (and host memory a transport carries staged, RDMA with
// RdmaHostMemory::Staged) crosses transports that reach neither, through the engine's pool of
// pinned host chunks. No transport, sink or CPU copy ever sees a device pointer.
//
// The requester cuts a transfer into chunks (cuda.staging_chunk_bytes), several in flight
// (cuda.staging_depth). Each chunk, for a put: a chunk of the pool is leased, the local device
// bytes are copied into it (the allocation's stream and event), then, when the remote region is
// staged at its owner, a StageOpen makes the owner lease a chunk and publish it as a one-chunk
// window; the host part (frames, single copy or an RDMA grant) moves the bytes into the window
// or the region; a StageClose makes the owner copy the window into its device memory and answer
// StageDone. A get runs the same steps the other way. The owner's windows and the requester's
// chunks are the state below; docs/cuda.md has the whole sequence.
#pragma once

#include <orbite/transfer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cuda/allocation.h"
#include "cuda/staging.h"
#include "p2p/registry.h"
#include "p2p/request.h"

namespace orbite::p2p {

class PeerEndpoint;

// The local side of a staged transfer: host bytes, or a device range.
struct LocalMemory {
  std::byte* host = nullptr;                     // host memory (device == null)
  const detail::RegionRecord* region = nullptr;  // the registration around host, if any
  std::uint64_t region_offset = 0;               // of `host` in `region`
  std::shared_ptr<cuda::Allocation> device;      // device memory: its allocation
  std::uint64_t device_offset = 0;               // of byte 0 in the allocation
  bool staged = false;                           // through a local chunk (always for device memory)
};

struct StagedOp;

// One chunk in flight. Shared by the op, the frames that wait for the peer (weakly) and the
// host part's completion callback.
struct StagedChunk {
  enum class Phase : std::uint8_t { Lease, CopyIn, Open, Transfer, Close, CopyOut, Done };
  Phase phase = Phase::Lease;
  StagedOp* op = nullptr;       // the op owns the chunk and outlives it
  std::uint64_t local_at = 0;   // in the local memory
  std::uint64_t remote_at = 0;  // in the remote region
  std::uint64_t length = 0;
  std::shared_ptr<cuda::StagingLease> lease;
  std::shared_ptr<cuda::CopyJob> copy;  // the local device copy in flight
  // Remote staging: the StageOpen id, and the window the owner answered with.
  std::uint64_t stage_id = 0;
  std::uint64_t window = 0;
  std::uint64_t window_generation = 0;
  bool waiting = false;   // for the peer's StageReady/StageDone, or for the host part
  bool opened = false;    // the owner holds a window for it (a StageClose is owed)
  bool draining = false;  // failed, its device copy still running: it ends when that finished
  Status error;
};

// A put or get (or the read of an exposed rendezvous) moved in chunks.
struct StagedOp {
  std::shared_ptr<detail::RequestState> req;
  detail::PeerLink* link = nullptr;
  PeerEndpoint* ep = nullptr;
  bool put = false;
  LocalMemory local;
  bool remote_staged = false;
  std::uint64_t remote_region = 0;
  std::uint64_t remote_generation = 0;
  std::vector<TransferRange> ranges;  // local offsets in `local`, remote ones in the region
  std::uint64_t chunk = 0;  // bytes per chunk: the pool's, or less when the owner stages less
  std::size_t next_range = 0;
  std::uint64_t next_in_range = 0;
  std::vector<std::shared_ptr<StagedChunk>> chunks;  // in flight
  std::uint64_t bytes = 0;
  Status first_error;
  bool finished = false;
  // Called once, when every chunk ended; the op is dropped after.
  std::function<void(const Status&, std::uint64_t bytes)> finish;
};

// The owner's side of one remotely staged chunk (StageOpen .. StageDone).
struct StageWindow {
  enum class Phase : std::uint8_t { Lease, CopyOut, Ready, Draining, CopyIn, Done };
  Phase phase = Phase::Lease;
  std::uint64_t id = 0;  // the requester's stage id
  PeerEndpoint* ep = nullptr;
  std::shared_ptr<detail::RegionRecord> region;  // pinned from open to done
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool write = false;
  bool commit = false;
  std::shared_ptr<cuda::StagingLease> lease;
  std::shared_ptr<cuda::CopyJob> copy;
  std::shared_ptr<detail::RegionRecord> window;  // published while the requester transfers
};

}  // namespace orbite::p2p
