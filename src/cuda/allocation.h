// One CUDA allocation as OrbiTE owns it: device memory (owned or adopted) or pinned host memory,
// with its primary-context reference, its one stream and completion event for OrbiTE's copies,
// and its readiness event. Every view (CudaMemory, HostMemory), registration and transfer of the
// allocation shares one Allocation. No CUDA header is needed to use this one.
#pragma once

#include <orbite/config.h>
#include <orbite/cuda.h>
#include <orbite/status.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace orbite::cuda {

enum class Kind : std::uint8_t { Device, PinnedHost };

// A legacy CUDA IPC handle (CUipcMemHandle's 64 opaque bytes), as it travels between processes.
struct IpcHandle {
  static constexpr std::size_t kBytes = 64;
  std::array<std::uint8_t, kBytes> bytes{};
};

// What a device advertises for GPUDirect RDMA (its driver attributes), read per allocation.
struct GpuDirectSupport {
  bool rdma = false;            // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
  bool dma_buf = false;         // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  bool dma_buf_export = false;  // the driver exports cuMemGetHandleForAddressRange
  int writes_ordering = 0;      // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING (0, 100, 200)
};

// A dma-buf of a whole device allocation (cuMemGetHandleForAddressRange): its base and size are
// host-page aligned (a legacy allocation's length rounded up to a page). The fd is the caller's.
struct DmabufExport {
  int fd = -1;
  std::uint64_t base = 0;
  std::uint64_t size = 0;
};

// A copy between a device range and host memory, or another process's device memory mapped
// into this allocation's context (cuda/ipc.h), run on the allocation's stream. Copies of one
// allocation run one at a time, or several batched ones together: the one completion event then
// says which finished (the guide's one stream and one event per allocation, with generations).
struct CopyJob {
  // Fill: cuMemsetD8 of `fill_value` over the range (no host side), in line with the copies.
  // ToPeer / FromPeer: cuMemcpyDtoDAsync to or from `peer`.
  enum class Direction : std::uint8_t { ToDevice, ToHost, Fill, ToPeer, FromPeer };
  Direction direction = Direction::ToHost;
  std::uint64_t offset = 0;   // in the allocation
  std::byte* host = nullptr;  // the host side (pinned staging for asynchronous copies)
  std::uint64_t peer = 0;     // the mapped device address of a peer copy
  std::uint64_t length = 0;
  std::uint8_t fill_value = 0;
  // May run behind other batched jobs of the allocation instead of alone (peer copies, which
  // nothing waits for one by one): they go onto the stream back to back, the one event recorded
  // after each, and all finish together when it completes (its latest generation).
  bool batched = false;
  // 0 queued, 1 submitted, 2 finished (status is set before, with release order).
  std::atomic<int> state{0};
  Status status;
  [[nodiscard]] bool finished() const { return state.load(std::memory_order_acquire) == 2; }
};

class Allocation {
 public:
  // Owned device memory on `ordinal`, with a reference to its primary context.
  static Result<std::shared_ptr<Allocation>> allocate_device(int ordinal, std::uint64_t bytes);
  // The allocation that holds [ptr, ptr + bytes) of device memory (see
  // CudaMemory::from_raw_parts for what is refused, each with the field named); the one OrbiTE
  // already knows when there is one. *offset is ptr's offset in it.
  static Result<std::shared_ptr<Allocation>> adopt_device(const void* ptr, std::uint64_t bytes,
                                                          std::shared_ptr<void> owner,
                                                          std::uint64_t* offset);
  // Owned pinned host memory (cuMemHostAlloc in `ordinal`'s primary context).
  static Result<std::shared_ptr<Allocation>> allocate_pinned(std::uint64_t bytes, int ordinal);

