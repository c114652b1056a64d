// Multirail scenarios of orbite-rdma-probe, run on a softverbs config with two NICs per process
// (rdma_test.cpp writes it): the DeviceSelector spreads each parent's slices over the rails, and
// every rail's share shows in TransferEngine::nic_load_stats().
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

constexpr std::uint64_t kSeedOwner = 0x7A11000;
constexpr std::uint64_t kSeedRequester = 0x7A12000;

std::vector<NicLoad> loads(TransferEngine& engine) {
  std::vector<NicLoad> out = engine.nic_load_stats();
  check(!out.empty(), "nic_load_stats() lists no NIC");
  return out;
}

void print_shares(int rank, const std::vector<NicLoad>& before, const std::vector<NicLoad>& after) {
  for (std::size_t i = 0; i < after.size() && i < before.size(); ++i) {
    std::printf("rank %d: nic %d %s allocated %" PRIu64 " completed %" PRIu64
                " link %.1f Gb/s selection %.3g B/s\n",
                rank, after[i].nic_id, after[i].name.c_str(),
                after[i].allocated_bytes - before[i].allocated_bytes,
                after[i].completed_bytes - before[i].completed_bytes, after[i].link_gbps,
                after[i].selection_bytes_per_s);
  }
}

}  // namespace

void checked_puts(RdmaContext& r, Region& mine, const RemoteRegion& remote, std::uint64_t at,
                  std::uint64_t n, int count, std::uint64_t seed, const std::string& phase,
                  int& step) {
  TransferEngine& engine = r.c.comm.engine();
  for (int i = 0; i < count; ++i) {
    const std::uint64_t pattern = seed + static_cast<std::uint64_t>(i);
    if (r.c.rank == 0) {
      fill_pattern(mine.bytes.data(), n, pattern);
      Request q = accepted(engine.put(mine.region, 0, remote, at, n, r.rdma), "put");
      wait_ok(q, phase + ": put " + sz(static_cast<std::uint64_t>(i)));
      signal_peer(r.c, 1, step);
    } else {
      await_peer(r.c, 0, step);
      check_pattern(mine.bytes.data() + at, n, pattern, phase + ": put bytes");
    }
    ++step;
    barrier(r.c, phase + ": checked");  // before the next put overwrites the region
  }
}

