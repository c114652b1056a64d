#include "p2p/rdma/scheduler.h"

#include <algorithm>
#include <limits>

namespace orbite::rdma {

double deadline_mlu(std::uint64_t bytes_ahead, std::uint64_t length,
                    SchedClock::time_point deadline, SchedClock::time_point now, double Bps) {
  if (deadline == kNoDeadline || !(Bps > 0.0)) return 0.0;
  if (deadline <= now) return std::numeric_limits<double>::infinity();
  const double window = std::chrono::duration<double>(deadline - now).count();
  const double needed = (static_cast<double>(bytes_ahead) + static_cast<double>(length)) / Bps;
  return needed / window;
}

// ---- Arbiter ---------------------------------------------------------------------------------

void Arbiter::order(std::span<const ArbCandidate> c, std::span<const NicRate> nics,
                    SchedClock::time_point now, std::vector<std::uint32_t>& order) {
  order.resize(c.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  // Groups in first-appearance order; a NIC's group is gathered once, when its first candidate
  // is met (a later candidate of the same NIC finds it already placed).
  taken_.assign(c.size(), 0);
  for (std::size_t i = 0; i < c.size(); ++i) {
    const int nic = c[i].nic;
    if (taken_[i] != 0 || nic < 0 || static_cast<std::size_t>(nic) >= nics.size()) continue;
    group_.clear();
    bool any_deadline = false;
    for (std::size_t j = i; j < c.size(); ++j) {
      if (c[j].nic != nic) continue;
      taken_[j] = 1;
      group_.push_back(static_cast<std::uint32_t>(j));
      any_deadline = any_deadline || c[j].deadline != kNoDeadline;
    }
    if (group_.size() < 2 || !any_deadline || !(nics[static_cast<std::size_t>(nic)].Bps > 0.0)) {
      continue;  // FIFO
    }
    order_group(c, nics[static_cast<std::size_t>(nic)], now);
    // The group's positions, in FIFO order, take its arbitrated order.
    for (std::size_t k = 0; k < group_.size(); ++k) order[group_[k]] = placed_[k];
  }
}

void Arbiter::order_group(std::span<const ArbCandidate> c, const NicRate& nic,
                          SchedClock::time_point now) {
  const std::size_t n = group_.size();
  placed_.clear();
  std::vector<std::uint8_t>& used = taken_;  // reused per group below: marks 2 = placed
  std::uint64_t ahead = nic.posted;
  const std::size_t greedy = std::min(n, kGreedyPicks);
  for (std::size_t slot = 0; slot < greedy; ++slot) {
    std::size_t best = n;
    double best_score = -1.0;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint32_t idx = group_[k];
      if (used[idx] == 2) continue;
      const double s = deadline_mlu(ahead, c[idx].bytes, c[idx].deadline, now, nic.Bps);
      if (s > best_score) {  // strictly greater: the earliest wins ties (FIFO)
        best_score = s;
        best = k;
      }
    }
    const std::uint32_t idx = group_[best];
    used[idx] = 2;
    placed_.push_back(idx);
    ahead += c[idx].bytes;
  }
  if (greedy == n) return;
  // The tail: scored once against what the greedy picks added, then stable by score, descending
  // (built in FIFO order, so equal scores keep it).
  tail_.clear();
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint32_t idx = group_[k];
    if (used[idx] == 2) continue;
    tail_.emplace_back(deadline_mlu(ahead, c[idx].bytes, c[idx].deadline, now, nic.Bps), idx);
  }
  std::stable_sort(tail_.begin(), tail_.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [score, idx] : tail_) placed_.push_back(idx);
}

// ---- Scheduler -------------------------------------------------------------------------------

Scheduler::~Scheduler() {
  for (std::size_t t = 0; t < kTiers; ++t) {
    counters_[t].queued.fetch_sub(tiers_[t].size(), std::memory_order_relaxed);
  }
}

void Scheduler::enqueue(const SchedEntry& e) {
  tiers_[e.tier].push_back(e);
  counters_[e.tier].queued.fetch_add(1, std::memory_order_relaxed);
}

void Scheduler::push(PeerRdma* peer, std::uint64_t parent, Priority priority,
                     SchedClock::time_point now, SchedClock::time_point deadline) {
  SchedEntry e;
  e.peer = peer;
  e.parent = parent;
  e.enqueued = now;
  e.deadline = deadline;
  e.tier = e.original = static_cast<std::uint8_t>(tier_of(priority));
  resume(e);
}

void Scheduler::resume(const SchedEntry& e) {
  if (dispatching_) {
    incoming_.push_back(e);
  } else {
    enqueue(e);
  }
}

std::size_t Scheduler::promote_tier(std::size_t from, SchedClock::time_point now) {
  std::deque<SchedEntry>& src = tiers_[from];
  const auto aged = [&](const SchedEntry& e) {
    // A clock that went backwards never counts as age.
    return e.parent != 0 && now >= e.enqueued && now - e.enqueued >= config_.promotion_timeout;
  };
  if (src.empty()) return 0;
  std::size_t moved = 0;
  if (!config_.promotion_per_entry) {
    if (!aged(src.front())) return 0;
    for (SchedEntry& e : src) {
      e.tier = static_cast<std::uint8_t>(from - 1);
      tiers_[from - 1].push_back(e);
    }
    moved = src.size();
    src.clear();
  } else {
    for (SchedEntry& e : src) {
      if (!aged(e)) continue;
      e.tier = static_cast<std::uint8_t>(from - 1);
      tiers_[from - 1].push_back(e);
      e.parent = 0;
      ++moved;
    }
    std::erase_if(src, [](const SchedEntry& e) { return e.parent == 0; });
  }
  counters_[from].queued.fetch_sub(moved, std::memory_order_relaxed);
  counters_[from - 1].queued.fetch_add(moved, std::memory_order_relaxed);
  counters_[from - 1].promoted.fetch_add(moved, std::memory_order_relaxed);
  return moved;
}

std::size_t Scheduler::promote(SchedClock::time_point now) {
  if (now < next_promotion_) return 0;
  next_promotion_ = now + std::chrono::milliseconds(1);
  // Medium first: what Low promotes into Medium is not promoted again in this check.
  const std::size_t medium = promote_tier(1, now);
  if (medium > 0 && !config_.promotion_per_entry) return medium;  // one tier per pass
  return medium + promote_tier(2, now);
}

}  // namespace orbite::rdma
