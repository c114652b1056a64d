// Producer-stream readiness: one event per allocation, shared by its aliases. A record captures
// the work already queued on the producer's stream; the first access OrbiTE makes waits for that
// generation once (one cuEventSynchronize, which a deadline cannot interrupt: poll_ready asks
// without blocking first, so a lane never sleeps in it). An unproven record or wait fences the
// allocation and keeps the producer's inputs.
#include "cuda/native.h"

namespace orbite::cuda {

Status Allocation::record_producer(void* stream, std::shared_ptr<void> owner) {
  Native& n = *native_;
  const Api* a = n.api;
  if (a == nullptr) return Status::error(Errc::Internal, "record_producer_stream: no driver");
  const auto s = static_cast<CUstream>(stream);
  const std::string what = "record_producer_stream on " + describe();
  const bool default_stream = s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
  if (default_stream) {
    // A default-stream handle means the calling thread's: its current context must be ours.
    CUcontext current = nullptr;
    if (CUresult rc = a->cuCtxGetCurrent_(&current); rc != CUDA_SUCCESS) {
      return driver_error(rc, what + ": cuCtxGetCurrent");
    }
    if (current != n.ctx) {
      return Status::error(Errc::InvalidArgument,
                           what + ": stream " + hex(stream) +
                               " is a default stream, which resolves on the calling thread, and "
                               "its current context (" +
                               hex(current) + ") is not the allocation's (" + hex(n.ctx) + ")");
    }
  }
  std::lock_guard<std::mutex> g(mu_);
  if (!fence_.ok()) return fence_;
  ContextScope scope(a, n.ctx);
  if (scope.result() != CUDA_SUCCESS)
    return driver_error(scope.result(), what + ": cuCtxPushCurrent");
  if (!default_stream) {
    CUcontext sctx = nullptr;
    if (CUresult rc = a->cuStreamGetCtx_(s, &sctx); rc != CUDA_SUCCESS) {
      return driver_error(rc, what + ": cuStreamGetCtx(stream " + hex(stream) + ")");
    }
    if (sctx != n.ctx) {
      return Status::error(Errc::InvalidArgument,
                           what + ": stream " + hex(stream) + " belongs to context " + hex(sctx) +
                               ", not the allocation's (" + hex(n.ctx) + ")");
    }
  }
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (CUresult rc = a->cuStreamIsCapturing_(s, &capture); rc != CUDA_SUCCESS) {
    return driver_error(rc, what + ": cuStreamIsCapturing");
  }
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    return Status::error(Errc::InvalidArgument,
                         what + ": stream " + hex(stream) +
                             " is capturing a graph; its work has no completion to wait for");
  }
  // One event: a generation still pending is waited for here, on the producer's thread, so that
  // the new record never hides it.
  if (recorded_ > consumed_) {
    if (CUresult rc = a->cuEventSynchronize_(n.ready); rc != CUDA_SUCCESS) {
      const Status failed = driver_error(rc, what + ": the wait for the previous generation");
      fence(failed);
      return fence_;
    }
    consumed_ = recorded_;
    producer_owner_.reset();
  }
  if (n.ready == nullptr) {
    if (CUresult rc = a->cuEventCreate_(&n.ready, CU_EVENT_DISABLE_TIMING); rc != CUDA_SUCCESS) {
      return driver_error(rc, what + ": cuEventCreate");
    }
  }
  if (CUresult rc = a->cuEventRecord_(n.ready, s); rc != CUDA_SUCCESS) {
    // Whether the producer's work is covered is unknown: nothing may touch the memory now.
    fence(driver_error(rc, what + ": cuEventRecord"));
    if (owner) retain("the producer inputs of " + describe(), "its readiness record failed");
    producer_owner_ = std::move(owner);
    ++recorded_;
    return fence_;
  }
  ++recorded_;
  producer_owner_ = std::move(owner);
  return {};
}

Result<bool> Allocation::poll_ready() {
  std::lock_guard<std::mutex> g(mu_);
  if (!fence_.ok()) return fence_;
  if (recorded_ == consumed_) return false;
  Native& n = *native_;
  const CUresult q = n.api->cuEventQuery_(n.ready);
  if (q == CUDA_ERROR_NOT_READY) return true;
  // Finished (or failed): the one synchronization of this generation.
  const CUresult w = q == CUDA_SUCCESS ? n.api->cuEventSynchronize_(n.ready) : q;
  if (w != CUDA_SUCCESS) {
    fence(driver_error(w, describe() + ": the wait for its producer generation"));
    return fence_;
  }
  consumed_ = recorded_;
  producer_owner_.reset();
  return false;
}

Status Allocation::wait_ready() {
  std::lock_guard<std::mutex> g(mu_);
  if (!fence_.ok()) return fence_;
  if (recorded_ == consumed_) return {};
  Native& n = *native_;
  if (CUresult rc = n.api->cuEventSynchronize_(n.ready); rc != CUDA_SUCCESS) {
    fence(driver_error(rc, describe() + ": the wait for its producer generation"));
    return fence_;
  }
  consumed_ = recorded_;
  producer_owner_.reset();
  return {};
}

}  // namespace orbite::cuda
