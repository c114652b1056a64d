// Priority slots shared by cooperating processes on one host (rdma.shared_quota_shm_path; the
// guide's "Priority promotion and shared slots", TENT's SharedSlotManager). Time is cut into
// slots of rdma.slot_rotation_interval that repeat High only, High+Medium, then every priority;
// a lane posts payload of a tier only while the current slot admits it. It is a gate on posting,
// not a bandwidth cap or an exclusive turn.
//
// The object is a POSIX shared-memory segment holding one fixed header (magic, version, size,
// interval, clock id, CRC of those) and the published slot with the monotonic time it was
// computed at. One process at a time publishes: the one holding a non-blocking flock() on the
// segment, which the kernel releases when that process exits; the others try to take the lock
// every 10 ms. Readers trust a published slot only within the interval it was computed in, so a
// stalled or dead publisher cannot extend a slot: a stale one admits High only. An object whose
// header is foreign (another interval, clock or format) or damaged is refused when the engine
// starts (fail closed). Participants need the same name, interval, effective UID (the segment is
// 0600), /dev/shm mount and time namespace.
#pragma once

#include <orbite/status.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace orbite::rdma {

inline constexpr std::uint64_t kSlotMagic = 0x53544F4C5342524FULL;  // "ORBSLOTS"
inline constexpr std::uint32_t kSlotVersion = 1;

// The slot (0: High only, 1: High+Medium, 2: all) at monotonic time `now_ns`.
inline std::uint32_t slot_at(std::uint64_t now_ns, std::uint64_t interval_ns) {
  return static_cast<std::uint32_t>((now_ns / interval_ns) % 3);
}

class SharedSlots {
 public:
  // Opens (or creates) the named segment and starts the publisher thread. Configuration naming
  // the object and what is wrong with it for a foreign or damaged header.
  static Result<std::unique_ptr<SharedSlots>> open(const std::string& name,
                                                   std::chrono::nanoseconds interval);
  SharedSlots(const SharedSlots&) = delete;
  SharedSlots& operator=(const SharedSlots&) = delete;
  ~SharedSlots();

  // Whether payload of `tier` (0 High, 1 Medium, 2 Low) may be posted at monotonic `now_ns`.
  [[nodiscard]] bool admits(std::size_t tier, std::uint64_t now_ns) const;
  [[nodiscard]] bool admits(std::size_t tier) const { return admits(tier, now_ns()); }
  // This process holds the publisher's lock.
  [[nodiscard]] bool publishing() const { return publishing_.load(std::memory_order_acquire); }
  [[nodiscard]] const std::string& name() const { return name_; }
  static std::uint64_t now_ns();

  // The mapped header (public for the tests that damage it).
  struct Header;

 private:
  SharedSlots(std::string name, int fd, Header* header, std::uint64_t interval_ns);
  void run(const std::stop_token& stop);

  std::string name_;
  int fd_ = -1;
  Header* header_ = nullptr;  // mapped for the object's lifetime
  std::uint64_t interval_ns_ = 0;
  std::atomic<bool> publishing_{false};
  std::jthread publisher_;  // last: stopped and joined before the mapping goes
};

}  // namespace orbite::rdma
