// Rail health in the data path (orbite-rdma-probe's rail_health scenario), on two softverbs NICs
// per process with rdma.rail_error_threshold 2, rdma.rail_cooldown 1 s and a zero probe interval
// (rdma_test.cpp sets them): error completions that softverbs injects (fail_wr, RETRY_EXC_ERR)
// pause rank 0's soft_0 pair, parents avoid it, the first parent after the cooldown is its
// half-open trial and reopens it, a failed trial doubles the cooldown, and with every pair paused
// a put fails before its payload. RdmaStats and nic_load_stats() are checked at every step.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

constexpr std::uint64_t kLength = 8 * kMiB;  // 8 slices of 1 MiB (rdma.block_size from the test)
constexpr std::uint64_t kSmall = 64 * 1024;  // one slice
constexpr std::uint64_t kOwnerSeed = 0x4A11000;
constexpr std::uint64_t kRequesterSeed = 0x4A12000;
constexpr auto kCooldown = std::chrono::milliseconds(1000);  // ORBITE_RDMA_RAIL_COOLDOWN

struct RailView {
  RdmaStats stats;
  std::vector<NicLoad> nics;
};

RailView view(TransferEngine& engine) {
  RailView v{engine.rdma_stats(), engine.nic_load_stats()};
  check(v.nics.size() == 2, "nic_load_stats() lists " + sz(v.nics.size()) + " NICs, not 2");
  return v;
}

std::string describe(const RailView& v) {
  std::string out = "errors " + sz(v.stats.rail_errors) + " open " + sz(v.stats.rail_open_pairs) +
                    " probes " + sz(v.stats.rail_probes) + " recoveries " +
                    sz(v.stats.rail_recoveries) + " pauses " + sz(v.stats.rail_pauses) + " pairs " +
                    sz(v.stats.rail_pairs);
  for (const NicLoad& n : v.nics) {
    out += "; " + n.name + ": errors " + sz(n.rail_errors) + " probes " + sz(n.rail_probes) +
           " open " + sz(n.rail_open_pairs) + " allocated " + sz(n.allocated_bytes);
  }
  return out;
}

}  // namespace

