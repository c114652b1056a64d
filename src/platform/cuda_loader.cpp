#include "platform/cuda_loader.h"

#include <dlfcn.h>
#include <link.h>

#if ORBITE_WITH_CUDA
#include <cuda.h>
#endif

namespace orbite::cuda {

#if ORBITE_WITH_CUDA
namespace {

constexpr const char* kLibrary = "libcuda.so.1";
// Oldest driver API whose entry points we ask for; newer drivers serve it too.
constexpr int kApiVersion = 12000;

using GetProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

struct Driver {
  std::string path;
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_pci_bus_id)(char*, int, CUdevice) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
};

Result<Driver> open_driver() {
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::error(Errc::Unavailable, std::string(kLibrary) + " could not be loaded: " +
                                                (err != nullptr ? err : "unknown error"));
  }
  Driver d;
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    d.path = map->l_name;
  }
  auto v2 = reinterpret_cast<GetProcV2>(dlsym(handle, "cuGetProcAddress_v2"));
  auto v1 = reinterpret_cast<GetProcV1>(dlsym(handle, "cuGetProcAddress"));
  if (v2 == nullptr && v1 == nullptr) {
    return Status::error(
        Errc::Unavailable,
        std::string(kLibrary) + " lacks cuGetProcAddress (driver older than CUDA 11.3)");
  }
  auto lookup = [&](const char* name, auto& out) -> Status {
    void* fn = nullptr;
    CUresult rc = v2 != nullptr ? v2(name, &fn, kApiVersion, CU_GET_PROC_ADDRESS_DEFAULT, nullptr)
                                : v1(name, &fn, kApiVersion, CU_GET_PROC_ADDRESS_DEFAULT);
    if (rc != CUDA_SUCCESS || fn == nullptr) {
      return Status::error(Errc::Unavailable, std::string(kLibrary) + " does not provide " + name +
                                                  " (CUresult " + std::to_string(rc) + ")");
    }
    out = reinterpret_cast<std::remove_reference_t<decltype(out)>>(fn);
    return {};
  };
  ORBITE_RETURN_IF_ERROR(lookup("cuInit", d.init));
  ORBITE_RETURN_IF_ERROR(lookup("cuDriverGetVersion", d.driver_get_version));
  ORBITE_RETURN_IF_ERROR(lookup("cuDeviceGetCount", d.device_get_count));
  ORBITE_RETURN_IF_ERROR(lookup("cuGetErrorString", d.get_error_string));
  ORBITE_RETURN_IF_ERROR(lookup("cuDeviceGet", d.device_get));
  ORBITE_RETURN_IF_ERROR(lookup("cuDeviceGetPCIBusId", d.device_get_pci_bus_id));
  ORBITE_RETURN_IF_ERROR(lookup("cuDeviceGetName", d.device_get_name));
  return d;
}

std::string error_text(const Driver& d, CUresult rc) {
  const char* text = nullptr;
  if (d.get_error_string != nullptr && d.get_error_string(rc, &text) == CUDA_SUCCESS && text) {
    return text;
  }
  return "CUresult " + std::to_string(rc);
}

}  // namespace

const Result<Driver>& driver_once() {
  static const Result<Driver> driver = open_driver();
  return driver;
}

Result<DriverInfo> probe_driver() {
  const Result<Driver>& driver = driver_once();
  if (!driver.ok()) return driver.status();
  const Driver& d = driver.value();
  DriverInfo info;
  info.path = d.path;
  CUresult rc = d.init(0);
  if (rc != CUDA_SUCCESS) {
    return Status::error(Errc::Unavailable,
                         std::string(kLibrary) + ": cuInit failed: " + error_text(d, rc));
  }
  d.driver_get_version(&info.driver_version);
  rc = d.device_get_count(&info.device_count);
  if (rc != CUDA_SUCCESS) {
    return Status::error(Errc::Unavailable,
                         std::string(kLibrary) + ": cuDeviceGetCount failed: " + error_text(d, rc));
  }
  return info;
}

Result<std::vector<DeviceIdentity>> list_devices() {
  ORBITE_ASSIGN_OR_RETURN(DriverInfo info, probe_driver());
  const Driver& d = driver_once().value();
  std::vector<DeviceIdentity> devices;
  for (int i = 0; i < info.device_count; ++i) {
    CUdevice dev = 0;
    char bus[64] = {};
    char name[256] = {};
    CUresult rc = d.device_get(&dev, i);
    if (rc == CUDA_SUCCESS) rc = d.device_get_pci_bus_id(bus, sizeof bus, dev);
    if (rc == CUDA_SUCCESS) rc = d.device_get_name(name, sizeof name, dev);
    if (rc != CUDA_SUCCESS) {
      return Status::error(Errc::Unavailable, std::string(kLibrary) + ": device " +
                                                  std::to_string(i) + ": " + error_text(d, rc));
    }
    devices.push_back(DeviceIdentity{i, bus, name});
  }
  return devices;
}

#else

Result<std::vector<DeviceIdentity>> list_devices() {
  return probe_driver().status();
}

Result<DriverInfo> probe_driver() {
  return Status::error(
      Errc::Unavailable,
      "libcuda.so.1: OrbiTE was built without CUDA support (ORBITE_WITH_CUDA=OFF)");
}

#endif

}  // namespace orbite::cuda
