#include "topo/selector.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <utility>

#include "topo/port_rate.h"

namespace orbite::topo {

struct DeviceSelector::CompiledRow {
  Location location;
  std::size_t count = 0;
  // Tier 0 first, then tier 1 and 2, each in the row's order: round-robin takes a prefix and
  // the multipath sort breaks exact ties by this position.
  std::array<std::uint8_t, kMaxNics> nic{};
  std::array<std::uint8_t, kMaxNics> tier{};
  std::array<double, kMaxNics> weight{};
};

// TENT's transmit meter (notes §5.9): completed bytes over the time payload debt was
// outstanding, sampled at most every kMeterInterval.
struct DeviceSelector::Meter {
  std::mutex mu;
  double seed_Bps = 0.0;
  double transmit_Bps = 0.0;
  std::uint64_t posted = 0;
  std::uint64_t completed = 0;
  std::chrono::nanoseconds busy{0};
  TimePoint busy_since{};
  bool sampled = false;
  TimePoint last_sample{};
  bool have_baseline = false;
  std::uint64_t base_completed = 0;
  std::chrono::nanoseconds base_busy{0};

  void reseed(double seed) {
    seed_Bps = seed;
    transmit_Bps = seed;
  }
  void post(std::uint64_t bytes, TimePoint now);
  void complete(std::uint64_t bytes, bool ok, TimePoint now);
  void sample(TimePoint now);
};

namespace {

// Scores this close are one tie; the guide rotates ties instead of TENT's jitter + lowest id.
constexpr double kTieEpsilon = 1e-9;
// TENT's selectMultiPath weight is 1 / (score + 1e-12); the constant only guards a zero score.
// Added to every score it skews exact shares (for 64 KiB slices at 400 Gbps, 6 × 2/3 comes out
// just under 4 and floors to 3, against the guide's worked example), so it is applied as a lower
// bound instead.
constexpr double kMinScore = 1e-12;
// An exact share such as 6 × 2/3 = 4 may come out as 3.999…; without this guard the floor would
// move a slice to the leftovers.
constexpr double kShareGuard = 1e-9;

double bytes_per_second(double gbps) {
  return gbps * 1e9 / 8.0;
}

double clamp_to_seed(double value, double seed) {
  return std::clamp(value, kEstimateFloor * seed, kEstimateCeiling * seed);
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

bool positive_finite(double v) {
  return std::isfinite(v) && v > 0.0;
}

// The eligible candidates of one choice; lives on the stack.
// Left uninitialized: only the first `count` entries are ever read.
struct Eligible {
  std::size_t count = 0;
  std::array<std::uint8_t, kMaxNics> nic;
  std::array<std::uint8_t, kMaxNics> tier;
  std::array<double, kMaxNics> weight;
  std::array<double, kMaxNics> score;
};

}  // namespace

void DeviceSelector::Meter::post(std::uint64_t bytes, TimePoint now) {
  if (bytes == 0) return;
  // Busy time accrues only while debt is outstanding: a stretch opens on 0 → non-zero.
  if (posted == 0) busy_since = now;
  posted += bytes;
}

void DeviceSelector::Meter::complete(std::uint64_t bytes, bool ok, TimePoint now) {
  const std::uint64_t leaving = std::min(posted, bytes);
  if (leaving > 0) {
    posted -= leaving;
    if (posted == 0) busy += std::max(now - busy_since, std::chrono::nanoseconds{0});
  }
  if (ok) {
    completed += bytes;
  } else {
    // The interval's bytes and busy time no longer describe the link (TENT notes §5.9): the next
    // sample only rebuilds baselines.
    have_baseline = false;
  }
  sample(now);
}

void DeviceSelector::Meter::sample(TimePoint now) {
  if (sampled && now - last_sample < kMeterInterval) return;
  const auto interval = now - last_sample;
  const bool first = !sampled;
  sampled = true;
  last_sample = now;
  auto busy_now = busy;
  if (posted > 0) busy_now += std::max(now - busy_since, std::chrono::nanoseconds{0});
  const std::uint64_t d_completed = completed - base_completed;
  const auto d_busy = busy_now - base_busy;
  base_completed = completed;
  base_busy = busy_now;
  if (first || !have_baseline) {
    have_baseline = true;
    return;
  }
  // A long gap mixes idle stretches and stale debt into one number; TENT drops it.
  if (interval > kMeterMaxInterval || d_completed == 0 || d_busy <= std::chrono::nanoseconds{0}) {
    return;
  }
  const double observed =
      static_cast<double>(d_completed) / (static_cast<double>(d_busy.count()) * 1e-9);
  transmit_Bps = clamp_to_seed(
      kTransmitOldWeight * transmit_Bps + (1.0 - kTransmitOldWeight) * observed, seed_Bps);
}

// ---------------------------------------------------------------------------------------------
// DeviceLease

DeviceLease::DeviceLease(DeviceLease&& other) noexcept
    : selector_(std::exchange(other.selector_, nullptr)),
      pending_(std::exchange(other.pending_, 0)),
      size_(std::exchange(other.size_, 0)),
      charged_(other.charged_),
      nic_(other.nic_),
      bytes_(other.bytes_) {}

DeviceLease& DeviceLease::operator=(DeviceLease&& other) noexcept {
  if (this != &other) {
    abandon();
    selector_ = std::exchange(other.selector_, nullptr);
    pending_ = std::exchange(other.pending_, 0);
    size_ = std::exchange(other.size_, 0);
    charged_ = other.charged_;
    nic_ = other.nic_;
    bytes_ = other.bytes_;
  }
  return *this;
}

bool DeviceLease::complete(std::size_t slice, bool ok, std::chrono::nanoseconds post_to_cqe) {
  if (selector_ == nullptr || slice >= size_) return false;
  std::lock_guard lock(selector_->mu_);
  return selector_->release_locked(*this, slice, ok, post_to_cqe);
}

void DeviceLease::abandon() {
  // Reading pending_ unlocked is safe: abandon never races with complete on the same lease.
  if (selector_ == nullptr || pending_ == 0) return;
  if (!charged_) {  // round-robin mode: nothing to return to the selector
    pending_ = 0;
    return;
  }
  std::lock_guard lock(selector_->mu_);
  for (std::uint64_t left = pending_; left != 0; left &= left - 1) {
    selector_->release_locked(*this, static_cast<std::size_t>(std::countr_zero(left)), false,
                              std::chrono::nanoseconds{0});
  }
}

bool DeviceSelector::release_locked(DeviceLease& lease, std::size_t slice, bool ok,
                                    std::chrono::nanoseconds post_to_cqe) {
  const std::uint64_t bit = std::uint64_t{1} << slice;
  if ((lease.pending_ & bit) == 0) return false;
  lease.pending_ &= ~bit;
  const std::size_t nic = lease.nic_[slice];
  const std::uint64_t bytes = lease.bytes_[slice];
  // Exactly what the slice charged; the min only keeps a bookkeeping bug from wrapping around.
  if (lease.charged_) charged_[nic] -= std::min(charged_[nic], bytes);
  // Only a successful slice with a measured post → last CQE time is a bandwidth sample (TENT
  // notes §5.8, LATER); a zero-byte one would pin the estimate at its floor.
  if (ok && post_to_cqe.count() > 0 && bytes > 0) {
    const double observed =
        static_cast<double>(bytes) / (static_cast<double>(post_to_cqe.count()) * 1e-9);
    selection_Bps_[nic] = clamp_to_seed(
        kSelectionOldWeight * selection_Bps_[nic] + (1.0 - kSelectionOldWeight) * observed,
        seed_Bps_[nic]);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// DeviceSelector: construction

DeviceSelector::DeviceSelector() : meters_(std::make_unique<std::array<Meter, kMaxNics>>()) {}
DeviceSelector::~DeviceSelector() = default;

Result<std::unique_ptr<DeviceSelector>> DeviceSelector::create(const PriorityTable& table,
                                                               const Inventory& inventory,
                                                               const SelectorConfig& config) {
  if (!positive_finite(config.default_bandwidth_gbps)) {
    return Status::error(Errc::Configuration, "rdma.default_bandwidth_gbps = " +
                                                  std::to_string(config.default_bandwidth_gbps) +
                                                  " must be a positive number");
  }
  for (std::size_t t = 0; t < kTierCount; ++t) {
    if (!positive_finite(config.scheduling.tier_weights[t])) {
      return Status::error(Errc::Configuration,
                           "rdma.scheduling.tier_weights[" + std::to_string(t) +
                               "] = " + std::to_string(config.scheduling.tier_weights[t]) +
                               " must be a positive number");
    }
  }
  const std::size_t n = inventory.nics.size();
  if (n > kMaxNics) {
    return Status::error(Errc::InvalidArgument,
                         "the inventory has " + std::to_string(n) +
                             " NICs; the selector handles at most 64 (the device_mask width)");
  }

  std::unique_ptr<DeviceSelector> s(new DeviceSelector());
  s->config_ = config;
  s->nic_count_ = n;
  s->healthy_mask_ = n == kMaxNics ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
  s->nic_numa_.fill(kUnknownNuma);
  for (std::size_t i = 0; i < n; ++i) {
    const NicInfo& info = inventory.nics[i];
    if (info.id != static_cast<int>(i)) {
      return Status::error(Errc::InvalidArgument, "inventory NIC " + info.name + " at position " +
                                                      std::to_string(i) + " has id " +
                                                      std::to_string(info.id));
    }
    s->names_.push_back(info.name);
    s->nic_numa_[i] = info.numa < 0 ? kUnknownNuma : info.numa;
    s->link_gbps_[i] = info.link_gbps;
    s->effective_gbps_[i] = effective_rate_gbps(info.link_gbps, config.default_bandwidth_gbps);
    s->seed_Bps_[i] = bytes_per_second(s->effective_gbps_[i]);
    s->selection_Bps_[i] = s->seed_Bps_[i];
    (*s->meters_)[i].reseed(s->seed_Bps_[i]);
  }
  for (const GpuInfo& gpu : inventory.gpus) {
    if (gpu.ordinal < 0 || gpu.ordinal >= 4096) continue;
    const auto ordinal = static_cast<std::size_t>(gpu.ordinal);
    if (s->gpu_numa_.size() <= ordinal) s->gpu_numa_.resize(ordinal + 1, kUnknownNuma);
    s->gpu_numa_[ordinal] = gpu.numa < 0 ? kUnknownNuma : gpu.numa;
  }

  s->rows_.reserve(table.rows.size());
  for (const LocationTiers& row : table.rows) {
    CompiledRow& c = s->rows_.emplace_back();
    c.location = row.location;
    std::uint64_t seen = 0;
    for (std::size_t t = 0; t < kTierCount; ++t) {
      for (int id : row.tiers[t]) {
        if (id < 0 || static_cast<std::size_t>(id) >= n) {
          return Status::error(Errc::InvalidArgument,
                               "priority row " + row.location.to_string() + " (" + table.origin +
                                   ") names NIC " + std::to_string(id) + "; the inventory has " +
                                   std::to_string(n) + " NICs");
        }
        // A NIC keeps its preferred tier; TENT would add it twice and double-weight it in
        // multipath (notes §5.2).
        const std::uint64_t bit = std::uint64_t{1} << id;
        if (seen & bit) continue;
        seen |= bit;
        c.nic[c.count] = static_cast<std::uint8_t>(id);
        c.tier[c.count] = static_cast<std::uint8_t>(t);
        c.weight[c.count] = config.scheduling.tier_weights[t];
        ++c.count;
      }
    }
  }
  std::sort(s->rows_.begin(), s->rows_.end(),
            [](const CompiledRow& a, const CompiledRow& b) { return a.location < b.location; });
  for (std::size_t i = 1; i < s->rows_.size(); ++i) {
    if (s->rows_[i].location == s->rows_[i - 1].location) {
      return Status::error(Errc::InvalidArgument, "priority table (" + table.origin +
                                                      ") has two rows for " +
                                                      s->rows_[i].location.to_string());
    }
  }
  return s;
}

const DeviceSelector::CompiledRow& DeviceSelector::row_for(Location location) const {
  const auto find = [this](Location where) -> const CompiledRow* {
    auto it = std::lower_bound(rows_.begin(), rows_.end(), where,
                               [](const CompiledRow& row, Location w) { return row.location < w; });
    return it != rows_.end() && it->location == where ? &*it : nullptr;
  };
  if (const CompiledRow* row = find(location)) return *row;
  if (const CompiledRow* star = find(Location::any())) return *star;
  static const CompiledRow kNone;
  return kNone;
}

int DeviceSelector::location_numa(Location location) const {
  switch (location.kind) {
    case Location::Kind::Cpu: return location.index >= 0 ? location.index : kUnknownNuma;
    case Location::Kind::Cuda:
      if (location.index >= 0 && static_cast<std::size_t>(location.index) < gpu_numa_.size()) {
        return gpu_numa_[static_cast<std::size_t>(location.index)];
      }
      return kUnknownNuma;
    case Location::Kind::Any: break;
  }
  return kUnknownNuma;
}

// ---------------------------------------------------------------------------------------------
// DeviceSelector: selection

Result<DeviceLease> DeviceSelector::select(const SelectionRequest& req, std::uint64_t slice_bytes) {
  const std::uint64_t one[1] = {slice_bytes};
  return choose(req, std::span<const std::uint64_t>(one));
}

Result<DeviceLease> DeviceSelector::select_multi(const SelectionRequest& req,
                                                 std::span<const std::uint64_t> slice_lengths) {
  return choose(req, slice_lengths);
}

Result<DeviceLease> DeviceSelector::choose(const SelectionRequest& req,
                                           std::span<const std::uint64_t> lengths) {
  const std::size_t n = lengths.size();
  if (n == 0 || n > kMaxSlices) {
    return Status::error(Errc::InvalidArgument,
                         "a selection takes 1 to 64 slices, not " + std::to_string(n));
  }
  const CompiledRow& row = row_for(req.location);
  if (row.count == 0) {
    return Status::error(Errc::Unavailable,
                         "no eligible NIC for " + req.location.to_string() +
                             ": its priority row lists no NIC (the location is disabled)");
  }
  // Unknown NUMA on either side stays eligible (the guide; TENT notes §5.2).
  const int home = config_.strict_local_numa ? location_numa(req.location) : kUnknownNuma;
  const bool smart = config_.scheduling.smart_selection;

  Eligible e;
  DeviceLease lease;
  std::size_t off_mask = 0, no_path = 0, unhealthy = 0, cross_numa = 0;
  std::unique_lock lock(mu_);
  // Eligibility is a hard limit applied before any score: a weight can prefer an idle
  // lower-tier NIC but never admit an excluded one.
  for (std::size_t i = 0; i < row.count; ++i) {
    const std::uint8_t nic = row.nic[i];
    const std::uint64_t bit = std::uint64_t{1} << nic;
    if ((req.mask & bit) == 0) {
      ++off_mask;
    } else if ((req.compatible & bit) == 0) {
      ++no_path;
    } else if ((healthy_mask_ & bit) == 0) {
      ++unhealthy;
    } else if (home != kUnknownNuma && nic_numa_[nic] != kUnknownNuma && nic_numa_[nic] != home) {
      ++cross_numa;
    } else {
      e.nic[e.count] = nic;
      e.tier[e.count] = row.tier[i];
      e.weight[e.count] = row.weight[i];
      ++e.count;
    }
  }
  if (e.count == 0) {
    lock.unlock();
    std::string msg = "no eligible NIC for " + req.location.to_string();
    if (row.location != req.location) msg += " (row \"" + row.location.to_string() + "\")";
    msg += ": " + std::to_string(row.count) + " listed; mask " + hex(req.mask) + " excludes " +
           std::to_string(off_mask) + ", " + std::to_string(no_path) +
           " without a path to the peer (compatible " + hex(req.compatible) + "), " +
           std::to_string(unhealthy) + " unhealthy, " + std::to_string(cross_numa) + " cross-NUMA";
    if (config_.strict_local_numa) {
      msg += " (strict_local_numa, memory on NUMA " +
             (home == kUnknownNuma ? std::string("unknown") : std::to_string(home)) + ")";
    }
    return Status::error(Errc::Unavailable, std::move(msg));
  }

  lease.selector_ = this;
  lease.size_ = static_cast<std::uint8_t>(n);
  lease.pending_ = n == kMaxSlices ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
  lease.charged_ = smart;
  for (std::size_t i = 0; i < n; ++i) lease.bytes_[i] = lengths[i];

  if (!smart) {
    // TENT's round-robin mode (notes §5.6): the first tier holding an eligible NIC, cycled slice
    // by slice. Eligible NICs are in tier order, so that tier is a prefix.
    std::size_t k = 1;
    while (k < e.count && e.tier[k] == e.tier[0]) ++k;
    for (std::size_t i = 0; i < n; ++i) lease.nic_[i] = e.nic[(rr_counter_ + i) % k];
    rr_counter_ += n;
  } else {
    const double first = static_cast<double>(lengths[0]);
    for (std::size_t j = 0; j < e.count; ++j) {
      const std::uint8_t nic = e.nic[j];
      e.score[j] = (static_cast<double>(charged_[nic]) + first) / selection_Bps_[nic] * e.weight[j];
    }
    if (n == 1) {
      double best = e.score[0];
      for (std::size_t j = 1; j < e.count; ++j) best = std::min(best, e.score[j]);
      std::array<std::uint8_t, kMaxNics> tied;
      std::size_t k = 0;
      for (std::size_t j = 0; j < e.count; ++j) {
        if (e.score[j] - best <= kTieEpsilon * e.score[j]) tied[k++] = e.nic[j];
      }
      // Rotating ties (the guide) spread an idle start over equal NICs instead of always
      // loading the lowest id as TENT's jitter + id order does.
      lease.nic_[0] = k == 1 ? tied[0] : tied[tie_counter_++ % k];
    } else {
      // Score order; exact ties keep row order, which keeps the comparison a strict weak order.
      std::array<std::uint8_t, kMaxNics> order;
      for (std::size_t j = 0; j < e.count; ++j) order[j] = static_cast<std::uint8_t>(j);
      std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(e.count),
                [&e](std::uint8_t a, std::uint8_t b) {
                  return e.score[a] < e.score[b] || (e.score[a] == e.score[b] && a < b);
                });
      const std::uint32_t period = config_.scheduling.multipath_probe_period;
      ++parent_counter_;
      if (period != 0 && parent_counter_ % period == 0) {
        // Probe parent: round-robin counts (the j-th best gets n / count slices, the first
        // n % count one more) so that NICs the scores starve still get fresh samples, laid out
        // as one contiguous run per NIC in score order so that a probe costs one segment per
        // rail rather than one per slice. Only eligible (hence healthy) NICs are probed.
        std::size_t next = 0;
        for (std::size_t j = 0; j < e.count && next < n; ++j) {
          const std::size_t take = n / e.count + (j < n % e.count ? 1 : 0);
          for (std::size_t i = 0; i < take; ++i) lease.nic_[next++] = e.nic[order[j]];
          if (take > 0) ++probes_[e.nic[order[j]]];
        }
      } else {
        // TENT's selectMultiPath shares: weight 1 / score, floor(w / W × n) slices
        // each in score order as contiguous runs, the flooring leftovers appended to the best.
        double total = 0.0;
        std::array<double, kMaxNics> weight;
        for (std::size_t j = 0; j < e.count; ++j) {
          weight[j] = 1.0 / std::max(e.score[order[j]], kMinScore);
          total += weight[j];
        }
        std::size_t next = 0;
        for (std::size_t j = 0; j < e.count && next < n; ++j) {
          const double share = std::floor(weight[j] / total * static_cast<double>(n) + kShareGuard);
          const std::size_t take = std::min(static_cast<std::size_t>(share), n - next);
          for (std::size_t i = 0; i < take; ++i) lease.nic_[next++] = e.nic[order[j]];
        }
        // The best has the largest weight, the earliest on ties: order[0].
        while (next < n) lease.nic_[next++] = e.nic[order[0]];
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t nic = lease.nic_[i];
    allocated_[nic] += lease.bytes_[i];
    if (smart) charged_[nic] += lease.bytes_[i];
  }
  lock.unlock();
  return lease;
}

// ---------------------------------------------------------------------------------------------
// DeviceSelector: health, rates, meters, stats

void DeviceSelector::set_healthy(int nic, bool healthy) {
  if (!known(nic)) return;
  const std::uint64_t bit = std::uint64_t{1} << nic;
  std::lock_guard lock(mu_);
  const bool was = (healthy_mask_ & bit) != 0;
  healthy_mask_ = healthy ? (healthy_mask_ | bit) : (healthy_mask_ & ~bit);
  if (!healthy || was) return;
  // Back from unhealthy: what both estimates learned describes the link before it failed (its
  // last slices crawled into the failure), and with a low estimate TENT's floored shares would
  // give the rail no slice at all until a probe parent. It restarts from its seed.
  restart_estimates(static_cast<std::size_t>(nic));
}

void DeviceSelector::set_link_rate(int nic, double reported_gbps) {
  if (!known(nic)) return;
  const auto i = static_cast<std::size_t>(nic);
  std::lock_guard lock(mu_);
  link_gbps_[i] = reported_gbps;
  const double effective = effective_rate_gbps(reported_gbps, config_.default_bandwidth_gbps);
  if (effective == effective_gbps_[i]) return;
  // What was learned against the old rate (and its clamp) says nothing about the new link: both
  // estimates restart from the new seed (TENT notes §5.7).
  effective_gbps_[i] = effective;
  seed_Bps_[i] = bytes_per_second(effective);
  restart_estimates(i);
}

void DeviceSelector::restart_estimates(std::size_t i) {
  selection_Bps_[i] = seed_Bps_[i];
  Meter& meter = (*meters_)[i];
  std::lock_guard meter_lock(meter.mu);
  meter.reseed(seed_Bps_[i]);
}

void DeviceSelector::on_posted(int nic, std::uint64_t bytes, TimePoint now) {
  if (!known(nic)) return;
  Meter& meter = (*meters_)[static_cast<std::size_t>(nic)];
  std::lock_guard lock(meter.mu);
  meter.post(bytes, now);
}

void DeviceSelector::on_completed(int nic, std::uint64_t bytes, bool ok, TimePoint now) {
  if (!known(nic)) return;
  Meter& meter = (*meters_)[static_cast<std::size_t>(nic)];
  std::lock_guard lock(meter.mu);
  meter.complete(bytes, ok, now);
}

void DeviceSelector::transmit(std::span<NicTransmit> out) const {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = NicTransmit{};
    if (i >= nic_count_) continue;
    Meter& meter = (*meters_)[i];
    std::lock_guard meter_lock(meter.mu);
    out[i].Bps = meter.transmit_Bps;
    out[i].posted = meter.posted;
    out[i].healthy = (healthy_mask_ >> i) & 1;
    out[i].known = link_gbps_[i] > 0.0 || meter.sampled;
  }
}

std::vector<NicLoadStats> DeviceSelector::nic_load_stats() const {
  std::vector<NicLoadStats> out(nic_count_);
  for (std::size_t i = 0; i < nic_count_; ++i) {
    out[i].id = static_cast<int>(i);
    out[i].name = names_[i];  // immutable; copied before the lock so no allocation holds it
  }
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < nic_count_; ++i) {
    NicLoadStats& s = out[i];
    s.healthy = (healthy_mask_ >> i) & 1;
    s.link_gbps = link_gbps_[i];
    s.effective_gbps = effective_gbps_[i];
    s.selection_Bps = selection_Bps_[i];
    s.charged_bytes = charged_[i];
    s.allocated_bytes = allocated_[i];
    s.probes = probes_[i];
    Meter& meter = (*meters_)[i];
    std::lock_guard meter_lock(meter.mu);
    s.transmit_Bps = meter.transmit_Bps;
    s.posted_bytes = meter.posted;
    s.completed_bytes = meter.completed;
  }
  return out;
}

}  // namespace orbite::topo