// rails: put and get of 8,388,768 bytes (with rdma.block_size 1 MiB from the test: 8 slices) and
// of 64 MiB at odd offsets, each checked over the whole of both regions, then the rails' shares.
// RAILS_EXPECT (from the test): "both" (each NIC carried payload), "only1" (device_mask [1]:
// NIC 0 carried nothing), or "ratio:R" (NIC 1's allocated bytes over NIC 0's within 20% of R).
void scenario_rdma_rails(RdmaContext& r) {
  constexpr std::uint64_t kLocal = 4099;
  constexpr std::uint64_t kRemote = 4101;
  constexpr std::uint64_t kLength = 64 * kMiB + 3 * 4096;
  Region mine = make_region(r, kLength, "the region");
  RemoteRegion remote = share_descriptor(r, &mine.region, 1, 1);
  TransferEngine& engine = r.c.comm.engine();
  const std::vector<NicLoad> before = loads(engine);
  int step = 10;
  const char* env_rounds = std::getenv("RAILS_ROUNDS");
  const int rounds = env_rounds != nullptr ? std::atoi(env_rounds) : 1;
  double busy_s = 0;  // rank 0's time inside puts and gets (reported, never checked)
  for (int round = 0; round < rounds; ++round) {
    for (std::uint64_t n : {std::uint64_t{8388768}, 64 * kMiB}) {
      fill_pattern(mine.bytes.data(), kLength, r.c.rank == 1 ? kSeedOwner + n : kSeedRequester + n);
      barrier(r.c, "filled");
      if (r.c.rank == 0) {
        const auto t0 = std::chrono::steady_clock::now();
        Request q = accepted(engine.put(mine.region, kLocal, remote, kRemote, n, r.rdma), "put");
        wait_ok(q, "put " + sz(n));
        busy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        signal_peer(r.c, 1, step);
      } else {
        await_peer(r.c, 0, step);
        const std::string what = "put of " + sz(n) + " bytes over the rails";
        check_pattern(mine.bytes.data(), kRemote, kSeedOwner + n, what + ": before the window");
        check_pattern(mine.bytes.data() + kRemote, n, kSeedRequester + n, what, kLocal);
        check_pattern(mine.bytes.data() + kRemote + n, kLength - kRemote - n, kSeedOwner + n,
                      what + ": after the window", kRemote + n);
      }
      ++step;
      fill_pattern(mine.bytes.data(), kLength,
                   r.c.rank == 1 ? kSeedOwner + 7 * n : kSeedRequester + 7 * n);
      barrier(r.c, "refilled");
      if (r.c.rank == 0) {
        const auto t0 = std::chrono::steady_clock::now();
        Request q = accepted(engine.get(mine.region, kLocal, remote, kRemote, n, r.rdma), "get");
        wait_ok(q, "get " + sz(n));
        busy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::string what = "get of " + sz(n) + " bytes over the rails";
        check_pattern(mine.bytes.data(), kLocal, kSeedRequester + 7 * n, what + ": before");
        check_pattern(mine.bytes.data() + kLocal, n, kSeedOwner + 7 * n, what, kRemote);
        check_pattern(mine.bytes.data() + kLocal + n, kLength - kLocal - n, kSeedRequester + 7 * n,
                      what + ": after", kLocal + n);
      }
      barrier(r.c, "get checked");
    }
  }
  if (r.c.rank == 0) {
    const std::vector<NicLoad> after = loads(engine);
    print_shares(r.c.rank, before, after);
    check(after.size() >= 2, "the softverbs config gives " + sz(after.size()) + " NIC(s), not 2");
    const std::uint64_t a0 = after[0].allocated_bytes - before[0].allocated_bytes;
    const std::uint64_t a1 = after[1].allocated_bytes - before[1].allocated_bytes;
    const std::uint64_t c0 = after[0].completed_bytes - before[0].completed_bytes;
    const std::uint64_t c1 = after[1].completed_bytes - before[1].completed_bytes;
    const std::uint64_t moved = rounds * 2 * (8388768 + 64 * kMiB);
    std::printf("rank 0: aggregate %.2f Gb/s over both rails (%.0f MB in %.3f s)\n",
                static_cast<double>(moved) * 8 / busy_s / 1e9, static_cast<double>(moved) / 1e6,
                busy_s);
    check(c0 + c1 == moved, "the rails completed " + sz(c0 + c1) + " bytes of " + sz(moved));
    check(after[0].charged_bytes == 0 && after[1].charged_bytes == 0 &&
              after[0].posted_bytes == 0 && after[1].posted_bytes == 0,
          "charges or posted debt left after every transfer ended");
    const char* raw = std::getenv("RAILS_EXPECT");
    const std::string expect = raw != nullptr ? raw : "both";
    if (expect == "both") {
      check(c0 > 0 && c1 > 0, "one rail carried nothing: " + sz(c0) + " / " + sz(c1));
    } else if (expect == "only1") {
      check(a0 == 0 && c0 == 0 && c1 == moved,
            "device_mask [1]: NIC 0 got " + sz(a0) + " bytes allocated");
    } else if (expect.starts_with("ratio:")) {
      const double want = std::strtod(expect.c_str() + 6, nullptr);
      check(a0 > 0, "NIC 0 got no bytes");
      const double got = static_cast<double>(a1) / static_cast<double>(a0);
      std::printf("rank 0: allocated ratio nic1/nic0 %.3f (want %.3f)\n", got, want);
      check(got > want * 0.8 && got < want * 1.2, "allocated split " + std::to_string(got) +
                                                      " is not within 20% of " +
                                                      std::to_string(want));
    }
  }
  barrier(r.c, "shares checked");
  std::printf("rank %d: rails ok\n", r.c.rank);
}

