#include "p2p/rdma/rail_health.h"

#include <algorithm>
#include <string>
#include <utility>

namespace orbite::rdma {

std::size_t RailPairHash::operator()(const RailPair& p) const noexcept {
  std::uint64_t h = p.peer_epoch * 0x9e3779b97f4a7c15ULL;
  h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(p.local_nic)) << 32 |
       static_cast<std::uint32_t>(p.remote_nic);
  h *= 0xbf58476d1ce4e5b9ULL;
  return static_cast<std::size_t>(h ^ (h >> 31));
}

RailHealth::RailHealth(const RdmaConfig& cfg)
    : threshold_(std::max<std::uint32_t>(cfg.rail_error_threshold, 1)),
      window_(cfg.rail_error_window),
      cooldown_(std::min<Clock::duration>(cfg.rail_cooldown, kMaxCooldown)),
      probe_interval_(cfg.rail_probe_interval),
      max_pairs_(std::max<std::uint32_t>(cfg.max_rail_pairs, 1)) {}

bool RailHealth::usable(const RailPair& pair) const {
  std::lock_guard lock(mu_);
  auto it = pairs_.find(pair);
  return it == pairs_.end() || !it->second.paused;
}

RailHealth::Admission RailHealth::admit(const RailPair& pair, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = pairs_.find(pair);
  if (it == pairs_.end()) return Admission{};  // healthy; it is recorded by its first error
  Entry& e = it->second;
  if (!e.paused) return Admission{};
  const bool cooled = now >= e.paused_until;
  const bool probe_due =
      e.last_trial == Clock::time_point{} || now - e.last_trial >= probe_interval_;
  if (!cooled || !probe_due || e.trial_running) return Admission{Verdict::Paused, 0};
  e.trial_running = true;
  e.trial = next_trial_++;
  e.last_trial = now;
  ++stats_.probes;
  ++nics_[pair.local_nic].probes;
  return Admission{Verdict::Trial, e.trial};
}

void RailHealth::trim(Entry& e, Clock::time_point now) const {
  while (!e.errors.empty() && now - e.errors.front() > window_) e.errors.pop_front();
}

void RailHealth::pause(const RailPair& pair, Entry& e, Clock::time_point now,
                       Clock::duration cooldown) {
  if (!e.paused) {
    ++stats_.paused;
    ++nics_[pair.local_nic].paused;
  }
  e.paused = true;
  e.cooldown = cooldown;
  e.paused_until = now + cooldown;
  e.trial_running = false;
  e.errors.clear();
  ++stats_.pauses;
}

Status RailHealth::record_error(const RailPair& pair, Clock::time_point now, std::uint64_t trial) {
  std::lock_guard lock(mu_);
  auto it = pairs_.find(pair);
  if (it == pairs_.end()) {
    if (!make_room(now)) {
      ++stats_.errors;
      ++stats_.refused;
      ++nics_[pair.local_nic].errors;
      return Status::error(Errc::ResourceExhausted,
                           "rail health holds rdma.max_rail_pairs = " + std::to_string(max_pairs_) +
                               " NIC pairs, all paused, on trial or counting errors: the error "
                               "of local NIC " +
                               std::to_string(pair.local_nic) + " to remote NIC " +
                               std::to_string(pair.remote_nic) + " is counted, not tracked");
    }
    it = pairs_.emplace(pair, Entry{}).first;
  }
  Entry& e = it->second;
  ++stats_.errors;
  ++nics_[pair.local_nic].errors;
  if (e.paused) {
    if (trial != 0 && e.trial_running && trial == e.trial) {
      pause(pair, e, now, std::min<Clock::duration>(e.cooldown * 2, kMaxCooldown));
    }
    return {};  // an error of work posted before the pause: the cooldown stays as it was
  }
  trim(e, now);
  e.errors.push_back(now);
  if (e.errors.size() >= threshold_) pause(pair, e, now, cooldown_);
  return {};
}

void RailHealth::trial_succeeded(const RailPair& pair, std::uint64_t trial) {
  std::lock_guard lock(mu_);
  auto it = pairs_.find(pair);
  if (it == pairs_.end()) return;
  Entry& e = it->second;
  if (!e.paused || !e.trial_running || trial != e.trial) return;
  e.paused = false;
  e.trial_running = false;
  e.cooldown = cooldown_;
  e.errors.clear();
  --stats_.paused;
  --nics_[pair.local_nic].paused;
  ++stats_.recoveries;
}

void RailHealth::trial_cancelled(const RailPair& pair, std::uint64_t trial) {
  std::lock_guard lock(mu_);
  auto it = pairs_.find(pair);
  if (it == pairs_.end()) return;
  Entry& e = it->second;
  if (!e.trial_running || trial != e.trial) return;
  e.trial_running = false;
  // The turn goes back: the next admission need not wait another probe interval.
  e.last_trial = Clock::time_point{};
}

void RailHealth::trial_abandoned(const RailPair& pair, std::uint64_t trial) {
  std::lock_guard lock(mu_);
  auto it = pairs_.find(pair);
  if (it == pairs_.end()) return;
  Entry& e = it->second;
  if (e.trial_running && trial == e.trial) e.trial_running = false;  // last_trial stays
}

void RailHealth::forget_epoch(std::uint64_t peer_epoch) {
  std::lock_guard lock(mu_);
  for (auto it = pairs_.begin(); it != pairs_.end();) {
    if (it->first.peer_epoch != peer_epoch) {
      ++it;
      continue;
    }
    if (it->second.paused) {
      --stats_.paused;
      --nics_[it->first.local_nic].paused;
    }
    it = pairs_.erase(it);
  }
}

bool RailHealth::make_room(Clock::time_point now) {
  if (pairs_.size() < max_pairs_) return true;
  for (auto it = pairs_.begin(); it != pairs_.end(); ++it) {
    Entry& e = it->second;
    trim(e, now);
    if (!e.paused && e.errors.empty()) {
      pairs_.erase(it);
      return true;
    }
  }
  return false;
}

RailHealth::Stats RailHealth::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.pairs = pairs_.size();
  return s;
}

RailHealth::NicCounts RailHealth::nic(int local_nic) const {
  std::lock_guard lock(mu_);
  auto it = nics_.find(local_nic);
  return it == nics_.end() ? NicCounts{} : it->second;
}

RailTrial& RailTrial::operator=(RailTrial&& o) noexcept {
  if (this != &o) {
    end();
    health_ = std::exchange(o.health_, nullptr);
    pair_ = o.pair_;
    token_ = o.token_;
    posted_ = o.posted_;
  }
  return *this;
}

void RailTrial::succeeded() {
  if (health_ == nullptr) return;
  std::exchange(health_, nullptr)->trial_succeeded(pair_, token_);
}

Status RailTrial::failed(RailHealth::Clock::time_point now) {
  if (health_ == nullptr) return {};
  return std::exchange(health_, nullptr)->record_error(pair_, now, token_);
}

void RailTrial::end() {
  if (health_ == nullptr) return;
  RailHealth* h = std::exchange(health_, nullptr);
  if (posted_) {
    h->trial_abandoned(pair_, token_);
  } else {
    h->trial_cancelled(pair_, token_);
  }
}

}  // namespace orbite::rdma
