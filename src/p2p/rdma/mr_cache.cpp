// MrCache: declared engine-owned ranges, registered at first use and kept within the budgets.
#include "p2p/rdma/mr_cache.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "p2p/rdma/engine.h"

namespace orbite::rdma {

MrCache::MrCache(std::shared_ptr<RdmaEngine> engine)
    : engine_(std::move(engine)),
      max_copies_(engine_->config().rdma.max_cached_mrs),
      max_bytes_(engine_->config().rdma.max_cached_mr_bytes),
      bounce_limit_((engine_->config().rdma.bounce_limit + 63) / 64 * 64) {
  if (bounce_limit_ == 0) return;
  // The configuration guarantees a pool of at least one chunk; a refusal leaves bouncing off.
  auto pool = cuda::StagingPool::create(
      std::max(engine_->config().rdma.bounce_pool_bytes, bounce_limit_), bounce_limit_,
      [this](cuda::StagingSlab& slab) {
        declare(slab.base, slab.length);
        return Status{};
      },
      false);
  if (pool.ok()) {
    bounce_ = std::move(*pool);
  } else {
    ORBITE_LOG(Warn, Rdma) << "bounce buffers are off: " << pool.status().to_string();
  }
}

std::optional<MrCache::Bounce> MrCache::take_bounce(std::uint64_t length) {
  if (!bounces(length)) return std::nullopt;
  auto chunk = bounce_->try_take();
  if (!chunk.ok()) {
    ORBITE_LOG(Debug, Rdma) << "bounce pool: " << chunk.status().to_string();
    return std::nullopt;
  }
  if (*chunk == nullptr) return std::nullopt;  // every chunk is lent
  // Null when the budgets cannot take the chunk's slab.
  auto record = find((*chunk)->data(), length);
  if (record == nullptr) return std::nullopt;
  Bounce b;
  b.offset = static_cast<std::uint64_t>((*chunk)->data() - record->base);
  b.chunk = std::move(*chunk);
  b.record = std::move(record);
  return b;
}

void MrCache::count_bounce(bool sender, bool bounced) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!bounced) {
    ++bounce_fallbacks_;
  } else {
    ++(sender ? bounce_sends_ : bounce_receives_);
  }
}

void MrCache::declare(std::byte* base, std::uint64_t length) {
  if (base == nullptr || length == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Entry e;
  e.length = length;
  entries_[base] = std::move(e);
}

void MrCache::uncharge(const Entry& e) {
  copies_ -= e.copies;
  bytes_ -= e.copies * e.length;
}

void MrCache::forget(const std::byte* base) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(base);
  if (it == entries_.end()) return;
  Entry e = std::move(it->second);
  entries_.erase(it);
  // Jobs and grants hold the record while they use it: its MRs go when the last one drops it.
  if (e.record != nullptr && e.record.use_count() > 1) {
    draining_.push_back(std::move(e));
  } else {
    uncharge(e);
  }
  sweep_draining();
}

void MrCache::sweep_draining() {
  std::erase_if(draining_, [this](Entry& e) {
    if (e.record.use_count() > 1) return false;
    uncharge(e);
    return true;  // the record and its MRs go here
  });
}

bool MrCache::make_room(std::uint64_t copies, std::uint64_t bytes, const std::byte* keep) {
  sweep_draining();
  while (copies_ + copies > max_copies_ || bytes_ + bytes > max_bytes_) {
    // The least recently used registered entry that nobody holds now.
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const Entry& e = it->second;
      if (it->first == keep || e.record == nullptr || e.record.use_count() > 1) continue;
      if (victim == entries_.end() || e.last_use < victim->second.last_use) victim = it;
    }
    if (victim == entries_.end()) return false;
    uncharge(victim->second);
    victim->second.record.reset();
    victim->second.copies = 0;
    ++evictions_;
  }
  return true;
}

std::shared_ptr<detail::RegionRecord> MrCache::find(const std::byte* p, std::uint64_t length,
                                                    bool* owned) {
  if (owned != nullptr) *owned = false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.upper_bound(p);
  if (it == entries_.begin()) return nullptr;
  --it;
  const std::byte* base = it->first;
  Entry& e = it->second;
  if (p + length > base + e.length) return nullptr;  // not (wholly) engine-owned
  if (owned != nullptr) *owned = true;
  e.last_use = ++tick_;
  if (e.record != nullptr) {
    ++hits_;
    return e.record;
  }
  std::uint64_t copies = 0;
  for (const auto& c : engine_->contexts()) copies += c->usable() ? 1 : 0;
  if (copies == 0 || !make_room(copies, copies * e.length, base)) {
    ++refused_;
    return nullptr;
  }
  auto record = std::make_shared<detail::RegionRecord>();
  record->base = const_cast<std::byte*>(base);
  record->length = e.length;
  record->access = Access{true, true};
  auto mrs = std::make_unique<MrSet>(engine_);
  if (Status st = mrs->prepare(record->base, e.length, true); !st.ok()) {
    // The caller's per-request registration will meet (and report) the same refusal.
    ORBITE_LOG(Debug, Rdma) << "MR cache: registering " << e.length
                            << " bytes of engine-owned memory failed: " << st.to_string();
    ++refused_;
    return nullptr;
  }
  record->registrations[static_cast<std::size_t>(p2p::TransportId::Rdma)] = std::move(mrs);
  e.record = std::move(record);
  e.copies = copies;
  copies_ += copies;
  bytes_ += copies * e.length;
  ++registrations_;
  return e.record;
}

Status MrCache::charge_slab(std::uint64_t bytes, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!make_room(1, bytes, nullptr)) {
    ++refused_;
    const bool by_count = copies_ + 1 > max_copies_;
    return Status::error(
        Errc::ResourceExhausted,
        what + ": a slab of " + std::to_string(bytes) + " bytes does not fit " +
            (by_count ? "rdma.max_cached_mrs = " + std::to_string(max_copies_) + " (" +
                            std::to_string(copies_) + " MR copies in use)"
                      : "rdma.max_cached_mr_bytes = " + std::to_string(max_bytes_) + " (" +
                            std::to_string(bytes_) + " bytes in use)") +
            " after evicting every unused cached range");
  }
  copies_ += 1;
  bytes_ += bytes;
  ++slabs_;
  slab_bytes_ += bytes;
  return {};
}

void MrCache::release_slab(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  copies_ -= 1;
  bytes_ -= bytes;
  --slabs_;
  slab_bytes_ -= bytes;
}

RdmaMrCacheStats MrCache::stats() const {
  RdmaMrCacheStats s;
  if (bounce_ != nullptr) {
    // Read before mu_: the pool's mutex comes first (its slab hook declares under it).
    const cuda::StagingStats b = bounce_->stats();
    s.bounce_pool_bytes = b.slab_bytes;
    s.bounce_lent = b.lent;
  }
  std::lock_guard<std::mutex> lock(mu_);
  s.declared = entries_.size();
  for (const auto& [base, e] : entries_) s.registered += e.record != nullptr ? 1 : 0;
  s.draining = draining_.size();
  s.mr_copies = copies_;
  s.bytes = bytes_;
  s.hits = hits_;
  s.registrations = registrations_;
  s.evictions = evictions_;
  s.refused = refused_;
  s.slabs = slabs_;
  s.slab_bytes = slab_bytes_;
  s.bounce_sends = bounce_sends_;
  s.bounce_receives = bounce_receives_;
  s.bounce_fallbacks = bounce_fallbacks_;
  return s;
}

}  // namespace orbite::rdma
