// The public face of NVIDIA memory (include/orbite/cuda.h): CudaMemory views, pinned
// HostMemory, the device list and the retained list. Copies to and from host memory go through
// pinned staging chunks on the allocation's stream, so that no DMA ever targets the caller's
// pageable buffer and a copy that does not finish in time leaves only staging behind.
#include <orbite/cuda.h>

#include <cstring>
#include <thread>

#include "cuda/allocation.h"
#include "cuda/staging.h"
#include "platform/cuda_loader.h"

namespace orbite::cuda {

namespace {

// The staging of the copies made through this API (not an engine's): 8 chunks of 1 MiB.
Result<std::shared_ptr<StagingPool>> copy_staging() {
  static const Result<std::shared_ptr<StagingPool>> pool = StagingPool::create(8 * kMiB, 1 * kMiB);
  return pool;
}

Status check_range(const char* what, std::uint64_t offset, std::uint64_t length,
                   std::uint64_t size) {
  if (offset > size || length > size - offset) {
    return Status::error(Errc::InvalidArgument, std::string(what) + ": [" + std::to_string(offset) +
                                                    ", +" + std::to_string(length) +
                                                    ") is outside the view of " +
                                                    std::to_string(size) + " bytes");
  }
  return {};
}

// A chunk from the pool, waiting for one to come back until the deadline.
Result<std::shared_ptr<StagingLease>> take(StagingPool& pool, const Deadline& deadline) {
  for (;;) {
    ORBITE_ASSIGN_OR_RETURN(auto lease, pool.try_take());
    if (lease) return lease;
    if (deadline.expired()) {
      return Status::error(Errc::Timeout, "no staging chunk came back in time (" +
                                              std::to_string(pool.stats().lent) + " lent)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// One chunk's copy, waited for; a copy that does not finish keeps its staging.
Status run(Allocation& a, CopyJob::Direction dir, std::uint64_t offset, std::uint64_t length,
           const std::shared_ptr<StagingLease>& lease, const Deadline& deadline) {
  auto job = std::make_shared<CopyJob>();
  job->direction = dir;
  job->offset = offset;
  job->host = lease->data();
  job->length = length;
  ORBITE_RETURN_IF_ERROR(a.submit(job));
  Status st = a.wait(*job, deadline);
  if (st.code() == Errc::Timeout) {
    a.park(job, lease);  // returned to the pool if it ever finishes
  } else if (st.code() == Errc::Unquiesced) {
    lease->retain(st.message());
  }
  return st;
}

}  // namespace

bool is_device_pointer(const void* p) {
  return is_device_memory(p);
}

Result<std::vector<DeviceInfo>> devices() {
  ORBITE_ASSIGN_OR_RETURN(auto list, list_devices());
  std::vector<DeviceInfo> out;
  for (const auto& d : list) {
    out.push_back(DeviceInfo{d.ordinal, d.name, d.pci_bus_id, d.uuid, d.memory_bytes, d.numa_node});
  }
  return out;
}

Result<CudaMemory> CudaMemory::allocate(int ordinal, std::uint64_t bytes) {
  ORBITE_ASSIGN_OR_RETURN(auto a, Allocation::allocate_device(ordinal, bytes));
  return CudaMemory(std::move(a), 0, bytes);
}

Result<CudaMemory> CudaMemory::from_raw_parts(void* ptr, std::uint64_t bytes,
                                              std::shared_ptr<void> owner) {
  std::uint64_t offset = 0;
  ORBITE_ASSIGN_OR_RETURN(auto a, Allocation::adopt_device(ptr, bytes, std::move(owner), &offset));
  return CudaMemory(std::move(a), offset, bytes);
}

void* CudaMemory::data() const {
  return alloc_ ? alloc_->base() + offset_ : nullptr;
}

int CudaMemory::ordinal() const {
  return alloc_ ? alloc_->ordinal() : -1;
}

Result<CudaMemory> CudaMemory::view(std::uint64_t offset, std::uint64_t length) const {
  if (!alloc_) return Status::error(Errc::InvalidArgument, "CudaMemory::view of an empty view");
  ORBITE_RETURN_IF_ERROR(check_range("CudaMemory::view", offset, length, length_));
  return CudaMemory(alloc_, offset_ + offset, length);
}

bool CudaMemory::same_allocation(const CudaMemory& other) const {
  return alloc_ != nullptr && alloc_ == other.alloc_;
}

Status CudaMemory::copy_from_host(std::uint64_t offset, const void* src, std::uint64_t length,
                                  Duration timeout) {
  if (!alloc_) return Status::error(Errc::InvalidArgument, "copy_from_host on an empty view");
  ORBITE_RETURN_IF_ERROR(check_range("copy_from_host", offset, length, length_));
  ORBITE_ASSIGN_OR_RETURN(auto pool, copy_staging());
  const Deadline deadline = Deadline::after(timeout);
  const auto* from = static_cast<const std::byte*>(src);
  for (std::uint64_t done = 0; done < length;) {
    const std::uint64_t n = std::min(pool->chunk_bytes(), length - done);
    ORBITE_ASSIGN_OR_RETURN(auto lease, take(*pool, deadline));
    std::memcpy(lease->data(), from + done, n);
    ORBITE_RETURN_IF_ERROR(
        run(*alloc_, CopyJob::Direction::ToDevice, offset_ + offset + done, n, lease, deadline));
    done += n;
  }
  return {};
}

Status CudaMemory::copy_to_host(std::uint64_t offset, void* dst, std::uint64_t length,
                                Duration timeout) const {
  if (!alloc_) return Status::error(Errc::InvalidArgument, "copy_to_host on an empty view");
  ORBITE_RETURN_IF_ERROR(check_range("copy_to_host", offset, length, length_));
  ORBITE_ASSIGN_OR_RETURN(auto pool, copy_staging());
  const Deadline deadline = Deadline::after(timeout);
  auto* to = static_cast<std::byte*>(dst);
  for (std::uint64_t done = 0; done < length;) {
    const std::uint64_t n = std::min(pool->chunk_bytes(), length - done);
    ORBITE_ASSIGN_OR_RETURN(auto lease, take(*pool, deadline));
    ORBITE_RETURN_IF_ERROR(
        run(*alloc_, CopyJob::Direction::ToHost, offset_ + offset + done, n, lease, deadline));
    std::memcpy(to + done, lease->data(), n);  // exposed only after the completion event
    done += n;
  }
  return {};
}

Status CudaMemory::fill(std::uint64_t offset, std::uint64_t length, std::uint8_t value,
                        Duration timeout) {
  if (!alloc_) return Status::error(Errc::InvalidArgument, "fill on an empty view");
  ORBITE_RETURN_IF_ERROR(check_range("fill", offset, length, length_));
  return alloc_->memset(offset_ + offset, length, value, Deadline::after(timeout));
}

Status CudaMemory::record_producer_stream(void* stream, std::shared_ptr<void> owner) {
  if (!alloc_)
    return Status::error(Errc::InvalidArgument, "record_producer_stream on an empty view");
  return alloc_->record_producer(stream, std::move(owner));
}

void* HostMemory::data() const {
  return alloc_ ? alloc_->base() : nullptr;
}

std::uint64_t HostMemory::size() const {
  return alloc_ ? alloc_->size() : 0;
}

Status HostMemory::record_producer_stream(void* stream, std::shared_ptr<void> owner) {
  if (!alloc_)
    return Status::error(Errc::InvalidArgument, "record_producer_stream on empty memory");
  return alloc_->record_producer(stream, std::move(owner));
}

Status HostMemory::wait_ready() {
  if (!alloc_) return {};
  return alloc_->wait_ready();
}

Result<HostMemory> allocate_pinned_host(std::uint64_t bytes, int ordinal) {
  ORBITE_ASSIGN_OR_RETURN(auto a, Allocation::allocate_pinned(bytes, ordinal));
  return HostMemory(std::move(a));
}

}  // namespace orbite::cuda
