// The CUDA types behind an Allocation, and the scope that makes its context current. Only the
// cuda layer's own sources include this (it includes cuda.h).
#pragma once

#include "cuda/allocation.h"
#include "platform/cuda_api.h"

namespace orbite::cuda {

struct Allocation::Native {
  const Api* api = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;    // the device's primary context, retained by this allocation
  CUstream stream = nullptr;  // OrbiTE's copies (created at the first one)
  CUevent done = nullptr;     // their completion event
  CUevent ready = nullptr;    // the readiness event (created at the first record)
};

// Pushes a context for a scope and pops it after (a driver call needs its context current).
class ContextScope {
 public:
  ContextScope(const Api* api, CUcontext ctx) : api_(api) {
    pushed_ = api_->cuCtxPushCurrent_(ctx);
  }
  ~ContextScope() {
    if (pushed_ == CUDA_SUCCESS) {
      CUcontext popped = nullptr;
      api_->cuCtxPopCurrent_(&popped);
    }
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  [[nodiscard]] CUresult result() const { return pushed_; }

 private:
  const Api* api_;
  CUresult pushed_ = CUDA_ERROR_UNKNOWN;
};

// "0x7f00c0000000" for messages.
std::string hex(const void* p);

}  // namespace orbite::cuda
