// Rail health (the guide's "Rail health"): a circuit breaker per NIC pair. The requester counts
// the errors of its payload per (peer epoch, local NIC, remote NIC); rdma.rail_error_threshold
// of them inside rdma.rail_error_window pause the pair for rdma.rail_cooldown. Once the cooldown
// and rdma.rail_probe_interval since the last trial have passed, one half-open trial may use the
// pair; a failed trial doubles the cooldown (at most five minutes), and only the current trial's
// positive receipt reopens it. An unposted trial that is cancelled gives its turn back. Looking a
// pair up (`usable`) never arms a trial: only `admit`, which a slice that will be posted calls.
//
// The table holds at most rdma.max_rail_pairs pairs. A new pair finds room by forgetting a
// healthy pair with no error inside the window (it holds nothing a fresh entry would not); when
// every pair is paused, on trial or counting errors, the new one is refused (ResourceExhausted)
// and the ones it would have displaced are kept.
//
// Thread-safe: one table per engine (RdmaEngine::rail_health), shared by its lanes. Its mutex is a
// leaf (a lane's mutex → it; nothing is taken under it). Time is passed in, so the rules are
// tested without sleeping.
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace orbite::rdma {

struct RailPair {
  std::uint64_t peer_epoch = 0;  // a peer's connection: a new one starts with fresh pairs
  int local_nic = -1;
  int remote_nic = -1;
  bool operator==(const RailPair&) const = default;
};

struct RailPairHash {
  std::size_t operator()(const RailPair& p) const noexcept;
};

class RailHealth {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kMaxCooldown = std::chrono::minutes(5);

  enum class Verdict : std::uint8_t {
    Open,    // healthy: use it
    Trial,   // paused, and this slice is its one half-open trial (`trial` names it)
    Paused,  // paused: choose another pair
  };
  struct Admission {
    Verdict verdict = Verdict::Open;
    std::uint64_t trial = 0;  // with Trial: the token its outcome must name
  };

  struct NicCounts {
    std::uint64_t errors = 0;  // errors recorded on pairs with this local NIC, lifetime
    std::uint64_t probes = 0;  // trials admitted
    std::uint64_t paused = 0;  // pairs paused now
  };
  struct Stats {
    std::uint64_t errors = 0;      // lifetime
    std::uint64_t pauses = 0;      // pairs paused by the threshold or a failed trial, lifetime
    std::uint64_t probes = 0;      // trials admitted, lifetime
    std::uint64_t recoveries = 0;  // pairs a trial reopened, lifetime
    std::uint64_t paused = 0;      // pairs paused now (the circuit breaker's "open" pairs)
    std::uint64_t pairs = 0;       // pairs held now
    std::uint64_t refused = 0;     // new pairs refused by a full table, lifetime
  };

  explicit RailHealth(const RdmaConfig& cfg);

  // Whether the pair may carry a slice now, without arming anything: a paused pair is false even
  // when a trial could be admitted. An unknown pair is healthy.
  [[nodiscard]] bool usable(const RailPair& pair) const;
  // A slice that will be posted asks for the pair: Open, the trial's turn, or Paused. The first
  // admission after the cooldown is a trial; later ones wait rdma.rail_probe_interval after the
  // last trial as well (zero: none). Never adds a pair to the table.
  Admission admit(const RailPair& pair, Clock::time_point now);
  // A payload error on the pair (a failed or flushed WR that was not the pair's fault is not
  // reported here). With the current trial's token it fails that trial: the cooldown doubles
  // (at most kMaxCooldown) and starts again. An error on a paused pair outside its trial (slices
  // posted before the pause) leaves the cooldown as it was. A pair the table cannot hold (full,
  // and every held pair must be kept) is ResourceExhausted: its error is counted, not tracked.
  Status record_error(const RailPair& pair, Clock::time_point now, std::uint64_t trial = 0);
  // The trial's positive receipt: the pair reopens, its cooldown back to rdma.rail_cooldown. A
  // token that is not the pair's current trial changes nothing.
  void trial_succeeded(const RailPair& pair, std::uint64_t trial);
  // The trial's slice was never posted: its turn goes back, so the next `admit` may try again
  // without waiting rdma.rail_probe_interval.
  void trial_cancelled(const RailPair& pair, std::uint64_t trial);
  // The trial was posted but ended without a verdict on the pair (its parent failed for another
  // reason: an authority error, the peer's grant refused): the pair stays paused and the next
  // trial waits rdma.rail_probe_interval after this one.
  void trial_abandoned(const RailPair& pair, std::uint64_t trial);
  // The peer's connection ended: its pairs go.
  void forget_epoch(std::uint64_t peer_epoch);

  [[nodiscard]] Stats stats() const;
  [[nodiscard]] NicCounts nic(int local_nic) const;

 private:
  struct Entry {
    std::deque<Clock::time_point> errors;  // inside the window (at most the threshold kept)
    bool paused = false;
    Clock::time_point paused_until{};
    Clock::duration cooldown{};
    Clock::time_point last_trial{};  // when the last trial was admitted
    bool trial_running = false;
    std::uint64_t trial = 0;  // the current trial's token
  };
  // Under mu_.
  void trim(Entry& e, Clock::time_point now) const;
  void pause(const RailPair& pair, Entry& e, Clock::time_point now, Clock::duration cooldown);
  // Room for one more pair; false when every held pair must be kept.
  bool make_room(Clock::time_point now);

  mutable std::mutex mu_;  // a leaf; guards everything below the constants
  const std::uint32_t threshold_;
  const Clock::duration window_;
  const Clock::duration cooldown_;
  const Clock::duration probe_interval_;
  const std::size_t max_pairs_;
  std::unordered_map<RailPair, Entry, RailPairHash> pairs_;
  std::uint64_t next_trial_ = 1;
  Stats stats_;
  std::unordered_map<int, NicCounts> nics_;
};

// One half-open trial a parent carries, as a move-only owner: it ends exactly once, by a verdict
// (`succeeded`, `failed`) or, when dropped without one, as cancelled (never posted) or abandoned
// (posted). Touched by its lane's thread only; the table it names outlives it (the engine's).
class RailTrial {
 public:
  RailTrial() = default;
  RailTrial(RailHealth& health, const RailPair& pair, std::uint64_t token)
      : health_(&health), pair_(pair), token_(token) {}
  RailTrial(RailTrial&& o) noexcept { *this = std::move(o); }
  RailTrial& operator=(RailTrial&& o) noexcept;
  RailTrial(const RailTrial&) = delete;
  RailTrial& operator=(const RailTrial&) = delete;
  ~RailTrial() { end(); }

  [[nodiscard]] bool running() const { return health_ != nullptr; }
  [[nodiscard]] const RailPair& pair() const { return pair_; }
  [[nodiscard]] std::uint64_t token() const { return token_; }
  // A payload WR of the trial's pair was accepted by the HCA.
  void posted() { posted_ = true; }
  // The pair's positive receipt: it reopens.
  void succeeded();
  // A rail error on the pair: the trial failed (the cooldown doubles). Returns record_error's.
  Status failed(RailHealth::Clock::time_point now);
  // No verdict: cancelled if nothing of it was posted, else abandoned.
  void end();

 private:
  RailHealth* health_ = nullptr;  // null: no trial, or it has ended
  RailPair pair_;
  std::uint64_t token_ = 0;
  bool posted_ = false;
};

}  // namespace orbite::rdma
