// --memory host|cuda|pinned: where the OrbiTE benchmarks' buffers live. Host memory is the
// harness's page-aligned buffer; pinned is cuda::allocate_pinned_host; cuda is device memory
// (device 0), which the CPU never touches: its bytes are written and checked through the driver
// (OrbiTE's staging copies), outside the timed loops. Header-only: only OrbiTE binaries use it.
#pragma once

#include <orbite/cuda.h>
#include <orbite/transfer.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/harness.h"
#include "harness/orbite_bench.h"

namespace orbite::perf {

inline ExtraFlag memory_flag(std::string* kind) {
  ExtraFlag f;
  f.name = "--memory";
  f.value_name = "M";
  f.help =
      "host (default), cuda (device memory of device 0: filled and checked\n"
      "through the driver) or pinned (cuda::allocate_pinned_host)";
  f.set = [kind](std::string_view v) {
    if (v != "host" && v != "cuda" && v != "pinned")
      return std::string("expected host, cuda or pinned");
    *kind = std::string(v);
    return std::string();
  };
  return f;
}

inline std::string memory_note(const std::string& kind) {
  if (kind == "cuda")
    return "memory: cuda (device 0; bytes written and checked through the driver)";
  if (kind == "pinned") return "memory: pinned host (cuda::allocate_pinned_host)";
  return "memory: host";
}

class BenchMemory {
 public:
  BenchMemory() = default;
  BenchMemory(const std::string& kind, std::uint64_t bytes, int rank) {
    if (kind == "cuda") {
      device_ = value_or_die(rank, cuda::CudaMemory::allocate(0, bytes),
                             "allocating " + std::to_string(bytes) + " bytes of device memory");
      // Device memory starts as whatever it held: zero it, as the host buffer is.
      check_ok(rank, device_.fill(0, bytes, 0), "zeroing the device buffer");
    } else if (kind == "pinned") {
      pinned_ = value_or_die(rank, cuda::allocate_pinned_host(bytes),
                             "allocating " + std::to_string(bytes) + " bytes of pinned memory");
      std::memset(pinned_.data(), 0, bytes);
    } else {
      host_ = Buffer(bytes);
    }
    rank_ = rank;
    size_ = bytes;
  }
  [[nodiscard]] std::byte* data() const {
    if (device_.valid()) return static_cast<std::byte*>(device_.data());
    if (pinned_.valid()) return static_cast<std::byte*>(pinned_.data());
    return host_.data();
  }
  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] bool device() const { return device_.valid(); }

  void write(std::uint64_t offset, const std::byte* src, std::uint64_t n) {
    if (device_.valid()) {
      check_ok(rank_, device_.copy_from_host(offset, src, n), "writing device memory");
    } else {
      std::memcpy(data() + offset, src, n);
    }
  }
  void read(std::uint64_t offset, std::byte* dst, std::uint64_t n) const {
    if (device_.valid()) {
      check_ok(rank_, device_.copy_to_host(offset, dst, n), "reading device memory");
    } else {
      std::memcpy(dst, data() + offset, n);
    }
  }
  void fill(std::uint64_t offset, std::uint64_t n, const PatternKey& key) {
    if (!device_.valid()) return fill_pattern({data() + offset, static_cast<std::size_t>(n)}, key);
    std::vector<std::byte> host(n);
    fill_pattern(host, key);
    write(offset, host.data(), n);
  }
  Mismatch check(std::uint64_t offset, std::uint64_t n, const PatternKey& key) const {
    if (!device_.valid()) return check_pattern({data() + offset, static_cast<std::size_t>(n)}, key);
    std::vector<std::byte> host(n);
    read(offset, host.data(), n);
    return check_pattern(host, key);
  }
  Result<MemoryRegion> register_with(TransferEngine& engine) const {
    if (device_.valid()) return engine.register_memory(device_);
    if (pinned_.valid()) return engine.register_memory(pinned_);
    return engine.register_memory(host_.data(), size_);
  }

 private:
  cuda::CudaMemory device_;
  cuda::HostMemory pinned_;
  Buffer host_;
  int rank_ = 0;
  std::uint64_t size_ = 0;
};

}  // namespace orbite::perf
