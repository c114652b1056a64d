#include "p2p/registry.h"

#include <thread>

namespace orbite::p2p {

std::shared_ptr<detail::RegionRecord> RegionRegistry::prepare(std::weak_ptr<void> engine,
                                                              std::byte* base, std::uint64_t length,
                                                              MemoryKind kind, Access access) {
  auto r = std::make_shared<detail::RegionRecord>();
  r->engine = std::move(engine);
  r->base = base;
  r->length = length;
  r->kind = kind;
  r->access = access;
  std::lock_guard lock(mu_);
  r->id = next_id_++;
  // The generation distinguishes registrations of one id across engine incarnations.
  r->generation = 1;
  return r;
}

void RegionRegistry::publish(const std::shared_ptr<detail::RegionRecord>& record) {
  std::lock_guard lock(mu_);
  if (sources_fenced_ && record->application) record->source_fenced.store(true);
  regions_[record->id] = record;
}

void RegionRegistry::remove(std::uint64_t id) {
  std::lock_guard lock(mu_);
  regions_.erase(id);
}

Result<std::shared_ptr<detail::RegionRecord>> RegionRegistry::authorize(
    std::uint64_t id, std::uint64_t generation, std::uint64_t offset, std::uint64_t length,
    bool write, TransportId via) const {
  ORBITE_ASSIGN_OR_RETURN(auto r, authorize_staged(id, generation, offset, length, write));
  if ((r->staged >> static_cast<unsigned>(via) & 1) != 0) {
    return Status::error(Errc::InvalidArgument,
                         "region " + std::to_string(id) + " is " +
                             (r->kind == MemoryKind::Cuda ? "CUDA memory" : "host memory") +
                             " that " + transport_name(via) +
                             " carries through the owner's staging (StageOpen), not directly");
  }
  // A transport reaches the bytes once this returns: its producer's writes first.
  ORBITE_RETURN_IF_ERROR(consume_pinned_readiness(*r, Deadline::after(kProducerBound)));
  return r;
}

Status consume_pinned_readiness(const detail::RegionRecord& r, Deadline deadline) {
  if (!r.cuda || r.cuda->kind() != cuda::Kind::PinnedHost) return {};
  // Polled, never a blocking synchronisation: the caller stays bounded by the deadline.
  for (;;) {
    ORBITE_ASSIGN_OR_RETURN(const bool pending, r.cuda->poll_ready());
    if (!pending) return {};
    if (deadline.expired()) {
      return Status::error(Errc::Timeout,
                           r.cuda->describe() + ": its producer's recorded work has not finished");
    }
    std::this_thread::yield();
  }
}

Result<std::shared_ptr<detail::RegionRecord>> RegionRegistry::authorize_staged(
    std::uint64_t id, std::uint64_t generation, std::uint64_t offset, std::uint64_t length,
    bool write) const {
  std::shared_ptr<detail::RegionRecord> r;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find(id);
    if (it != regions_.end()) r = it->second;
  }
  const std::string what =
      "region " + std::to_string(id) + " generation " + std::to_string(generation);
  if (!r || r->generation != generation || r->dead.load()) {
    return Status::error(Errc::InvalidArgument, what +
                                                    " is not registered (unregistered or "
                                                    "stale descriptor)");
  }
  if (r->source_fenced.load(std::memory_order_seq_cst)) {
    return Status::error(Errc::Cancelled,
                         what +
                             ": its owner closed its source role (close_source); no access "
                             "by a peer starts");
  }
  if (!range_inside(offset, length, r->length)) {
    return Status::error(Errc::InvalidArgument, what + ": range offset " + std::to_string(offset) +
                                                    " length " + std::to_string(length) +
                                                    " exceeds its " + std::to_string(r->length) +
                                                    " bytes");
  }
  if (write ? !r->access.write : !r->access.read) {
    return Status::error(
        Errc::InvalidArgument,
        what + " does not grant " + (write ? "write (put)" : "read (get)") + " access");
  }
  return r;
}

std::size_t RegionRegistry::size() const {
  std::lock_guard lock(mu_);
  return regions_.size();
}

void RegionRegistry::kill_all() {
  std::lock_guard lock(mu_);
  for (auto& [id, r] : regions_) r->dead.store(true);
}

void RegionRegistry::fence_sources() {
  std::lock_guard lock(mu_);
  sources_fenced_ = true;
  for (auto& [id, r] : regions_) {
    if (r->application) r->source_fenced.store(true, std::memory_order_seq_cst);
  }
}

bool RegionRegistry::sources_fenced() const {
  std::lock_guard lock(mu_);
  return sources_fenced_;
}

RegionRegistry::RoleLoad RegionRegistry::role_load() const {
  RoleLoad load;
  std::lock_guard lock(mu_);
  for (const auto& [id, r] : regions_) {
    if (!r->application) continue;
    load.served += r->pins.load(std::memory_order_seq_cst);
    load.requested += r->local_pins.load(std::memory_order_seq_cst);
  }
  return load;
}

}  // namespace orbite::p2p
