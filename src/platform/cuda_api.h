// The CUDA driver's entry points as OrbiTE uses them, each resolved through cuGetProcAddress
// with its own ABI version and typed by its own PFN_<name>_v<version> from cudaTypedefs.h, so
// that a signature that changed (cuCtxGetDevice, cuCtxSynchronize, cuStreamGetCtx at 12.5/13.0,
// cuStreamGetCaptureInfo at 12.3) is always called as the version asked for. Versions stay at or
// below 12000 so that a 12.x driver serves them all. Internal: it includes cuda.h, so only the
// platform and cuda layers see it, never a public header.
#pragma once

#include <cudaTypedefs.h>
#include <orbite/status.h>

#include <string>
#include <vector>

// X(name, version): required (the loader fails without it); O(name, version): optional (the
// feature that needs it reports Unavailable).
#define ORBITE_CUDA_ENTRY_POINTS(X, O)     \
  X(cuInit, 2000)                          \
  X(cuDriverGetVersion, 2020)              \
  X(cuGetErrorName, 6000)                  \
  X(cuGetErrorString, 6000)                \
  X(cuDeviceGetCount, 2000)                \
  X(cuDeviceGet, 2000)                     \
  X(cuDeviceGetName, 2000)                 \
  X(cuDeviceGetPCIBusId, 4010)             \
  X(cuDeviceGetUuid, 11040)                \
  X(cuDeviceTotalMem, 3020)                \
  X(cuDeviceGetAttribute, 2000)            \
  X(cuDevicePrimaryCtxRetain, 7000)        \
  X(cuDevicePrimaryCtxRelease, 11000)      \
  X(cuCtxGetCurrent, 4000)                 \
  X(cuCtxSetCurrent, 4000)                 \
  X(cuCtxPushCurrent, 4000)                \
  X(cuCtxPopCurrent, 4000)                 \
  X(cuCtxGetDevice, 2000)                  \
  X(cuMemAlloc, 3020)                      \
  X(cuMemFree, 3020)                       \
  X(cuMemGetAddressRange, 3020)            \
  X(cuMemHostAlloc, 2020)                  \
  X(cuMemFreeHost, 2000)                   \
  X(cuMemHostRegister, 6050)               \
  X(cuMemHostUnregister, 4000)             \
  X(cuPointerGetAttribute, 4000)           \
  X(cuPointerGetAttributes, 7000)          \
  X(cuPointerSetAttribute, 6000)           \
  X(cuStreamCreate, 2000)                  \
  X(cuStreamDestroy, 4000)                 \
  X(cuStreamSynchronize, 2000)             \
  X(cuStreamQuery, 2000)                   \
  X(cuStreamGetCtx, 9020)                  \
  X(cuStreamIsCapturing, 10000)            \
  X(cuStreamWaitEvent, 3020)               \
  X(cuEventCreate, 2000)                   \
  X(cuEventDestroy, 4000)                  \
  X(cuEventRecord, 2000)                   \
  X(cuEventQuery, 2000)                    \
  X(cuEventSynchronize, 2000)              \
  X(cuMemcpyHtoDAsync, 3020)               \
  X(cuMemcpyDtoHAsync, 3020)               \
  X(cuMemcpyDtoDAsync, 3020)               \
  X(cuMemsetD8Async, 3020)                 \
  O(cuIpcGetMemHandle, 4010)               \
  O(cuIpcOpenMemHandle, 11000)             \
  O(cuIpcCloseMemHandle, 4010)             \
  O(cuMemGetHandleForAddressRange, 11070)  \
  O(cuMemCreate, 10020)                    \
  O(cuMemRelease, 10020)                   \
  O(cuMemMap, 10020)                       \
  O(cuMemUnmap, 10020)                     \
  O(cuMemAddressReserve, 10020)            \
  O(cuMemAddressFree, 10020)               \
  O(cuMemSetAccess, 10020)                 \
  O(cuMemExportToShareableHandle, 10020)   \
  O(cuMemImportFromShareableHandle, 10020) \
  O(cuMemGetAllocationGranularity, 10020)  \
  O(cuModuleLoadData, 2000)                \
  O(cuModuleUnload, 2000)                  \
  O(cuModuleGetFunction, 2000)             \
  O(cuLaunchKernel, 4000)

namespace orbite::cuda {

// One field per entry point, named <name>_ (cuda.h defines several names as macros: the
// trailing underscore keeps each field the version the table asks for).
struct Api {
#define ORBITE_CUDA_FIELD(name, version) PFN_##name##_v##version name##_ = nullptr;
  ORBITE_CUDA_ENTRY_POINTS(ORBITE_CUDA_FIELD, ORBITE_CUDA_FIELD)
#undef ORBITE_CUDA_FIELD
  int driver_version = 0;
  int device_count = 0;
  std::string path;  // the file the dynamic loader picked
};

// The driver, loaded (dlopen, retained for the process), resolved and initialized (cuInit) once.
// Unavailable naming libcuda.so.1 and what is missing: the library, cuGetProcAddress, a required
// export, or cuInit's error.
Result<const Api*> api();
// "CUDA_ERROR_INVALID_VALUE (1)" or, without a driver, "CUresult 1".
std::string result_name(CUresult rc);
// A failed call as a Status: the call, the driver's name for the result and what it means here.
Status driver_error(CUresult rc, const std::string& call);

}  // namespace orbite::cuda
