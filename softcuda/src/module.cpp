// Test kernels. softcuda runs no GPU code: a module loads when it is PTX text, and only the
// whitelisted entries below can be launched, each emulated on a copy engine thread in stream
// order. The same PTX (tests/gpu/kernels.ptx) runs on a real GPU in the GPU gate.
//
//   orbite_fill_u32(u32* dst, u32 value, u64 count)                 dst[i] = value
//   orbite_delay_fill_u32(u32* dst, u32 value, u64 count, u64 ns)   waits ns, then fills
//
// A launch whose range leaves its allocation fails at execution with ILLEGAL_ADDRESS, which is
// sticky for the context, as a faulting kernel is on the driver.
#include <cstring>
#include <regex>
#include <thread>

#include "internal.h"

using namespace softcuda;

namespace {

const std::set<std::string>& whitelist() {
  static const std::set<std::string> names = {"orbite_fill_u32", "orbite_delay_fill_u32"};
  return names;
}

CUresult load(CUmodule* mod, const void* image) {
  if (mod == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const char* text = static_cast<const char*>(image);
  // PTX is text that names its target; cubins and fatbins are binary.
  if (std::strstr(text, ".target") == nullptr || std::strstr(text, ".version") == nullptr) {
    return CUDA_ERROR_NOT_SUPPORTED;  // no GPU code runs on softcuda
  }
  auto m = std::make_unique<Module>();
  static const std::regex entry(R"(\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*\()");
  const std::string s(text);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), entry); it != std::sregex_iterator();
       ++it) {
    m->entries.insert((*it)[1].str());
  }
  if (m->entries.empty()) return CUDA_ERROR_INVALID_PTX;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  *mod = reinterpret_cast<CUmodule>(m.get());
  st.modules.emplace(m.get(), std::move(m));
  return CUDA_SUCCESS;
}

template <typename T>
T param(void** params, int i) {
  T v{};
  std::memcpy(&v, params[i], sizeof v);
  return v;
}

}  // namespace

SC_API CUresult cuModuleLoadData(CUmodule* mod, const void* image) {
  SC_ENTER("cuModuleLoadData");
  return load(mod, image);
}

SC_API CUresult cuModuleLoadDataEx(CUmodule* mod, const void* image, unsigned int n, CUjit_option*,
                                   void**) {
  SC_ENTER("cuModuleLoadDataEx");
  (void)n;  // JIT options change nothing here
  return load(mod, image);
}

SC_API CUresult cuModuleUnload(CUmodule mod) {
  SC_ENTER("cuModuleUnload");
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  auto* m = reinterpret_cast<Module*>(mod);
  if (st.modules.count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto it = st.functions.begin(); it != st.functions.end();) {
    it = it->second->module == m ? st.functions.erase(it) : std::next(it);
  }
  st.modules.erase(m);
  return CUDA_SUCCESS;
}

SC_API CUresult cuModuleGetFunction(CUfunction* fn, CUmodule mod, const char* name) {
  SC_ENTER("cuModuleGetFunction");
  if (fn == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  auto* m = reinterpret_cast<Module*>(mod);
  if (st.modules.count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (m->entries.count(name) == 0) return CUDA_ERROR_NOT_FOUND;
  if (whitelist().count(name) == 0) return CUDA_ERROR_NOT_SUPPORTED;  // not an emulated kernel
  auto f = std::make_unique<Function>();
  f->module = m;
  f->name = name;
  *fn = reinterpret_cast<CUfunction>(f.get());
  st.functions.emplace(f.get(), std::move(f));
  return CUDA_SUCCESS;
}

namespace {

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, CUstream h, void** params, void** extra, bool ptds) {
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
      static_cast<std::uint64_t>(bx) * by * bz > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (extra != nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // parameter buffers are not emulated
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  auto* fn = reinterpret_cast<Function*>(f);
  if (st.functions.count(fn) == 0) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  const auto dst = param<CUdeviceptr>(params, 0);
  const auto value = param<std::uint32_t>(params, 1);
  const auto count = param<std::uint64_t>(params, 2);
  const std::uint64_t delay_ns =
      fn->name == "orbite_delay_fill_u32" ? param<std::uint64_t>(params, 3) : 0;
  auto op = std::make_shared<Op>();
  op->kind = Op::Kernel;
  Span span;
  const bool valid = count <= (1ull << 40) && resolve_device(dst, count * 4, &span) == CUDA_SUCCESS;
  if (valid) op->holds.push_back(span.alloc);
  std::byte* out = span.cpu;
  op->work = [valid, out, value, count, delay_ns] {
    if (delay_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(delay_ns));
    if (!valid) return CUDA_ERROR_ILLEGAL_ADDRESS;
    for (std::uint64_t i = 0; i < count; ++i) std::memcpy(out + 4 * i, &value, 4);
    return CUDA_SUCCESS;
  };
  enqueue(s, op);
  return CUDA_SUCCESS;
}

}  // namespace

SC_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz,
                               unsigned int shared, CUstream h, void** params, void** extra) {
  SC_ENTER("cuLaunchKernel");
  (void)shared;
  return launch(f, gx, gy, gz, bx, by, bz, h, params, extra, false);
}

SC_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by, unsigned int bz,
                                    unsigned int shared, CUstream h, void** params, void** extra) {
  SC_ENTER("cuLaunchKernel_ptsz");
  (void)shared;
  return launch(f, gx, gy, gz, bx, by, bz, h, params, extra, true);
}
