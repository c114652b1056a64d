/* A CUDA driver API program as NVIDIA's documentation writes them, with no OrbiTE in it: device
 * query, the primary context, allocation, synchronous and asynchronous copies on a stream with
 * pinned memory, events, and IPC between two processes (the child is forked before either
 * process initializes CUDA, as the driver requires). It runs unchanged on NVIDIA's driver and on
 * softcuda:
 *
 *   LD_LIBRARY_PATH=build/softcuda build/examples/cuda/driver_api_tour
 *
 * Exit status 0 when every check passed. */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                                 \
  do {                                                                              \
    CUresult rc_ = (call);                                                          \
    if (rc_ != CUDA_SUCCESS) {                                                      \
      const char* name_ = NULL;                                                     \
      cuGetErrorName(rc_, &name_);                                                  \
      fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,     \
              name_ ? name_ : "?", (int)rc_);                                       \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

enum { kBytes = 1 << 20 };

/* The child: opens the parent's allocation, checks its bytes, adds one to each and exits. */
static int child(int from_parent, int to_parent) {
  CUipcMemHandle handle;
  if (read(from_parent, &handle, sizeof handle) != (ssize_t)sizeof handle) return 2;
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CUdeviceptr remote;
  CHECK(cuIpcOpenMemHandle(&remote, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  unsigned char* bytes = (unsigned char*)malloc(kBytes);
  CHECK(cuMemcpyDtoH(bytes, remote, kBytes));
  int bad = 0;
  for (int i = 0; i < kBytes; ++i) {
    if (bytes[i] != (unsigned char)(i * 7)) ++bad;
    bytes[i] = (unsigned char)(bytes[i] + 1);
  }
  CHECK(cuMemcpyHtoD(remote, bytes, kBytes));
  CHECK(cuCtxSynchronize());
  CHECK(cuIpcCloseMemHandle(remote));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  free(bytes);
  char done = bad == 0 ? 'y' : 'n';
  if (write(to_parent, &done, 1) != 1) return 2;
  printf("child: opened the parent's %d bytes over IPC, %d wrong\n", kBytes, bad);
  return bad == 0 ? 0 : 1;
}

int main(void) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return 2;
  pid_t pid = fork();
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    return child(down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);

  int version = 0, count = 0;
  CHECK(cuInit(0));
  CHECK(cuDriverGetVersion(&version));
  CHECK(cuDeviceGetCount(&count));
  printf("driver %d.%d, %d device(s)\n", version / 1000, (version % 1000) / 10, count);
  for (int i = 0; i < count; ++i) {
    CUdevice d;
    char name[256], bus[32];
    size_t mem = 0;
    int major = 0, minor = 0, uva = 0;
    CHECK(cuDeviceGet(&d, i));
    CHECK(cuDeviceGetName(name, sizeof name, d));
    CHECK(cuDeviceGetPCIBusId(bus, sizeof bus, d));
    CHECK(cuDeviceTotalMem(&mem, d));
    CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
    CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
    CHECK(cuDeviceGetAttribute(&uva, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, d));
    printf("  %d: %s, %s, %zu MiB, compute %d.%d, unified addressing %d\n", i, name, bus,
           mem >> 20, major, minor, uva);
  }

  CUdevice dev;
  CUcontext ctx;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));

  /* Pinned host memory, a device buffer, and an asynchronous round trip on a stream. */
  unsigned char *pinned_in, *pinned_out;
  CUdeviceptr dbuf, dcopy;
  CUstream stream;
  CUevent start, stop;
  CHECK(cuMemHostAlloc((void**)&pinned_in, kBytes, 0));
  CHECK(cuMemHostAlloc((void**)&pinned_out, kBytes, 0));
  CHECK(cuMemAlloc(&dbuf, kBytes));
  CHECK(cuMemAlloc(&dcopy, kBytes));
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  for (int i = 0; i < kBytes; ++i) pinned_in[i] = (unsigned char)(i * 7);
  memset(pinned_out, 0, kBytes);
  CHECK(cuEventRecord(start, stream));
  CHECK(cuMemcpyHtoDAsync(dbuf, pinned_in, kBytes, stream));
  CHECK(cuMemcpyDtoDAsync(dcopy, dbuf, kBytes, stream));
  CHECK(cuMemcpyDtoHAsync(pinned_out, dcopy, kBytes, stream));
  CHECK(cuEventRecord(stop, stream));
  CHECK(cuEventSynchronize(stop));
  float ms = 0;
  CHECK(cuEventElapsedTime(&ms, start, stop));
  if (memcmp(pinned_in, pinned_out, kBytes) != 0) {
    fprintf(stderr, "the round trip through the device changed the bytes\n");
    return 1;
  }
  printf("stream round trip of %d bytes: equal (%.3f ms)\n", kBytes, ms);

  CUdeviceptr base;
  size_t size;
  CHECK(cuMemGetAddressRange(&base, &size, dbuf + 100));
  unsigned int mem_type = 0;
  CHECK(cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dbuf));
  printf("address range of dbuf+100: base %s, %zu bytes; memory type %s\n",
         base == dbuf ? "dbuf" : "other", size, mem_type == CU_MEMORYTYPE_DEVICE ? "device" : "?");

  /* IPC: the child opens dbuf, checks it and adds one to every byte. */
  CUipcMemHandle handle;
  CHECK(cuIpcGetMemHandle(&handle, dbuf));
  if (write(down[1], &handle, sizeof handle) != (ssize_t)sizeof handle) return 2;
  char done = 0;
  if (read(up[0], &done, 1) != 1 || done != 'y') {
    fprintf(stderr, "the child did not see the bytes\n");
    return 1;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(cuMemcpyDtoH(pinned_out, dbuf, kBytes));
  int bad = 0;
  for (int i = 0; i < kBytes; ++i) {
    if (pinned_out[i] != (unsigned char)(i * 7 + 1)) ++bad;
  }
  printf("parent: the child's writes arrived, %d wrong; child exit %d\n", bad,
         WIFEXITED(status) ? WEXITSTATUS(status) : -1);

  CHECK(cuEventDestroy(start));
  CHECK(cuEventDestroy(stop));
  CHECK(cuStreamDestroy(stream));
  CHECK(cuMemFree(dbuf));
  CHECK(cuMemFree(dcopy));
  CHECK(cuMemFreeHost(pinned_in));
  CHECK(cuMemFreeHost(pinned_out));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return bad == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
