// Sharing device memory: legacy IPC handles opened by another process, the virtual memory
// management API with POSIX file descriptors, and dma-buf export of an address range. Each rests
// on the memfd behind an allocation: the importer obtains it (pidfd_getfd, or /proc/<pid>/fd)
// and maps the same bytes for its own copy engine at an address of its own arena.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "internal.h"

using namespace softcuda;

namespace {

constexpr std::uint64_t kGranularity = 2u << 20;
constexpr char kMagic[8] = {'S', 'C', 'U', 'D', 'A', 'I', 'P', 'C'};

// The 64 bytes of a CUipcMemHandle as softcuda fills them.
struct IpcWire {
  char magic[8];
  std::uint32_t version;
  std::int32_t pid;
  std::int32_t fd;
  std::int32_t device;
  std::uint64_t buffer_id;
  std::uint64_t size;
  std::uint64_t mapped_size;
  char pad[16];
};
static_assert(sizeof(IpcWire) == sizeof(CUipcMemHandle), "IPC handle layout");

std::string memfd_name(int pid, std::uint64_t buffer_id) {
  return "/memfd:softcuda:" + std::to_string(pid) + ":" + std::to_string(buffer_id);
}

bool fd_is(int fd, const std::string& name) {
  char buf[256];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return false;
  buf[n] = '\0';
  const std::string target(buf);
  return target == name || target == name + " (deleted)";
}

// The exporter's descriptor `fd`, duplicated into this process; -1 when it cannot be had.
int fetch_fd(int pid, int fd) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    const int got = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    close(pidfd);
    if (got >= 0) {
      fcntl(got, F_SETFD, FD_CLOEXEC);
      return got;
    }
  }
#endif
  // Without ptrace rights over the exporter: reopen its memfd through /proc.
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  return open(path.c_str(), O_RDWR | O_CLOEXEC);
}

bool valid_prop(const CUmemAllocationProp* prop) {
  return prop != nullptr && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
         device_of(prop->location.id) != nullptr;
}

VmmHandle* find_handle(CUmemGenericAllocationHandle h) {
  auto it = state().vmm_handles.find(h);
  return it == state().vmm_handles.end() ? nullptr : it->second.get();
}

void maybe_release(VmmHandle* h) {
  if (h->refs > 0 || h->mappings > 0) return;
  Device* d = device_of(h->prop.location.id);
  if (d != nullptr && !h->imported) d->used_bytes -= h->size;
  state().vmm_handles.erase(h->id);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Legacy IPC

SC_API CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  SC_ENTER("cuIpcGetMemHandle");
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(dptr);
  if (!a || a->kind != MemKind::Device || a->base != dptr) return CUDA_ERROR_INVALID_VALUE;
  Device* d = device_of(a->device);
  if (d == nullptr || !d->config.ipc) return CUDA_ERROR_NOT_SUPPORTED;
  IpcWire w{};
  std::memcpy(w.magic, kMagic, sizeof kMagic);
  w.version = 1;
  w.pid = getpid();
  w.fd = a->fd;
  w.device = a->device;
  w.buffer_id = a->buffer_id;
  w.size = a->size;
  w.mapped_size = a->mapped_size;
  std::memcpy(handle, &w, sizeof w);
  return CUDA_SUCCESS;
}

