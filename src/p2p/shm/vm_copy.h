// Single-copy transfers between processes on one host with process_vm_readv/writev. The kernel
// may refuse them (ptrace policy, seccomp, a container): the first refusal is logged once and the
// caller falls back to the two-copy path through the shared-memory ring.
#pragma once

#include <orbite/status.h>

#include <cstddef>
#include <cstdint>

namespace orbite::p2p {

// Copies len bytes from `remote` in process `pid` to `local`.
Status vm_read(std::int64_t pid, std::byte* local, std::uint64_t remote, std::uint64_t len);
// Copies len bytes from `local` to `remote` in process `pid`.
Status vm_write(std::int64_t pid, const std::byte* local, std::uint64_t remote, std::uint64_t len);
// Whether single copy is still believed to work in this process.
bool vm_copy_usable();
// Tests: make every copy fail as a kernel refusal would, without giving up on single copy, so
// that each transfer exercises its fallback.
void vm_copy_simulate_refusal(bool refuse);

}  // namespace orbite::p2p
