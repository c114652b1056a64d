// A spin-wait hint for the busy-polling loops (progress lanes, the engine core, the collective
// executor): it lets a sibling hyperthread run and saves power while a loop spins.
#pragma once

namespace orbite {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace orbite
