// softcuda's control API for tests (docs/softcuda.md): a header-only helper for programs that
// load any libcuda.so.1 and may run on softcuda. It finds softcuda_control() at run time, so the
// same binary runs on NVIDIA's driver, where softcuda::loaded() is false.
//
//   std::string r;
//   if (softcuda::control("fail cuMemAlloc 1 CUDA_ERROR_OUT_OF_MEMORY", &r) != 0) ...
#pragma once

#include <dlfcn.h>

#include <cerrno>
#include <cstddef>
#include <string>

namespace softcuda {

// True when the libcuda.so.1 of this process is softcuda.
inline bool loaded() {
  return dlsym(RTLD_DEFAULT, "softcuda_control") != nullptr;
}

// Runs one command; 0 and "ok..." in reply, or an errno value and "error: ...".
inline int control(const std::string& command, std::string* reply = nullptr) {
  using Fn = int (*)(const char*, char*, size_t);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "softcuda_control"));
  if (fn == nullptr) {
    if (reply != nullptr) *reply = "error: softcuda is not the libcuda.so.1 of this process";
    return ENOSYS;
  }
  std::string buf(1 << 16, '\0');
  const int err = fn(command.c_str(), buf.data(), buf.size());
  if (reply != nullptr) *reply = buf.c_str();
  return err;
}

// The JSON statistics ("stats" without the leading "ok ").
inline std::string stats() {
  std::string r;
  if (control("stats", &r) != 0 || r.size() < 3) return "{}";
  return r.substr(3);
}

// Where a dma-buf descriptor from cuMemGetHandleForAddressRange starts in its allocation's
// backing, and its length (softcuda only): 0, or ENOENT / ENOSYS.
inline int dmabuf_describe(int fd, unsigned long long* offset, unsigned long long* size) {
  using Fn = int (*)(int, unsigned long long*, unsigned long long*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "softcuda_dmabuf_describe"));
  return fn != nullptr ? fn(fd, offset, size) : ENOSYS;
}

}  // namespace softcuda
