// The copy and memset entry points: each resolves its ranges (device, pinned, pageable) and
// queues the work on its stream with the driver's rules (engine.cpp's submit_copy). Each
// per-thread-default-stream variant (_ptds, _ptsz) is the same call with stream 0 meaning the
// calling thread's default stream.
#include <algorithm>

#include "internal.h"

using namespace softcuda;

namespace {

enum class Dir { HtoD, DtoH, DtoD, Any };

CUresult copy(Dir dir, std::uintptr_t dst, std::uintptr_t src, std::uint64_t len, CUstream h,
              bool ptds, bool sync_call) {
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  if (len == 0) return CUDA_SUCCESS;
  Span d, sp;
  CUresult rc = CUDA_SUCCESS;
  switch (dir) {
    case Dir::HtoD:
      rc = resolve_device(dst, len, &d);
      if (rc == CUDA_SUCCESS) rc = resolve_host(reinterpret_cast<const void*>(src), len, &sp);
      break;
    case Dir::DtoH:
      rc = resolve_host(reinterpret_cast<const void*>(dst), len, &d);
      if (rc == CUDA_SUCCESS) rc = resolve_device(src, len, &sp);
      break;
    case Dir::DtoD:
      rc = resolve_device(dst, len, &d);
      if (rc == CUDA_SUCCESS) rc = resolve_device(src, len, &sp);
      break;
    case Dir::Any:
      rc = resolve_any(dst, len, &d);
      if (rc == CUDA_SUCCESS) rc = resolve_any(src, len, &sp);
      break;
  }
  if (rc != CUDA_SUCCESS) return rc;
  return submit_copy(lock, s, d, sp, len, sync_call);
}

CUresult memset_(CUdeviceptr dst, std::uint32_t value, unsigned width, std::uint64_t count,
                 CUstream h, bool ptds, bool sync_call) {
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  if (count == 0) return CUDA_SUCCESS;
  if (dst % width != 0) return CUDA_ERROR_INVALID_VALUE;
  Span d;
  if (CUresult rc = resolve_any(dst, count * width, &d); rc != CUDA_SUCCESS) return rc;
  return submit_memset(lock, s, d, value, width, count, sync_call);
}

inline std::uintptr_t u(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

}  // namespace

SC_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SC_ENTER("cuMemcpy");
  return copy(Dir::Any, dst, src, n, nullptr, false, true);
}
SC_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SC_ENTER("cuMemcpy_ptds");
  return copy(Dir::Any, dst, src, n, nullptr, true, true);
}
SC_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SC_ENTER("cuMemcpyAsync");
  return copy(Dir::Any, dst, src, n, h, false, false);
}
SC_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SC_ENTER("cuMemcpyAsync_ptsz");
  return copy(Dir::Any, dst, src, n, h, true, false);
}
SC_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  SC_ENTER("cuMemcpyHtoD");
  return copy(Dir::HtoD, dst, u(src), n, nullptr, false, true);
}
SC_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  SC_ENTER("cuMemcpyHtoD_v2_ptds");
  return copy(Dir::HtoD, dst, u(src), n, nullptr, true, true);
}
SC_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  SC_ENTER("cuMemcpyDtoH");
  return copy(Dir::DtoH, u(dst), src, n, nullptr, false, true);
}
SC_API CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  SC_ENTER("cuMemcpyDtoH_v2_ptds");
  return copy(Dir::DtoH, u(dst), src, n, nullptr, true, true);
}
SC_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SC_ENTER("cuMemcpyDtoD");
  return copy(Dir::DtoD, dst, src, n, nullptr, false, true);
}
SC_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SC_ENTER("cuMemcpyDtoD_v2_ptds");
  return copy(Dir::DtoD, dst, src, n, nullptr, true, true);
}
SC_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
  SC_ENTER("cuMemcpyHtoDAsync");
  return copy(Dir::HtoD, dst, u(src), n, h, false, false);
}
SC_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
  SC_ENTER("cuMemcpyHtoDAsync_v2_ptsz");
  return copy(Dir::HtoD, dst, u(src), n, h, true, false);
}
SC_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream h) {
  SC_ENTER("cuMemcpyDtoHAsync");
  return copy(Dir::DtoH, u(dst), src, n, h, false, false);
}
SC_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream h) {
  SC_ENTER("cuMemcpyDtoHAsync_v2_ptsz");
  return copy(Dir::DtoH, u(dst), src, n, h, true, false);
}
SC_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SC_ENTER("cuMemcpyDtoDAsync");
  return copy(Dir::DtoD, dst, src, n, h, false, false);
}
SC_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SC_ENTER("cuMemcpyDtoDAsync_v2_ptsz");
  return copy(Dir::DtoD, dst, src, n, h, true, false);
}
SC_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t n) {
  SC_ENTER("cuMemcpyPeer");
  return copy(Dir::DtoD, dst, src, n, nullptr, false, true);
}
SC_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext,
                                  size_t n) {
  SC_ENTER("cuMemcpyPeer_ptds");
  return copy(Dir::DtoD, dst, src, n, nullptr, true, true);
}
SC_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t n,
                                  CUstream h) {
  SC_ENTER("cuMemcpyPeerAsync");
  return copy(Dir::DtoD, dst, src, n, h, false, false);
}
SC_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext,
                                       size_t n, CUstream h) {
  SC_ENTER("cuMemcpyPeerAsync_ptsz");
  return copy(Dir::DtoD, dst, src, n, h, true, false);
}

SC_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  SC_ENTER("cuMemsetD8");
  return memset_(dst, v, 1, n, nullptr, false, true);
}
SC_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n) {
  SC_ENTER("cuMemsetD8_v2_ptds");
  return memset_(dst, v, 1, n, nullptr, true, true);
}
SC_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
  SC_ENTER("cuMemsetD32");
  return memset_(dst, v, 4, n, nullptr, false, true);
}
SC_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) {
  SC_ENTER("cuMemsetD32_v2_ptds");
  return memset_(dst, v, 4, n, nullptr, true, true);
}
SC_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream h) {
  SC_ENTER("cuMemsetD8Async");
  return memset_(dst, v, 1, n, h, false, false);
}
SC_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream h) {
  SC_ENTER("cuMemsetD8Async_ptsz");
  return memset_(dst, v, 1, n, h, true, false);
}
SC_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream h) {
  SC_ENTER("cuMemsetD32Async");
  return memset_(dst, v, 4, n, h, false, false);
}
SC_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream h) {
  SC_ENTER("cuMemsetD32Async_ptsz");
  return memset_(dst, v, 4, n, h, true, false);
}
