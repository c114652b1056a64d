// orbite-rdma-probe's scheduler scenarios (see rdma_probe.cpp), on one softverbs rail limited to
// 2.5 Gb/s and a 16 MiB rdma.max_direct_bytes (from the test): High work overtaking queued Low
// work, promotion moving aged Low work ahead of it, a deadline passing while a put waits for
// admission, and one passing while it waits for its payload to start (its grant given back).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

constexpr std::uint64_t kLows = 12;
constexpr std::uint64_t kEach = 4 * kMiB;

TransferOptions at(const RdmaContext& r, Priority p) {
  TransferOptions o = r.rdma;
  o.priority = p;
  return o;
}

// Rank 0 puts kLows Low puts, waits until every one reached the RDMA scheduler (the proxy's own
// queue orders by priority too, so the High put must find them already started), then one High
// put. Returns how many Low puts had finished when the High one did. Rank 1 checks every byte.
std::size_t lows_done_when_high_finished(RdmaContext& r, const char* name) {
  auto [mine, remote] = setup_region(r, (kLows + 1) * kEach, 0xA0, 0xA1);
  TransferEngine& engine = r.c.comm.engine();
  std::size_t done = 0;
  barrier(r.c, std::string(name) + ": regions");
  if (r.c.rank == 0) {
    const std::uint64_t parents_before = engine.rdma_stats().parents;
    std::vector<Request> lows;
    for (std::uint64_t i = 0; i < kLows; ++i) {
      lows.push_back(accepted(
          engine.put(mine.region, i * kEach, remote, i * kEach, kEach, at(r, Priority::Low)),
          "low put"));
    }
    check(eventually([&] { return engine.rdma_stats().parents >= parents_before + kLows; }),
          "the Low puts never reached the RDMA transport");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Request high = accepted(
        engine.put(mine.region, kLows * kEach, remote, kLows * kEach, kEach, at(r, Priority::High)),
        "high put");
    // rdma.post_queue_target (500 us of the rail, at least 256 KiB, at least one WR) bounds the
    // Low work's backlog, and the Low work not yet posted stays where the High put can overtake
    // it. High has no tier above it: the Low backlog does not hold its WRs back, its QP's depth
    // alone bounds them.
    std::uint64_t low_peak = 0;
    std::uint64_t high_peak = 0;
    while (!high.done()) {
      for (const NicLoad& n : engine.nic_load_stats()) {
        low_peak = std::max(low_peak, n.outstanding_by_tier[2]);
        high_peak = std::max(high_peak, n.outstanding_by_tier[0]);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    wait_ok(high, "the High put");
    for (Request& q : lows) done += q.done() ? 1 : 0;
    std::printf("rank 0: %s: at most %llu Low and %llu High payload bytes posted to the rail\n",
                name, static_cast<unsigned long long>(low_peak),
                static_cast<unsigned long long>(high_peak));
    // The Low window plus at most one WR past it (a 4 MiB parent's slices are 256 KiB); before
    // the window counted by tier, the High put's WRs waited inside the same window (at most
    // 1 MiB and one WR of everything).
    check(low_peak <= 512 * kKiB, "Low posted to the rail: " + sz(low_peak));
    check(high_peak > kMiB + 256 * kKiB, "High posted to the rail: " + sz(high_peak));
    std::printf("rank 0: %s: %zu of %zu Low puts done when the High put finished\n", name, done,
                static_cast<std::size_t>(kLows));
    wait_all_ok(lows, "the Low puts");
    const RdmaStats s = engine.rdma_stats();
    // Counted in the tier each parent was in when its payload started (promotion moves them).
    const std::uint64_t posted = s.tiers[0].posted + s.tiers[1].posted + s.tiers[2].posted;
    check(posted >= kLows + 1, sz(posted) + " parents posted");
    check(s.tiers[0].queued == 0 && s.tiers[1].queued == 0 && s.tiers[2].queued == 0,
          "entries left queued");
    std::printf("rank 0: %s: promoted into Medium %llu, into High %llu\n", name,
                static_cast<unsigned long long>(s.tiers[1].promoted),
                static_cast<unsigned long long>(s.tiers[0].promoted));
  }
  barrier(r.c, std::string(name) + ": moved");
  if (r.c.rank == 1) check_pattern(mine.bytes.data(), (kLows + 1) * kEach, 0xA1, name);
  barrier(r.c, std::string(name) + ": checked");
  return done;
}

// Rank 0's put of 1 MiB with a 50 ms deadline fails Timeout with `expect` in its message; rank 1
// runs `owner_check` on its engine; rank 1's bytes are untouched; a put without a deadline then
// lands.
void deadlined_put_moves_nothing(RdmaContext& r, const std::string& name, const std::string& expect,
                                 const std::function<void(TransferEngine&)>& owner_check) {
  constexpr std::uint64_t kLength = 1 * kMiB;
  auto [mine, remote] = setup_region(r, kLength, 0xE0, 0xE1);
  TransferEngine& engine = r.c.comm.engine();
  barrier(r.c, name + ": regions");
  if (r.c.rank == 0) {
    TransferOptions soon = r.rdma;
    soon.deadline = Clock::now() + std::chrono::milliseconds(50);
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, soon), "deadlined put");
    const Status st = q.wait(kWait);
    std::printf("rank 0: %s: %s\n", name.c_str(), st.to_string().c_str());
    check(st.code() == Errc::Timeout && st.message().find(expect) != std::string::npos,
          "the deadlined put: " + st.to_string());
  } else {
    owner_check(engine);
  }
  barrier(r.c, name + ": refused");
  if (r.c.rank == 1) check_pattern(mine.bytes.data(), kLength, 0xE0, "the refused put's range");
  barrier(r.c, name + ": untouched");
  if (r.c.rank == 0) {
    Request again = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "again");
    wait_ok(again, "the put without a deadline");
  }
  barrier(r.c, name + ": again");
  if (r.c.rank == 1) check_pattern(mine.bytes.data(), kLength, 0xE1, "the put without a deadline");
  barrier(r.c, name + ": checked");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// priority: with promotion out of the way (ORBITE_RDMA_PRIORITY_PROMOTION_TIMEOUT=60s), the High
