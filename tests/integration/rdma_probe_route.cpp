// The monitor's route fencing and recovery (orbite-rdma-probe's route_recovery scenario; the
// test pins rdma.gid_index to 1, softverbs' second GID of each NIC, and sets a 100 ms monitor
// interval). Rank 1 deletes its soft_0's GID 1: its monitor fences the route (paused, a NicTable
// to rank 0), the QPs on the route drain at both ends (rank 0 retires its QPs to that NIC once
// idle), and with no valid address the route stays fenced while puts go on over the other rail.
// The GID back publishes the route again and the NIC carries again; a fatal device event then
// fences it for good although port and address are fine.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

constexpr std::uint64_t kLength = 8 * kMiB + 160;
constexpr auto kTicks = std::chrono::milliseconds(500);  // five monitor intervals

RdmaContextStats soft0(TransferEngine& engine) {
  const RdmaStats s = engine.rdma_stats();
  check(s.contexts.size() == 2, "rdma_stats() lists " + sz(s.contexts.size()) + " contexts");
  return s.contexts[0];
}

std::string describe(TransferEngine& engine) {
  const RdmaContextStats c = soft0(engine);
  const RdmaStats s = engine.rdma_stats();
  return "soft_0 " + c.state + " (" + c.fence + "), GID " + sz(c.gid_index) + " " + c.gid +
         ", route generation " + sz(c.route_generation) + ", live QPs " + sz(c.live_qps) +
         "; ticks " + sz(s.monitor_ticks) + " queries " + sz(s.route_queries) + " fences " +
         sz(s.route_fences) + " recoveries " + sz(s.route_recoveries) + " retired " +
         sz(s.route_qps_retired) + " message moves " + sz(s.message_qp_moves);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

void scenario_rdma_route_recovery(RdmaContext& r) {
  Region mine = make_region(r, kLength, "the region");
  RemoteRegion remote = share_descriptor(r, &mine.region, 1, 1);
  TransferEngine& engine = r.c.comm.engine();
  int step = 10;
  auto puts = [&](int count, std::uint64_t seed, const std::string& phase) {
    checked_puts(r, mine, remote, 0, kLength, count, seed, phase, step);
  };
  auto tables = [&] { return engine.rdma_stats().nic_tables_received; };
  puts(3, 0xE10, "warm-up");
  const RdmaContextStats first = soft0(engine);
  check(first.state == "active" && first.gid_index == 1 && first.fence.empty(),
        "the pinned route after the warm-up: " + describe(engine));
  // The warm-up may end before the monitor's first tick (100 ms): wait for one. The counters are
  // read between ticks, so a read may catch a tick before its queries.
  check(eventually([&] {
          const RdmaStats s = engine.rdma_stats();
          return s.monitor_ticks > 0 && s.route_queries >= 2 * s.monitor_ticks;
        }),
        "the monitor does not query both routes every tick: " + describe(engine));
  const RdmaStats start = engine.rdma_stats();
  std::printf("rank %d: warm-up: %s\n", r.c.rank, describe(engine).c_str());

  // The address goes away: fenced, drained, and kept fenced while it has no valid address.
  std::uint64_t seen = tables();
  if (r.c.rank == 1) {
    softverbs_control("gid soft_0 1 delete");
    check(eventually([&] { return soft0(engine).state == "paused"; }),
          "the route was not fenced when its GID went away: " + describe(engine));
    check(engine.rdma_stats().route_fences == start.route_fences + 1,
          "one address change, fences: " + describe(engine));
    check(eventually([&] {
            const RdmaContextStats c = soft0(engine);
            return c.live_qps == 0 && has(c.fence, "no valid GID at the pinned index");
          }),
          "the fenced route's QPs did not drain: " + describe(engine));
  } else {
    check(eventually([&] { return tables() > seen; }), "no NicTable from rank 1 for the fence");
  }
  barrier(r.c, "fenced");
  puts(3, 0xE20, "route fenced");
  if (r.c.rank == 1) {
    std::this_thread::sleep_for(kTicks);
    const RdmaContextStats c = soft0(engine);
    check(c.state == "paused" && c.live_qps == 0 &&
              engine.rdma_stats().route_recoveries == start.route_recoveries,
          "a route without a valid address carried or was published: " + describe(engine));
  }
  std::printf("rank %d: fenced: %s\n", r.c.rank, describe(engine).c_str());
  barrier(r.c, "fenced and checked");

  // The address back: the drained route is published again (two generations on) and carries.
  seen = tables();
  if (r.c.rank == 1) {
    softverbs_control("gid soft_0 1 ::ffff:127.0.0.1");
    check(eventually([&] { return soft0(engine).state == "active"; }),
          "the route was not published again: " + describe(engine));
    const RdmaContextStats c = soft0(engine);
    check(engine.rdma_stats().route_recoveries == start.route_recoveries + 1 &&
              c.route_generation == first.route_generation + 2 && c.fence.empty() &&
              c.gid_index == 1,
          "after the recovery: " + describe(engine));
  } else {
    check(eventually([&] { return tables() > seen; }), "no NicTable from rank 1 for the recovery");
  }
  barrier(r.c, "published");
  bool carried = false;
  for (int round = 0; round < 10 && !carried; ++round) {
    puts(2, 0xE30 + 16 * static_cast<std::uint64_t>(round), "route published");
    // Rank 1 decides (a QP on its soft_0 again: rank 0 built one to the new route).
    std::uint64_t mark = r.c.rank == 1 && soft0(engine).live_qps > 0 ? 1 : 0;
    Request agree =
        accepted(r.c.comm.all_reduce(&mark, &mark, 1, DataType::Uint64, ReduceOp::Max), "agree");
    wait_ok(agree, "agreeing whether the published route carries");
    carried = mark != 0;
  }
  check(carried, "the published route never carried again: " + describe(engine));
  std::printf("rank %d: published: %s\n", r.c.rank, describe(engine).c_str());

  // A fatal device event: fenced for good, though its port is ACTIVE and its GID valid.
  seen = tables();
  if (r.c.rank == 1) {
    const std::uint64_t recoveries = engine.rdma_stats().route_recoveries;
    softverbs_control("fatal soft_0");
    check(eventually([&] {
            const RdmaContextStats c = soft0(engine);
            return c.state == "paused" && has(c.fence, "fatal") && c.live_qps == 0;
          }),
          "a fatal device event did not fence and drain the route: " + describe(engine));
    std::this_thread::sleep_for(kTicks);
    check(soft0(engine).state == "paused" && engine.rdma_stats().route_recoveries == recoveries,
          "a route fenced by a fatal event came back: " + describe(engine));
  } else {
    check(eventually([&] { return tables() > seen; }), "no NicTable from rank 1 for the fatal");
  }
  barrier(r.c, "fatal");
  puts(2, 0xE50, "after the fatal event");
  if (r.c.rank == 1) {
    check(soft0(engine).state == "paused" && soft0(engine).live_qps == 0,
          "the fatal route carried: " + describe(engine));
  }
  barrier(r.c, "done");
  std::printf("rank %d: route_recovery ok\n", r.c.rank);
}

}  // namespace orbite::probe
