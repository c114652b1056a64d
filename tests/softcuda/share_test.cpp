// IPC rules, the virtual memory management API with POSIX descriptors, dma-buf export and the
// whitelisted test kernels.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "fixture.h"

namespace {

TEST_F(Softcuda, IpcHandlesAreNotOpenedByTheirExporter) {
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 1 << 20));
  CUipcMemHandle h{};
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&h, p + 64));  // not a base
  CU_OK(cuIpcGetMemHandle(&h, p));
  CUdeviceptr opened = 0;
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT,
            cuIpcOpenMemHandle(&opened, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  CUipcMemHandle garbage{};
  std::memset(&garbage, 0x5a, sizeof garbage);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
            cuIpcOpenMemHandle(&opened, garbage, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  unsigned capable = 0;
  CU_OK(cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p));
  EXPECT_EQ(1u, capable & 0xff);
  CU_OK(cuMemFree(p));
}

CUmemAllocationProp device_prop(bool posix_fd) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes =
      posix_fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  prop.allocFlags.gpuDirectRDMACapable = 1;
  return prop;
}

TEST_F(Softcuda, VmmExportsAPosixDescriptorThatMapsTheSameBytes) {
  CUmemAllocationProp prop = device_prop(true);
  size_t gran = 0;
  CU_OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  ASSERT_EQ(2u << 20, gran);
  CUmemGenericAllocationHandle handle = 0;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&handle, gran + 1, &prop, 0));
  CU_OK(cuMemCreate(&handle, gran, &prop, 0));
  CUdeviceptr va = 0;
  CU_OK(cuMemAddressReserve(&va, gran, 0, 0, 0));
  CU_OK(cuMemMap(va, gran, 0, handle, 0));
  std::vector<char> bytes(4096, 'v');
  // Mapped but not yet accessible.
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(va, bytes.data(), bytes.size()));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU_OK(cuMemSetAccess(va, gran, &access, 1));
  CU_OK(cuMemcpyHtoD(va, bytes.data(), bytes.size()));

  int fd = -1;
  CU_OK(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  ASSERT_GE(fd, 0);
  CUmemGenericAllocationHandle imported = 0;
  CU_OK(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(std::intptr_t(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);
  CUdeviceptr va2 = 0;
  CU_OK(cuMemAddressReserve(&va2, gran, 0, 0, 0));
  CU_OK(cuMemMap(va2, gran, 0, imported, 0));
  CU_OK(cuMemSetAccess(va2, gran, &access, 1));
  std::vector<char> back(4096);
  CU_OK(cuMemcpyDtoH(back.data(), va2, back.size()));
  EXPECT_EQ(bytes, back);
  unsigned long long types = 0;
  CU_OK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, va));
  EXPECT_EQ(unsigned(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), types);

  CU_OK(cuMemUnmap(va2, gran));
  CU_OK(cuMemAddressFree(va2, gran));
  CU_OK(cuMemRelease(imported));
  CU_OK(cuMemUnmap(va, gran));
  CU_OK(cuMemAddressFree(va, gran));
  CU_OK(cuMemRelease(handle));
  // Without POSIX_FD requested at creation, there is nothing to export.
  CUmemAllocationProp plain = device_prop(false);
  CU_OK(cuMemCreate(&handle, gran, &plain, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
            cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CU_OK(cuMemRelease(handle));
}

TEST_F(Softcuda, DmaBufExportNeedsHostPageGeometry) {
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 3 * 4096 + 100));  // a legacy allocation rounds up to a host page
  int fd = -1;
  CU_EXPECT(
      CUDA_ERROR_INVALID_VALUE,
      cuMemGetHandleForAddressRange(&fd, p + 100, 4096, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
            cuMemGetHandleForAddressRange(&fd, p, 1000, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  CU_EXPECT(
      CUDA_ERROR_INVALID_VALUE,
      cuMemGetHandleForAddressRange(&fd, p, 5 * 4096, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  CU_OK(cuMemGetHandleForAddressRange(&fd, p + 4096, 3 * 4096, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                      0));
  ASSERT_GE(fd, 0);
  unsigned long long offset = 0, size = 0;
  ASSERT_EQ(0, softcuda::dmabuf_describe(fd, &offset, &size));
  EXPECT_EQ(4096u, offset);
  EXPECT_EQ(3u * 4096, size);
  close(fd);
  CU_OK(cuMemFree(p));
}

std::string ptx() {
  std::ifstream in(SOFTCUDA_KERNELS_PTX);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(Softcuda, WhitelistedKernelsRunInStreamOrder) {
  const std::string text = ptx();
  ASSERT_FALSE(text.empty());
  CUmodule mod = nullptr;
  CU_OK(cuModuleLoadData(&mod, text.c_str()));
  CUfunction fill = nullptr, missing = nullptr;
  CU_OK(cuModuleGetFunction(&fill, mod, "orbite_delay_fill_u32"));
  CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&missing, mod, "not_there"));
  CUdeviceptr d = 0;
  const uint64_t count = 4096;
  CU_OK(cuMemAlloc(&d, count * 4));
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  uint32_t value = 0xfeedbeef;
  uint64_t n = count, delay = 20'000'000;  // 20 ms: still running when the copy is queued
  void* params[] = {&d, &value, &n, &delay};
  CU_OK(cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, s, params, nullptr));
  std::vector<uint32_t> out(count);
  CU_OK(cuMemcpyDtoHAsync(out.data(), d, count * 4, s));  // pageable: returns when done
  EXPECT_EQ(0xfeedbeefu, out.front());
  EXPECT_EQ(0xfeedbeefu, out.back());
  // Binary images are GPU code softcuda cannot run.
  const char cubin[] =
      "\x7f"
      "ELF";
  CUmodule other = nullptr;
  CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuModuleLoadData(&other, cubin));
  CU_OK(cuStreamDestroy(s));
  CU_OK(cuMemFree(d));
  CU_OK(cuModuleUnload(mod));
}

}  // namespace