// port_down: rank 0's soft_0 port goes down while a 64 MiB put (then a get) is in flight. The
// in-flight parent either finished first or fails as the guide says (WRITE: effect unknown;
// READ: replayable, after drain); later transfers finish on soft_1 alone; once the port is up
// again (the monitor's scan resumes the context), both rails carry again.
// PORT_DOWN_CMD / PORT_UP_CMD (shell commands, run by rank 0) replace the softverbs commands,
// and PORT_DOWN_NIC names the rail they cut: the test cuts a veth in a network namespace so.
void scenario_rdma_port_down(RdmaContext& r) {
  const char* down_cmd = std::getenv("PORT_DOWN_CMD");
  const char* up_cmd = std::getenv("PORT_UP_CMD");
  const char* nic_env = std::getenv("PORT_DOWN_NIC");
  const std::size_t cut = nic_env != nullptr ? static_cast<std::size_t>(std::atoi(nic_env)) : 0;
  const std::size_t other = 1 - cut;
  auto run = [](const char* cmd) {
    const int rc = std::system(cmd);
    check(rc == 0, std::string("'") + cmd + "' exited with " + std::to_string(rc));
  };
  auto take_down = [&] {
    if (down_cmd != nullptr) {
      run(down_cmd);
    } else {
      softverbs_control("port soft_" + std::to_string(cut) + " down");
    }
  };
  auto bring_up = [&] {
    if (up_cmd != nullptr) {
      run(up_cmd);
    } else {
      softverbs_control("port soft_" + std::to_string(cut) + " up");
    }
  };
  constexpr std::uint64_t kBig = 64 * kMiB;
  constexpr std::uint64_t kSmall = 8 * kMiB + 160;
  constexpr std::uint64_t kLength = kBig + 4096;
  Region mine = make_region(r, kLength, "the region");
  RemoteRegion remote = share_descriptor(r, &mine.region, 1, 1);
  TransferEngine& engine = r.c.comm.engine();
  int step = 10;
  // Puts of kSmall whose bytes rank 1 checks; returns rank 0's per-NIC completed deltas.
  auto checked_puts = [&](int count, std::uint64_t seed, const std::string& phase) {
    const std::vector<NicLoad> before = loads(engine);
    probe::checked_puts(r, mine, remote, 1, kSmall, count, seed, phase, step);
    const std::vector<NicLoad> after = loads(engine);
    return std::make_pair(after[cut].completed_bytes - before[cut].completed_bytes,
                          after[other].completed_bytes - before[other].completed_bytes);
  };
  // The port events the monitor consumed on the cut rail's context (softverbs raises PORT_ERR and
  // PORT_ACTIVE on every open context of the device, a veth's link change included).
  auto port_events = [&] { return engine.rdma_stats().contexts.at(cut).port_events; };
  std::uint64_t events_seen = 0;
  std::uint64_t recoveries_seen = 0;
  auto in_flight_then_down = [&](bool write) {
    if (r.c.rank != 0) return;
    events_seen = port_events();
    Request q = write ? accepted(engine.put(mine.region, 0, remote, 0, kBig, r.rdma), "big put")
                      : accepted(engine.get(mine.region, 0, remote, 0, kBig, r.rdma), "big get");
    take_down();
    const Status st = q.wait(std::chrono::seconds(60));
    const std::string expect = write ? "effect unknown" : "replayable";
    std::printf("rank 0: %s in flight when the port went down: %s\n", write ? "put" : "get",
                st.ok() ? "finished first" : st.to_string().c_str());
    check(st.ok() ||
              (st.code() == Errc::ConnectionLost && st.message().find(expect) != std::string::npos),
          std::string(write ? "put" : "get") + " failed other than '" + expect +
              "': " + st.to_string());
    check(eventually([&] { return !loads(engine)[cut].healthy; }), "the cut rail is still healthy");
    check(engine.rdma_stats().contexts.at(cut).fence.find("port left ACTIVE") != std::string::npos,
          "the cut rail's fence: '" + engine.rdma_stats().contexts.at(cut).fence + "'");
    recoveries_seen = engine.rdma_stats().route_recoveries;
    check(eventually([&] { return port_events() > events_seen; }),
          "the monitor consumed no port event of the cut rail (" + sz(port_events()) + ")");
    events_seen = port_events();
  };
  auto port_up = [&] {
    if (r.c.rank == 0) bring_up();
    // A veth cut takes the peer's end down too: both ends must have resumed before the rail can
    // carry (the peer's monitor scan resumes its context on its own clock).
    check(eventually([&] { return loads(engine)[cut].healthy; }),
          "the cut rail did not resume after its port came back");
    if (r.c.rank == 0) {
      check(eventually([&] { return port_events() > events_seen; }),
            "the monitor consumed no port event when the rail came back");
      // Resumed through the monitor's recovery: the old route's QPs drained first.
      const RdmaStats s = engine.rdma_stats();
      check(s.route_recoveries > recoveries_seen && s.contexts.at(cut).fence.empty(),
            "the cut rail resumed without a route recovery (" + sz(s.route_recoveries) + ")");
    }
    barrier(r.c, "port up");
  };
  checked_puts(1, 0x9D0, "warm-up");
  for (bool write : {true, false}) {
    in_flight_then_down(write);
    barrier(r.c, "port down");
    const auto [down0, down1] = checked_puts(3, write ? 0x9D10 : 0x9D20, "port down");
    if (r.c.rank == 0) {
      check(down0 == 0 && down1 == 3 * kSmall,
            "with the rail down the cut / other rail carried " + sz(down0) + " / " + sz(down1));
    }
    port_up();
    // Both rails carry again within a bounded number of puts: the first ones after the resume
    // may still go to the other rail alone while the cut rail's QP is rebuilt.
    std::uint64_t up0 = 0, up1 = 0;
    for (int round = 0; round < 10; ++round) {
      const auto [c0, c1] = checked_puts(
          3, (write ? 0x9D30 : 0x9D40) + 16 * static_cast<std::uint64_t>(round), "port up again");
      up0 += c0;
      up1 += c1;
      // Rank 0 decides; the collective tells rank 1 (over the default transport).
      std::uint64_t both = r.c.rank == 0 && up0 > 0 && up1 > 0 ? 1 : 0;
      Request agree = accepted(
          r.c.comm.all_reduce(&both, &both, 1, DataType::Uint64, ReduceOp::Max), "all_reduce");
      wait_ok(agree, "agreeing whether both rails carried");
      if (both != 0) break;
    }
    if (r.c.rank == 0) {
      std::string state;
      for (const NicLoad& n : loads(engine)) {
        state += "; " + n.name + (n.healthy ? " healthy" : " paused") + " charged " +
                 sz(n.charged_bytes) + " posted " + sz(n.posted_bytes) + " selection " +
                 std::to_string(n.selection_bytes_per_s) + " B/s";
      }
      check(up0 > 0 && up1 > 0,
            "after the port came back the rails carried " + sz(up0) + " / " + sz(up1) + state);
    }
  }
  barrier(r.c, "done");
  std::printf("rank %d: port_down ok\n", r.c.rank);
}

