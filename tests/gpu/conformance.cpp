// The driver behaviour OrbiTE relies on, observed and printed as "key value" lines, so that the
// same binary compares softcuda with NVIDIA's driver: pointer attributes, allocation alignment
// and ranges, event states, stream capture, IPC between two processes and dma-buf rules.
//
//   conformance                 prints what this driver does
//   conformance --golden FILE   also compares with FILE (lines "key value"; '#' comments);
//                               exits 1 naming each difference
//
// tests/gpu/conformance.golden holds the values the CUDA documentation states until the GPU gate
// (tests/gpu/run-gate.sh) records them on a real GPU. Keys under "info." describe the machine
// and are never compared. Written against the driver API only (cuda.h, -lcuda).
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::map<std::string, std::string> observed;
std::vector<std::string> order;

void put(const std::string& key, const std::string& value) {
  if (observed.count(key) == 0) order.push_back(key);
  observed[key] = value;
}

std::string rc_name(CUresult rc) {
  const char* name = nullptr;
  if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUresult(" + std::to_string(static_cast<int>(rc)) + ")";
  }
  return name;
}

void put_rc(const std::string& key, CUresult rc) {
  put(key, rc_name(rc));
}

[[noreturn]] void die(const std::string& what, CUresult rc) {
  std::fprintf(stderr, "conformance: %s: %s\n", what.c_str(), rc_name(rc).c_str());
  std::exit(2);
}

#define MUST(call)                                                   \
  do {                                                               \
    if (CUresult rc_ = (call); rc_ != CUDA_SUCCESS) die(#call, rc_); \
  } while (0)

// A boolean attribute, read into a word filled with a marker: its value, and how many bytes the
// driver wrote (the documentation gives the boolean attributes the type bool: one byte).
// A "boolean" attribute: its value and how many bytes of an 8-byte slot the driver wrote (the
// documentation says bool; NVIDIA's driver writes more).
void put_bool(const std::string& key, CUpointer_attribute attr, CUdeviceptr p) {
  unsigned char slot[8];
  std::memset(slot, 0xAA, sizeof slot);
  put_rc(key + ".result", cuPointerGetAttribute(slot, attr, p));
  put(key, std::to_string(slot[0]));
  int written = 0;
  for (unsigned char b : slot) written += b != 0xAA ? 1 : 0;
  put(key + ".bytes_written", std::to_string(written));
}

std::string memory_type_name(unsigned t) {
  switch (t) {
    case 0: return "none";
    case CU_MEMORYTYPE_HOST: return "HOST";
    case CU_MEMORYTYPE_DEVICE: return "DEVICE";
    case CU_MEMORYTYPE_ARRAY: return "ARRAY";
    case CU_MEMORYTYPE_UNIFIED: return "UNIFIED";
    default: return std::to_string(t);
  }
}

void pointer_attributes() {
  CUdeviceptr dev = 0;
  MUST(cuMemAlloc(&dev, 1 << 20));
  unsigned type = 0;
  put_rc("pointer.device.memory_type.result",
         cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dev));
  put("pointer.device.memory_type", memory_type_name(type));
  put_bool("pointer.device.is_managed", CU_POINTER_ATTRIBUTE_IS_MANAGED, dev);
  // The programming guide: allocation routines return addresses aligned to at least 256 bytes.
  put("alloc.aligned_256", dev % 256 == 0 ? "1" : "0");
  CUdeviceptr base = 0;
  size_t size = 0;
  put_rc("address_range.interior.result", cuMemGetAddressRange(&base, &size, dev + 4096));
  put("address_range.interior.base_is_allocation", base == dev ? "1" : "0");
  put("address_range.interior.covers_allocation", size >= (1 << 20) ? "1" : "0");

  void* pinned = nullptr;
  MUST(cuMemHostAlloc(&pinned, 1 << 16, 0));
  type = 0;
  put_rc("pointer.pinned.memory_type.result",
         cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               reinterpret_cast<CUdeviceptr>(pinned)));
  put("pointer.pinned.memory_type", memory_type_name(type));

  CUdeviceptr um = 0;
  MUST(cuMemAllocManaged(&um, 1 << 16, CU_MEM_ATTACH_GLOBAL));
  put_bool("pointer.managed.is_managed", CU_POINTER_ATTRIBUTE_IS_MANAGED, um);

  // Memory CUDA never saw: the single query fails, the batched one answers with defaults.
  std::vector<char> pageable(4096);
  const auto plain = reinterpret_cast<CUdeviceptr>(pageable.data());
  put_rc("pointer.pageable.memory_type.result",
         cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, plain));
  type = 99;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
  void* data[] = {&type};
  put_rc("pointer.pageable.attributes.result", cuPointerGetAttributes(1, attrs, data, plain));
  put("pointer.pageable.attributes.memory_type", memory_type_name(type));

  MUST(cuMemFree(um));
  MUST(cuMemFreeHost(pinned));
  MUST(cuMemFree(dev));
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void events(const std::string& ptx) {
  CUevent ev = nullptr;
  MUST(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  put_rc("event.unrecorded.query", cuEventQuery(ev));
  float ms = 0;
  put_rc("event.disable_timing.elapsed", cuEventElapsedTime(&ms, ev, ev));

  CUstream s = nullptr;
  MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  MUST(cuModuleLoadData(&mod, ptx.c_str()));
  MUST(cuModuleGetFunction(&fn, mod, "orbite_delay_fill_u32"));
  CUdeviceptr dst = 0;
  MUST(cuMemAlloc(&dst, 4096));
  std::uint32_t value = 7;
  std::uint64_t count = 1024;
  std::uint64_t delay_ns = 300'000'000;  // 0.3 s: the query below runs long before it ends
  void* params[] = {&dst, &value, &count, &delay_ns};
  MUST(cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, s, params, nullptr));
  MUST(cuEventRecord(ev, s));
  put_rc("event.pending.query", cuEventQuery(ev));
  put_rc("event.pending.synchronize", cuEventSynchronize(ev));
  put_rc("event.completed.query", cuEventQuery(ev));
  std::uint32_t back[4] = {};
  MUST(cuMemcpyDtoH(back, dst, sizeof back));
  put("kernel.delay_fill.result", back[0] == 7 && back[3] == 7 ? "filled" : "wrong");
  MUST(cuMemFree(dst));
  MUST(cuModuleUnload(mod));
  MUST(cuStreamDestroy(s));
  MUST(cuEventDestroy(ev));
}

