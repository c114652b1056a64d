// Device memory behind an MR: what the kernel's dma-buf importer and nvidia-peermem give a real
// NIC, done for softcuda's device memory. softcuda backs each allocation with a memfd that the
// CPU cannot reach at the device address (a PROT_NONE arena); the NIC thread reaches it through
// a shadow mapping of that memfd made here, so an MR's iova stays the device address.
//
// softcuda is found in the process at run time: OrbiTE loads libcuda.so.1 RTLD_LOCAL, so the
// lookup asks for that loaded library by name (RTLD_NOLOAD) before the global scope. Without
// softcuda nothing here matches: a dma-buf fd is refused and every address is host memory.
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "internal.h"

namespace softverbs {
namespace {

void* softcuda_symbol(const char* name) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void* fn = lib != nullptr ? dlsym(lib, name) : nullptr;
  if (lib != nullptr) dlclose(lib);  // only the reference RTLD_NOLOAD took
  return fn != nullptr ? fn : dlsym(RTLD_DEFAULT, name);
}

// The objects loaded into the process so far (glibc's dlpi_adds): a symbol that was missing can
// only appear once this moves. Reading it takes no system call.
unsigned long long objects_loaded() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_subs)) {
          *static_cast<unsigned long long*>(data) = info->dlpi_adds;
        }
        return 1;  // the counters are the same in every entry: the first is enough
      },
      &adds);
  return adds;
}

struct SymbolCache {
  std::atomic<void*> fn{nullptr};
  // objects_loaded() when the symbol was last missing (none yet: ~0).
  std::atomic<unsigned long long> missed_at{~0ULL};
};

// The symbol once found, for the process's life (every ibv_reg_mr asks, host memory too). A miss
// is looked up again only after another object was loaded (the driver may come later): each
// lookup is a dlopen that maps and unmaps the loader's cache, and in a VM each unmap is a TLB
// shootdown across the CPUs, which made a registration cost about a millisecond here. (A driver,
// once loaded, is never unloaded by its users here.)
void* cached_symbol(SymbolCache& cache, const char* name) {
  void* fn = cache.fn.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  const unsigned long long loaded = objects_loaded();
  if (cache.missed_at.load(std::memory_order_acquire) == loaded) return nullptr;
  fn = softcuda_symbol(name);
  if (fn != nullptr) {
    cache.fn.store(fn, std::memory_order_release);
  } else {
    cache.missed_at.store(loaded, std::memory_order_release);
  }
  return fn;
}
SymbolCache g_describe;
SymbolCache g_resolve;

// Maps [offset, offset + length) of fd; the mapping holds its own reference to the file.
int map_shadow(int fd, uint64_t offset, size_t length, GpuMapping* out) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t first = offset - offset % page;
  const size_t span = static_cast<size_t>(offset + length - first + page - 1) / page * page;
  void* m = mmap(nullptr, span == 0 ? page : span, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                 static_cast<off_t>(first));
  if (m == MAP_FAILED) return errno;
  out->base = m;
  out->span = span == 0 ? page : span;
  out->host = static_cast<char*>(m) + (offset - first);
  return 0;
}

}  // namespace

int map_dmabuf(int fd, uint64_t offset, size_t length, GpuMapping* out) {
  if (fd < 0) return EBADF;  // what NCCL's support probe (fd -1) expects of a kernel that has it
  using Describe = int (*)(int, unsigned long long*, unsigned long long*);
  auto describe = reinterpret_cast<Describe>(cached_symbol(g_describe, "softcuda_dmabuf_describe"));
  unsigned long long start = 0;
  unsigned long long size = 0;
  if (describe == nullptr || describe(fd, &start, &size) != 0) return EINVAL;  // not a dma-buf
  if (offset > size || length > size - offset) return EINVAL;
  return map_shadow(fd, start + offset, length, out);
}

int map_peermem(const void* addr, size_t length, GpuMapping* out) {
  using Resolve = int (*)(uint64_t, uint64_t, int*, uint64_t*);
  auto resolve = reinterpret_cast<Resolve>(cached_symbol(g_resolve, "softcuda_peermem_resolve"));
  if (resolve == nullptr) return ENOENT;
  int fd = -1;
  uint64_t offset = 0;
  const int rc = resolve(reinterpret_cast<uint64_t>(addr), length, &fd, &offset);
  if (rc == EINVAL) return ENOENT;  // not device memory: an ordinary host registration
  if (rc != 0) return EFAULT;       // device memory and no peermem: the kernel cannot pin it
  const int mapped = map_shadow(fd, offset, length, out);
  close(fd);
  return mapped;
}

void unmap_gpu(const GpuMapping& m) {
  if (m.base != nullptr) munmap(m.base, m.span);
}

}  // namespace softverbs