// peer_port_down: the owner (rank 1) takes its own soft_0 down; its NicTable tells rank 0, whose
// soft_0 then maps to rank 1's soft_1, so rank 0's puts keep succeeding on both of its rails
// (without the table they would fail on the dead remote NIC). Messages over RDMA both ways (an
// eager one and a rendezvous) go on too: both message QPs started on soft_0 and move off the
// paused rail before their next frame. After the port comes back a second table arrives and
// puts and messages go on.
void scenario_rdma_peer_port_down(RdmaContext& r) {
  constexpr std::uint64_t kSmall = 8 * kMiB + 160;
  Region mine = make_region(r, kSmall, "the region");
  RemoteRegion remote = share_descriptor(r, &mine.region, 1, 1);
  TransferEngine& engine = r.c.comm.engine();
  int step = 10;
  auto checked_puts = [&](int count, std::uint64_t seed, const std::string& phase) {
    probe::checked_puts(r, mine, remote, 0, kSmall, count, seed, phase, step);
  };
  auto tables = [&] { return engine.rdma_stats().nic_tables_received; };
  // Rank 0 sends 100 bytes and 64 KiB + 1 over RDMA, rank 1 sends them back; both check.
  Context over_rdma{r.c.comm, r.rdma, r.c.rank, r.c.size};
  auto messages = [&](std::uint64_t seed, const std::string& phase) {
    for (int from : {0, 1}) {
      for (std::uint64_t n : {std::uint64_t{100}, std::uint64_t{64 * 1024 + 1}}) {
        Bytes b(n);
        const std::string what = phase + ": " + sz(n) + " bytes from rank " + sz(from);
        if (r.c.rank == from) {
          fill_pattern(b.data(), n, seed + n + static_cast<std::uint64_t>(from));
          send(over_rdma, b.data(), n, 1 - from, 60, what);
        } else {
          check(recv(over_rdma, b.data(), n, from, 60, what) == n, what + ": size");
          check_pattern(b.data(), n, seed + n + static_cast<std::uint64_t>(from), what);
        }
      }
    }
  };
  checked_puts(1, 0xB10, "warm-up");
  messages(0xC10, "warm-up");
  for (const bool down : {true, false}) {
    const std::string phase = down ? "peer port down" : "peer port up";
    const std::uint64_t seen = tables();
    if (r.c.rank == 1) {
      softverbs_control(std::string("port soft_0 ") + (down ? "down" : "up"));
      check(eventually([&] { return engine.nic_load_stats()[0].healthy != down; }),
            phase + ": rank 1's soft_0 did not follow its port");
    } else {
      check(eventually([&] { return tables() > seen; }),
            phase + ": no NicTable from rank 1 (" + sz(tables()) + " received)");
    }
    barrier(r.c, phase);
    checked_puts(3, down ? 0xB20 : 0xB30, phase);
    messages(down ? 0xC20 : 0xC30, phase);
  }
  check(engine.rdma_stats().message_qp_moves >= 1,
        "the message QP did not move off the paused rail (" +
            sz(engine.rdma_stats().message_qp_moves) + " moves)");
  if (r.c.rank == 1) {
    check(engine.rdma_stats().nic_tables_sent >= 2,
          "rank 1 sent " + sz(engine.rdma_stats().nic_tables_sent) + " NIC tables for two changes");
  }
  barrier(r.c, "done");
  std::printf("rank %d: peer_port_down ok\n", r.c.rank);
}