void capture() {
  CUstream s = nullptr;
  MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  put_rc("capture.begin", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  MUST(cuStreamIsCapturing(s, &status));
  put("capture.status", status == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "ACTIVE" : "other");
  put_rc("capture.synchronize", cuStreamSynchronize(s));
  MUST(cuStreamIsCapturing(s, &status));
  put("capture.status_after_synchronize",
      status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "INVALIDATED" : "other");
  CUgraph graph = nullptr;
  put_rc("capture.end", cuStreamEndCapture(s, &graph));
  put("capture.end.graph", graph == nullptr ? "null" : "graph");
  if (graph != nullptr) cuGraphDestroy(graph);
  MUST(cuStreamDestroy(s));
}

// The exporter writes a pattern, hands the handle to a child through a pipe, and the child opens
// it in its own context and reads the bytes back.
void ipc(const char* self) {
  CUdeviceptr dev = 0;
  MUST(cuMemAlloc(&dev, 1 << 20));
  std::vector<unsigned char> pattern(1 << 20);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 7 + 3);
  MUST(cuMemcpyHtoD(dev, pattern.data(), pattern.size()));
  CUipcMemHandle handle{};
  put_rc("ipc.get_handle", cuIpcGetMemHandle(&handle, dev));
  int fds[2];
  if (pipe(fds) != 0) die("pipe", CUDA_ERROR_UNKNOWN);
  const pid_t child = fork();
  if (child == 0) {
    close(fds[1]);
    dup2(fds[0], STDIN_FILENO);
    execl("/proc/self/exe", self, "--ipc-child", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[0]);
  const bool sent = write(fds[1], &handle, sizeof handle) == static_cast<ssize_t>(sizeof handle);
  close(fds[1]);
  int status = 0;
  waitpid(child, &status, 0);
  put("ipc.child",
      sent && WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : "failed");
  MUST(cuMemFree(dev));
}

int ipc_child() {
  CUipcMemHandle handle{};
  if (read(STDIN_FILENO, &handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) return 3;
  CUdevice d = 0;
  CUcontext ctx = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&d, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    return 4;
  }
  CUdeviceptr p = 0;
  if (cuIpcOpenMemHandle(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS) return 5;
  std::vector<unsigned char> got(1 << 20);
  if (cuMemcpyDtoH(got.data(), p, got.size()) != CUDA_SUCCESS) return 6;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != static_cast<unsigned char>(i * 7 + 3)) return 7;
  }
  if (cuIpcCloseMemHandle(p) != CUDA_SUCCESS) return 8;
  cuDevicePrimaryCtxRelease(d);
  return 0;
}

