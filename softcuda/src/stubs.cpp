// Every export of the CUDA driver stub, weakly defined as CUDA_ERROR_NOT_SUPPORTED: what softcuda
// emulates is a strong definition elsewhere and replaces the weak one at link time, so a program
// linked with -lcuda always finds its symbols, and what is not emulated says so. This file must
// not see cuda.h: the weak definitions take no parameters (the C calling convention lets a
// callee ignore its arguments).
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED

int not_supported(const char* name) {
  static const bool trace = std::getenv("SOFTCUDA_TRACE_UNSUPPORTED") != nullptr;
  if (trace) std::fprintf(stderr, "softcuda: %s is not emulated\n", name);
  return kNotSupported;
}

}  // namespace

#define SC_SYMBOL(base, version, variant, symbol)                        \
  extern "C" __attribute__((weak, visibility("default"))) int symbol() { \
    return not_supported(#symbol);                                       \
  }
// exports.inc has one row per exported symbol.
#include "exports.inc"
#undef SC_SYMBOL
