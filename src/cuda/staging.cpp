#include "cuda/staging.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "cuda/allocation.h"
#include "platform/cuda_loader.h"

namespace orbite::cuda {

namespace {
constexpr std::uint64_t kSlabChunks = 8;
}

StagingLease::~StagingLease() {
  if (!retained_ && pool_) pool_->give_back(slab_, data_);
}

void StagingLease::retain(const std::string& why) {
  if (retained_) return;
  retained_ = true;
  {
    std::lock_guard<std::mutex> g(pool_->mu_);
    pool_->stats_.retained++;
    pool_->stats_.lent--;
  }
  cuda::retain("staging chunk of " + std::to_string(size_) + " bytes", why);
  // The slab (and its registration) stays alive with this lease's reference, kept for good.
  static std::mutex keep_mu;
  static auto* kept = new std::vector<std::shared_ptr<StagingSlab>>;
  std::lock_guard<std::mutex> g(keep_mu);
  kept->push_back(slab_);
}

StagingPool::StagingPool(std::uint64_t max_bytes, std::uint64_t chunk_bytes, SlabHook hook,
                         bool pin)
    : max_(max_bytes), chunk_(chunk_bytes), hook_(std::move(hook)), pin_(pin) {
  stats_.chunk_bytes = chunk_bytes;
  stats_.max_bytes = max_bytes;
}

Result<std::shared_ptr<StagingPool>> StagingPool::create(std::uint64_t max_bytes,
                                                         std::uint64_t chunk_bytes,
                                                         SlabHook on_slab, bool pin_for_cuda) {
  if (chunk_bytes == 0 || chunk_bytes % 64 != 0 || max_bytes < chunk_bytes) {
    return Status::error(Errc::Configuration,
                         "staging: chunk of " + std::to_string(chunk_bytes) +
                             " bytes (a positive multiple of 64) within a bound of " +
                             std::to_string(max_bytes) + " bytes");
  }
  return std::shared_ptr<StagingPool>(
      new StagingPool(max_bytes, chunk_bytes, std::move(on_slab), pin_for_cuda));
}

Result<std::shared_ptr<StagingLease>> StagingPool::try_take() {
  std::lock_guard<std::mutex> g(mu_);
  if (free_.empty()) {
    const std::uint64_t room = max_ - slab_bytes_;
    const std::uint64_t chunks = std::min<std::uint64_t>(kSlabChunks, room / chunk_);
    if (chunks == 0) {
      stats_.refusals++;
      return std::shared_ptr<StagingLease>();
    }
    auto slab = std::make_shared<StagingSlab>();
    slab->length = chunks * chunk_;
    // Pinned when a driver is there (asynchronous device copies), ordinary pages otherwise.
    if (pin_ && probe_driver().ok()) {
      ORBITE_ASSIGN_OR_RETURN(auto pinned, Allocation::allocate_pinned(slab->length, 0));
      slab->base = pinned->base();
      slab->pinned = true;
      slab->memory = std::move(pinned);
    } else {
      void* m =
          mmap(nullptr, slab->length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) {
        return Status::error(Errc::ResourceExhausted, "staging: mmap of " +
                                                          std::to_string(slab->length) +
                                                          " bytes failed: " + std::strerror(errno));
      }
      const std::uint64_t len = slab->length;
      slab->base = static_cast<std::byte*>(m);
      slab->memory = std::shared_ptr<void>(m, [len](void* p) { munmap(p, len); });
    }
    if (hook_) ORBITE_RETURN_IF_ERROR(hook_(*slab));
    slab_bytes_ += slab->length;
    stats_.slab_bytes = slab_bytes_;
    stats_.pinned = slab->pinned;
    for (std::uint64_t i = chunks; i-- > 0;) free_.emplace_back(slab, slab->base + i * chunk_);
    slabs_.push_back(std::move(slab));
  }
  auto [slab, data] = std::move(free_.back());
  free_.pop_back();
  stats_.loans++;
  stats_.lent++;
  stats_.lent_peak = std::max(stats_.lent_peak, stats_.lent);
  return std::shared_ptr<StagingLease>(
      new StagingLease(shared_from_this(), std::move(slab), data, chunk_));
}

void StagingPool::give_back(const std::shared_ptr<StagingSlab>& slab, std::byte* data) {
  std::lock_guard<std::mutex> g(mu_);
  free_.emplace_back(slab, data);
  stats_.lent--;
}

StagingStats StagingPool::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

std::vector<std::shared_ptr<StagingSlab>> StagingPool::slabs() const {
  std::lock_guard<std::mutex> g(mu_);
  return slabs_;
}

}  // namespace orbite::cuda
