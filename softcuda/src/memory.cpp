// Memory: device allocations the CPU cannot touch, pinned and registered host memory, managed
// memory, the registry behind pointer attributes, and where the copy engine reaches the bytes.
//
// A device allocation is a range of its device's PROT_NONE arena (the address the application
// sees: any CPU access faults, and the kernel refuses it to write/sendmsg/process_vm_* with
// EFAULT) backed by a memfd that only the copy engine maps, at a second address.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "internal.h"

namespace softcuda {

namespace {
constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kLargePage = 2u << 20;

bool is_device_kind(MemKind k) {
  return k == MemKind::Device || k == MemKind::IpcImport || k == MemKind::Vmm ||
         k == MemKind::Managed;
}
}  // namespace

Allocation::~Allocation() {
  if (own_shadow && shadow != nullptr) munmap(shadow, mapped_size);
  if (host_mapping) munmap(reinterpret_cast<void*>(base), mapped_size);
  if (fd >= 0) close(fd);
}

VmmHandle::~VmmHandle() {
  if (fd >= 0) close(fd);
}

std::uint64_t page_round(std::uint64_t n) {
  return (n + kPage - 1) & ~(kPage - 1);
}

std::uintptr_t arena_take(Device& d, std::uint64_t len, std::uint64_t align) {
  // Fresh addresses first, so that a stale pointer to freed memory keeps faulting for a while.
  std::uint64_t off = (d.arena_next + align - 1) & ~(align - 1);
  if (off + len <= d.arena_size) {
    d.arena_next = off + len;
    return d.arena_base + off;
  }
  for (auto it = d.freed.begin(); it != d.freed.end(); ++it) {
    const std::uint64_t start = (it->first + align - 1) & ~(align - 1);
    if (start + len > it->first + it->second) continue;
    const std::uint64_t before = start - it->first;
    const std::uint64_t after = it->first + it->second - (start + len);
    const std::uint64_t base = it->first;
    d.freed.erase(it);
    if (before > 0) d.freed.emplace(base, before);
    if (after > 0) d.freed.emplace(start + len, after);
    return d.arena_base + start;
  }
  return 0;
}

void arena_give(Device& d, std::uintptr_t base, std::uint64_t len) {
  d.freed.emplace(base - d.arena_base, len);
}

void reserve_none(std::uintptr_t base, std::uint64_t len) {
  mmap(reinterpret_cast<void*>(base), len, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

bool in_device_arena(std::uintptr_t p) {
  State& st = state();
  for (const auto& d : st.devices) {
    if (p >= d->arena_base && p < d->arena_base + d->arena_size) return true;
  }
  return st.vmm_arena_base != 0 && p >= st.vmm_arena_base &&
         p < st.vmm_arena_base + st.vmm_arena_size;
}

CUresult make_backing(std::uint64_t buffer_id, std::uint64_t len, int* fd, std::byte** shadow) {
  const std::string name = "softcuda:" + std::to_string(getpid()) + ":" + std::to_string(buffer_id);
  const int f = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (f < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(f, static_cast<off_t>(len)) != 0) {
    close(f);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  if (m == MAP_FAILED) {
    close(f);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *fd = f;
  *shadow = static_cast<std::byte*>(m);
  return CUDA_SUCCESS;
}

CUresult oom_check(std::uint64_t bytes) {
  ExecFaults& f = state().faults;
  if (!f.oom) return CUDA_SUCCESS;
  if (bytes > f.oom_budget) return CUDA_ERROR_OUT_OF_MEMORY;
  f.oom_budget -= bytes;
  return CUDA_SUCCESS;
}

std::shared_ptr<Allocation> find_allocation(std::uintptr_t p) {
  auto& m = state().allocations;
  auto it = m.upper_bound(p);
  if (it == m.begin()) return nullptr;
  --it;
  const Allocation& a = *it->second;
  const std::uint64_t extent = std::max<std::uint64_t>(a.size, 1);
  if (p >= a.base && p - a.base < extent) return it->second;
  return nullptr;
}

namespace {

bool overlaps(std::uintptr_t p, std::uint64_t len) {
  auto& m = state().allocations;
  auto it = m.lower_bound(p + len);
  if (it == m.begin()) return false;
  --it;
  return it->second->base + std::max<std::uint64_t>(it->second->size, 1) > p;
}

}  // namespace

CUresult resolve_device(CUdeviceptr p, std::uint64_t len, Span* out) {
  auto a = find_allocation(p);
  if (!a || !is_device_kind(a->kind) || !a->accessible) return CUDA_ERROR_INVALID_VALUE;
  if (len > a->size - (p - a->base)) return CUDA_ERROR_INVALID_VALUE;
  out->cpu = a->shadow + (p - a->base);
  out->device = a->kind != MemKind::Managed;
  out->pinned = a->kind == MemKind::Managed;
  out->alloc = std::move(a);
  return CUDA_SUCCESS;
}

CUresult resolve_host(const void* p, std::uint64_t len, Span* out) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = find_allocation(addr);
  if (a) {
    if (is_device_kind(a->kind) && a->kind != MemKind::Managed) return CUDA_ERROR_INVALID_VALUE;
    if (len > a->size - (addr - a->base)) {
      // Pinned memory whose range runs past its registration: treat the whole as pageable.
      out->cpu = static_cast<std::byte*>(const_cast<void*>(p));
      return CUDA_SUCCESS;
    }
    out->cpu = a->shadow + (addr - a->base);
    out->pinned = true;
    out->alloc = std::move(a);
    return CUDA_SUCCESS;
  }
  if (in_device_arena(addr)) return CUDA_ERROR_INVALID_VALUE;  // freed device memory
  out->cpu = static_cast<std::byte*>(const_cast<void*>(p));
  return CUDA_SUCCESS;
}

CUresult resolve_any(std::uintptr_t p, std::uint64_t len, Span* out) {
  auto a = find_allocation(p);
  if (a && is_device_kind(a->kind) && a->kind != MemKind::Managed) {
    return resolve_device(p, len, out);
  }
  return resolve_host(reinterpret_cast<const void*>(p), len, out);
}

}  // namespace softcuda

using namespace softcuda;

namespace {

// Frees an allocation of the given kinds whose base is p (with mu held).
CUresult free_base(std::uintptr_t p, MemKind kind, CUresult not_found) {
  State& st = state();
  auto it = st.allocations.find(p);
  if (it == st.allocations.end() || it->second->kind != kind) return not_found;
  std::shared_ptr<Allocation> a = it->second;
  st.allocations.erase(it);
  if (kind == MemKind::Device || kind == MemKind::Managed) {
    Device* d = device_of(a->device);
    if (d != nullptr) {
      d->used_bytes -= a->size;
      if (kind == MemKind::Device) arena_give(*d, a->base, a->mapped_size);
    }
    st.live_bytes -= a->size;
  }
  return CUDA_SUCCESS;  // the mapping goes when the last op holding it finished
}

}  // namespace

SC_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  SC_ENTER("cuMemAlloc");
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  Device& d = *c->device;
  if (bytes > d.config.memory_bytes - d.used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult rc = oom_check(bytes); rc != CUDA_SUCCESS) return rc;
  auto a = std::make_shared<Allocation>();
  a->kind = MemKind::Device;
  a->size = bytes;
  a->mapped_size = page_round(bytes);
  a->ctx = c;
  a->device = d.ordinal;
  a->buffer_id = st.next_id++;
  a->base = arena_take(d, a->mapped_size, bytes >= kLargePage ? kLargePage : kPage);
  if (a->base == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult rc = make_backing(a->buffer_id, a->mapped_size, &a->fd, &a->shadow);
      rc != CUDA_SUCCESS) {
    arena_give(d, a->base, a->mapped_size);
    return rc;
  }
  a->own_shadow = true;
  d.used_bytes += bytes;
  st.live_bytes += bytes;
  *dptr = a->base;
  st.allocations.emplace(a->base, std::move(a));
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  SC_ENTER("cuMemFree");
  std::lock_guard<std::mutex> g(state().mu);
  if (dptr == 0) return CUDA_ERROR_INVALID_VALUE;
  auto a = find_allocation(dptr);
  if (a && a->kind == MemKind::Managed && a->base == dptr) {
    return free_base(dptr, MemKind::Managed, CUDA_ERROR_INVALID_VALUE);
  }
  return free_base(dptr, MemKind::Device, CUDA_ERROR_INVALID_VALUE);
}

SC_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  SC_ENTER("cuMemGetInfo");
  if (free_bytes == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  *total = c->device->config.memory_bytes;
  *free_bytes = c->device->config.memory_bytes - c->device->used_bytes;
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  SC_ENTER("cuMemGetAddressRange");
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(dptr);
  if (!a || !is_device_kind(a->kind)) return CUDA_ERROR_NOT_FOUND;
  if (pbase != nullptr) *pbase = a->base;
  if (psize != nullptr) *psize = a->size;
  return CUDA_SUCCESS;
}

namespace {

// Host pages the CPU reaches (pinned or managed memory), as an allocation of context c: its
// address is its own shadow. Null when the pages cannot be mapped. With state().mu held.
std::shared_ptr<Allocation> host_pages(MemKind kind, size_t bytes, unsigned flags, Context* c) {
  void* m =
      mmap(nullptr, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto a = std::make_shared<Allocation>();
  a->kind = kind;
  a->base = reinterpret_cast<std::uintptr_t>(m);
  a->size = bytes;
  a->mapped_size = page_round(bytes);
  a->ctx = c;
  a->device = c->device->ordinal;
  a->buffer_id = state().next_id++;
  a->flags = flags;
  a->shadow = static_cast<std::byte*>(m);
  a->host_mapping = true;
  return a;
}

}  // namespace

SC_API CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  SC_ENTER("cuMemAllocManaged");
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  Device& d = *c->device;
  if (bytes > d.config.memory_bytes - d.used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult rc = oom_check(bytes); rc != CUDA_SUCCESS) return rc;
  // Managed memory is reachable by the CPU too: ordinary pages.
  auto a = host_pages(MemKind::Managed, bytes, flags, c);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  d.used_bytes += bytes;
  st.live_bytes += bytes;
  *dptr = a->base;
  st.allocations.emplace(a->base, std::move(a));
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Pinned and registered host memory

SC_API CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
  SC_ENTER("cuMemHostAlloc");
  if (pp == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                 CU_MEMHOSTALLOC_WRITECOMBINED)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = oom_check(bytes); rc != CUDA_SUCCESS) return rc;
  auto a = host_pages(MemKind::HostAlloc, bytes, flags, c);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  *pp = reinterpret_cast<void*>(a->base);
  st.allocations.emplace(a->base, std::move(a));
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemAllocHost_v2(void** pp, size_t bytes) {
  return cuMemHostAlloc(pp, bytes, 0);
}

SC_API CUresult cuMemFreeHost(void* p) {
  SC_ENTER("cuMemFreeHost");
  std::lock_guard<std::mutex> g(state().mu);
  return free_base(reinterpret_cast<std::uintptr_t>(p), MemKind::HostAlloc,
                   CUDA_ERROR_INVALID_VALUE);
}

SC_API CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int flags) {
  SC_ENTER("cuMemHostRegister");
  if (p == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                 CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((flags & CU_MEMHOSTREGISTER_IOMEMORY) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  if (in_device_arena(addr)) return CUDA_ERROR_INVALID_VALUE;
  if (overlaps(addr, bytes)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  auto a = std::make_shared<Allocation>();
  a->kind = MemKind::HostRegistered;
  a->base = addr;
  a->size = bytes;
  a->mapped_size = bytes;
  a->ctx = c;
  a->device = c->device->ordinal;
  a->buffer_id = st.next_id++;
  a->flags = flags;
  a->shadow = static_cast<std::byte*>(p);
  st.allocations.emplace(a->base, std::move(a));
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemHostRegister(void* p, size_t bytes, unsigned int flags) {
  return cuMemHostRegister_v2(p, bytes, flags);
}

SC_API CUresult cuMemHostUnregister(void* p) {
  SC_ENTER("cuMemHostUnregister");
  std::lock_guard<std::mutex> g(state().mu);
  return free_base(reinterpret_cast<std::uintptr_t>(p), MemKind::HostRegistered,
                   CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

SC_API CUresult cuMemHostGetFlags(unsigned int* flags, void* p) {
  SC_ENTER("cuMemHostGetFlags");
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(reinterpret_cast<std::uintptr_t>(p));
  if (!a || a->kind != MemKind::HostAlloc) return CUDA_ERROR_INVALID_VALUE;
  *flags = a->flags;
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p, unsigned int flags) {
  SC_ENTER("cuMemHostGetDevicePointer");
  if (dptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(reinterpret_cast<std::uintptr_t>(p));
  if (!a || (a->kind != MemKind::HostAlloc && a->kind != MemKind::HostRegistered)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *dptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Pointer attributes

namespace {

template <typename T>
void put(void* data, T v) {
  std::memcpy(data, &v, sizeof v);
}

// Writes attribute `attr` of `a` (null: a pointer the driver does not know) for `p`.
CUresult attribute(void* data, CUpointer_attribute attr, const Allocation* a, std::uintptr_t p,
                   bool defaults) {
  if (a == nullptr && !defaults) return CUDA_ERROR_INVALID_VALUE;
  const bool device = a != nullptr && is_device_kind(a->kind);
  const bool host = a != nullptr && !device;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      put(data,
          reinterpret_cast<CUcontext>(a != nullptr && a->kind != MemKind::Vmm ? a->ctx : nullptr));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      put(data, static_cast<unsigned>(a == nullptr ? 0
                                      : device     ? CU_MEMORYTYPE_DEVICE
                                                   : CU_MEMORYTYPE_HOST));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      put(data, static_cast<CUdeviceptr>(a != nullptr ? p : 0));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (a != nullptr && device && a->kind != MemKind::Managed) return CUDA_ERROR_INVALID_VALUE;
      put(data, reinterpret_cast<void*>(a != nullptr ? p : 0));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      put(data, static_cast<bool>(a != nullptr && a->sync_memops));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      put(data, static_cast<unsigned long long>(a != nullptr ? a->buffer_id : 0));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      // As NVIDIA's driver does (the GPU gate's conformance run): 4 bytes, not the documented
      // bool, so a caller with a 1-byte slot sees its neighbour overwritten here too.
      put(data, static_cast<unsigned>(a != nullptr && a->kind == MemKind::Managed));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      put(data, static_cast<int>(a != nullptr ? a->device : -2));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: {
      bool capable = false;
      if (a != nullptr && a->kind == MemKind::Device) {
        Device* d = device_of(a->device);
        capable = d != nullptr && d->config.ipc;
      }
      put(data, capable);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      put(data, static_cast<CUdeviceptr>(a != nullptr ? a->base : 0));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      put(data, static_cast<size_t>(a != nullptr ? a->size : 0));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: put(data, a != nullptr); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: {
      unsigned long long types = 0;
      if (a != nullptr && a->kind == MemKind::Vmm) {
        auto it = state().vmm_handles.find(a->vmm_handle);
        if (it != state().vmm_handles.end()) types = it->second->prop.requestedHandleTypes;
      }
      put(data, types);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: {
      bool capable = false;
      if (a != nullptr && device && a->kind != MemKind::Managed) {
        Device* d = device_of(a->device);
        capable = d != nullptr && d->config.gpudirect;
        if (a->kind == MemKind::Vmm) {
          auto it = state().vmm_handles.find(a->vmm_handle);
          capable = capable && it != state().vmm_handles.end() &&
                    it->second->prop.allocFlags.gpuDirectRDMACapable != 0;
        }
      }
      put(data, capable);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: {
      int flags = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
      if (a != nullptr) {
        flags = (host && (a->flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0 &&
                 a->kind == MemKind::HostRegistered)
                    ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ
                    : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
      }
      put(data, flags);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      put(data, static_cast<void*>(nullptr));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      put(data, static_cast<size_t>(a != nullptr ? a->mapped_size : 0));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      put(data, reinterpret_cast<void*>(a != nullptr ? a->base : 0));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      put(data, static_cast<unsigned long long>(a != nullptr ? a->buffer_id : 0));
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

SC_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  SC_ENTER("cuPointerGetAttribute");
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(ptr);
  return attribute(data, attr, a.get(), ptr, false);
}

SC_API CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attrs, void** data,
                                       CUdeviceptr ptr) {
  SC_ENTER("cuPointerGetAttributes");
  if (count == 0 || attrs == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(ptr);
  for (unsigned i = 0; i < count; ++i) {
    if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = attribute(data[i], attrs[i], a.get(), ptr, true); rc != CUDA_SUCCESS) {
      return rc;
    }
  }
  return CUDA_SUCCESS;
}

SC_API CUresult cuPointerSetAttribute(const void* value, CUpointer_attribute attr,
                                      CUdeviceptr ptr) {
  SC_ENTER("cuPointerSetAttribute");
  if (value == nullptr || attr != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(ptr);
  if (!a || !is_device_kind(a->kind)) return CUDA_ERROR_INVALID_VALUE;
  unsigned v = 0;
  std::memcpy(&v, value, sizeof v);
  a->sync_memops = v != 0;
  return CUDA_SUCCESS;
}
