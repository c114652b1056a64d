// Shared pieces of orbite-rdma-probe (tests/integration/rdma_probe*.cpp): the RDMA scenarios'
// context on top of orbite-p2p-probe's helpers (p2p_probe.h). Messages between the ranks (signals,
// descriptors) go over the default route; every put and get is forced onto Transport::Rdma.
#pragma once

#include <orbite/rdma.h>

#include <string>

#include "p2p_probe.h"

namespace orbite::probe {

struct RdmaContext {
  Context& c;
  TransferOptions rdma;  // transport = Rdma
};

// A registered buffer with its own bytes.
struct Region {
  Bytes bytes;
  MemoryRegion region;
};
Region make_region(RdmaContext& r, std::uint64_t length, const std::string& what);

// The scenario's region of `length` bytes on every rank, filled with the rank's seed (rank 1 owns
// the memory the others access), and rank 1's descriptor on the others.
struct Setup {
  Region mine;
  RemoteRegion remote;
};
Setup setup_region(RdmaContext& r, std::uint64_t length, std::uint64_t owner_seed,
                   std::uint64_t requester_seed);

// Rank `owner` exports `region`'s descriptor to every other rank; they import it.
RemoteRegion share_descriptor(RdmaContext& r, const MemoryRegion* region, int owner, int step);

// The descriptor with a u64 field (region id, generation or length) changed in its bytes.
// `count` puts of `n` bytes from rank 0 into rank 1's region at offset `at`, each checked by
// rank 1 before the next overwrites it; `step` numbers the signals (rdma_probe_rails.cpp).
void checked_puts(RdmaContext& r, Region& mine, const RemoteRegion& remote, std::uint64_t at,
                  std::uint64_t n, int count, std::uint64_t seed, const std::string& phase,
                  int& step);

// Polls `done` (the engine's stats) for up to kWait.
bool eventually(const std::function<bool()>& done);

// Scenarios (rdma_probe.cpp, rdma_probe_faults.cpp).
void scenario_rdma_bytes(RdmaContext& r);
void scenario_rdma_forged(RdmaContext& r, const std::string& hook);
void scenario_rdma_tampered(RdmaContext& r);
void scenario_rdma_concurrent(RdmaContext& r);
void scenario_rdma_deferred(RdmaContext& r);
void scenario_rdma_forged_rendezvous(RdmaContext& r);
// rdma_probe_rendezvous.cpp
void scenario_rdma_announced_rendezvous(RdmaContext& r, bool announcing);
void scenario_rdma_error_cqe(RdmaContext& r);
void scenario_rdma_unregister_busy(RdmaContext& r);
void scenario_rdma_failed_post(RdmaContext& r);
void scenario_rdma_failed_polls(RdmaContext& r);
void scenario_rdma_orderly_close_lag(RdmaContext& r);
// A CQ set whose polls keep failing is replaced (rdma_probe_recovery.cpp); victim: whose.
void scenario_rdma_progress_recovery(RdmaContext& r, int victim);
void scenario_rdma_cts_post_fails(RdmaContext& r);
void scenario_rdma_cache_miss(RdmaContext& r);
void scenario_rdma_key_history(RdmaContext& r);
// Budgets (rdma_probe_budgets.cpp).
void scenario_rdma_crossed_messages(RdmaContext& r);
void scenario_rdma_eager_frames(RdmaContext& r);
void scenario_rdma_connect_slot(RdmaContext& r);
void scenario_rdma_failed_destroy(RdmaContext& r);
void scenario_rdma_receipt_slots(RdmaContext& r);
void scenario_rdma_grant_timeout(RdmaContext& r);
void scenario_rdma_deferred_limit(RdmaContext& r);
void scenario_rdma_own_grants(RdmaContext& r);
// rdma_probe_sched.cpp
void scenario_rdma_priority(RdmaContext& r);
void scenario_rdma_promotion(RdmaContext& r);
void scenario_rdma_deadline_queued(RdmaContext& r);
void scenario_rdma_grant_cancel(RdmaContext& r);
void scenario_rdma_shared_slots(RdmaContext& r);
void scenario_rdma_source_deadline(RdmaContext& r);
// rdma_probe_cleanup.cpp
void scenario_rdma_released_segments(RdmaContext& r);
void scenario_rdma_idle_reaper(RdmaContext& r);
void scenario_rdma_destroy_window(RdmaContext& r);
void scenario_rdma_directional_close(RdmaContext& r);
// Two rails (rdma_probe_rails.cpp).
void scenario_rdma_rails(RdmaContext& r);
void scenario_rdma_port_down(RdmaContext& r);
void scenario_rdma_peer_port_down(RdmaContext& r);
void scenario_rdma_forged_nic_table(RdmaContext& r);
// The monitor's route fencing and recovery (rdma_probe_route.cpp).
void scenario_rdma_route_recovery(RdmaContext& r);
// Rail health's circuit breaker (rdma_probe_rail_health.cpp).
void scenario_rdma_rail_health(RdmaContext& r);
// The MR cache of the collectives' scratch (rdma_probe_cache.cpp).
void scenario_rdma_mr_cache(RdmaContext& r);
// rdma_probe_bounce.cpp
void scenario_rdma_bounce(RdmaContext& r);
// NUMA placement of the rails (rdma_probe_numa.cpp).
void scenario_rdma_numa(RdmaContext& r);
// Killed peers (started directly by the test, 3 ranks): `phase` names who dies and when.
void scenario_rdma_killed(RdmaContext& r, const std::string& phase);

}  // namespace orbite::probe
