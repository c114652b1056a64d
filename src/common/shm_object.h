// Sizing of new POSIX shared-memory objects.
#pragma once

#include <cstdint>

namespace orbite {

// Gives a new shared-memory object (an fd from shm_open) `bytes` and reserves its pages now:
// tmpfs allocates a page when it is first touched, so a full /dev/shm (a container's is 64 MiB
// by default) would otherwise surface as SIGBUS at some later store instead of as an error
// here. Returns 0 or an errno value (ENOSPC when /dev/shm is full).
int size_shm_object(int fd, std::uint64_t bytes);

}  // namespace orbite