  // Waits for a pending producer generation, drains OrbiTE's copies, then frees (owned) or lets
  // go (adopted). What cannot be proven finished or freed is retained (retained_resources()).
  ~Allocation();
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  [[nodiscard]] Kind kind() const { return kind_; }
  [[nodiscard]] std::byte* base() const { return base_; }
  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] int ordinal() const { return ordinal_; }
  [[nodiscard]] bool owned() const { return owned_; }
  [[nodiscard]] std::string describe() const;

  // Producer readiness (readiness.cpp).
  Status record_producer(void* stream, std::shared_ptr<void> owner);
  // Whether a recorded generation is still pending, without blocking; a finished one is
  // consumed here (its one cuEventSynchronize). An error fences the allocation.
  Result<bool> poll_ready();
  // Blocks until the recorded generation finished (one cuEventSynchronize), then consumes it.
  Status wait_ready();

  // Copies (copy.cpp). submit() never blocks: the job starts when the copy ahead of it (and the
  // readiness wait) finished. advance() moves the allocation's copies on without blocking; every
  // thread that waits for a job calls it. wait() advances until the job finished or `deadline`
  // passed (Timeout: the job goes on; its host bytes must stay until it finished).
  Status submit(const std::shared_ptr<CopyJob>& job);
  void advance();
  Status wait(CopyJob& job, Deadline deadline);
  // Keeps `keep` (staging a timed-out copy still uses) until the job finished; for good when it
  // never does.
  void park(std::shared_ptr<CopyJob> job, std::shared_ptr<void> keep);
  // cuMemsetD8 on the allocation's stream, as a job in line with the copies, waited until
  // `deadline` (Timeout: it goes on).
  Status memset(std::uint64_t offset, std::uint64_t length, std::uint8_t value, Deadline deadline);
  // Non-ok once an unproven record, wait or drain fenced the allocation.
  [[nodiscard]] Status fenced() const;

  // CUDA IPC (ipc.cpp): the legacy handle of this device allocation, which another process
  // opens (PeerMapping); Unavailable where the driver lacks IPC or refuses this memory (VMM
  // memory, a device without it), naming the call.
  Result<IpcHandle> export_ipc() const;

  // GPUDirect RDMA (gpudirect.cpp). What the allocation's device advertises; a failed attribute
  // query is Unavailable naming it.
  [[nodiscard]] Result<GpuDirectSupport> gpudirect_support() const;
  // Before a NIC registers this device memory: CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set (the
  // driver's copies synchronous to the NIC's view), and the device must order GPUDirect RDMA
  // writes for its own consumers (OrbiTE does not flush them): Unavailable otherwise.
  [[nodiscard]] Status prepare_gpudirect() const;
  // The allocation as a dma-buf, export flags zero (the default mapping; no forced PCIe).
  [[nodiscard]] Result<DmabufExport> export_dmabuf() const;

  // Internal: what allocation.cpp, copy.cpp and readiness.cpp share.
  struct Native;
  Allocation(Kind kind, int ordinal);

 private:
  friend struct Native;
  void fence(const Status& why);           // with mu_ held
  Status start_next();                     // with mu_ held
  Status drain(const std::string& after);  // with mu_ held
  void drop_finished_parked();             // with mu_ held
  // Retains the allocation (retained_resources() names it and `why`) and keeps what its members
  // reference for the rest of the process, as the destructor gives up on it.
  void keep_forever(const std::string& why);

  const Kind kind_;
  const int ordinal_;
  std::byte* base_ = nullptr;
  std::uint64_t size_ = 0;
  bool owned_ = false;
  std::unique_ptr<Native> native_;  // the context, stream and events (CUDA types)
  // Guards everything below and every driver call on the allocation's stream and events.
  // A leaf lock: nothing else is taken while it is held.
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<void>> owners_;    // adopted memory: who keeps it alive
  std::deque<std::shared_ptr<CopyJob>> queued_;  // waiting for the ones in flight
  // On the stream: one job, or up to kMaxBatched batched ones; the event's latest record follows
  // the last of them.
  std::deque<std::shared_ptr<CopyJob>> running_;
  static constexpr std::size_t kMaxBatched = 32;
  std::vector<std::pair<std::shared_ptr<CopyJob>, std::shared_ptr<void>>> parked_;
  // Readiness: generations recorded and consumed; the producer's inputs until then.
  std::uint64_t recorded_ = 0;
  std::uint64_t consumed_ = 0;
  std::shared_ptr<void> producer_owner_;
  Status fence_;
};

// A device range named by a pointer from an application (send/recv, collectives).
struct DeviceView {
  std::shared_ptr<Allocation> alloc;
  std::uint64_t offset = 0;
};
// Whether [p, p + length) is device memory: nullopt for host memory (pageable, pinned or
// managed: the CPU reaches them) and whenever no CUDA driver is loaded in this process, which
// costs no driver call. Device memory is adopted as by from_raw_parts (no owner), so its range
// must lie in one allocation.
// Whether p is device memory (not host, pinned or managed) of a CUDA driver loaded in this
// process; false without one, at no driver call.
bool is_device_memory(const void* p);
Result<std::optional<DeviceView>> device_view_of(const void* p, std::uint64_t length);
// Whether a CUDA driver is loaded in this process (no driver call): without one no pointer is
// device memory, so a caller with several pointers asks once.
bool driver_in_process();

// OrbiTE's pinned host allocation that holds [p, p + length), or null (memory of any other
// kind, or not entirely inside one); *offset is p's offset in it.
std::shared_ptr<Allocation> find_pinned(const void* p, std::uint64_t length, std::uint64_t* offset);

// Records something kept for the rest of the process (retained_resources()).
void retain(std::string what, std::string why);

}  // namespace orbite::cuda
