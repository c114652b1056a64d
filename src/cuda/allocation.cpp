// Allocations: making, adopting and freeing them, the process-wide table that makes aliases
// share one owner, the retained list, and telling device pointers from host ones.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "common/log.h"
#include "cuda/native.h"

namespace orbite::cuda {

namespace {

// Allocations OrbiTE knows, by base address: an alias finds the owner of its allocation.
struct Known {
  std::mutex mu;
  std::map<std::uintptr_t, std::weak_ptr<Allocation>> by_base;
  // by_base.size(), written under mu after each change: a message's buffer check (find_pinned)
  // skips the lock while OrbiTE knows no allocation at all, the host-only case. A buffer of an
  // allocation reached the caller after its remember(), so a caller that holds one reads a
  // count above zero.
  std::atomic<std::size_t> entries{0};
};
Known& known() {
  static Known* k = new Known;  // outlives every Allocation (some die at exit)
  return *k;
}

struct Retained {
  std::mutex mu;
  std::vector<RetainedResource> list;
  // What retained allocations still referenced (copies' staging, producers' inputs, adopted
  // memory's owners): never released, so nothing reuses memory a device may still touch.
  std::vector<std::shared_ptr<void>> kept;
};
Retained& retained() {
  static Retained* r = new Retained;
  return *r;
}

Result<CUcontext> retain_primary(const Api* a, int ordinal, CUdevice* dev) {
  if (ordinal < 0 || ordinal >= a->device_count) {
    return Status::error(Errc::InvalidArgument,
                         "device ordinal " + std::to_string(ordinal) + " is not one of the " +
                             std::to_string(a->device_count) + " CUDA device(s)");
  }
  if (CUresult rc = a->cuDeviceGet_(dev, ordinal); rc != CUDA_SUCCESS) {
    return driver_error(rc, "cuDeviceGet(" + std::to_string(ordinal) + ")");
  }
  CUcontext ctx = nullptr;
  if (CUresult rc = a->cuDevicePrimaryCtxRetain_(&ctx, *dev); rc != CUDA_SUCCESS) {
    return driver_error(rc, "cuDevicePrimaryCtxRetain(device " + std::to_string(ordinal) + ")");
  }
  return ctx;
}

void remember(const std::shared_ptr<Allocation>& a) {
  std::lock_guard<std::mutex> g(known().mu);
  known().by_base[reinterpret_cast<std::uintptr_t>(a->base())] = a;
  known().entries.store(known().by_base.size(), std::memory_order_release);
}

}  // namespace

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, reinterpret_cast<std::uintptr_t>(p));
  return buf;
}

void retain(std::string what, std::string why) {
  ORBITE_LOG(Error, Proxy) << "retained for the rest of the process: " << what << ": " << why;
  std::lock_guard<std::mutex> g(retained().mu);
  retained().list.push_back(RetainedResource{std::move(what), std::move(why)});
}

std::vector<RetainedResource> retained_resources() {
  std::lock_guard<std::mutex> g(retained().mu);
  return retained().list;
}

Allocation::Allocation(Kind kind, int ordinal)
    : kind_(kind), ordinal_(ordinal), native_(std::make_unique<Native>()) {}

std::string Allocation::describe() const {
  return std::string(kind_ == Kind::Device
                         ? (owned_ ? "device allocation " : "adopted device memory ")
                         : "pinned host allocation ") +
         hex(base_) + " (" + std::to_string(size_) + " bytes, device " + std::to_string(ordinal_) +
         ")";
}

