// Driver entry points by name: cuGetProcAddress answers (name, CUDA version, flags) as the driver
// documents (the newest ABI of that name not newer than the version asked for; the per-thread
// default-stream variant with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), from the table
// generated out of the CUDA toolkit's driver stub (exports.inc). Also the error strings.
#include <dlfcn.h>

#include <cctype>
#include <cstring>
#include <string>
#include <unordered_map>

#include "internal.h"

using namespace softcuda;

namespace {

struct Entry {
  const char* base;
  int version;
  const char* variant;
  const char* symbol;
};
const Entry kEntries[] = {
#define SC_SYMBOL(base, version, variant, symbol) {#base, version, variant, #symbol},
#include "exports.inc"
#undef SC_SYMBOL
};

void* self_handle() {
  static void* handle = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&self_handle), &info) == 0 || info.dli_fname == nullptr) {
      return static_cast<void*>(nullptr);
    }
    return dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
  }();
  return handle;
}

int driver_version() {
  int v = 13000;
  cuDriverGetVersion(&v);
  return v;
}

CUresult get_proc(const char* symbol, void** pfn, int version, cuuint64_t flags,
                  CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (flags != CU_GET_PROC_ADDRESS_DEFAULT && flags != CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
      flags != CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (version > driver_version()) return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  bool known = false, has_per_thread = false;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.base, symbol) != 0) continue;
    known = true;
    has_per_thread = has_per_thread || e.variant[0] != '\0';
  }
  if (!known) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  // Names without stream semantics answer the legacy entry for either flag.
  const bool want_variant = per_thread && has_per_thread;
  const Entry* best = nullptr;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.base, symbol) != 0 || (e.variant[0] != '\0') != want_variant) continue;
    if (e.version <= version && e.version <= driver_version() &&
        (best == nullptr || e.version > best->version)) {
      best = &e;
    }
  }
  if (best == nullptr) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_SUCCESS;
  }
  void* handle = self_handle();
  *pfn = handle != nullptr ? dlsym(handle, best->symbol) : nullptr;
  if (status != nullptr) {
    *status = *pfn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}

// "CUDA_ERROR_INVALID_VALUE" -> "invalid value": softcuda's own wording of each code.
const char* description(CUresult r) {
  static std::mutex mu;
  static std::unordered_map<int, std::string> cache;
  const char* name = error_name(r);
  if (name == nullptr) return nullptr;
  std::lock_guard<std::mutex> g(mu);
  auto it = cache.find(static_cast<int>(r));
  if (it != cache.end()) return it->second.c_str();
  std::string s = name;
  if (s.rfind("CUDA_ERROR_", 0) == 0) s = s.substr(11);
  if (s == "CUDA_SUCCESS") s = "no error";
  for (char& c : s)
    c = c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return cache.emplace(static_cast<int>(r), std::move(s)).first->second.c_str();
}

}  // namespace

SC_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status) {
  SC_ENTER_ANYTIME("cuGetProcAddress");
  return get_proc(symbol, pfn, version, flags, status);
}

SC_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  SC_ENTER_ANYTIME("cuGetProcAddress");
  return get_proc(symbol, pfn, version, flags, nullptr);
}

SC_API CUresult cuGetErrorString(CUresult error, const char** str) {
  SC_ENTER_ANYTIME("cuGetErrorString");
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *str = description(error);
  return *str != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SC_API CUresult cuGetErrorName(CUresult error, const char** str) {
  SC_ENTER_ANYTIME("cuGetErrorName");
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *str = error_name(error);
  return *str != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
