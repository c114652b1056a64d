// Bandwidth-aware RDMA NIC selection (the guide's "Bandwidth-aware RDMA selection", after TENT's
// DeviceSelector, TENT notes §5). A selector is compiled once from the priority table and the
// inventory; each slice (or multi-slice parent) then picks NICs from the request location's row,
// limited by hard eligibility rules, and charges its bytes until the slice completes. Selection
// never queries a device and never allocates.
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "topo/inventory.h"
#include "topo/location.h"

namespace orbite::topo {

using SelectorClock = std::chrono::steady_clock;
using TimePoint = SelectorClock::time_point;

// TENT's largest slice count per request; a lease holds at most this many slices.
inline constexpr std::size_t kMaxSlices = 64;

// Learning constants (TENT's bandwidth_learning_rate and transmit meter, notes §5.8–5.9). The
// weights are the old value's share.
inline constexpr double kSelectionOldWeight = 0.01;
inline constexpr double kTransmitOldWeight = 0.9;
inline constexpr double kEstimateFloor = 0.1;     // × seed
inline constexpr double kEstimateCeiling = 10.0;  // × seed
inline constexpr std::chrono::nanoseconds kMeterInterval = std::chrono::milliseconds(10);
inline constexpr std::chrono::nanoseconds kMeterMaxInterval = std::chrono::milliseconds(50);

struct SelectorConfig {
  rdma::SchedulingParams scheduling;
  bool strict_local_numa = false;
  double default_bandwidth_gbps = 400.0;

  static SelectorConfig from(const rdma::RdmaConfig& rdma) {
    return {rdma.scheduling, rdma.strict_local_numa, rdma.default_bandwidth_gbps};
  }
};

struct SelectionRequest {
  Location location;                 // where the owner's bytes live
  std::uint64_t mask = ~0ULL;        // the request's or policy's device_mask (bit i = NIC i)
  std::uint64_t compatible = ~0ULL;  // NICs with a usable path to the peer
};

// Local requester observations; rates in bytes per second.
struct NicLoadStats {
  int id = -1;
  std::string name;
  bool healthy = true;
  double link_gbps = 0.0;             // last reported rate (0: unknown)
  double effective_gbps = 0.0;        // the seed: reported rate, or default_bandwidth_gbps
  double selection_Bps = 0.0;         // selection EWMA
  double transmit_Bps = 0.0;          // transmit meter
  std::uint64_t charged_bytes = 0;    // charged by leases, not yet completed or abandoned
  std::uint64_t posted_bytes = 0;     // posted payload debt outstanding
  std::uint64_t completed_bytes = 0;  // successful payload bytes, lifetime
  std::uint64_t allocated_bytes = 0;  // bytes assigned by selection, lifetime, both modes
  std::uint64_t probes = 0;           // probe parents that gave it at least one slice
};

// What the RDMA scheduler reads of a NIC per dispatch (DeadlineMlu admission and arbitration).
struct NicTransmit {
  double Bps = 0.0;          // the transmit meter's estimate (its seed until it samples)
  std::uint64_t posted = 0;  // posted payload debt outstanding
  bool healthy = false;
  bool known = false;  // a reported link rate or a measured sample: the estimate means something
};

class DeviceSelector;

// The NICs chosen for one slice or one multi-slice parent, and the byte charges they hold. Charges
// return exactly once per slice: on complete(), or all remaining ones on abandon() (also run by
// the destructor and by move assignment). Different slices of one lease may be completed from
// different threads at once; abandon(), moves and destruction must not race with the lease's
// other calls. The selector must outlive its leases.
class DeviceLease {
 public:
  DeviceLease() = default;
  DeviceLease(DeviceLease&& other) noexcept;
  DeviceLease& operator=(DeviceLease&& other) noexcept;
  DeviceLease(const DeviceLease&) = delete;
  DeviceLease& operator=(const DeviceLease&) = delete;
  ~DeviceLease() { abandon(); }

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] int nic(std::size_t slice) const { return nic_[slice]; }
  [[nodiscard]] std::uint64_t bytes(std::size_t slice) const { return bytes_[slice]; }

  // The slice finished. A successful slice with a positive post-to-last-CQE time feeds the
  // selection EWMA; failed or uncertain ones (ok false, no time) learn nothing (TENT notes §5.8,
  // LATER). Returns the slice's charge; false, changing nothing, for a slice already completed or
  // abandoned, or out of range.
  bool complete(std::size_t slice, bool ok, std::chrono::nanoseconds post_to_cqe);
  // Returns every charge not yet completed. Idempotent.
  void abandon();

 private:
  friend class DeviceSelector;

  DeviceSelector* selector_ = nullptr;
  std::uint64_t pending_ = 0;  // bit i: slice i still holds its charge; under the selector's lock
  std::uint8_t size_ = 0;
  bool charged_ = false;  // smart mode charges; round-robin mode does not
  std::array<std::uint8_t, kMaxSlices> nic_{};
  std::array<std::uint64_t, kMaxSlices> bytes_{};
};

