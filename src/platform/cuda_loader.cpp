#include "platform/cuda_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <memory>

#if ORBITE_WITH_CUDA
#include "platform/cuda_api.h"
#endif

namespace orbite::cuda {

#if ORBITE_WITH_CUDA
namespace {

constexpr const char* kLibrary = "libcuda.so.1";

using GetProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

struct Loaded {
  void* handle = nullptr;
  GetProcV2 v2 = nullptr;
  GetProcV1 v1 = nullptr;
  std::string path;
};

// The library and its cuGetProcAddress, once.
const Result<Loaded>& library() {
  static const Result<Loaded> loaded = []() -> Result<Loaded> {
    void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      return Status::error(Errc::Unavailable, std::string(kLibrary) + " could not be loaded: " +
                                                  (err != nullptr ? err : "unknown error"));
    }
    Loaded l;
    l.handle = handle;  // retained for the life of the process
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
      l.path = map->l_name;
    }
    l.v2 = reinterpret_cast<GetProcV2>(dlsym(handle, "cuGetProcAddress_v2"));
    l.v1 = reinterpret_cast<GetProcV1>(dlsym(handle, "cuGetProcAddress"));
    if (l.v2 == nullptr && l.v1 == nullptr) {
      return Status::error(Errc::Unavailable, std::string(kLibrary) +
                                                  " lacks cuGetProcAddress (a driver older "
                                                  "than CUDA 11.3)");
    }
    return l;
  }();
  return loaded;
}

// One entry point with its own version; the status word as the driver gave it.
CUresult resolve(const Loaded& l, const char* name, int version, void** out,
                 CUdriverProcAddressQueryResult* status) {
  *out = nullptr;
  *status = CU_GET_PROC_ADDRESS_SUCCESS;
  if (l.v2 != nullptr) return l.v2(name, out, version, CU_GET_PROC_ADDRESS_DEFAULT, status);
  const CUresult rc = l.v1(name, out, version, CU_GET_PROC_ADDRESS_DEFAULT);
  if (rc == CUDA_SUCCESS && *out == nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return rc;
}

std::string status_text(CUresult rc, CUdriverProcAddressQueryResult status, bool found) {
  if (rc != CUDA_SUCCESS) return "CUresult " + std::to_string(rc);
  if (status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) return "version not sufficient";
  if (status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND || !found) return "symbol not found";
  return "ok";
}

Result<std::unique_ptr<Api>> load() {
  const Result<Loaded>& lib = library();
  if (!lib.ok()) return lib.status();
  auto a = std::make_unique<Api>();
  a->path = lib->path;
  // Success is CUDA_SUCCESS, a SUCCESS status word and a non-null pointer, all three.
#define ORBITE_CUDA_REQUIRED(name, version)                                                  \
  {                                                                                          \
    void* fn = nullptr;                                                                      \
    CUdriverProcAddressQueryResult st{};                                                     \
    const CUresult rc = resolve(*lib, #name, version, &fn, &st);                             \
    if (rc != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || fn == nullptr) {          \
      return Status::error(Errc::Unavailable, std::string(kLibrary) + " does not provide " + \
                                                  #name " (version " #version "): " +        \
                                                  status_text(rc, st, fn != nullptr));       \
    }                                                                                        \
    a->name##_ = reinterpret_cast<PFN_##name##_v##version>(fn);                              \
  }
#define ORBITE_CUDA_OPTIONAL(name, version)                        \
  {                                                                \
    void* fn = nullptr;                                            \
    CUdriverProcAddressQueryResult st{};                           \
    if (resolve(*lib, #name, version, &fn, &st) == CUDA_SUCCESS && \
        st == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr) {      \
      a->name##_ = reinterpret_cast<PFN_##name##_v##version>(fn);  \
    }                                                              \
  }
  ORBITE_CUDA_ENTRY_POINTS(ORBITE_CUDA_REQUIRED, ORBITE_CUDA_OPTIONAL)
#undef ORBITE_CUDA_REQUIRED
#undef ORBITE_CUDA_OPTIONAL
  if (const CUresult rc = a->cuInit_(0); rc != CUDA_SUCCESS) {
    const char* text = nullptr;
    a->cuGetErrorName_(rc, &text);
    return Status::error(Errc::Unavailable, std::string(kLibrary) + ": cuInit failed: " +
                                                (text != nullptr ? text : "?") + " (" +
                                                std::to_string(rc) + ")");
  }
  a->cuDriverGetVersion_(&a->driver_version);
  if (const CUresult rc = a->cuDeviceGetCount_(&a->device_count); rc != CUDA_SUCCESS) {
    return Status::error(
        Errc::Unavailable,
        std::string(kLibrary) + ": cuDeviceGetCount failed (CUresult " + std::to_string(rc) + ")");
  }
  return a;
}

}  // namespace

Result<const Api*> api() {
  static const Result<std::unique_ptr<Api>> loaded = load();
  if (!loaded.ok()) return loaded.status();
  return loaded->get();
}

std::string result_name(CUresult rc) {
  auto a = api();
  const char* name = nullptr;
  if (a.ok() && (*a)->cuGetErrorName_(rc, &name) == CUDA_SUCCESS && name != nullptr) {
    return std::string(name) + " (" + std::to_string(rc) + ")";
  }
  return "CUresult " + std::to_string(rc);
}

Status driver_error(CUresult rc, const std::string& call) {
  Errc code = Errc::Internal;
  switch (rc) {
    case CUDA_ERROR_OUT_OF_MEMORY: code = Errc::ResourceExhausted; break;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_NOT_FOUND: code = Errc::InvalidArgument; break;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED: code = Errc::Unavailable; break;
    default: break;
  }
  return Status::error(code, call + " failed: " + result_name(rc));
}

Result<DriverInfo> probe_driver() {
  ORBITE_ASSIGN_OR_RETURN(const Api* a, api());
  return DriverInfo{a->path, a->driver_version, a->device_count};
}

Result<std::vector<DeviceIdentity>> list_devices() {
  ORBITE_ASSIGN_OR_RETURN(const Api* a, api());
  std::vector<DeviceIdentity> devices;
  for (int i = 0; i < a->device_count; ++i) {
    CUdevice dev = 0;
    char bus[64] = {};
    char name[256] = {};
    CUuuid uuid{};
    size_t bytes = 0;
    CUresult rc = a->cuDeviceGet_(&dev, i);
    if (rc == CUDA_SUCCESS) rc = a->cuDeviceGetPCIBusId_(bus, sizeof bus, dev);
    if (rc == CUDA_SUCCESS) rc = a->cuDeviceGetName_(name, sizeof name, dev);
    if (rc == CUDA_SUCCESS) rc = a->cuDeviceGetUuid_(&uuid, dev);
    if (rc == CUDA_SUCCESS) rc = a->cuDeviceTotalMem_(&bytes, dev);
    if (rc != CUDA_SUCCESS) {
      return driver_error(rc, std::string(kLibrary) + ": querying device " + std::to_string(i));
    }
    int numa = -1;
    if (a->cuDeviceGetAttribute_(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS) {
      numa = -1;  // older drivers do not know the attribute
    }
    char text[64];
    const auto* u = reinterpret_cast<const unsigned char*>(uuid.bytes);
    std::snprintf(text, sizeof text,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                  u[14], u[15]);
    DeviceIdentity d{i, bus, name, text, bytes, numa < 0 ? -1 : numa};
    auto attribute = [&](CUdevice_attribute attr) {
      int v = 0;
      return a->cuDeviceGetAttribute_(&v, attr, dev) == CUDA_SUCCESS ? v : 0;
    };
    d.gpudirect_rdma = attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED) != 0;
    d.dma_buf = attribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) != 0;
    d.gpudirect_writes_ordering = attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING);
    d.dma_buf_export = a->cuMemGetHandleForAddressRange_ != nullptr;
    devices.push_back(std::move(d));
  }
  return devices;
}

