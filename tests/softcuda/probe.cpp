// softcuda_probe: prints what cuInit and the device queries answer in this process's
// environment (SOFTCUDA_CONFIG, CUDA_VISIBLE_DEVICES), one line each, for ctests that need an
// environment of their own:
//   init <CUresult name>
//   device <ordinal> <PCI bus id> <uuid> numa=<host numa id> dma_buf=<0|1> vmm=<0|1>
//   alloc <n> <CUresult name>     (three cuMemAlloc calls on device 0's primary context)
#include <cuda.h>

#include <cstdio>

int main() {
  const CUresult rc = cuInit(0);
  const char* name = nullptr;
  cuGetErrorName(rc, &name);
  std::printf("init %s\n", name != nullptr ? name : "?");
  if (rc != CUDA_SUCCESS) return 0;
  int count = 0;
  cuDeviceGetCount(&count);
  for (int i = 0; i < count; ++i) {
    CUdevice d = 0;
    char bus[32] = {};
    CUuuid u{};
    int numa = -2, dmabuf = -1, vmm = -1;
    cuDeviceGet(&d, i);
    cuDeviceGetPCIBusId(bus, sizeof bus, d);
    cuDeviceGetUuid(&u, d);
    cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, d);
    cuDeviceGetAttribute(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d);
    cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
    std::printf("device %d %s %02x%02x numa=%d dma_buf=%d vmm=%d\n", i, bus,
                static_cast<unsigned char>(u.bytes[0]), static_cast<unsigned char>(u.bytes[15]),
                numa, dmabuf, vmm);
  }
  CUdevice d = 0;
  CUcontext ctx = nullptr;
  if (count == 0 || cuDeviceGet(&d, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    return 0;
  }
  for (int n = 1; n <= 3; ++n) {
    CUdeviceptr p = 0;
    const CUresult a = cuMemAlloc(&p, 4096);
    cuGetErrorName(a, &name);
    std::printf("alloc %d %s\n", n, name != nullptr ? name : "?");
    if (a == CUDA_SUCCESS) cuMemFree(p);
  }
  cuDevicePrimaryCtxRelease(d);
  return 0;
}
