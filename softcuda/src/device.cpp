// Initialization, devices and contexts: cuInit, device queries and attributes, primary contexts
// (reference counted; the last release destroys what the context owned, as on the driver) and
// the calling thread's context stack.
#include <sys/mman.h>
#include <sys/resource.h>

#include <strings.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "internal.h"

namespace softcuda {

State& state() {
  static State* s = new State;  // never destroyed: copy engine threads may outlive main()
  return *s;
}

namespace {
// The calling thread's context stack. A program may call the driver from the destructors that
// run at its exit, after this thread's thread_local objects are gone (OrbiTE frees pinned memory
// then), so the stack lives on the heap behind trivially destructible thread_locals, and a stack
// made that late is kept, reachable, for the rest of the process.
thread_local std::vector<Context*>* tls_stack = nullptr;
thread_local bool tls_stack_gone = false;
struct StackOwner {
  ~StackOwner() {
    delete tls_stack;
    tls_stack = nullptr;
    tls_stack_gone = true;
  }
};
thread_local StackOwner tls_stack_owner;
}  // namespace

std::vector<Context*>& ctx_stack() {
  if (tls_stack == nullptr) {
    tls_stack = new std::vector<Context*>();
    if (tls_stack_gone) {
      static std::mutex mu;
      static auto* late = new std::vector<std::vector<Context*>*>();
      std::lock_guard<std::mutex> g(mu);
      late->push_back(tls_stack);
    } else {
      (void)&tls_stack_owner;  // its destructor frees the stack at this thread's exit
    }
  }
  return *tls_stack;
}

Context* current_ctx() {
  auto& s = ctx_stack();
  return s.empty() ? nullptr : s.back();
}

CUresult enter(CallSite& site, bool needs_init) {
  if (CUresult injected = site.hit(); injected != CUDA_SUCCESS) return injected;
  if (needs_init) {
    State& st = state();
    std::lock_guard<std::mutex> g(st.mu);
    if (!st.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (st.init_result != CUDA_SUCCESS) return st.init_result;
  }
  return CUDA_SUCCESS;
}

CUresult check_ctx(CUcontext c, Context** out) {
  State& st = state();
  auto* ctx = reinterpret_cast<Context*>(c);
  if (ctx == nullptr || st.contexts.count(ctx) == 0 || !ctx->active) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  *out = ctx;
  return CUDA_SUCCESS;
}

CUresult need_ctx(Context** out) {
  Context* c = current_ctx();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return check_ctx(reinterpret_cast<CUcontext>(c), out);
}

Device* device_of(CUdevice d) {
  State& st = state();
  if (d < 0 || d >= static_cast<int>(st.devices.size())) return nullptr;
  return st.devices[static_cast<std::size_t>(d)].get();
}

namespace {

void initialize(State& st) {
  std::string error;
  if (!load_config(&st.config, &error)) {
    std::fprintf(stderr, "softcuda: %s\n", error.c_str());
    st.init_error = error;
    st.init_result = CUDA_ERROR_INVALID_VALUE;
    return;
  }
  // Every allocation keeps a memfd: lift the soft descriptor limit to the hard one.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  const std::vector<int> visible = visible_devices(st.config, std::getenv("CUDA_VISIBLE_DEVICES"));
  for (int physical : visible) {
    auto d = std::make_unique<Device>();
    d->ordinal = static_cast<int>(st.devices.size());
    d->config = st.config.devices[static_cast<std::size_t>(physical)];
    // Device pointers come from an address range the CPU can never touch.
    d->arena_size = std::max<std::uint64_t>(d->config.memory_bytes * 2, 16ull << 30);
    void* arena =
        mmap(nullptr, d->arena_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED) {
      st.init_error = "cannot reserve " + std::to_string(d->arena_size) +
                      " bytes of address space for device " + std::to_string(d->ordinal);
      st.init_result = CUDA_ERROR_OUT_OF_MEMORY;
      return;
    }
    // 2 MiB aligned, as large device allocations are.
    const auto raw = reinterpret_cast<std::uintptr_t>(arena);
    const std::uintptr_t aligned = (raw + (2u << 20) - 1) & ~std::uintptr_t((2u << 20) - 1);
    d->arena_base = aligned;
    d->arena_size -= aligned - raw;
    st.devices.push_back(std::move(d));
  }
  if (st.devices.empty()) {
    st.init_error = "no visible device (CUDA_VISIBLE_DEVICES)";
    st.init_result = CUDA_ERROR_NO_DEVICE;
    return;
  }
  // The VMM address space (cuMemAddressReserve).
  st.vmm_arena_size = 256ull << 30;
  void* vmm = mmap(nullptr, st.vmm_arena_size + (2u << 20), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (vmm != MAP_FAILED) {
    st.vmm_arena_base =
        (reinterpret_cast<std::uintptr_t>(vmm) + (2u << 20) - 1) & ~std::uintptr_t((2u << 20) - 1);
  }
  st.init_result = CUDA_SUCCESS;
}

Context* make_context(State& st, Device* d, unsigned flags, bool primary) {
  auto c = std::make_unique<Context>();
  c->id = st.next_id++;
  c->device = d;
  c->flags = flags;
  c->primary = primary;
  Context* raw = c.get();
  st.context_store.push_back(std::move(c));
  st.contexts.insert(raw);
  auto legacy = std::make_unique<Stream>();
  legacy->id = st.next_id++;
  legacy->ctx = raw;
  legacy->legacy = true;
  raw->legacy = legacy.get();
  st.streams.emplace(legacy.get(), std::move(legacy));
  return raw;
}

void remove_from_stacks(Context* c) {
  // Only the calling thread's stack is reachable; other threads see INVALID_CONTEXT on use.
  auto& s = ctx_stack();
  for (auto& entry : s) {
    if (entry == c) entry = nullptr;
  }
  while (!s.empty() && s.back() == nullptr) s.pop_back();
}

}  // namespace

}  // namespace softcuda

using namespace softcuda;

SC_API CUresult cuInit(unsigned int flags) {
  SC_ENTER_ANYTIME("cuInit");
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  bool first = false;
  {
    std::lock_guard<std::mutex> g(st.mu);
    if (!st.initialized) {
      initialize(st);
      st.initialized = true;
      first = st.init_result == CUDA_SUCCESS;
    }
  }
  if (first) {
    for (const std::string& f : st.config.faults) {
      const std::string r = run_control(f);
      if (r.rfind("ok", 0) != 0)
        std::fprintf(stderr, "softcuda: fault '%s': %s\n", f.c_str(), r.c_str());
    }
  }
  std::lock_guard<std::mutex> g(st.mu);
  return st.init_result;
}

SC_API CUresult cuDriverGetVersion(int* version) {
  SC_ENTER_ANYTIME("cuDriverGetVersion");
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Config c;
  std::string ignored;
  State& st = state();
  {
    std::lock_guard<std::mutex> g(st.mu);
    if (st.initialized && st.init_result == CUDA_SUCCESS) {
      *version = st.config.driver_version;
      return CUDA_SUCCESS;
    }
  }
  *version = load_config(&c, &ignored) ? c.driver_version : 13000;
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceGetCount(int* count) {
  SC_ENTER("cuDeviceGetCount");
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  *count = static_cast<int>(state().devices.size());
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  SC_ENTER("cuDeviceGet");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  if (device_of(ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  SC_ENTER("cuDeviceGetName");
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<std::size_t>(len), "%s", d->config.name.c_str());
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  SC_ENTER("cuDeviceGetUuid");
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::memcpy(uuid->bytes, d->config.uuid.data(), 16);
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

SC_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  SC_ENTER("cuDeviceTotalMem");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = d->config.memory_bytes;
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  SC_ENTER("cuDeviceGetPCIBusId");
  if (bus_id == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(bus_id, static_cast<std::size_t>(len), "%s", d->config.pci_bus_id.c_str());
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* bus_id) {
  SC_ENTER("cuDeviceGetByPCIBusId");
  if (dev == nullptr || bus_id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  unsigned dom = 0, bus = 0, d = 0, fn = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &dom, &bus, &d, &fn) != 4) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  for (const auto& device : state().devices) {
    const DeviceConfig& c = device->config;
    if (c.pci_domain == static_cast<int>(dom) && c.pci_bus == static_cast<int>(bus) &&
        c.pci_device == static_cast<int>(d) && c.pci_function == static_cast<int>(fn)) {
      *dev = device->ordinal;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

SC_API CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  SC_ENTER("cuDeviceCanAccessPeer");
  if (can == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  if (device_of(dev) == nullptr || device_of(peer) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *can = dev != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) {
  SC_ENTER("cuDeviceGetAttribute");
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (attr <= 0 || attr >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  const DeviceConfig& c = d->config;
  int v = 0;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 48 << 10; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 64 << 10; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: v = 512; break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = c.sm_count; break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = c.pci_bus; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = c.pci_device; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = c.pci_domain; break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 6144; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 60 << 20; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = state().config.copy_engines; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = c.cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = c.cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = c.vmm ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = c.vmm ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
      v = c.gpudirect && c.vmm ? 1 : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: v = c.gpudirect ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
      v = c.gpudirect ? CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: v = c.dma_buf ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG: v = CU_DEVICE_NUMA_CONFIG_NONE; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: v = -1; break;
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: v = c.numa_node; break;
    default: return CUDA_ERROR_NOT_SUPPORTED;  // a valid attribute softcuda does not model
  }
  *value = v;
  return CUDA_SUCCESS;
}

SC_API CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  SC_ENTER("cuDeviceComputeCapability");
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *major = d->config.cc_major;
  *minor = d->config.cc_minor;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Primary contexts

SC_API CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  SC_ENTER("cuDevicePrimaryCtxRetain");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  start_engines();
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (d->primary == nullptr) d->primary = make_context(st, d, d->primary_flags, true);
  d->primary->active = true;
  d->primary_refs++;
  *pctx = reinterpret_cast<CUcontext>(d->primary);
  return CUDA_SUCCESS;
}

SC_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SC_ENTER("cuDevicePrimaryCtxRelease");
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (d->primary_refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--d->primary_refs == 0) {
    // The last reference: the context's memory, streams and events go, as on the driver.
    destroy_context_resources(lock, d->primary);
    d->primary->active = false;
    d->primary->sticky = CUDA_SUCCESS;
  }
  return CUDA_SUCCESS;
}
SC_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

SC_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  SC_ENTER("cuDevicePrimaryCtxGetState");
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *flags = d->primary_flags;
  *active = d->primary_refs > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

SC_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  SC_ENTER("cuDevicePrimaryCtxSetFlags");
  std::lock_guard<std::mutex> g(state().mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if ((flags & ~0x1fu) != 0) return CUDA_ERROR_INVALID_VALUE;
  d->primary_flags = flags;
  if (d->primary != nullptr) d->primary->flags = flags;
  return CUDA_SUCCESS;
}
SC_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

SC_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  SC_ENTER("cuDevicePrimaryCtxReset");
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (d->primary != nullptr && d->primary_refs > 0) {
    destroy_context_resources(lock, d->primary);
    d->primary->sticky = CUDA_SUCCESS;
  }
  return CUDA_SUCCESS;
}
SC_API CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

// ---------------------------------------------------------------------------------------------
// Contexts and the current-context stack

SC_API CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  SC_ENTER("cuCtxCreate");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  start_engines();
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Device* d = device_of(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  Context* c = make_context(st, d, flags, false);
  ctx_stack().push_back(c);
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                               CUdevice dev) {
  if (params != nullptr &&
      (params->execAffinityParams != nullptr || params->cigParams != nullptr)) {
    return CUDA_ERROR_NOT_SUPPORTED;  // execution affinity and CIG are not emulated
  }
  return cuCtxCreate_v2(pctx, flags, dev);
}

SC_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
  SC_ENTER("cuCtxDestroy");
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  auto* c = reinterpret_cast<Context*>(ctx);
  if (c == nullptr || st.contexts.count(c) == 0 || !c->active) return CUDA_ERROR_INVALID_CONTEXT;
  if (c->primary)
    return CUDA_ERROR_INVALID_CONTEXT;  // primary contexts are released, not destroyed
  destroy_context_resources(lock, c);
  c->active = false;
  st.contexts.erase(c);
  remove_from_stacks(c);
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  SC_ENTER("cuCtxPushCurrent");
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  if (CUresult rc = check_ctx(ctx, &c); rc != CUDA_SUCCESS) return rc;
  ctx_stack().push_back(c);
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  SC_ENTER("cuCtxPopCurrent");
  auto& s = ctx_stack();
  if (s.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = reinterpret_cast<CUcontext>(s.back());
  s.pop_back();
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  SC_ENTER("cuCtxSetCurrent");
  auto& s = ctx_stack();
  if (ctx == nullptr) {
    if (!s.empty()) s.pop_back();
    return CUDA_SUCCESS;
  }
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  if (CUresult rc = check_ctx(ctx, &c); rc != CUDA_SUCCESS) return rc;
  if (s.empty())
    s.push_back(c);
  else
    s.back() = c;
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxGetCurrent(CUcontext* pctx) {
  SC_ENTER("cuCtxGetCurrent");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(current_ctx());
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxGetDevice(CUdevice* device) {
  SC_ENTER("cuCtxGetDevice");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  *device = c->device->ordinal;
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  if (ctx == nullptr) return cuCtxGetDevice(device);
  SC_ENTER("cuCtxGetDevice");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  if (CUresult rc = check_ctx(ctx, &c); rc != CUDA_SUCCESS) return rc;
  *device = c->device->ordinal;
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxSynchronize(void) {
  SC_ENTER("cuCtxSynchronize");
  std::unique_lock<std::mutex> lock(state().mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  return sync_context(lock, c);
}

SC_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (ctx == nullptr) return cuCtxSynchronize();
  SC_ENTER("cuCtxSynchronize");
  std::unique_lock<std::mutex> lock(state().mu);
  Context* c = nullptr;
  if (CUresult rc = check_ctx(ctx, &c); rc != CUDA_SUCCESS) return rc;
  return sync_context(lock, c);
}

SC_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  SC_ENTER("cuCtxGetApiVersion");
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  CUresult rc = ctx == nullptr ? need_ctx(&c) : check_ctx(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  *version = 3020;  // every context speaks the _v2 (64-bit) API
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxGetFlags(unsigned int* flags) {
  SC_ENTER("cuCtxGetFlags");
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  *flags = c->flags;
  return CUDA_SUCCESS;
}

SC_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long* id) {
  SC_ENTER("cuCtxGetId");
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  CUresult rc = ctx == nullptr ? need_ctx(&c) : check_ctx(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  *id = c->id;
  return CUDA_SUCCESS;
}
