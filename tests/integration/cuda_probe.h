// What orbite-cuda-probe's scenario files share (cuda_probe.cpp, cuda_probe_direct.cpp): memory of
// each kind checked through the driver, the environment, descriptor exchange and softcuda's
// statistics.
#pragma once

#include <orbite/cuda.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "p2p_probe.h"

namespace orbite::probe {

inline constexpr std::uint64_t kRegion = 8 * kMiB;

// Memory of one kind: device (driver copies), pinned host or ordinary host.
class Memory {
 public:
  Memory(const std::string& kind, std::uint64_t bytes) : kind_(kind), bytes_(bytes) {
    if (kind == "cuda") {
      auto m = cuda::CudaMemory::allocate(0, bytes);
      check_ok(m.status(), "cuda allocate");
      device_ = *m;
    } else if (kind == "pinned") {
      auto m = cuda::allocate_pinned_host(bytes);
      check_ok(m.status(), "pinned allocate");
      pinned_ = *m;
    } else {
      check(kind == "host", "memory kind '" + kind + "' (host, cuda or pinned)");
      host_.resize(bytes);
    }
  }
  void* data() {
    if (device_.valid()) return device_.data();
    if (pinned_.valid()) return pinned_.data();
    return host_.data();
  }
  void fill(std::uint64_t at, std::uint64_t n, std::uint64_t seed) {
    Bytes b(n);
    fill_pattern(b.data(), n, seed);
    write(at, b.data(), n);
  }
  void write(std::uint64_t at, const std::byte* src, std::uint64_t n) {
    if (device_.valid()) {
      check_ok(device_.copy_from_host(at, src, n), "copy_from_host");
    } else {
      std::memcpy(static_cast<std::byte*>(data()) + at, src, n);
    }
  }
  Bytes read(std::uint64_t at, std::uint64_t n) {
    Bytes b(n);
    if (device_.valid()) {
      check_ok(device_.copy_to_host(at, b.data(), n), "copy_to_host");
    } else {
      std::memcpy(b.data(), static_cast<std::byte*>(data()) + at, n);
    }
    return b;
  }
  // Bytes [at, +n) hold pattern `seed` from its index `start` on.
  void expect(std::uint64_t at, std::uint64_t n, std::uint64_t seed, const std::string& what,
              std::uint64_t start = 0) {
    Bytes b = read(at, n);
    check_pattern(b.data(), n, seed, what, start);
  }
  Result<MemoryRegion> register_with(TransferEngine& e) {
    if (device_.valid()) return e.register_memory(device_);
    if (pinned_.valid()) return e.register_memory(pinned_);
    return e.register_memory(host_.data(), host_.size());
  }
  cuda::CudaMemory& device() { return device_; }

 private:
  std::string kind_;
  std::uint64_t bytes_;
  cuda::CudaMemory device_;
  cuda::HostMemory pinned_;
  Bytes host_;
};

// NAME's value, or `fallback` when it is unset or empty.
std::string env(const char* name, const char* fallback);
// Rank 1 registers `remote` and hands its descriptor to rank 0 (rank 1 gets an empty one).
RemoteRegion share_region(Context& c, MemoryRegion& region);
// One of softcuda's statistics (live_ipc_imports: IPC handles this process opened and has not
// closed; live_device_allocations); -1 on a real driver.
long long softcuda_stat(const std::string& name);
long long live_ipc_imports();
// Set by a scenario that leaves an RDMA resource retained: the engine's close is then
// Unquiesced, naming it.
extern bool g_close_retains;

// Scenarios (argv[1]).
void putget(Context& c);
void gpudirect(Context& c);           // cuda_probe_direct.cpp
void nvlink_messages(Context& c);     // cuda_probe_direct.cpp
void private_faults(Context& c);      // cuda_probe_direct.cpp
void device_collectives(Context& c);  // cuda_probe_collectives.cpp
void misstated_path(Context& c);      // cuda_probe_direct.cpp
void private_budget(Context& c);      // cuda_probe_direct.cpp
void private_retained(Context& c);    // cuda_probe_direct.cpp

}  // namespace orbite::probe
