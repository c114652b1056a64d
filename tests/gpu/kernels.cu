// The test kernels the GPU gate and softcuda share (softcuda emulates exactly these entries, see
// softcuda/src/module.cpp). kernels.ptx is generated from this file and checked in, so that the
// tests need no nvcc:
//   nvcc -ptx -arch=compute_75 tests/gpu/kernels.cu -o tests/gpu/kernels.ptx
// then its `.version` is lowered to 7.0 (CUDA 11.0) so that a 12.x driver JIT-compiles it too:
// nothing in it needs a newer ISA (ptxas -arch=sm_90 accepts it).
#include <stdint.h>

extern "C" __global__ void orbite_fill_u32(uint32_t* dst, uint32_t value, uint64_t count) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
    dst[i] = value;
  }
}

// A producer that is still running when its stream is handed over: it spins on the global
// timer for delay_ns, then fills. Readiness tests record the producer stream behind it.
extern "C" __global__ void orbite_delay_fill_u32(uint32_t* dst, uint32_t value, uint64_t count,
                                                 uint64_t delay_ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < delay_ns);
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
    dst[i] = value;
  }
}