std::vector<EntryPoint> entry_points() {
  std::vector<EntryPoint> out;
  const Result<Loaded>& lib = library();
  if (!lib.ok()) return out;
  auto add = [&](const char* name, int version, bool required) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st{};
    const CUresult rc = resolve(*lib, name, version, &fn, &st);
    EntryPoint e;
    e.name = name;
    e.version = version;
    e.flags = CU_GET_PROC_ADDRESS_DEFAULT;
    e.required = required;
    e.resolved = rc == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr;
    e.status = status_text(rc, st, fn != nullptr);
    out.push_back(std::move(e));
  };
#define ORBITE_CUDA_DUMP_REQUIRED(name, version) add(#name, version, true);
#define ORBITE_CUDA_DUMP_OPTIONAL(name, version) add(#name, version, false);
  ORBITE_CUDA_ENTRY_POINTS(ORBITE_CUDA_DUMP_REQUIRED, ORBITE_CUDA_DUMP_OPTIONAL)
#undef ORBITE_CUDA_DUMP_REQUIRED
#undef ORBITE_CUDA_DUMP_OPTIONAL
  return out;
}

#else

Result<DriverInfo> probe_driver() {
  return Status::error(
      Errc::Unavailable,
      "libcuda.so.1: OrbiTE was built without CUDA support (ORBITE_WITH_CUDA=OFF)");
}

Result<std::vector<DeviceIdentity>> list_devices() {
  return probe_driver().status();
}

std::vector<EntryPoint> entry_points() {
  return {};
}

#endif

}  // namespace orbite::cuda
