// The cuda layer of a build without cuda.h (ORBITE_WITH_CUDA=OFF): no allocation can be made or
// adopted, so every pointer is host memory and every CUDA call is Unavailable naming why.
#include <mutex>

#include "cuda/allocation.h"
#include "cuda/ipc.h"

namespace orbite::cuda {

namespace {
Status unavailable() {
  return Status::error(
      Errc::Unavailable,
      "libcuda.so.1: OrbiTE was built without CUDA support (ORBITE_WITH_CUDA=OFF)");
}
std::mutex retained_mu;
std::vector<RetainedResource> retained_list;
}  // namespace

struct Allocation::Native {};

Allocation::Allocation(Kind kind, int ordinal) : kind_(kind), ordinal_(ordinal) {}
Allocation::~Allocation() = default;
std::string Allocation::describe() const {
  return "CUDA memory";
}
Result<std::shared_ptr<Allocation>> Allocation::allocate_device(int, std::uint64_t) {
  return unavailable();
}
Result<std::shared_ptr<Allocation>> Allocation::adopt_device(const void*, std::uint64_t,
                                                             std::shared_ptr<void>,
                                                             std::uint64_t*) {
  return unavailable();
}
Result<std::shared_ptr<Allocation>> Allocation::allocate_pinned(std::uint64_t, int) {
  return unavailable();
}
Status Allocation::record_producer(void*, std::shared_ptr<void>) {
  return unavailable();
}
Result<bool> Allocation::poll_ready() {
  return false;
}
Status Allocation::wait_ready() {
  return {};
}
Status Allocation::submit(const std::shared_ptr<CopyJob>&) {
  return unavailable();
}
void Allocation::advance() {}
Status Allocation::wait(CopyJob&, Deadline) {
  return unavailable();
}
void Allocation::park(std::shared_ptr<CopyJob>, std::shared_ptr<void>) {}
Status Allocation::memset(std::uint64_t, std::uint64_t, std::uint8_t, Deadline) {
  return unavailable();
}
Status Allocation::fenced() const {
  return {};
}
Result<IpcHandle> Allocation::export_ipc() const {
  return unavailable();
}
Result<GpuDirectSupport> Allocation::gpudirect_support() const {
  return unavailable();
}
Status Allocation::prepare_gpudirect() const {
  return unavailable();
}
Result<DmabufExport> Allocation::export_dmabuf() const {
  return unavailable();
}
struct PeerMapping::Context {};
PeerMapping::PeerMapping(std::unique_ptr<Context> ctx, std::uint64_t address, int ordinal)
    : ctx_(std::move(ctx)), address_(address), ordinal_(ordinal) {}
Result<std::unique_ptr<PeerMapping>> PeerMapping::open(const IpcHandle&, int) {
  return unavailable();
}
Status PeerMapping::close() {
  return {};
}
PeerMapping::~PeerMapping() = default;

bool is_device_memory(const void*) {
  return false;
}

Result<std::optional<DeviceView>> device_view_of(const void*, std::uint64_t) {
  return std::optional<DeviceView>();
}

std::shared_ptr<Allocation> find_pinned(const void*, std::uint64_t, std::uint64_t*) {
  return nullptr;
}

void retain(std::string what, std::string why) {
  std::lock_guard<std::mutex> g(retained_mu);
  retained_list.push_back(RetainedResource{std::move(what), std::move(why)});
}

std::vector<RetainedResource> retained_resources() {
  std::lock_guard<std::mutex> g(retained_mu);
  return retained_list;
}

}  // namespace orbite::cuda