Result<std::shared_ptr<Allocation>> Allocation::allocate_device(int ordinal, std::uint64_t bytes) {
  ORBITE_ASSIGN_OR_RETURN(const Api* a, api());
  if (bytes == 0) {
    return Status::error(Errc::InvalidArgument, "CudaMemory::allocate: bytes is 0");
  }
  auto out = std::make_shared<Allocation>(Kind::Device, ordinal);
  Native& n = *out->native_;
  n.api = a;
  ORBITE_ASSIGN_OR_RETURN(n.ctx, retain_primary(a, ordinal, &n.device));
  CUdeviceptr p = 0;
  CUresult rc = CUDA_SUCCESS;
  {
    ContextScope scope(a, n.ctx);
    rc = scope.result() != CUDA_SUCCESS ? scope.result() : a->cuMemAlloc_(&p, bytes);
  }
  if (rc != CUDA_SUCCESS) {
    a->cuDevicePrimaryCtxRelease_(n.device);
    n.ctx = nullptr;
    return driver_error(rc, "cuMemAlloc(" + std::to_string(bytes) + " bytes on device " +
                                std::to_string(ordinal) + ")");
  }
  out->base_ = reinterpret_cast<std::byte*>(p);
  out->size_ = bytes;
  out->owned_ = true;
  remember(out);
  return out;
}

Result<std::shared_ptr<Allocation>> Allocation::allocate_pinned(std::uint64_t bytes, int ordinal) {
  ORBITE_ASSIGN_OR_RETURN(const Api* a, api());
  if (bytes == 0) {
    return Status::error(Errc::InvalidArgument, "allocate_pinned_host: bytes is 0");
  }
  auto out = std::make_shared<Allocation>(Kind::PinnedHost, ordinal);
  Native& n = *out->native_;
  n.api = a;
  ORBITE_ASSIGN_OR_RETURN(n.ctx, retain_primary(a, ordinal, &n.device));
  void* p = nullptr;
  CUresult rc = CUDA_SUCCESS;
  {
    ContextScope scope(a, n.ctx);
    rc = scope.result() != CUDA_SUCCESS ? scope.result()
                                        : a->cuMemHostAlloc_(&p, bytes, CU_MEMHOSTALLOC_PORTABLE);
  }
  if (rc != CUDA_SUCCESS) {
    a->cuDevicePrimaryCtxRelease_(n.device);
    n.ctx = nullptr;
    return driver_error(rc, "cuMemHostAlloc(" + std::to_string(bytes) + " bytes)");
  }
  out->base_ = static_cast<std::byte*>(p);
  out->size_ = bytes;
  out->owned_ = true;
  remember(out);
  return out;
}