void scenario_rdma_rail_health(RdmaContext& r) {
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    auto put = [&](const std::string& what, std::uint64_t length = kLength) {
      Request q = accepted(engine.put(mine.region, 0, remote, 0, length, r.rdma), what);
      const Status st = q.wait(kWait);
      check(st.code() != Errc::Timeout, what + ": the put never completed");
      return st;
    };
    // One error completion on `nic`'s pair: the next of its WRs fails, and one-slice puts run
    // until one carried it (the selection may give a put no slice there). Small puts keep the
    // errors well inside a cooldown, sanitizers included.
    auto one_error = [&](int nic, const std::string& what) {
      const std::uint64_t errors = engine.rdma_stats().rail_errors;
      softverbs_control("fail_wr soft_" + std::to_string(nic) + " * 1 RETRY_EXC_ERR");
      for (int i = 0; i < 10; ++i) {
        const Status st = put(what, kSmall);
        if (st.ok()) continue;
        check(st.code() == Errc::ConnectionLost &&
                  st.message().find("RETRY_EXC_ERR") != std::string::npos,
              what + ": " + st.to_string());
        const RdmaStats s = engine.rdma_stats();
        check(s.rail_errors == errors + 1, what + ": " + sz(s.rail_errors - errors) +
                                               " rail errors counted for one error completion");
        return;
      }
      check(false, what + ": ten puts and the injected error never ran");
    };
    // A put that must succeed; returns the bytes each NIC was allocated for it.
    auto ok_put = [&](const std::string& what) {
      const RailView before = view(engine);
      const Status st = put(what);
      check(st.ok(), what + ": " + st.to_string());
      const RailView after = view(engine);
      return std::make_pair(after.nics[0].allocated_bytes - before.nics[0].allocated_bytes,
                            after.nics[1].allocated_bytes - before.nics[1].allocated_bytes);
    };

    ok_put("warm-up");
    // Two errors inside the window: soft_0's pair pauses; soft_1's is untouched.
    one_error(0, "first error");
    RailView v = view(engine);
    check(v.stats.rail_open_pairs == 0, "one error paused a pair: " + describe(v));
    one_error(0, "second error");
    v = view(engine);
    check(v.stats.rail_open_pairs == 1 && v.nics[0].rail_open_pairs == 1 &&
              v.nics[1].rail_open_pairs == 0 && v.nics[0].rail_errors == 2 &&
              v.stats.rail_pauses == 1 && v.stats.rail_probes == 0,
          "after two errors on soft_0: " + describe(v));
    const auto pause_at = std::chrono::steady_clock::now();

    // Paused: parents take soft_1 alone (the cooldown is not over, so no trial).
    auto [paused0, paused1] = ok_put("paused");
    v = view(engine);
    check(paused0 == 0 && paused1 == kLength,
          "while paused soft_0 / soft_1 got " + sz(paused0) + " / " + sz(paused1));
    check(v.stats.rail_probes == 0, "a trial before the cooldown: " + describe(v));

    // The cooldown is over: the next parent is the one half-open trial, all of it on soft_0, and
    // its receipt reopens the pair.
    std::this_thread::sleep_until(pause_at + kCooldown + std::chrono::milliseconds(100));
    auto [trial0, trial1] = ok_put("trial");
    v = view(engine);
    check(trial0 == kLength && trial1 == 0,
          "the trial parent gave soft_0 / soft_1 " + sz(trial0) + " / " + sz(trial1));
    check(v.stats.rail_probes == 1 && v.nics[0].rail_probes == 1 && v.stats.rail_recoveries == 1 &&
              v.stats.rail_open_pairs == 0 && v.nics[0].rail_open_pairs == 0,
          "after the trial's receipt: " + describe(v));
    std::printf("rank 0: paused, then reopened by a trial: %s\n", describe(v).c_str());

    // A failed trial: paused again, cooled, and the trial's own WR fails; the cooldown doubles
    // (2 s), so a parent right after it takes soft_1 and arms no trial.
    one_error(0, "third error");
    one_error(0, "fourth error");
    const auto repause_at = std::chrono::steady_clock::now();
    check(view(engine).stats.rail_open_pairs == 1, "the pair did not pause again");
    std::this_thread::sleep_until(repause_at + kCooldown + std::chrono::milliseconds(100));
    softverbs_control("fail_wr soft_0 * 1 RETRY_EXC_ERR");
    const Status failed_trial = put("failed trial");
    const auto failed_at = std::chrono::steady_clock::now();
    check(!failed_trial.ok() && failed_trial.message().find("RETRY_EXC_ERR") != std::string::npos,
          "the trial with an injected error: " + failed_trial.to_string());
    v = view(engine);
    check(v.stats.rail_probes == 2 && v.stats.rail_open_pairs == 1 && v.stats.rail_pauses == 3 &&
              v.stats.rail_recoveries == 1,
          "after the failed trial: " + describe(v));
    auto [after0, after1] = ok_put("inside the doubled cooldown");
    check(after0 == 0 && after1 == kLength,
          "inside the doubled cooldown soft_0 / soft_1 got " + sz(after0) + " / " + sz(after1));
    check(view(engine).stats.rail_probes == 2, "a trial inside the doubled cooldown");
    std::this_thread::sleep_until(failed_at + 2 * kCooldown + std::chrono::milliseconds(100));
    auto [again0, again1] = ok_put("second trial");
    v = view(engine);
    check(again0 == kLength && again1 == 0 && v.stats.rail_probes == 3 &&
              v.stats.rail_recoveries == 2 && v.stats.rail_open_pairs == 0,
          "the trial after the doubled cooldown: " + describe(v));

    // Every allowed pair paused: soft_0's, then soft_1's (which carries everything meanwhile).
    // The put fails before its payload: Unavailable, no WRITE posted.
    one_error(0, "soft_0 error 1");
    one_error(0, "soft_0 error 2");
    one_error(1, "soft_1 error 1");
    one_error(1, "soft_1 error 2");
    v = view(engine);
    check(v.stats.rail_open_pairs == 2, "both pairs should be paused: " + describe(v));
    const RdmaStats before = engine.rdma_stats();
    const Status none = put("every rail paused");
    const RdmaStats after = engine.rdma_stats();
    check(none.code() == Errc::Unavailable &&
              none.message().find("paused by rail health") != std::string::npos &&
              none.message().find("nothing moved") != std::string::npos,
          "with every pair paused: " + none.to_string());
    check(after.completed_writes == before.completed_writes && after.parents == before.parents,
          "the refused put moved bytes or started a parent");
    std::printf("rank 0: every rail paused: %s\n", none.to_string().c_str());

    // Cooled down: the last put (its bytes checked by rank 1) is a trial again and succeeds.
    std::this_thread::sleep_for(kCooldown + std::chrono::milliseconds(100));
    fill_pattern(mine.bytes.data(), kLength, kRequesterSeed + 1);
    ok_put("after both pauses");
    signal_peer(r.c, 1, 70);
  } else {
    await_peer(r.c, 0, 70);
    check_pattern(mine.bytes.data(), kLength, kRequesterSeed + 1, "the last put's bytes");
    const RdmaStats s = engine.rdma_stats();
    check(s.rail_errors == 0 && s.rail_open_pairs == 0,
          "the owner counted rail errors of its own: " + sz(s.rail_errors));
  }
  barrier(r.c, "rail health checked");
  std::printf("rank %d: rail_health ok\n", r.c.rank);
}

}  // namespace orbite::probe
