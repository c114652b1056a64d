// CUDA IPC with legacy handles: the exporter names an allocation by its handle, an importer maps
// it into its device's primary context. The entry points are optional rows of the loader: a
// driver without them makes every call here Unavailable, naming the one that is missing.
#include "cuda/ipc.h"

#include <cstring>

#include "cuda/native.h"

namespace orbite::cuda {

namespace {

Status missing(const char* call) {
  return Status::error(Errc::Unavailable,
                       std::string("CUDA IPC: the driver does not export ") + call);
}

}  // namespace

struct PeerMapping::Context {
  const Api* api = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
};

Result<IpcHandle> Allocation::export_ipc() const {
  if (kind_ != Kind::Device) {
    return Status::error(Errc::InvalidArgument,
                         describe() + ": only device memory has an IPC handle");
  }
  const Native& n = *native_;
  if (n.api->cuIpcGetMemHandle_ == nullptr) return missing("cuIpcGetMemHandle");
  ContextScope scope(n.api, n.ctx);
  if (scope.result() != CUDA_SUCCESS) {
    return driver_error(scope.result(), describe() + ": cuCtxPushCurrent");
  }
  CUipcMemHandle h{};
  if (CUresult rc = n.api->cuIpcGetMemHandle_(&h, reinterpret_cast<CUdeviceptr>(base_));
      rc != CUDA_SUCCESS) {
    return Status::error(Errc::Unavailable,
                         driver_error(rc, describe() + ": cuIpcGetMemHandle").message());
  }
  static_assert(sizeof(h.reserved) == IpcHandle::kBytes);
  IpcHandle out;
  std::memcpy(out.bytes.data(), h.reserved, IpcHandle::kBytes);
  return out;
}

PeerMapping::PeerMapping(std::unique_ptr<Context> ctx, std::uint64_t address, int ordinal)
    : ctx_(std::move(ctx)), address_(address), ordinal_(ordinal) {}

Result<std::unique_ptr<PeerMapping>> PeerMapping::open(const IpcHandle& handle, int ordinal) {
  ORBITE_ASSIGN_OR_RETURN(const Api* a, api());
  if (a->cuIpcOpenMemHandle_ == nullptr) return missing("cuIpcOpenMemHandle");
  if (a->cuIpcCloseMemHandle_ == nullptr) return missing("cuIpcCloseMemHandle");
  auto c = std::make_unique<Context>();
  c->api = a;
  const std::string where = "CUDA device " + std::to_string(ordinal);
  if (CUresult rc = a->cuDeviceGet_(&c->device, ordinal); rc != CUDA_SUCCESS) {
    return driver_error(rc, where + ": cuDeviceGet");
  }
  if (CUresult rc = a->cuDevicePrimaryCtxRetain_(&c->ctx, c->device); rc != CUDA_SUCCESS) {
    return driver_error(rc, where + ": cuDevicePrimaryCtxRetain");
  }
  CUipcMemHandle h{};
  std::memcpy(h.reserved, handle.bytes.data(), IpcHandle::kBytes);
  CUdeviceptr mapped = 0;
  CUresult rc = CUDA_SUCCESS;
  {
    ContextScope scope(a, c->ctx);
    rc = scope.result();
    if (rc == CUDA_SUCCESS) {
      rc = a->cuIpcOpenMemHandle_(&mapped, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    }
  }
  if (rc != CUDA_SUCCESS) {
    a->cuDevicePrimaryCtxRelease_(c->device);
    return driver_error(rc, where + ": cuIpcOpenMemHandle of a peer's allocation");
  }
  return std::unique_ptr<PeerMapping>(
      new PeerMapping(std::move(c), static_cast<std::uint64_t>(mapped), ordinal));
}

Status PeerMapping::close() {
  if (closed_) return {};
  closed_ = true;
  const Api* a = ctx_->api;
  CUresult rc = CUDA_SUCCESS;
  {
    ContextScope scope(a, ctx_->ctx);
    rc = scope.result();
    if (rc == CUDA_SUCCESS) rc = a->cuIpcCloseMemHandle_(static_cast<CUdeviceptr>(address_));
  }
  if (rc != CUDA_SUCCESS) {
    const Status failed = driver_error(rc, "CUDA device " + std::to_string(ordinal_) +
                                               ": cuIpcCloseMemHandle of a peer's " + "allocation");
    // Still mapped as far as anyone can tell: the mapping and its context stay.
    retain("a peer's allocation mapped on CUDA device " + std::to_string(ordinal_),
           failed.message());
    (void)ctx_.release();  // kept for the rest of the process on purpose
    return failed;
  }
  a->cuDevicePrimaryCtxRelease_(ctx_->device);
  return {};
}

PeerMapping::~PeerMapping() {
  close().ignore();
}

}  // namespace orbite::cuda