Result<std::shared_ptr<Allocation>> Allocation::adopt_device(const void* ptr, std::uint64_t bytes,
                                                             std::shared_ptr<void> owner,
                                                             std::uint64_t* offset) {
  ORBITE_ASSIGN_OR_RETURN(const Api* a, api());
  const std::string what = "CudaMemory::from_raw_parts: ptr " + hex(ptr);
  if (ptr == nullptr) return Status::error(Errc::InvalidArgument, what + " is null");
  if (bytes == 0) return Status::error(Errc::InvalidArgument, what + ": bytes is 0");
  unsigned type = 0;
  // Documented as a bool, but NVIDIA's driver writes IS_MANAGED as a 4-byte integer (seen on
  // driver 580 by the GPU gate's conformance program): a slot of 8 zeroed bytes holds either.
  std::uint64_t managed = 0;
  CUcontext ctx = nullptr;
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t range = 0;
  CUpointer_attribute attrs[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_IS_MANAGED,
      CU_POINTER_ATTRIBUTE_CONTEXT,          CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&type, &managed, &ctx, &ordinal, &start, &range};
  const auto p = reinterpret_cast<CUdeviceptr>(ptr);
  if (CUresult rc = a->cuPointerGetAttributes_(6, attrs, data, p); rc != CUDA_SUCCESS) {
    return driver_error(rc, what + ": cuPointerGetAttributes");
  }
  if (type == 0) {
    return Status::error(Errc::InvalidArgument,
                         what + " is not CUDA memory (ordinary host memory?): memory type unknown");
  }
  if (type == CU_MEMORYTYPE_HOST) {
    return Status::error(Errc::InvalidArgument,
                         what + " is pinned host memory (memory type host), not device memory");
  }
  if (managed != 0) {
    return Status::error(Errc::InvalidArgument,
                         what + " is managed memory (is_managed = 1), which is not adopted");
  }
  if (type != CU_MEMORYTYPE_DEVICE || start == 0 || range == 0) {
    return Status::error(Errc::InvalidArgument,
                         what + ": memory type " + std::to_string(type) + " is not device memory");
  }
  if (bytes > range - (p - start)) {
    return Status::error(Errc::InvalidArgument, what + " + " + std::to_string(bytes) +
                                                    " bytes extends past its allocation [" +
                                                    hex(reinterpret_cast<void*>(start)) + ", +" +
                                                    std::to_string(range) + ")");
  }
  CUdevice dev = 0;
  ORBITE_ASSIGN_OR_RETURN(CUcontext primary, retain_primary(a, ordinal, &dev));
  if (ctx != primary) {
    a->cuDevicePrimaryCtxRelease_(dev);
    return Status::error(Errc::InvalidArgument, what + " belongs to a context other than device " +
                                                    std::to_string(ordinal) +
                                                    "'s primary context (context " + hex(ctx) +
                                                    ")");
  }
  *offset = p - start;
  {
    std::lock_guard<std::mutex> g(known().mu);
    auto it = known().by_base.find(start);
    if (it != known().by_base.end()) {
      if (auto live = it->second.lock();
          live && live->size_ == range && live->kind_ == Kind::Device) {
        a->cuDevicePrimaryCtxRelease_(dev);  // the live one holds its own reference
        if (owner) {
          std::lock_guard<std::mutex> g2(live->mu_);
          live->owners_.push_back(std::move(owner));
        }
        return live;
      }
    }
  }
  auto out = std::make_shared<Allocation>(Kind::Device, ordinal);
  Native& n = *out->native_;
  n.api = a;
  n.device = dev;
  n.ctx = primary;
  out->base_ = reinterpret_cast<std::byte*>(start);
  out->size_ = range;
  out->owned_ = false;
  if (owner) out->owners_.push_back(std::move(owner));
  remember(out);
  return out;
}

void Allocation::keep_forever(const std::string& why) {
  retain(describe(), why);
  struct Kept {
    std::vector<std::shared_ptr<void>> owners;
    std::deque<std::shared_ptr<CopyJob>> queued;
    std::deque<std::shared_ptr<CopyJob>> running;
    std::vector<std::pair<std::shared_ptr<CopyJob>, std::shared_ptr<void>>> parked;
    std::shared_ptr<void> producer_owner;
  };
  auto kept =
      std::make_shared<Kept>(Kept{std::move(owners_), std::move(queued_), std::move(running_),
                                  std::move(parked_), std::move(producer_owner_)});
  std::lock_guard<std::mutex> g(retained().mu);
  retained().kept.push_back(std::move(kept));
}

