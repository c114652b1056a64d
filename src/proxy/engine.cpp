// The public data-path API: TransferEngine, Request, MemoryRegion and RemoteRegion. Everything
// here runs on the caller's thread: it validates, then hands requests to the proxy's lanes.
#include <orbite/transfer.h>

#include <chrono>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "cuda/allocation.h"
#include "p2p/descriptor.h"
#include "proxy/engine_core.h"
#include "proxy/metrics_exporter.h"

namespace orbite {

using detail::EngineCore;
using detail::OpKind;
using detail::RequestState;

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::Unspec: return "unspec";
    case Transport::Tcp: return "tcp";
    case Transport::Shm: return "shm";
    case Transport::Rdma: return "rdma";
    case Transport::Nvlink: return "nvlink";
  }
  return "?";
}

std::string_view to_string(Priority p) {
  switch (p) {
    case Priority::High: return "high";
    case Priority::Medium: return "medium";
    case Priority::Low: return "low";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Request

bool Request::test() {
  if (!state_) return false;
  if (state_->phase.load(std::memory_order_acquire) != 0) return true;
  if (state_->driver) state_->driver->poll();
  return state_->phase.load(std::memory_order_acquire) != 0;
}

Status Request::wait(Duration timeout) {
  if (!state_) return Status::error(Errc::InvalidArgument, "wait() on an empty Request");
  if (state_->phase.load(std::memory_order_acquire) == 0 && state_->driver) {
    state_->driver->wait(state_->phase, timeout);
  }
  if (state_->phase.load(std::memory_order_acquire) == 0) {
    return Status::error(
        Errc::Timeout,
        "request still running after " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
            " ms");
  }
  return state_->final_status;
}

std::optional<Status> Request::status() const {
  if (!state_ || state_->phase.load(std::memory_order_acquire) == 0) return std::nullopt;
  return state_->final_status;
}

bool Request::done() const {
  return state_ && state_->phase.load(std::memory_order_acquire) != 0;
}

std::uint64_t Request::bytes() const {
  return state_ ? state_->bytes_done.load(std::memory_order_acquire) : 0;
}

int Request::source() const {
  if (!state_ || state_->phase.load(std::memory_order_acquire) == 0) return -1;
  return state_->source;
}

int Request::tag() const {
  if (!state_ || state_->phase.load(std::memory_order_acquire) == 0) return -1;
  return state_->matched_tag;
}

Status wait_all(std::span<Request> requests, Duration timeout) {
  const Deadline deadline = Deadline::after(timeout);
  Status first;
  for (Request& r : requests) {
    Status st = r.wait(deadline.remaining());
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

// ---------------------------------------------------------------------------------------------
// MemoryRegion

MemoryRegion::MemoryRegion(MemoryRegion&&) noexcept = default;

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& other) noexcept {
  if (this != &other) {
    if (record_) {
      Status st = unregister();
      if (!st.ok()) {
        ORBITE_LOG(Error, Proxy) << st.message();
      }
    }
    record_ = std::move(other.record_);
  }
  return *this;
}

MemoryRegion::~MemoryRegion() {
  if (!record_) return;
  Status st = unregister();
  if (!st.ok()) {
    ORBITE_LOG(Error, Proxy) << st.message()
                             << "; the registration is retained and the memory must stay valid";
  }
}

void* MemoryRegion::data() const {
  return record_ ? record_->base : nullptr;
}
std::uint64_t MemoryRegion::length() const {
  return record_ ? record_->length : 0;
}
Access MemoryRegion::access() const {
  return record_ ? record_->access : Access{false, false};
}
MemoryKind MemoryRegion::kind() const {
  return record_ ? record_->kind : MemoryKind::Host;
}

RemoteRegion MemoryRegion::export_descriptor() const {
  if (!record_) return RemoteRegion();
  auto core = std::static_pointer_cast<EngineCore>(record_->engine.lock());
  if (!core) return RemoteRegion();
  std::vector<std::pair<std::uint8_t, std::string>> blobs;
  std::array<std::uint8_t, p2p::kTransportCount> gpu_direct{};
  for (const auto& domain : core->domains) {
    if (!domain) continue;
    const auto i = static_cast<std::size_t>(domain->id());
    if (!domain->published(*record_, record_->registrations[i].get())) continue;
    blobs.emplace_back(static_cast<std::uint8_t>(domain->id()),
                       domain->pack(*record_, record_->registrations[i].get()));
    gpu_direct[i] = domain->gpu_direct_routes(record_->registrations[i].get());
  }
  return detail::DescriptorCodec::make(*record_, core->self, std::move(blobs),
                                       core->config.cuda.staging_chunk_bytes, gpu_direct);
}

Status MemoryRegion::unregister(Duration timeout) {
  if (!record_) return {};
  detail::RegionRecord& r = *record_;
  r.dead.store(true, std::memory_order_seq_cst);
  auto core = std::static_pointer_cast<EngineCore>(r.engine.lock());
  const Deadline deadline = Deadline::after(timeout);
  while (r.all_pins() > 0) {
    if (deadline.expired()) {
      return Status::error(Errc::Unquiesced, "unregister region " + std::to_string(r.id) + ": " +
                                                 std::to_string(r.all_pins()) +
                                                 " transfer(s) in flight or cuda_ipc peer "
                                                 "mapping(s) still hold it");
    }
    if (core) {
      for (auto& lane : core->lanes) lane->poll();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  Status released;
  if (core) {
    core->regions.remove(r.id);
    // A domain that cannot release its part keeps it in its retained list.
    for (std::size_t i = 0; i < r.registrations.size(); ++i) {
      if (!r.registrations[i] || !core->domains[i]) continue;
      Status st = core->domains[i]->deregister(std::move(r.registrations[i]));
      if (!st.ok() && released.ok()) released = st;
    }
  }
  record_.reset();
  return released;
}

// ---------------------------------------------------------------------------------------------
// TransferEngine

TransferEngine::TransferEngine(std::shared_ptr<EngineCore> core) : core_(std::move(core)) {}

TransferEngine::~TransferEngine() {
  if (!core_) return;
  Status st = core_->close(std::chrono::seconds(2), CloseTimeout::Cancel);
  if (!st.ok()) {
    ORBITE_LOG(Warn, Proxy) << "engine destroyed: " << st.message();
  }
}

Result<std::shared_ptr<TransferEngine>> TransferEngine::create(const EngineConfig& config) {
  ORBITE_ASSIGN_OR_RETURN(auto core, EngineCore::create(config, false));
  return std::shared_ptr<TransferEngine>(new TransferEngine(std::move(core)));
}

std::string TransferEngine::state_report() const {
  std::string out;
  core_->report(out);
  return out;
}

const std::string& TransferEngine::control_address() const {
  return core_->self.address;
}
const std::string& TransferEngine::id() const {
  return core_->self.id;
}
const EngineConfig& TransferEngine::config() const {
  return core_->config;
}

namespace {

Status check_registration(const RegistrationRequest& r, std::size_t index) {
  const std::string where = "register_memory[" + std::to_string(index) + "]: ";
  if (r.kind != MemoryKind::Host && r.kind != MemoryKind::Cuda) {
    return Status::error(Errc::InvalidArgument,
                         where + "memory kind " + std::to_string(static_cast<int>(r.kind)));
  }
  if (r.length == 0) return Status::error(Errc::InvalidArgument, where + "length is 0");
  if (r.data == nullptr) {
    return Status::error(Errc::InvalidArgument,
                         where + "data is null with length " + std::to_string(r.length));
  }
  if (reinterpret_cast<std::uintptr_t>(r.data) + r.length <
      reinterpret_cast<std::uintptr_t>(r.data)) {
    return Status::error(Errc::InvalidArgument, where + "range wraps the address space");
  }
  if (!r.access.read && !r.access.write) {
    return Status::error(Errc::InvalidArgument, where + "access grants neither read nor write");
  }
  // Host memory is touched by the CPU and the kernel: device memory there would crash or EFAULT.
  if (r.kind == MemoryKind::Host && cuda::is_device_memory(r.data)) {
    return Status::error(Errc::InvalidArgument,
                         where +
                             "kind Host, but data is CUDA device memory: register it as "
                             "MemoryKind::Cuda (or a cuda::CudaMemory)");
  }
  return {};
}

}  // namespace

Result<MemoryRegion> TransferEngine::register_memory(void* data, std::uint64_t length,
                                                     MemoryKind kind, Access access) {
  RegistrationRequest r{data, length, kind, access};
  ORBITE_ASSIGN_OR_RETURN(auto regions,
                          register_memory(std::span<const RegistrationRequest>(&r, 1)));
  return std::move(regions[0]);
}

Result<MemoryRegion> TransferEngine::register_memory(const cuda::CudaMemory& memory,
                                                     Access access) {
  if (!memory.valid()) {
    return Status::error(Errc::InvalidArgument, "register_memory: the CudaMemory view is empty");
  }
  // The adoption inside finds this view's allocation: the region shares its owner.
  return register_memory(memory.data(), memory.size(), MemoryKind::Cuda, access);
}

Result<MemoryRegion> TransferEngine::register_memory(const cuda::HostMemory& memory,
                                                     Access access) {
  if (!memory.valid()) {
    return Status::error(Errc::InvalidArgument, "register_memory: the HostMemory is empty");
  }
  return register_memory(memory.data(), memory.size(), MemoryKind::Host, access);
}

Result<std::vector<MemoryRegion>> TransferEngine::register_memory(
    std::span<const RegistrationRequest> requests) {
  if (core_->closed.load()) {
    return Status::error(Errc::Cancelled, "register_memory: the engine is closed");
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ORBITE_RETURN_IF_ERROR(check_registration(requests[i], i));
  }
  // Every transport prepares every range before any becomes visible; a failure releases what was
  // prepared, so nothing of the batch stays registered.
  std::vector<std::shared_ptr<detail::RegionRecord>> made;
  made.reserve(requests.size());
  auto release = [&] {
    for (auto& rec : made) {
      for (std::size_t i = 0; i < rec->registrations.size(); ++i) {
        if (rec->registrations[i]) {
          core_->domains[i]->deregister(std::move(rec->registrations[i])).ignore();
        }
      }
    }
  };
  for (std::size_t n = 0; n < requests.size(); ++n) {
    const auto& r = requests[n];
    const std::string where = "register_memory[" + std::to_string(n) + "]";
    made.push_back(
        core_->regions.prepare(core_, static_cast<std::byte*>(r.data), r.length, r.kind, r.access));
    detail::RegionRecord& rec = *made.back();
    rec.application = true;
    // The CUDA allocation behind it: device memory must be one (adopted, sharing the owner of
    // views OrbiTE already has); host memory may be OrbiTE's pinned memory (its readiness).
    if (r.kind == MemoryKind::Cuda) {
      auto adopted = cuda::Allocation::adopt_device(r.data, r.length, nullptr, &rec.cuda_offset);
      if (!adopted.ok()) {
        release();
        return adopted.status().with_context(where);
      }
      rec.cuda = std::move(*adopted);
    } else {
      rec.cuda = cuda::find_pinned(r.data, r.length, &rec.cuda_offset);
    }
    for (const auto& domain : core_->domains) {
      if (!domain) continue;
      const auto i = static_cast<std::size_t>(domain->id());
      std::string why;
      switch (domain->backing(r.kind, &why)) {
        case p2p::Backing::Staged: rec.staged |= 1u << i; continue;
        case p2p::Backing::Absent: continue;
        case p2p::Backing::Refused:
          release();
          return Status::error(Errc::Unavailable,
                               where + " on " + p2p::transport_name(domain->id()) + ": " + why);
        case p2p::Backing::Native: break;
      }
      auto reg = domain->register_region(rec);
      if (!reg.ok()) {
        release();
        return reg.status().with_context(where + " on " + p2p::transport_name(domain->id()));
      }
      rec.registrations[i] = std::move(*reg);
    }
  }
  std::vector<MemoryRegion> out;
  out.reserve(requests.size());
  for (auto& rec : made) {
    core_->regions.publish(rec);
    out.push_back(core_->wrap(std::move(rec)));
  }
  return out;
}

Status TransferEngine::close(Duration timeout, CloseTimeout on_timeout) {
  return core_->close(timeout, on_timeout);
}

Status TransferEngine::close_source(Duration timeout) {
  return core_->close_source(timeout);
}

Status TransferEngine::close_requester(Duration timeout) {
  return core_->close_requester(timeout);
}

std::vector<NicLoad> TransferEngine::nic_load_stats() const {
  return core_->nic_load_stats();
}

RdmaStats TransferEngine::rdma_stats() const {
  return core_->rdma_stats();
}

EngineStats TransferEngine::stats() const {
  return core_->stats();
}

std::string TransferEngine::metrics() const {
  return core_->metrics_text();
}

std::string TransferEngine::metrics_endpoint() const {
  return detail::metrics_export::endpoint();
}

}  // namespace orbite