void dma_buf(CUdevice d) {
  int supported = 0;
  MUST(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d));
  put("info.dma_buf_supported", std::to_string(supported));
  if (supported == 0) return;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  CUdeviceptr dev = 0;
  MUST(cuMemAlloc(&dev, 4 << 20));
  int fd = -1;
  const CUdeviceptr aligned = (dev + page - 1) / page * page;
  put_rc("dmabuf.aligned", cuMemGetHandleForAddressRange(&fd, aligned, 2 << 20,
                                                         CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  if (fd >= 0) close(fd);
  fd = -1;
  // The documentation: the address and size must be aligned to the host page size.
  put_rc("dmabuf.unaligned", cuMemGetHandleForAddressRange(&fd, aligned + 1, page,
                                                           CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  if (fd >= 0) close(fd);
  MUST(cuMemFree(dev));
}

int compare(const char* golden_path) {
  std::ifstream in(golden_path);
  if (!in) {
    std::fprintf(stderr, "conformance: cannot read %s\n", golden_path);
    return 2;
  }
  int differences = 0;
  std::string line;
  std::map<std::string, bool> seen;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string want = space == std::string::npos ? "" : line.substr(space + 1);
    if (key.rfind("info.", 0) == 0) continue;
    seen[key] = true;
    auto it = observed.find(key);
    if (it == observed.end()) {
      // A check that does not apply to this device (dma-buf unsupported) is not a difference.
      if (key.rfind("dmabuf.", 0) == 0 && observed["info.dma_buf_supported"] == "0") continue;
      std::printf("DIFF %s: golden %s, not observed\n", key.c_str(), want.c_str());
      ++differences;
    } else if (it->second != want) {
      std::printf("DIFF %s: golden %s, observed %s\n", key.c_str(), want.c_str(),
                  it->second.c_str());
      ++differences;
    }
  }
  for (const auto& key : order) {
    if (key.rfind("info.", 0) != 0 && !seen[key]) {
      std::printf("DIFF %s: observed %s, not in the golden\n", key.c_str(), observed[key].c_str());
      ++differences;
    }
  }
  std::printf("# %d difference(s) from %s\n", differences, golden_path);
  return differences == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--ipc-child") == 0) return ipc_child();
  const char* golden = nullptr;
  const char* ptx_path = ORBITE_KERNELS_PTX;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--golden") == 0 && i + 1 < argc) {
      golden = argv[++i];
    } else if (std::strcmp(argv[i], "--ptx") == 0 && i + 1 < argc) {
      ptx_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: conformance [--golden FILE] [--ptx kernels.ptx]\n");
      return 2;
    }
  }
  MUST(cuInit(0));
  int version = 0;
  MUST(cuDriverGetVersion(&version));
  CUdevice d = 0;
  MUST(cuDeviceGet(&d, 0));
  char name[256] = {};
  MUST(cuDeviceGetName(name, sizeof name, d));
  put("info.driver_version", std::to_string(version));
  put("info.device", name);
  int unified = 0;
  MUST(cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, d));
  put("device.unified_addressing", std::to_string(unified));
  CUcontext ctx = nullptr, again = nullptr;
  MUST(cuDevicePrimaryCtxRetain(&ctx, d));
  MUST(cuDevicePrimaryCtxRetain(&again, d));
  put("context.primary_retained_twice_is_one", ctx == again ? "1" : "0");
  MUST(cuDevicePrimaryCtxRelease(d));
  MUST(cuCtxSetCurrent(ctx));

  pointer_attributes();
  events(read_file(ptx_path));
  capture();
  ipc(argv[0]);
  dma_buf(d);

  for (const auto& key : order) std::printf("%s %s\n", key.c_str(), observed[key].c_str());
  std::fflush(stdout);
  const int rc = golden != nullptr ? compare(golden) : 0;
  MUST(cuCtxSetCurrent(nullptr));
  MUST(cuDevicePrimaryCtxRelease(d));
  return rc;
}
