// Initialization, entry points by name, devices, attributes and contexts.
#include <dlfcn.h>

#include <cstring>
#include <thread>

#include "fixture.h"

namespace {

void* proc(const char* name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* st,
           CUresult* rc) {
  void* fn = nullptr;
  *rc = cuGetProcAddress(name, &fn, version, flags, st);
  return fn;
}

TEST_F(Softcuda, ProcAddressAnswersByNameVersionAndFlags) {
  CUdriverProcAddressQueryResult st{};
  CUresult rc{};
  void* self = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  ASSERT_NE(nullptr, self);
  // The newest ABI not newer than the version asked for.
  EXPECT_EQ(dlsym(self, "cuMemAlloc_v2"), proc("cuMemAlloc", 12000, 0, &st, &rc));
  EXPECT_EQ(CU_GET_PROC_ADDRESS_SUCCESS, st);
  EXPECT_EQ(dlsym(self, "cuMemAlloc"), proc("cuMemAlloc", 3000, 0, &st, &rc));
  EXPECT_EQ(dlsym(self, "cuCtxGetDevice"), proc("cuCtxGetDevice", 12090, 0, &st, &rc));
  EXPECT_EQ(dlsym(self, "cuCtxGetDevice_v2"), proc("cuCtxGetDevice", 13000, 0, &st, &rc));
  EXPECT_EQ(dlsym(self, "cuStreamGetCaptureInfo_v2"),
            proc("cuStreamGetCaptureInfo", 12000, 0, &st, &rc));
  // Per-thread default stream variants, and names without stream semantics under that flag.
  EXPECT_EQ(
      dlsym(self, "cuMemcpyHtoDAsync_v2_ptsz"),
      proc("cuMemcpyHtoDAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st, &rc));
  EXPECT_EQ(dlsym(self, "cuMemAlloc_v2"),
            proc("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st, &rc));
  // Unknown name, and a version older than the name: success with a null pointer.
  EXPECT_EQ(nullptr, proc("cuNoSuchThing", 12000, 0, &st, &rc));
  EXPECT_EQ(CUDA_SUCCESS, rc);
  EXPECT_EQ(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, st);
  EXPECT_EQ(nullptr, proc("cuMemCreate", 10000, 0, &st, &rc));
  EXPECT_EQ(CUDA_SUCCESS, rc);
  EXPECT_EQ(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, st);
  // A version newer than the driver, and unknown flags, are invalid.
  EXPECT_EQ(nullptr, proc("cuMemAlloc", 99000, 0, &st, &rc));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, rc);
  proc("cuMemAlloc", 12000, 8, &st, &rc);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, rc);
  dlclose(self);
}

TEST_F(Softcuda, WhatIsNotEmulatedSaysSo) {
  // cuArrayCreate is exported (programs link) but not emulated.
  CUarray array = nullptr;
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = 16;
  desc.Height = 16;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuArrayCreate(&array, &desc));
}

TEST_F(Softcuda, ErrorNamesAndStrings) {
  const char* s = nullptr;
  CU_OK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
  EXPECT_STREQ("CUDA_ERROR_INVALID_VALUE", s);
  CU_OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
  EXPECT_STREQ("out of memory", s);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetErrorName(static_cast<CUresult>(123456), &s));
}

TEST_F(Softcuda, DeviceIdentityAndAttributes) {
  char name[128], bus[32];
  CU_OK(cuDeviceGetName(name, sizeof name, dev_));
  CU_OK(cuDeviceGetPCIBusId(bus, sizeof bus, dev_));
  EXPECT_STREQ("0000:1B:00.0", bus);
  CUdevice again = -1;
  CU_OK(cuDeviceGetByPCIBusId(&again, "0000:1b:00.0"));
  EXPECT_EQ(dev_, again);
  int v = 0;
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev_));
  EXPECT_EQ(1, v);
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev_));
  EXPECT_EQ(0x1b, v);
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev_));
  EXPECT_EQ(1, v);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
            cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(100000), dev_));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 7));
  CUuuid uuid{};
  CU_OK(cuDeviceGetUuid(&uuid, dev_));
  EXPECT_EQ(0x50, static_cast<unsigned char>(uuid.bytes[0]));
}

TEST_F(Softcuda, ContextStackAndTheCallsThatNeedOne) {
  CUcontext got = nullptr;
  CU_OK(cuCtxGetCurrent(&got));
  EXPECT_EQ(ctx_, got);
  // Another thread has no current context: what needs one is INVALID_CONTEXT there.
  CUresult on_thread = CUDA_SUCCESS;
  std::thread([&] {
    CUdeviceptr p = 0;
    on_thread = cuMemAlloc(&p, 64);
  }).join();
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, on_thread);
  CU_OK(cuCtxPopCurrent(&got));
  EXPECT_EQ(ctx_, got);
  CU_OK(cuCtxGetCurrent(&got));
  EXPECT_EQ(nullptr, got);
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxPopCurrent(&got));
  CU_OK(cuCtxPushCurrent(ctx_));
  CUdevice d = -1;
  CU_OK(cuCtxGetDevice(&d));
  EXPECT_EQ(dev_, d);
  // A context that does not exist.
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent(reinterpret_cast<CUcontext>(0x1234)));
}

TEST_F(Softcuda, ReleasingThePrimaryContextFreesWhatItOwned) {
  CUcontext second = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&second, dev_));
  EXPECT_EQ(ctx_, second);
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 4096));
  unsigned state_flags = 0;
  int active = 0;
  CU_OK(cuDevicePrimaryCtxGetState(dev_, &state_flags, &active));
  EXPECT_EQ(1, active);
  // Two references: the first release keeps everything, the second frees the allocation.
  CU_OK(cuDevicePrimaryCtxRelease(dev_));
  CUdeviceptr base = 0;
  CU_OK(cuMemGetAddressRange(&base, nullptr, p));
  CU_OK(cuDevicePrimaryCtxRelease(dev_));
  CU_OK(cuDevicePrimaryCtxGetState(dev_, &state_flags, &active));
  EXPECT_EQ(0, active);
  CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, nullptr, p));
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, 64));
  CU_OK(cuDevicePrimaryCtxRetain(&ctx_, dev_));  // for TearDown's release
  CU_OK(cuCtxSetCurrent(ctx_));
}

TEST_F(Softcuda, CallFaultsFailTheNthCallOnce) {
  control("fail cuMemAlloc 2 CUDA_ERROR_OUT_OF_MEMORY");
  CUdeviceptr a = 0, b = 0, c = 0;
  CU_OK(cuMemAlloc(&a, 64));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&b, 64));
  CU_OK(cuMemAlloc(&c, 64));
  CU_OK(cuMemFree(a));
  CU_OK(cuMemFree(c));
  std::string reply;
  EXPECT_NE(0, softcuda::control("fail cuNothing 1", &reply));
  EXPECT_NE(std::string::npos, reply.find("cuNothing"));
  EXPECT_NE(0, softcuda::control("fail cuMemAlloc 1 NOT_AN_ERROR", &reply));
  EXPECT_GE(stat("live_allocations"), 0);
}

TEST_F(Softcuda, OutOfMemoryAfterTheConfiguredBytes) {
  control("oom 1048576");
  CUdeviceptr a = 0, b = 0;
  CU_OK(cuMemAlloc(&a, 1 << 19));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&b, 1 << 20));
  control("oom off");
  CU_OK(cuMemAlloc(&b, 1 << 20));
  CU_OK(cuMemFree(a));
  CU_OK(cuMemFree(b));
}

}  // namespace