// forged_nic_table: rank 1's NicTable renames its first NIC (test hook forge_nic_table) when its
// soft_0 goes down. Rank 0 takes that for what it is, a table that is not the peer's: a protocol
// error that fails the link, after which a put to rank 1 fails at once and nothing moved.
void scenario_rdma_forged_nic_table(RdmaContext& r) {
  constexpr std::uint64_t kLength = 64 * 1024;
  Region mine = make_region(r, kLength, "the region");
  RemoteRegion remote = share_descriptor(r, &mine.region, 1, 1);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "first put");
    wait_ok(q, "first put");
  }
  barrier(r.c, "connected");
  if (r.c.rank == 1) {
    softverbs_control("port soft_0 down");
    check(eventually([&] { return engine.rdma_stats().nic_tables_sent > 0; }),
          "rank 1 sent no NicTable");
  } else {
    check(eventually([&] { return engine.stats().protocol_errors > 0; }),
          "the forged NicTable was not a protocol error");
    auto q = engine.put(mine.region, 0, remote, 0, kLength, r.rdma);
    const Status st = q.ok() ? q->wait(std::chrono::seconds(30)) : q.status();
    std::printf("rank 0: put after the forged table: %s\n", st.to_string().c_str());
    check(st.code() == Errc::ConnectionLost && st.message().find("NicTable") != std::string::npos,
          "the put after the forged table did not fail naming it: " + st.to_string());
  }
  barrier(r.c, "done");
  std::printf("rank %d: forged_nic_table ok\n", r.c.rank);
}

}  // namespace orbite::probe
