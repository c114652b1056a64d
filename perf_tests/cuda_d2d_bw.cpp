// The ceiling cuda_ipc is read against: device-to-device copies inside one process, the same
// window of copies per iteration as putget_perf's bandwidth loop (W copies of SIZE queued on one
// stream, then one synchronization). The driver is the one the loader finds: NVIDIA's, or
// softcuda with LD_LIBRARY_PATH=build/softcuda (then the figures are softcuda's, a CPU copy).
//
//   cuda_d2d_bw [--sizes 1M,4M,16M,64M] [--window 16] [-n 20] [--device 0]
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "cuda_d2d_bw: %s\n", what.c_str());
  std::exit(1);
}

void ok(CUresult rc, const char* call) {
  if (rc == CUDA_SUCCESS) return;
  const char* name = nullptr;
  cuGetErrorName(rc, &name);
  die(std::string(call) + " failed: " + (name != nullptr ? name : std::to_string(rc)));
}

std::uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  std::uint64_t unit = 1;
  if (*end == 'K' || *end == 'k')
    unit = 1024, ++end;
  else if (*end == 'M' || *end == 'm')
    unit = 1024 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    unit = 1024ULL * 1024 * 1024, ++end;
  if (end == s.c_str() || *end != '\0' || v == 0) die("bad size '" + s + "'");
  return v * unit;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::uint64_t> sizes = {1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int window = 16;
  int iters = 20;
  int ordinal = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) die("flag " + a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--sizes") {
      sizes.clear();
      for (std::size_t at = 0; at <= v.size();) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        sizes.push_back(parse_size(v.substr(at, comma - at)));
        at = comma + 1;
      }
    } else if (a == "--window") {
      window = std::atoi(v.c_str());
    } else if (a == "-n") {
      iters = std::atoi(v.c_str());
    } else if (a == "--device") {
      ordinal = std::atoi(v.c_str());
    } else {
      die("unknown flag " + a);
    }
  }
  if (window < 1 || iters < 1) die("--window and -n must be at least 1");
  ok(cuInit(0), "cuInit");
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  ok(cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  ok(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  ok(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  char name[128] = {};
  ok(cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  const std::uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  CUdeviceptr src = 0, dst = 0;
  ok(cuMemAlloc(&src, largest), "cuMemAlloc");
  ok(cuMemAlloc(&dst, largest), "cuMemAlloc");
  ok(cuMemsetD8(src, 0x5a, largest), "cuMemsetD8");
  CUstream stream = nullptr;
  ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  std::printf("# cuda_d2d_bw: %s, window %d, %d iterations (median)\n", name, window, iters);
  std::printf("%12s %12s\n", "size", "d2d_GBps");
  for (std::uint64_t size : sizes) {
    std::vector<double> us;
    for (int it = 0; it < iters + 2; ++it) {  // two warm-up iterations
      const auto start = std::chrono::steady_clock::now();
      for (int w = 0; w < window; ++w) {
        ok(cuMemcpyDtoDAsync(dst, src, size, stream), "cuMemcpyDtoDAsync");
      }
      ok(cuStreamSynchronize(stream), "cuStreamSynchronize");
      const auto end = std::chrono::steady_clock::now();
      if (it >= 2) us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::sort(us.begin(), us.end());
    const double median = us[us.size() / 2];
    std::printf("%12llu %12.2f\n", static_cast<unsigned long long>(size),
                static_cast<double>(size) * window / (median * 1e3));
  }
  cuStreamDestroy(stream);
  cuMemFree(src);
  cuMemFree(dst);
  cuDevicePrimaryCtxRelease(dev);
  return 0;
}
