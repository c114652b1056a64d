/* A recording libcuda.so.1 for the loader's unit test (cuda_loader_test): cuGetProcAddress_v2
 * appends "name version flags" to the file $FAKE_CUDA_LOG and answers with a function that
 * succeeds (no devices, driver 12.4). $FAKE_CUDA_MISSING names one entry point it does not have.
 * Nothing else is exported: OrbiTE must take every entry point through cuGetProcAddress. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;

static CUresult succeed(void) {
  return 0;
}
static CUresult driver_version(int* v) {
  *v = 12040;
  return 0;
}
static CUresult device_count(int* n) {
  *n = 0;
  return 0;
}
static CUresult error_name(CUresult rc, const char** s) {
  (void)rc;
  *s = "FAKE_ERROR";
  return 0;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* name, void** pfn,
                                                                    int version,
                                                                    unsigned long long flags,
                                                                    int* status) {
  const char* log = getenv("FAKE_CUDA_LOG");
  if (log != NULL) {
    FILE* f = fopen(log, "a");
    if (f != NULL) {
      fprintf(f, "%s %d %llu\n", name, version, flags);
      fclose(f);
    }
  }
  const char* missing = getenv("FAKE_CUDA_MISSING");
  if (missing != NULL && strcmp(missing, name) == 0) {
    *pfn = NULL;
    if (status != NULL) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return 0;
  }
  if (strcmp(name, "cuDriverGetVersion") == 0) {
    *pfn = (void*)driver_version;
  } else if (strcmp(name, "cuDeviceGetCount") == 0) {
    *pfn = (void*)device_count;
  } else if (strcmp(name, "cuGetErrorName") == 0) {
    *pfn = (void*)error_name;
  } else {
    *pfn = (void*)succeed;
  }
  if (status != NULL) *status = 0;
  return 0;
}
