// Entry points of a library loaded at run time (dlopen): the verbs loader and the metrics
// exporter's HTTP server resolve theirs the same way.
#pragma once

#include <dlfcn.h>

namespace orbite::platform {

// Sets `out` to `name`'s address in `handle` (null when it is absent); true when it was found.
template <class Fn>
bool resolve_symbol(void* handle, const char* name, Fn& out) {
  void* sym = dlsym(handle, name);
  out = reinterpret_cast<Fn>(sym);
  return sym != nullptr;
}

}  // namespace orbite::platform