Allocation::~Allocation() {
  {
    std::lock_guard<std::mutex> g(known().mu);
    auto it = known().by_base.find(reinterpret_cast<std::uintptr_t>(base_));
    if (it != known().by_base.end() && it->second.expired()) known().by_base.erase(it);
    known().entries.store(known().by_base.size(), std::memory_order_release);
  }
  Native& n = *native_;
  if (n.api == nullptr || n.ctx == nullptr) return;
  const Api* a = n.api;
  std::lock_guard<std::mutex> g(mu_);
  ContextScope scope(a, n.ctx);
  if (scope.result() != CUDA_SUCCESS) {
    keep_forever("its context could not be made current: " + result_name(scope.result()));
    return;
  }
  // A producer still writing into it, or a copy of OrbiTE's in flight: wait for them first.
  if (recorded_ > consumed_ && n.ready != nullptr) {
    if (CUresult rc = a->cuEventSynchronize_(n.ready); rc != CUDA_SUCCESS) {
      keep_forever("its producer generation could not be waited for: " + result_name(rc));
      return;  // the producer's inputs stay with it
    }
    consumed_ = recorded_;
    producer_owner_.reset();
  }
  if (n.stream != nullptr && (!running_.empty() || !queued_.empty() || !parked_.empty())) {
    if (CUresult rc = a->cuStreamSynchronize_(n.stream); rc != CUDA_SUCCESS) {
      keep_forever("its copies could not be drained: " + result_name(rc));
      return;
    }
  }
  if (!fence_.ok()) {
    keep_forever(fence_.message());  // its stream, events and memory are never touched again
    return;
  }
  bool kept = false;
  if (n.done != nullptr && a->cuEventDestroy_(n.done) != CUDA_SUCCESS) kept = true;
  if (n.ready != nullptr && a->cuEventDestroy_(n.ready) != CUDA_SUCCESS) kept = true;
  if (n.stream != nullptr && a->cuStreamDestroy_(n.stream) != CUDA_SUCCESS) kept = true;
  if (owned_) {
    const CUresult rc = kind_ == Kind::Device ? a->cuMemFree_(reinterpret_cast<CUdeviceptr>(base_))
                                              : a->cuMemFreeHost_(base_);
    if (rc != CUDA_SUCCESS) {
      keep_forever("freeing it failed: " + result_name(rc));
      return;  // its context reference stays too
    }
  }
  if (kept) retain("the stream or events of " + describe(), "destroying them failed");
  a->cuDevicePrimaryCtxRelease_(n.device);
}

std::shared_ptr<Allocation> find_pinned(const void* p, std::uint64_t length,
                                        std::uint64_t* offset) {
  if (known().entries.load(std::memory_order_acquire) == 0) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard<std::mutex> g(known().mu);
  auto it = known().by_base.upper_bound(at);
  if (it == known().by_base.begin()) return nullptr;
  --it;
  auto a = it->second.lock();
  if (!a || a->kind() != Kind::PinnedHost) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(a->base());
  if (at < base || length > a->size() || at - base > a->size() - length) return nullptr;
  *offset = at - base;
  return a;
}

// ---------------------------------------------------------------------------------------------
// Telling device pointers from host ones

namespace {

// Objects the dynamic linker has added so far: while it is unchanged, no libcuda appeared.
unsigned long long loaded_objects() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;  // the first object carries the counter
      },
      &adds);
  return adds;
}

}  // namespace

bool driver_in_process() {
  static std::atomic<bool> present{false};
  static std::atomic<unsigned long long> checked_at{~0ull};
  if (present.load(std::memory_order_acquire)) return true;
  const unsigned long long adds = loaded_objects();
  if (adds == checked_at.load(std::memory_order_acquire)) return false;
  void* h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (h != nullptr) {
    dlclose(h);
    present.store(true, std::memory_order_release);
    return true;
  }
  checked_at.store(adds, std::memory_order_release);
  return false;
}

bool is_device_memory(const void* p) {
  if (p == nullptr || !driver_in_process()) return false;
  auto loaded = api();
  if (!loaded.ok()) return false;  // a driver OrbiTE cannot use: host
  const Api* a = *loaded;
  unsigned type = 0;
  std::uint64_t managed = 0;  // written as 4 bytes by the driver (see adopt_device)
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* data[] = {&type, &managed};
  return a->cuPointerGetAttributes_(2, attrs, data, reinterpret_cast<CUdeviceptr>(p)) ==
             CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_DEVICE && managed == 0;
}

Result<std::optional<DeviceView>> device_view_of(const void* p, std::uint64_t length) {
  // Nothing of an empty range is ever touched: it may stay "host".
  if (length == 0 || !is_device_memory(p)) return std::optional<DeviceView>();
  DeviceView v;
  ORBITE_ASSIGN_OR_RETURN(v.alloc, Allocation::adopt_device(p, length, nullptr, &v.offset));
  return std::optional<DeviceView>(std::move(v));
}

}  // namespace orbite::cuda