class DeviceSelector {
 public:
  // Compiles every row of `table` against the inventory (NIC NUMA nodes, GPU NUMA nodes, tier
  // weights) and seeds each NIC's estimates from its link rate. Rejects a non-positive tier weight
  // or default rate, an inventory over kMaxNics NICs, and a row naming a NIC the inventory lacks.
  static Result<std::unique_ptr<DeviceSelector>> create(const PriorityTable& table,
                                                        const Inventory& inventory,
                                                        const SelectorConfig& config);
  DeviceSelector(const DeviceSelector&) = delete;
  DeviceSelector& operator=(const DeviceSelector&) = delete;
  ~DeviceSelector();

  // One slice: the eligible NIC with the lowest predicted service time
  //   (charged bytes + slice_bytes) / selection Bps × tier weight,
  // ties (within a relative 1e-9) rotating. Charges slice_bytes to it. Unavailable when no NIC of
  // the location's row is eligible.
  Result<DeviceLease> select(const SelectionRequest& req, std::uint64_t slice_bytes);
  // A multi-slice parent of 1..kMaxSlices slices of the given exact lengths (TENT's
  // selectMultiPath, scored with the first slice's length). Every multipath_probe_period-th
  // parent (0: never) gives the eligible NICs round-robin counts instead, one contiguous run
  // per NIC in score order. Either way each NIC holds one contiguous run of the parent's
  // slices. All charges commit under one lock. A single slice is scored like select() and is
  // no parent.
  Result<DeviceLease> select_multi(const SelectionRequest& req,
                                   std::span<const std::uint64_t> slice_lengths);

  // Rail state: an unhealthy NIC is neither selected nor probed. Outstanding leases keep their
  // charges until they complete. NICs start healthy. A NIC that becomes healthy again restarts
  // both estimates from its seed. Unknown ids are ignored here and below.
  void set_healthy(int nic, bool healthy);
  // A successful port query's decoded rate (port_rate.h). When the effective rate changes, both
  // estimates restart from the new seed. A failed query must not call this.
  void set_link_rate(int nic, double reported_gbps);

  // Transmit meter: payload posted to and leaving a NIC's QPs. `now` is injected so tests can
  // drive it; production passes SelectorClock::now().
  void on_posted(int nic, std::uint64_t bytes, TimePoint now);
  void on_completed(int nic, std::uint64_t bytes, bool ok, TimePoint now);

  [[nodiscard]] std::size_t nic_count() const { return nic_count_; }
  // A consistent snapshot (never half a parent) of every inventory NIC. Allocates.
  [[nodiscard]] std::vector<NicLoadStats> nic_load_stats() const;
  // The transmit side of NICs 0..out.size()-1 (beyond nic_count(): left unknown). No allocation.
  void transmit(std::span<NicTransmit> out) const;

 private:
  friend class DeviceLease;
  struct CompiledRow;
  struct Meter;

  DeviceSelector();
  Result<DeviceLease> choose(const SelectionRequest& req,
                             std::span<const std::uint64_t> slice_lengths);
  const CompiledRow& row_for(Location location) const;
  // Caller holds mu_: both estimates of NIC i start again from its seed.
  void restart_estimates(std::size_t i);
  int location_numa(Location location) const;
  bool known(int nic) const { return nic >= 0 && static_cast<std::size_t>(nic) < nic_count_; }
  // Returns the charge of the lease's slice if it still holds one (false otherwise) and learns
  // from it when ok; the caller holds mu_.
  bool release_locked(DeviceLease& lease, std::size_t slice, bool ok,
                      std::chrono::nanoseconds post_to_cqe);

  SelectorConfig config_;
  std::size_t nic_count_ = 0;
  std::vector<CompiledRow> rows_;  // sorted by location
  std::array<int, kMaxNics> nic_numa_{};
  std::vector<int> gpu_numa_;  // by CUDA ordinal
  std::vector<std::string> names_;

  // Selection state, all under mu_: the charges and choices of one parent commit together.
  // Order: (health_mu_ →) mu_ → a NIC's Meter::mu (snapshots); on_posted and on_completed take a
  // meter's mu alone. Lanes call in with their mutex held: Lane → mu_.
  mutable std::mutex mu_;
  std::uint64_t healthy_mask_ = 0;
  std::uint64_t tie_counter_ = 0;
  std::uint64_t rr_counter_ = 0;
  std::uint64_t parent_counter_ = 0;
  std::array<std::uint64_t, kMaxNics> charged_{};
  std::array<double, kMaxNics> selection_Bps_{};
  std::array<double, kMaxNics> seed_Bps_{};
  std::array<double, kMaxNics> link_gbps_{};
  std::array<double, kMaxNics> effective_gbps_{};
  std::array<std::uint64_t, kMaxNics> allocated_{};
  std::array<std::uint64_t, kMaxNics> probes_{};

  // Transmit meters, each under its own lock so the post/completion path never waits on
  // selection. Lock order: mu_ before a meter's lock.
  std::unique_ptr<std::array<Meter, kMaxNics>> meters_;
};

}  // namespace orbite::topo