// put is admitted before every Low put still waiting for the direct-bytes budget, so at least
// three Low puts are still running when it finishes (admission in arrival order made it last).

void scenario_rdma_priority(RdmaContext& r) {
  const std::size_t done = lows_done_when_high_finished(r, "priority");
  if (r.c.rank == 0) {
    check(done + 3 <= kLows, "the High put finished after " + sz(done) + " Low puts");
    // Each NIC's bytes by the tier that posted them (no promotion here).
    std::uint64_t high = 0, low = 0;
    for (const NicLoad& n : r.c.comm.engine().nic_load_stats()) {
      high += n.posted_by_tier[0];
      low += n.posted_by_tier[2];
    }
    check(high == kEach && low == kLows * kEach,
          "posted by tier: High " + sz(high) + ", Low " + sz(low));
  }
}

// ---------------------------------------------------------------------------------------------
// promotion: with ORBITE_RDMA_PRIORITY_PROMOTION_TIMEOUT=5ms the waiting Low puts age into
// Medium, then High, before the High put arrives, and go first: promotion lets old work progress
// against new High arrivals.

void scenario_rdma_promotion(RdmaContext& r) {
  const std::size_t done = lows_done_when_high_finished(r, "promotion");
  if (r.c.rank == 0) {
    const RdmaStats s = r.c.comm.engine().rdma_stats();
    check(s.tiers[1].promoted > 0 && s.tiers[0].promoted > 0,
          "nothing promoted: " + sz(s.tiers[1].promoted) + " into Medium, " +
              sz(s.tiers[0].promoted) + " into High");
    check(done + 3 > kLows, "the High put overtook aged Low work: " + sz(done) + " done");
  }
}

// ---------------------------------------------------------------------------------------------
// deadline_queued: three 16 MiB puts hold the budget in turn (about 54 ms each on the rail); a
// 4 MiB put with a 20 ms deadline waits for admission behind them, is dropped when its deadline
// passes, fails Timeout, and none of its bytes land.

void scenario_rdma_deadline_queued(RdmaContext& r) {
  constexpr std::uint64_t kBig = 16 * kMiB;
  constexpr std::uint64_t kLength = 3 * kBig + kEach;
  auto [mine, remote] = setup_region(r, kLength, 0xB0, 0xB1);
  TransferEngine& engine = r.c.comm.engine();
  barrier(r.c, "deadline_queued: regions");
  if (r.c.rank == 0) {
    std::vector<Request> big;
    for (std::uint64_t i = 0; i < 3; ++i) {
      big.push_back(accepted(engine.put(mine.region, i * kBig, remote, i * kBig, kBig, r.rdma),
                             "16 MiB put"));
    }
    TransferOptions soon = r.rdma;
    soon.deadline = Clock::now() + std::chrono::milliseconds(20);
    Request late = accepted(engine.put(mine.region, 3 * kBig, remote, 3 * kBig, kEach, soon),
                            "the put with a deadline");
    const Status st = late.wait(kWait);
    std::printf("rank 0: the put whose deadline passed in admission: %s\n", st.to_string().c_str());
    check(st.code() == Errc::Timeout &&
              st.message().find("waited for admission; nothing moved") != std::string::npos,
          "the late put: " + st.to_string());
    wait_all_ok(big, "the 16 MiB puts");
    const RdmaStats s = engine.rdma_stats();
    check(s.tiers[0].dropped == 1, sz(s.tiers[0].dropped) + " High parents dropped, not 1");
  }
  barrier(r.c, "deadline_queued: moved");
  if (r.c.rank == 1) {
    check_pattern(mine.bytes.data(), 3 * kBig, 0xB1, "the 16 MiB puts");
    check_pattern(mine.bytes.data() + 3 * kBig, kEach, 0xB0, "the dropped put's range", 3 * kBig);
  }
  barrier(r.c, "deadline_queued: checked");
}

