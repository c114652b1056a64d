// Progress recovery (orbite-rdma-probe's progress_recovery_requester and _source scenarios): one
// rank's softverbs fails every ibv_poll_cq on the CQs its device has (fail_poll soft_0 1 1e9; a
// CQ made afterwards polls normally). After a second of failures that rank's lane replaces its
// CQ set: the QPs on it are destroyed, the work in flight fails with ConnectionLost, and the peer
// drops its ends (QpRetire, QpLost). Then puts, gets and messages both ways work again on the
// same registrations (the PD and MRs were kept), every byte checked.
#include <cstdio>
#include <string>
#include <vector>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

constexpr std::uint64_t kLength = 1 * kMiB;
constexpr std::uint64_t kOwnerSeed = 0x9C01;
constexpr std::uint64_t kRequesterSeed = 0x9C02;
constexpr std::uint64_t kMessageSeed = 0x9C03;
constexpr std::uint64_t kMessageBytes = 3000;  // an eager frame over the message QPs
constexpr int kMessageTag = 91;

// One eager message each way over RDMA (the message QPs), every byte checked.
void exchange_messages(RdmaContext& r, std::uint64_t seed, const std::string& what) {
  const int peer = 1 - r.c.rank;
  std::vector<std::byte> out(kMessageBytes);
  std::vector<std::byte> in(kMessageBytes);
  fill_pattern(out.data(), kMessageBytes, seed + static_cast<std::uint64_t>(r.c.rank));
  std::vector<Request> both;
  both.push_back(accepted(r.c.comm.isend(out.data(), kMessageBytes, peer, kMessageTag, r.rdma),
                          what + ": isend"));
  both.push_back(accepted(r.c.comm.irecv(in.data(), kMessageBytes, peer, kMessageTag, r.rdma),
                          what + ": irecv"));
  wait_all_ok(both, what);
  check_pattern(in.data(), kMessageBytes, seed + static_cast<std::uint64_t>(peer), what);
}

void check_recovered(TransferEngine& engine, const RdmaStats& before, const std::string& who) {
  const RdmaStats s = engine.rdma_stats();
  check(
      s.progress_recoveries == before.progress_recoveries + 1,
      who + ": " + sz(s.progress_recoveries - before.progress_recoveries) + " progress recoveries");
  check(s.qps_lost > before.qps_lost, who + ": no QP was lost with the replaced set");
  std::printf("rank %s: progress recovered: %llu QPs lost, %llu failed polls\n", who.c_str(),
              static_cast<unsigned long long>(s.qps_lost - before.qps_lost),
              static_cast<unsigned long long>(s.cq_poll_failures - before.cq_poll_failures));
}

}  // namespace

// victim: the rank whose CQs fail (0: the requester, 1: the owner of the memory).
void scenario_rdma_progress_recovery(RdmaContext& r, int victim) {
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  const std::string me = std::to_string(r.c.rank);
  // Both message QPs and a payload QP exist before the fault.
  exchange_messages(r, kMessageSeed, "messages before the fault");
  if (r.c.rank == 0) {
    Request warm = accepted(engine.get(mine.region, kLength - 1, remote, kLength - 1, 1, r.rdma),
                            "warm-up get");
    wait_ok(warm, "warm-up get");
  }
  barrier(r.c, "connected");
  const RdmaStats before = engine.rdma_stats();
  if (r.c.rank == victim) softverbs_control("fail_poll soft_0 1 1000000000");
  barrier(r.c, "fault armed");
  if (r.c.rank == 0) {
    // Its completions (or the owner's binds) are out of reach until the set is replaced: the put
    // fails then, within the bound, and says why.
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength - 1, r.rdma), "put");
    check(q.wait(kWait).code() != Errc::Timeout, "the put across the lost CQs never completed");
    const auto st = q.status();
    check(st && !st->ok(), "the put across the lost CQs succeeded");
    std::printf("rank 0: the put across the lost CQs: %s\n", st->to_string().c_str());
    if (victim == 0) check_recovered(engine, before, me);
  }
  barrier(r.c, "the put failed");
  if (r.c.rank == victim && victim == 1) {
    check(eventually([&] { return engine.rdma_stats().progress_recoveries > 0; }),
          "the owner's CQ set was never replaced");
    check_recovered(engine, before, me);
  }
  if (r.c.rank != victim) {
    check(engine.rdma_stats().progress_recoveries == before.progress_recoveries,
          "the healthy rank replaced a CQ set");
  }
  // Everything works again, over new QPs on the new set.
  if (r.c.rank == 0) {
    fill_pattern(mine.bytes.data(), kLength, kRequesterSeed + 1);
    Request again = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put again");
    wait_ok(again, "the put after the recovery");
    signal_peer(r.c, 1, 80);
    await_peer(r.c, 1, 81);
    Request g = accepted(engine.get(mine.region, 0, remote, 0, kLength, r.rdma), "get");
    wait_ok(g, "the get after the recovery");
    check_pattern(mine.bytes.data(), kLength, kOwnerSeed + 1, "the get after the recovery");
  } else {
    await_peer(r.c, 0, 80);
    check_pattern(mine.bytes.data(), kLength, kRequesterSeed + 1, "the put after the recovery");
    fill_pattern(mine.bytes.data(), kLength, kOwnerSeed + 1);
    signal_peer(r.c, 0, 81);
  }
  exchange_messages(r, kMessageSeed + 10, "messages after the recovery");
  barrier(r.c, "recovery checked");
  const RdmaStats after = engine.rdma_stats();
  check(after.direct_bytes_in_use == 0 && after.grants_in_use == 0,
        "charges left after the recovery");
  std::printf("rank %s: after the recovery: put, get and messages intact\n", me.c_str());
}

}  // namespace orbite::probe
