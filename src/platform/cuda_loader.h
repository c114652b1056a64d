// The one place that loads the CUDA driver (libcuda.so.1). Entry points are resolved through
// cuGetProcAddress; no nvcc, no libcudart. Without a driver, every CUDA path is Unavailable and
// the host-only paths keep working.
#pragma once

#include <orbite/status.h>

#include <string>
#include <vector>

namespace orbite::cuda {

struct DriverInfo {
  std::string path;        // the file the dynamic loader picked
  int driver_version = 0;  // cuDriverGetVersion, e.g. 12040
  int device_count = 0;
};

// Loads and initializes the driver once (retained) and counts devices.
Result<DriverInfo> probe_driver();

struct DeviceIdentity {
  int ordinal = 0;
  std::string pci_bus_id;  // cuDeviceGetPCIBusId, e.g. "0000:4E:00.0"
  std::string name;        // cuDeviceGetName
};
// The devices as the driver numbers them (CUDA_VISIBLE_DEVICES applies). Creates no context.
Result<std::vector<DeviceIdentity>> list_devices();

}  // namespace orbite::cuda
