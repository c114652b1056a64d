// softverbs' control API for tests (docs/softverbs.md, "Fault injection"): a header-only helper
// for programs that are linked against any libibverbs.so.1 and may run on softverbs. It finds
// softverbs_control() at run time, so the same binary still runs on a real provider, where
// softverbs::control() reports that softverbs is not loaded.
//
//   std::string r;
//   if (softverbs::control("port soft_0 down", &r) != 0) ...  // r: "ok" or "error: ..."
#pragma once

#include <dlfcn.h>

#include <cerrno>
#include <cstddef>
#include <string>

extern "C" {
// Runs one command (see docs/softverbs.md); 0 and "ok..." in reply, or an errno value and
// "error: ..." naming the field and value. Exported by softverbs' libibverbs.so.1 only.
int softverbs_control(const char* command, char* reply, size_t reply_size);
}

namespace softverbs {

// True when the libibverbs.so.1 in this process is softverbs.
inline bool loaded() {
  return dlsym(RTLD_DEFAULT, "softverbs_control") != nullptr;
}

inline int control(const std::string& command, std::string* reply = nullptr) {
  using Fn = int (*)(const char*, char*, size_t);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "softverbs_control"));
  if (fn == nullptr) {
    if (reply != nullptr) *reply = "error: softverbs is not the libibverbs.so.1 of this process";
    return ENOSYS;
  }
  char buf[1024];
  const int err = fn(command.c_str(), buf, sizeof(buf));
  if (reply != nullptr) *reply = buf;
  return err;
}

}  // namespace softverbs
