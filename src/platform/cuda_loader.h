// The one place that loads the CUDA driver (libcuda.so.1). Entry points are resolved through
// cuGetProcAddress, each with its own version (cuda_api.h); no nvcc, no libcudart, no link-time
// cu* symbol. Without a driver, every CUDA path is Unavailable and the host paths keep working.
// This header needs no cuda.h.
#pragma once

#include <orbite/status.h>

#include <cstdint>
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
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::uint64_t memory_bytes = 0;
  int numa_node = -1;  // CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID where the driver knows it
  // GPUDirect RDMA as the device advertises it (false/0 where the driver does not answer).
  bool gpudirect_rdma = false;        // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
  bool dma_buf = false;               // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  int gpudirect_writes_ordering = 0;  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING
  bool dma_buf_export = false;        // the driver exports cuMemGetHandleForAddressRange
};
// The devices as the driver numbers them (CUDA_VISIBLE_DEVICES applies). Creates no context.
Result<std::vector<DeviceIdentity>> list_devices();

// How cuGetProcAddress answered each entry point OrbiTE asks for (the GPU gate diffs this on a
// real driver against the table).
struct EntryPoint {
  std::string name;
  int version = 0;
  std::uint64_t flags = 0;
  bool required = false;
  bool resolved = false;
  std::string status;  // "ok", "symbol not found", "version not sufficient", or the CUresult
};
// Empty when the library itself does not load.
std::vector<EntryPoint> entry_points();

}  // namespace orbite::cuda