// ---------------------------------------------------------------------------------------------
// grant_cancel: rank 0 (hook hold_granted) holds a granted put with a 50 ms deadline until the
// deadline passes; the requester gives the grant back (GrantCancel) and the put fails Timeout
// having moved nothing; rank 1's grant and budgets come back and its bytes are untouched; a put
// without a deadline then lands.

void scenario_rdma_grant_cancel(RdmaContext& r) {
  deadlined_put_moves_nothing(
      r, "grant_cancel", "waited for its grant; nothing moved (the grant was given back)",
      [](TransferEngine& engine) {
        check(eventually([&] { return engine.rdma_stats().grants > 0; }), "no grant was made");
        check(eventually([&] {
                const RdmaStats s = engine.rdma_stats();
                return s.grants_active == 0 && s.grants_in_use == 0 && s.granted_bytes_in_use == 0;
              }),
              "the canceled grant kept its budgets");
      });
}

// ---------------------------------------------------------------------------------------------
// shared_slots: both ranks share priority slots (ORBITE_RDMA_SHARED_QUOTA_SHM_PATH, 20 ms slots
// and no promotion, from the test). Rank 0's Low puts post only in the third slot of each cycle:
// they wait for it (slot_waits counted in the Low tier) and still all land; its High puts never
// wait.

void scenario_rdma_shared_slots(RdmaContext& r) {
  constexpr std::uint64_t kPuts = 8;
  auto [mine, remote] = setup_region(r, (kPuts + 1) * kMiB, 0xC0, 0xC1);
  TransferEngine& engine = r.c.comm.engine();
  barrier(r.c, "shared_slots: regions");
  if (r.c.rank == 0) {
    // Low puts one after another over at least two whole cycles (120 ms): some must start
    // outside the Low slot and wait for it.
    const auto until = Clock::now() + std::chrono::milliseconds(120);
    for (std::uint64_t i = 0; Clock::now() < until || i < kPuts; ++i) {
      const std::uint64_t at_byte = (i % kPuts) * kMiB;
      Request q = accepted(
          engine.put(mine.region, at_byte, remote, at_byte, kMiB, at(r, Priority::Low)), "low put");
      wait_ok(q, "a Low put under shared slots");
    }
    Request high = accepted(
        engine.put(mine.region, kPuts * kMiB, remote, kPuts * kMiB, kMiB, at(r, Priority::High)),
        "high put");
    wait_ok(high, "the High put");
    const RdmaStats s = engine.rdma_stats();
    std::printf("rank 0: slot waits High %llu, Low %llu\n",
                static_cast<unsigned long long>(s.tiers[0].slot_waits),
                static_cast<unsigned long long>(s.tiers[2].slot_waits));
    check(s.tiers[2].slot_waits > 0, "the Low puts never waited for their slot");
    check(s.tiers[0].slot_waits == 0, "a High put waited for a slot");
  }
  barrier(r.c, "shared_slots: moved");
  if (r.c.rank == 1) check_pattern(mine.bytes.data(), (kPuts + 1) * kMiB, 0xC1, "shared_slots");
  barrier(r.c, "shared_slots: checked");
}

// ---------------------------------------------------------------------------------------------
// source_deadline: rank 1 (hook defer_deadlined) keeps a GrantRequest that carries a deadline
// deferred; when the deadline (50 ms, sent as time left) passes there, it refuses it Timeout,
// granting nothing: the put fails naming the source, rank 1's bytes are untouched, and a put
// without a deadline then lands.

void scenario_rdma_source_deadline(RdmaContext& r) {
  deadlined_put_moves_nothing(
      r, "source_deadline", "waited at the source; nothing was granted",
      [](TransferEngine& engine) {
        check(eventually([&] { return engine.rdma_stats().grant_nacks > 0; }), "no refusal");
        const RdmaStats s = engine.rdma_stats();
        check(s.grants == 0 && s.grant_requests_deferred == 1,
              sz(s.grants) + " grants, " + sz(s.grant_requests_deferred) + " deferred");
      });
}

}  // namespace orbite::probe
