// NVIDIA memory as OrbiTE owns it (the guide's "NVIDIA memory ownership", "Producer-stream
// readiness", "Pinned host producer handoff", "Copy completion and reuse"). The CUDA driver is
// loaded at run time (libcuda.so.1); without it every call here is Errc::Unavailable naming
// libcuda.so.1, and host memory keeps working. No CUDA header is needed to use this one: streams
// are passed as the driver's CUstream handle, cast to void*.
//
// A CudaMemory is a view of one device allocation. Views of the same allocation (aliases) share
// one owner: the allocation is freed (or, when adopted, released to its owner) when the last
// view, registration and transfer that uses it are gone. Each allocation has one stream and one
// completion event for OrbiTE's own copies, and one readiness event shared by its aliases.
#pragma once

#include <orbite/config.h>
#include <orbite/export.h>
#include <orbite/status.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace orbite::cuda {

class Allocation;  // internal: the owner all views of one allocation share

// A CUDA device as the driver numbers it in this process (CUDA_VISIBLE_DEVICES applies).
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string pci_bus_id;  // "0000:4E:00.0"
  std::string uuid;        // "GPU-..."
  std::uint64_t memory_bytes = 0;
  int numa_node = -1;  // the host NUMA node the driver reports; -1 when unknown
};

// The driver's devices; Unavailable without a driver. Creates no context.
ORBITE_API Result<std::vector<DeviceInfo>> devices();

// Whether `p` is device memory (not host, pinned or managed memory) of a CUDA driver already
// loaded in this process. False without one, at no driver call and without loading one: a
// process that never used CUDA pays nothing (bindings use it to tell raw addresses apart).
ORBITE_API bool is_device_pointer(const void* p);

class ORBITE_API CudaMemory {
 public:
  CudaMemory() = default;

  // Owns `bytes` of device memory on device `ordinal` (and a reference to its primary context).
  static Result<CudaMemory> allocate(int ordinal, std::uint64_t bytes);

  // Adopts [ptr, ptr + bytes) of device memory the caller allocated (cuMemAlloc, torch, ...): it
  // must be device memory (not host or managed) of the primary context of its device, inside one
  // allocation. `owner` is kept until the last view is gone (for example the tensor that owns the
  // memory); the memory is never freed by OrbiTE. Aliases of an allocation OrbiTE already knows
  // share its owner. Unsafe in spirit: the caller keeps the memory alive and unused by others
  // while OrbiTE may touch it.
  static Result<CudaMemory> from_raw_parts(void* ptr, std::uint64_t bytes,
                                           std::shared_ptr<void> owner = {});

  [[nodiscard]] bool valid() const { return alloc_ != nullptr; }
  [[nodiscard]] void* data() const;  // a device pointer: never dereference it on the CPU
  [[nodiscard]] std::uint64_t size() const { return length_; }
  [[nodiscard]] int ordinal() const;
  // [offset, offset + length) of this view, sharing its owner; InvalidArgument outside it.
  [[nodiscard]] Result<CudaMemory> view(std::uint64_t offset, std::uint64_t length) const;
  // True when both views are of one allocation.
  [[nodiscard]] bool same_allocation(const CudaMemory& other) const;

  // Copies through owned pinned staging on this allocation's stream, waiting for its completion
  // event (at most `timeout`; an unproven drain is Unquiesced and keeps the staging).
  Status copy_from_host(std::uint64_t offset, const void* src, std::uint64_t length,
                        Duration timeout = std::chrono::seconds(60));
  Status copy_to_host(std::uint64_t offset, void* dst, std::uint64_t length,
                      Duration timeout = std::chrono::seconds(60)) const;
  // Sets [offset, offset + length) to `value` (cuMemsetD8 on this allocation's stream).
  Status fill(std::uint64_t offset, std::uint64_t length, std::uint8_t value,
              Duration timeout = std::chrono::seconds(60));

  // Producer-stream readiness: captures the work already queued on `stream` (a CUstream; 0 and
  // the legacy/per-thread handles resolve on the calling thread). Call it on the producer thread
  // before handing the memory to a transfer. The stream must belong to this allocation's context
  // and must not be capturing. The first access OrbiTE makes (a copy, a staging loan) waits for
  // this generation once; `owner` (the stream and the producer's inputs) is kept until then.
  Status record_producer_stream(void* stream, std::shared_ptr<void> owner = {});

  // Internal: the shared owner.
  [[nodiscard]] const std::shared_ptr<Allocation>& allocation() const { return alloc_; }
  [[nodiscard]] std::uint64_t offset() const { return offset_; }

 private:
  CudaMemory(std::shared_ptr<Allocation> a, std::uint64_t offset, std::uint64_t length)
      : alloc_(std::move(a)), offset_(offset), length_(length) {}
  std::shared_ptr<Allocation> alloc_;
  std::uint64_t offset_ = 0;
  std::uint64_t length_ = 0;
};

// Pinned (page-locked) host memory owned by OrbiTE: ordinary host memory for every transport,
// with the driver's asynchronous copies and a producer-readiness event of its own.
class ORBITE_API HostMemory {
 public:
  HostMemory() = default;
  [[nodiscard]] bool valid() const { return alloc_ != nullptr; }
  [[nodiscard]] void* data() const;
  [[nodiscard]] std::uint64_t size() const;
  // As CudaMemory::record_producer_stream; the stream must belong to the context the memory was
  // allocated in. Freeing the memory (the last reference) waits for a pending generation.
  Status record_producer_stream(void* stream, std::shared_ptr<void> owner = {});
  // Waits for a recorded producer generation (once); OrbiTE's transfers do it themselves.
  Status wait_ready();
  [[nodiscard]] const std::shared_ptr<Allocation>& allocation() const { return alloc_; }

 private:
  friend ORBITE_API Result<HostMemory> allocate_pinned_host(std::uint64_t bytes, int ordinal);
  explicit HostMemory(std::shared_ptr<Allocation> a) : alloc_(std::move(a)) {}
  std::shared_ptr<Allocation> alloc_;
};

// `bytes` of pinned host memory (cuMemHostAlloc in device `ordinal`'s primary context).
ORBITE_API Result<HostMemory> allocate_pinned_host(std::uint64_t bytes, int ordinal = 0);

// What OrbiTE could not prove finished or released (a failed copy drain, context restore, unpin
// or free) and so keeps for the rest of the process instead of freeing or reusing it.
struct RetainedResource {
  std::string what;  // "device allocation 0x7f.. (1048576 bytes, device 0)", "staging buffer ..."
  std::string why;   // the failure that made it so
};
ORBITE_API std::vector<RetainedResource> retained_resources();

}  // namespace orbite::cuda