SC_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                      unsigned int flags) {
  SC_ENTER("cuIpcOpenMemHandle");
  if (pdptr == nullptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  IpcWire w{};
  std::memcpy(&w, &handle, sizeof w);
  if (std::memcmp(w.magic, kMagic, sizeof kMagic) != 0 || w.version != 1 || w.mapped_size == 0 ||
      w.size > w.mapped_size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  // As on the driver, a process cannot open its own handle.
  if (w.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  for (auto& [base, a] : st.allocations) {
    if (a->kind == MemKind::IpcImport && a->exporter_pid == w.pid &&
        a->exporter_buffer == w.buffer_id && a->ctx == c) {
      a->opens++;
      *pdptr = a->base;
      return CUDA_SUCCESS;
    }
  }
  const int fd = fetch_fd(w.pid, w.fd);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  if (!fd_is(fd, memfd_name(w.pid, w.buffer_id))) {  // freed, or the descriptor was reused
    close(fd);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  void* shadow = mmap(nullptr, w.mapped_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (shadow == MAP_FAILED) {
    close(fd);
    return CUDA_ERROR_MAP_FAILED;
  }
  auto a = std::make_shared<Allocation>();
  a->kind = MemKind::IpcImport;
  a->size = w.size;
  a->mapped_size = w.mapped_size;
  a->ctx = c;
  a->device = c->device->ordinal;
  a->buffer_id = st.next_id++;
  a->fd = fd;
  a->shadow = static_cast<std::byte*>(shadow);
  a->own_shadow = true;
  a->exporter_pid = w.pid;
  a->exporter_buffer = w.buffer_id;
  a->opens = 1;
  a->base =
      arena_take(*c->device, a->mapped_size, w.mapped_size >= kGranularity ? kGranularity : 4096);
  if (a->base == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *pdptr = a->base;
  st.allocations.emplace(a->base, std::move(a));
  return CUDA_SUCCESS;
}

SC_API CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  return cuIpcOpenMemHandle_v2(pdptr, handle, flags);
}

SC_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  SC_ENTER("cuIpcCloseMemHandle");
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  auto it = st.allocations.find(dptr);
  if (it == st.allocations.end() || it->second->kind != MemKind::IpcImport) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (--it->second->opens > 0) return CUDA_SUCCESS;
  Device* d = device_of(it->second->device);
  if (d != nullptr) arena_give(*d, it->second->base, it->second->mapped_size);
  st.allocations.erase(it);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Virtual memory management

SC_API CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                              CUmemAllocationGranularity_flags option) {
  SC_ENTER("cuMemGetAllocationGranularity");
  if (granularity == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
      option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> g(state().mu);
  if (!valid_prop(prop)) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                            const CUmemAllocationProp* prop, unsigned long long flags) {
  SC_ENTER("cuMemCreate");
  if (handle == nullptr || size == 0 || size % kGranularity != 0 || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  if (!valid_prop(prop)) return CUDA_ERROR_INVALID_VALUE;
  Device* d = device_of(prop->location.id);
  if (!d->config.vmm) return CUDA_ERROR_NOT_SUPPORTED;
  if ((prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0) {
    return CUDA_ERROR_NOT_SUPPORTED;  // Win32 and fabric handles are not emulated
  }
  if (size > d->config.memory_bytes - d->used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult rc = oom_check(size); rc != CUDA_SUCCESS) return rc;
  auto h = std::make_unique<VmmHandle>();
  h->id = st.next_id++;
  h->size = size;
  h->prop = *prop;
  const std::string name = "softcuda:" + std::to_string(getpid()) + ":" + std::to_string(h->id);
  h->fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (h->fd < 0 || ftruncate(h->fd, static_cast<off_t>(size)) != 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d->used_bytes += size;
  *handle = h->id;
  st.vmm_handles.emplace(h->id, std::move(h));
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  SC_ENTER("cuMemRelease");
  std::lock_guard<std::mutex> g(state().mu);
  VmmHandle* h = find_handle(handle);
  if (h == nullptr || h->refs == 0) return CUDA_ERROR_INVALID_VALUE;
  h->refs--;
  maybe_release(h);
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags) {
  SC_ENTER("cuMemAddressReserve");
  (void)addr;  // a hint only
  if (ptr == nullptr || size == 0 || size % kGranularity != 0 || flags != 0 ||
      (alignment & (alignment - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  const std::uint64_t align = std::max<std::uint64_t>(alignment, kGranularity);
  const std::uint64_t off = (st.vmm_arena_next + align - 1) & ~(align - 1);
  if (st.vmm_arena_base == 0 || off + size > st.vmm_arena_size) return CUDA_ERROR_OUT_OF_MEMORY;
  st.vmm_arena_next = off + size;
  const std::uintptr_t base = st.vmm_arena_base + off;
  st.reservations.emplace(base, Reservation{base, size});
  *ptr = base;
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SC_ENTER("cuMemAddressFree");
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  auto it = st.reservations.find(ptr);
  if (it == st.reservations.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& [base, a] : st.allocations) {
    if (a->kind == MemKind::Vmm && base >= ptr && base < ptr + size)
      return CUDA_ERROR_INVALID_VALUE;
  }
  st.reservations.erase(it);
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  SC_ENTER("cuMemMap");
  if (size == 0 || size % kGranularity != 0 || offset % kGranularity != 0 || flags != 0 ||
      ptr % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  VmmHandle* h = find_handle(handle);
  if (h == nullptr || offset + size > h->size) return CUDA_ERROR_INVALID_VALUE;
  auto r = st.reservations.upper_bound(ptr);
  if (r == st.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (ptr + size > r->second.base + r->second.size) return CUDA_ERROR_INVALID_VALUE;
  if (find_allocation(ptr) || find_allocation(ptr + size - 1)) return CUDA_ERROR_INVALID_VALUE;
  void* shadow =
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, static_cast<off_t>(offset));
  if (shadow == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  auto a = std::make_shared<Allocation>();
  a->kind = MemKind::Vmm;
  a->base = ptr;
  a->size = size;
  a->mapped_size = size;
  a->device = h->prop.location.id;
  a->buffer_id = st.next_id++;
  a->shadow = static_cast<std::byte*>(shadow);
  a->own_shadow = true;
  a->vmm_handle = h->id;
  a->vmm_offset = offset;
  a->accessible = false;  // until cuMemSetAccess
  h->mappings++;
  st.allocations.emplace(ptr, std::move(a));
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SC_ENTER("cuMemUnmap");
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  std::vector<std::uintptr_t> gone;
  for (const auto& [base, a] : st.allocations) {
    if (a->kind == MemKind::Vmm && base >= ptr && base + a->size <= ptr + size)
      gone.push_back(base);
  }
  if (gone.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (std::uintptr_t base : gone) {
    auto it = st.allocations.find(base);
    VmmHandle* h = find_handle(it->second->vmm_handle);
    st.allocations.erase(it);
    if (h != nullptr) {
      h->mappings--;
      maybe_release(h);
    }
  }
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                               size_t count) {
  SC_ENTER("cuMemSetAccess");
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  bool access = false;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        device_of(desc[i].location.id) == nullptr ||
        (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    access = access || desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
  }
  std::uint64_t covered = 0;
  for (auto& [base, a] : st.allocations) {
    if (a->kind == MemKind::Vmm && base >= ptr && base + a->size <= ptr + size) {
      a->accessible = access;
      covered += a->size;
    }
  }
  return covered == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;  // must be fully mapped
}

SC_API CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                               CUdeviceptr ptr) {
  SC_ENTER("cuMemGetAccess");
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(ptr);
  if (!a || a->kind != MemKind::Vmm) return CUDA_ERROR_INVALID_VALUE;
  *flags = a->accessible ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType type,
                                             unsigned long long flags) {
  SC_ENTER("cuMemExportToShareableHandle");
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  VmmHandle* h = find_handle(handle);
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  if ((h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    return CUDA_ERROR_INVALID_VALUE;  // not requested at cuMemCreate
  }
  const int fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memcpy(shareable, &fd, sizeof fd);
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                               void* os_handle, CUmemAllocationHandleType type) {
  SC_ENTER("cuMemImportFromShareableHandle");
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int given = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
  char buf[256];
  const std::string link = "/proc/self/fd/" + std::to_string(given);
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0 || std::strncmp(buf, "/memfd:softcuda:", 16) != 0) return CUDA_ERROR_INVALID_VALUE;
  struct stat sb {};
  if (fstat(given, &sb) != 0 || sb.st_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Context* c = current_ctx();
  auto h = std::make_unique<VmmHandle>();
  h->id = st.next_id++;
  h->fd = fcntl(given, F_DUPFD_CLOEXEC, 0);  // the caller keeps (and closes) its descriptor
  if (h->fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  h->size = static_cast<std::uint64_t>(sb.st_size);
  h->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  h->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  h->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  h->prop.location.id = c != nullptr ? c->device->ordinal : 0;
  h->imported = true;  // charged to its exporter's device, not to this process's
  *handle = h->id;
  st.vmm_handles.emplace(h->id, std::move(h));
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  SC_ENTER("cuMemRetainAllocationHandle");
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  auto a = find_allocation(reinterpret_cast<std::uintptr_t>(addr));
  if (!a || a->kind != MemKind::Vmm) return CUDA_ERROR_INVALID_VALUE;
  VmmHandle* h = find_handle(a->vmm_handle);
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  h->refs++;
  *handle = h->id;
  return CUDA_SUCCESS;
}

SC_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                       CUmemGenericAllocationHandle handle) {
  SC_ENTER("cuMemGetAllocationPropertiesFromHandle");
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  VmmHandle* h = find_handle(handle);
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *prop = h->prop;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// dma-buf export

SC_API CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                              CUmemRangeHandleType type, unsigned long long flags) {
  SC_ENTER("cuMemGetHandleForAddressRange");
  if (handle == nullptr || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (flags != 0 && flags != CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  if (size == 0 || dptr % page != 0 || size % page != 0) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  auto a = find_allocation(dptr);
  if (!a || (a->kind != MemKind::Device && a->kind != MemKind::Vmm)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Device* d = device_of(a->device);
  if (d == nullptr || !d->config.dma_buf) return CUDA_ERROR_NOT_SUPPORTED;
  // BAR1 (PCIe) mappings are a platform property softcuda does not model.
  if (flags == CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) return CUDA_ERROR_NOT_SUPPORTED;
  // A legacy allocation's extent rounds up to a host page; a VMM range must be fully mapped.
  const std::uint64_t extent = a->kind == MemKind::Device ? page_round(a->size) : a->size;
  if (dptr + size > a->base + extent) return CUDA_ERROR_INVALID_VALUE;
  int source = a->fd;
  std::uint64_t fd_offset = dptr - a->base;
  if (a->kind == MemKind::Vmm) {
    VmmHandle* h = find_handle(a->vmm_handle);
    if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
    source = h->fd;
    fd_offset += a->vmm_offset;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(source);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  st.dmabufs[fd] = {fd_offset, size};
  std::memcpy(handle, &fd, sizeof fd);
  return CUDA_SUCCESS;
}

// Where a dma-buf descriptor from cuMemGetHandleForAddressRange starts in its memfd and how long
// it is, for softverbs' ibv_reg_dmabuf_mr (an mmap of fd at *offset + the MR's offset): 0, or
// ENOENT when fd is not such a descriptor of this process.
SC_API int softcuda_dmabuf_describe(int fd, unsigned long long* offset, unsigned long long* size) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  auto it = st.dmabufs.find(fd);
  if (it == st.dmabufs.end()) return ENOENT;
  char buf[256];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0 || std::strncmp(buf, "/memfd:softcuda:", 16) != 0) {
    st.dmabufs.erase(it);  // closed and reused for something else
    return ENOENT;
  }
  if (offset != nullptr) *offset = it->second.first;
  if (size != nullptr) *size = it->second.second;
  return 0;
}

// The peermem hook: what nvidia-peermem gives the kernel, a device range's backing, for
// softverbs to register a device pointer directly. A duplicated descriptor of the allocation's
// memfd and the range's offset in it; 0, EINVAL (not device memory), ENOTSUP (the device is not
// configured with peermem).
SC_API int softcuda_peermem_resolve(uint64_t addr, uint64_t len, int* fd, uint64_t* offset) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  auto a = find_allocation(addr);
  if (!a || (a->kind != MemKind::Device && a->kind != MemKind::Vmm) ||
      len > a->size - (addr - a->base)) {
    return EINVAL;
  }
  Device* d = device_of(a->device);
  if (d == nullptr || !d->config.peermem) return ENOTSUP;
  int source = a->fd;
  std::uint64_t off = addr - a->base;
  if (a->kind == MemKind::Vmm) {
    VmmHandle* h = find_handle(a->vmm_handle);
    if (h == nullptr) return EINVAL;
    source = h->fd;
    off += a->vmm_offset;
  }
  const int dup_fd = fcntl(source, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return errno;
  *fd = dup_fd;
  *offset = off;
  return 0;
}
