// The one place that loads the CUDA driver (libcuda.so.1). Entry points are resolved through
// cuGetProcAddress; no nvcc, no libcudart. Without a driver, every CUDA path is Unavailable and
// the host-only paths keep working.
#pragma once

#include <orbite/status.h>

#include <string>

namespace orbite::cuda {

struct DriverInfo {
  std::string path;        // the file the dynamic loader picked
  int driver_version = 0;  // cuDriverGetVersion, e.g. 12040
  int device_count = 0;
};

// Loads and initializes the driver once (retained) and counts devices.
Result<DriverInfo> probe_driver();

}  // namespace orbite::cuda
