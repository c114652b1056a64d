// The staging pool: host buffers owned by an engine, through which device bytes (and, for
// RdmaHostMemory::Staged, host bytes) reach a transport. Shared by tcp, shm and staged RDMA
// (the guide: "TCP and staged RDMA share the CUDA staging pool"), bounded by
// rdma.max_staging_bytes, lent in fixed chunks from slabs made on first need. Slabs are pinned
// (cuMemHostAlloc) when a CUDA driver is there, so that device copies are asynchronous, and
// ordinary pages otherwise. A hook sees each new slab (the engine registers it with the memory
// domains once, so that no transfer registers staging per use).
#pragma once

#include <orbite/status.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace orbite::cuda {

class StagingPool;

struct StagingSlab {
  std::byte* base = nullptr;
  std::uint64_t length = 0;
  bool pinned = false;
  std::shared_ptr<void> memory;  // owns the bytes
  std::shared_ptr<void> tag;     // what the slab hook attached (the engine's registration)
};

// One chunk lent out. Returned to the pool when the last reference goes, unless retained: a
// chunk a copy or DMA may still touch is never reused.
class StagingLease {
 public:
  ~StagingLease();
  StagingLease(const StagingLease&) = delete;
  StagingLease& operator=(const StagingLease&) = delete;
  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] const StagingSlab& slab() const { return *slab_; }
  // Offset of data() in its slab.
  [[nodiscard]] std::uint64_t slab_offset() const {
    return static_cast<std::uint64_t>(data_ - slab_->base);
  }
  // Keeps the chunk out of the pool for good (retained_resources() names it and `why`).
  void retain(const std::string& why);

 private:
  friend class StagingPool;
  StagingLease(std::shared_ptr<StagingPool> pool, std::shared_ptr<StagingSlab> slab,
               std::byte* data, std::uint64_t size)
      : pool_(std::move(pool)), slab_(std::move(slab)), data_(data), size_(size) {}
  std::shared_ptr<StagingPool> pool_;
  std::shared_ptr<StagingSlab> slab_;
  std::byte* data_;
  std::uint64_t size_;
  bool retained_ = false;
};

struct StagingStats {
  std::uint64_t chunk_bytes = 0;
  std::uint64_t max_bytes = 0;
  std::uint64_t slab_bytes = 0;  // made so far
  std::uint64_t lent = 0;        // chunks out now
  std::uint64_t lent_peak = 0;
  std::uint64_t loans = 0;     // lifetime
  std::uint64_t refusals = 0;  // try_take with nothing left
  std::uint64_t retained = 0;  // chunks kept for good
  bool pinned = false;
};

class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  using SlabHook = std::function<Status(StagingSlab&)>;
  // chunk_bytes (> 0) divides the slabs; max_bytes (>= chunk_bytes) bounds them all. With
  // pin_for_cuda false the slabs are ordinary pages even where a driver is there (a pool no
  // device copy reads, such as RDMA's bounce buffers).
  static Result<std::shared_ptr<StagingPool>> create(std::uint64_t max_bytes,
                                                     std::uint64_t chunk_bytes,
                                                     SlabHook on_slab = nullptr,
                                                     bool pin_for_cuda = true);
  // A chunk, or null when every chunk the bound allows is lent (the caller waits for one to
  // come back). An error only when a new slab could not be made or prepared.
  Result<std::shared_ptr<StagingLease>> try_take();
  [[nodiscard]] std::uint64_t chunk_bytes() const { return chunk_; }
  [[nodiscard]] StagingStats stats() const;
  // Every slab made so far (for the engine to forget them when it closes).
  [[nodiscard]] std::vector<std::shared_ptr<StagingSlab>> slabs() const;

 private:
  friend class StagingLease;
  StagingPool(std::uint64_t max_bytes, std::uint64_t chunk_bytes, SlabHook hook, bool pin);
  void give_back(const std::shared_ptr<StagingSlab>& slab, std::byte* data);

  const std::uint64_t max_;
  const std::uint64_t chunk_;
  SlabHook hook_;
  const bool pin_;
  mutable std::mutex mu_;  // guards everything below; the slab hook runs with it held
  std::vector<std::shared_ptr<StagingSlab>> slabs_;
  std::vector<std::pair<std::shared_ptr<StagingSlab>, std::byte*>> free_;
  std::uint64_t slab_bytes_ = 0;
  StagingStats stats_;
};

}  // namespace orbite::cuda
