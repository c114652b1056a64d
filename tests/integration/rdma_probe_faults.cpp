// orbite-rdma-probe's fault scenarios (see rdma_probe.cpp): an error completion on slice k of n,
// unregister while a grant is published, and peers SIGKILLed at each protocol phase.
#include <csignal>
#include <cstdio>
#include <thread>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

constexpr std::uint64_t kOwnerSeed = 0xFA17;
constexpr std::uint64_t kRequesterSeed = 0x5E17;
constexpr std::uint64_t kSentinelSeed = 0x5E47;

// A one-byte get of the region's last byte builds the connection before a fault is armed, so
// that the fault meets the put's WRs; the put's check leaves that byte out (the get copied the
// owner's byte there).
void warm_up_on_last_byte(RdmaContext& r, Region& mine, const RemoteRegion& remote,
                          std::uint64_t length) {
  TransferEngine& engine = r.c.comm.engine();
  Request warm =
      accepted(engine.get(mine.region, length - 1, remote, length - 1, 1, r.rdma), "warm-up get");
  wait_ok(warm, "warm-up get");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// error_cqe: softverbs fails the 8th send WR the requester posts (fail_wr soft_0 * 8 REM_OP_ERR)
// during a 16-slice put. The put fails only after the drain, marked "effect unknown"; no payload
// WR is re-posted (at most 7 succeed); the budgets come back once it has drained; a sentinel the
// owner writes into the target after the failure survives 200 ms (no late DMA, no replay).

void scenario_rdma_error_cqe(RdmaContext& r) {
  constexpr std::uint64_t kLength = 1 * kMiB;  // 16 slices of 64 KiB (a WRITE: at most 32)
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    // A first, small get builds the connection, so that the count below is of payload WRs.
    Request warm = accepted(engine.get(mine.region, 0, remote, 0, 1, r.rdma), "warm-up get");
    wait_ok(warm, "warm-up get");
    const RdmaStats before = engine.rdma_stats();
    softverbs_control("fail_wr soft_0 * 8 REM_OP_ERR");
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
    check(q.wait(kWait).code() != Errc::Timeout, "the failed put never completed");
    auto st = q.status();
    check(st && !st->ok(), "the put with a failed WR succeeded");
    check(st->message().find("effect unknown") != std::string::npos,
          "the failure does not say the effect is unknown: " + st->to_string());
    const RdmaStats after = engine.rdma_stats();
    const std::uint64_t writes = after.completed_writes - before.completed_writes;
    check(writes <= 7, sz(writes) + " payload WRs succeeded; the 8th failed");
    check(after.direct_bytes_in_use == 0, "the requester's loan was not returned after the drain");
    std::printf("rank 0: error CQE: %llu of 16 WRITEs done, then %s\n",
                static_cast<unsigned long long>(writes), st->to_string().c_str());
    signal_peer(r.c, 1, 60);
    await_peer(r.c, 1, 61);
  } else {
    await_peer(r.c, 0, 60);
    // The sentinel goes in after the requester saw the failure; nothing may overwrite it.
    check(eventually([&] { return engine.rdma_stats().grants_active == 0; }),
          "the failed grant was never closed");
    fill_pattern(mine.bytes.data(), kLength, kSentinelSeed);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    check_pattern(mine.bytes.data(), kLength, kSentinelSeed, "the sentinel after the failure");
    const RdmaStats s = engine.rdma_stats();
    check(s.grants_in_use == 0 && s.granted_bytes_in_use == 0,
          "the source's charges were not returned");
    signal_peer(r.c, 0, 61);
  }
  barrier(r.c, "error CQE checked");
}

// ---------------------------------------------------------------------------------------------
// failed_post: softverbs fails the requester's next ibv_post_send (fail_post). With bad_wr at
// WR 2 of the chain, the two WRs before it were accepted and the rest proven unaccepted: the
// put fails after the drain with at most 2 WRITEs done; with a null bad_wr the result is
// unknown, every WR stays charged until the QP is gone. Either way "effect unknown", the loans
// come back, and the next put (over a new connection) succeeds.

void scenario_rdma_failed_post(RdmaContext& r) {
  constexpr std::uint64_t kLength = 1 * kMiB;  // 16 slices: the first post is a chain of 15
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    warm_up_on_last_byte(r, mine, remote, kLength);
    for (const char* command :
         {"fail_post soft_0 * 1 ENOMEM at=2", "fail_post soft_0 * 1 EIO null"}) {
      const std::string fault = command;
      const RdmaStats before = engine.rdma_stats();
      softverbs_control(fault);
      Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
      check(q.wait(kWait).code() != Errc::Timeout, fault + ": the put never completed");
      auto st = q.status();
      check(st && !st->ok(), fault + ": the put succeeded");
      check(st->message().find("ibv_post_send") != std::string::npos &&
                st->message().find("effect unknown") != std::string::npos,
            fault + ": " + st->to_string());
      const RdmaStats after = engine.rdma_stats();
      const std::uint64_t writes = after.completed_writes - before.completed_writes;
      if (fault.ends_with("at=2")) check(writes <= 2, fault + ": " + sz(writes) + " WRITEs ran");
      // A failed post is one rail error of its pair (its accepted WRs flush: not counted again).
      check(after.rail_errors == before.rail_errors + 1,
            fault + ": " + sz(after.rail_errors - before.rail_errors) + " rail errors counted");
      check(eventually([&] { return engine.rdma_stats().direct_bytes_in_use == 0; }),
            fault + ": the loan was not returned");
      std::printf("rank 0: %s: %llu WRITEs, then %s\n", fault.c_str(),
                  static_cast<unsigned long long>(writes), st->to_string().c_str());
      Request again = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "again");
      wait_ok(again, fault + ": the next put");
    }
    signal_peer(r.c, 1, 65);
  } else {
    await_peer(r.c, 0, 65);
    check_pattern(mine.bytes.data(), kLength - 1, kRequesterSeed, "the put after the failed posts");
    check(eventually([&] { return engine.rdma_stats().grants_in_use == 0; }),
          "the failed grants were not closed");
  }
  barrier(r.c, "failed post checked");
}

// ---------------------------------------------------------------------------------------------
// failed_polls: softverbs fails the next 400 ibv_poll_cq calls on rank 0's device (fail_poll)
// while a put and a get are in flight. What the CQs hold is still there after them: both
// transfers complete with the right bytes, every failure is counted, and the run is logged once
// when it starts and once when polls work again (not once a pass).

void scenario_rdma_failed_polls(RdmaContext& r) {
  constexpr std::uint64_t kLength = 1 * kMiB;
  constexpr std::uint64_t kFailures = 400;
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    warm_up_on_last_byte(r, mine, remote, kLength);
    const RdmaStats before = engine.rdma_stats();
    softverbs_control("fail_poll soft_0 1 " + std::to_string(kFailures));
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
    wait_ok(q, "the put across failed polls");
    // Every armed failure came before the put's completion could be polled.
    const std::uint64_t failed = engine.rdma_stats().cq_poll_failures - before.cq_poll_failures;
    check(failed == kFailures, sz(failed) + " failed polls counted, " + sz(kFailures) + " armed");
    signal_peer(r.c, 1, 70);
    await_peer(r.c, 1, 71);
    // The owner rewrote its region; a get across another run of failures brings those bytes.
    softverbs_control("fail_poll soft_0 1 " + std::to_string(kFailures));
    Request g = accepted(engine.get(mine.region, 0, remote, 0, kLength, r.rdma), "get");
    wait_ok(g, "the get across failed polls");
    check_pattern(mine.bytes.data(), kLength, kOwnerSeed + 1, "the get across failed polls");
    const RdmaStats after = engine.rdma_stats();
    check(after.cq_poll_failures - before.cq_poll_failures == 2 * kFailures,
          sz(after.cq_poll_failures - before.cq_poll_failures) + " failed polls in all");
    check(after.parents_failed == before.parents_failed, "a transfer failed");
    std::printf("rank 0: failed polls: %llu counted, put and get intact\n",
                static_cast<unsigned long long>(after.cq_poll_failures - before.cq_poll_failures));
  } else {
    await_peer(r.c, 0, 70);
    check_pattern(mine.bytes.data(), kLength - 1, kRequesterSeed, "the put across failed polls");
    fill_pattern(mine.bytes.data(), kLength, kOwnerSeed + 1);
    signal_peer(r.c, 0, 71);
  }
  barrier(r.c, "failed polls checked");
}

// ---------------------------------------------------------------------------------------------
// unregister_busy: the requester's completions are delayed (softverbs delay), so the owner's grant
// stays published a while; unregister with a short timeout is Unquiesced and keeps the
// registration; after the put completes, unregister succeeds.

void scenario_rdma_unregister_busy(RdmaContext& r) {
  constexpr std::uint64_t kLength = 1 * kMiB;
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    softverbs_control("delay soft_0 1500000");
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
    wait_ok(q, "the delayed put");
    softverbs_control("delay soft_0 0");
    signal_peer(r.c, 1, 70);
  } else {
    check(eventually([&] { return engine.rdma_stats().grants_active > 0; }),
          "the grant was never published");
    Status st = mine.region.unregister(std::chrono::milliseconds(50));
    check(st.code() == Errc::Unquiesced,
          "unregister under a published grant: expected Unquiesced, got " + st.to_string());
    check(mine.region.valid(), "the registration went away");
    await_peer(r.c, 0, 70);
    check_pattern(mine.bytes.data(), kLength, kRequesterSeed, "the put that outlived unregister");
    check_ok(mine.region.unregister(std::chrono::seconds(10)), "unregister after the put");
  }
  barrier(r.c, "unregister checked");
}

// ---------------------------------------------------------------------------------------------
// killed: three ranks started by the test. Rank 0 requests, rank 1 owns the memory, rank 2 is a
// second requester. `phase` says who dies when (a hook SIGKILLs the process at that phase, or
// the test kills rank 1 once rank 0 streams). The survivors' requests fail with ConnectionLost
// within the bound; a source that lost its requester revokes its windows and unlocks the range,
// so rank 2 then gets a grant on the same range.

void scenario_rdma_killed(RdmaContext& r, const std::string& phase) {
  constexpr std::uint64_t kLength = 8 * kMiB;
  const bool requester_dies = phase.starts_with("requester");
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  const auto bound = std::chrono::seconds(30);
  if (r.c.rank == 0) {
    if (requester_dies) {
      // The hook kills this process inside the put.
      Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
      (void)q.wait(kWait);
      fail("the requester outlived its hook (" + phase + ")");
    }
    const auto start = Clock::now();
    bool announced = false;
    for (int i = 0;; ++i) {
      Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
      Status st = q.wait(kWait);
      if (st.ok()) {
        check(phase == "source_mid_payload", "a put succeeded although the source died");
        if (!announced) {
          std::printf("rank 0: streaming\n");  // the test kills rank 1 now
          std::fflush(stdout);
          announced = true;
        }
        continue;
      }
      check(st.code() == Errc::ConnectionLost, "expected ConnectionLost, got " + st.to_string());
      check(Clock::now() - start < kWait + bound, "the loss took too long");
      std::printf("rank 0: ConnectionLost after %d puts: %s\n", i, st.message().c_str());
      break;
    }
    check(eventually([&] { return engine.rdma_stats().direct_bytes_in_use == 0; }),
          "the requester's loans were not returned");
    check_ok(engine.close(std::chrono::seconds(10)), "close after the loss");
    return;
  }
  if (r.c.rank == 1) {
    if (!requester_dies) {
      // Killed by the hook or by the test; until then it serves.
      std::this_thread::sleep_for(2 * kWait);
      fail("the source outlived its phase (" + phase + ")");
    }
    // Rank 0 dies holding a grant: it must be revoked, and the range unlocked.
    check(eventually([&] {
            const RdmaStats s = engine.rdma_stats();
            return s.grants > 0 && s.grants_active == 0 && s.windows_revoked > 0;
          }),
          "the dead requester's grant was not revoked");
    signal_peer(r.c, 2, 80);
    await_peer(r.c, 2, 81);
    check_pattern(mine.bytes.data() + 4096, 4096, 0xC0FFEE, "rank 2's put into the same range",
                  4096);
    check(engine.rdma_stats().grants_in_use == 0, "grant charges left");
    check_ok(engine.close(std::chrono::seconds(10)), "close");
    return;
  }
  // rank 2
  if (!requester_dies) {
    check_ok(engine.close(std::chrono::seconds(10)), "close");
    return;
  }
  await_peer(r.c, 1, 80);
  fill_pattern(mine.bytes.data(), kLength, 0xC0FFEE);
  Request q = accepted(engine.put(mine.region, 4096, remote, 4096, 4096, r.rdma), "rank 2 put");
  wait_ok(q, "rank 2's put into the range the dead requester held");
  signal_peer(r.c, 1, 81);
  check_ok(engine.close(std::chrono::seconds(10)), "close");
}

// cts_post_fails: the receiver's Cts for a rendezvous message over RDMA cannot be posted
// (softverbs fails rank 0's next ibv_post_send): the link fails, and with it the receive that
// had matched the announcement, within the bound. (The receive used to be entered in flight
// only after the failed post had failed the link's requests, and then waited for good; found by
// the fault campaign.) The sender's request ends too.
void scenario_rdma_cts_post_fails(RdmaContext& r) {
  Context over_rdma{r.c.comm, r.rdma, r.c.rank, r.c.size};
  // Above the eager and the announcement limits (1 MiB): Rts, then the Cts.
  constexpr std::uint64_t kBig = kMiB + 1;
  Bytes b(kBig);
  const int peer = 1 - r.c.rank;
  // Both message QPs exist before the fault (a warm-up each way).
  if (r.c.rank == 0) {
    send(over_rdma, b.data(), 100, peer, 10, "warm-up");
    recv(over_rdma, b.data(), 100, peer, 11, "warm-up");
  } else {
    recv(over_rdma, b.data(), 100, peer, 10, "warm-up");
    send(over_rdma, b.data(), 100, peer, 11, "warm-up");
  }
  if (r.c.rank == 0) {
    Request q = irecv(over_rdma, b.data(), kBig, peer, 12, "the receive whose Cts fails");
    softverbs_control("fail_post soft_0 * 1 ENOMEM");
    signal_peer(r.c, peer, 70);
    const Status st = q.wait(kWait);
    check(q.done(), "the receive whose Cts could not be posted still waits after the bound");
    check(st.code() == Errc::ConnectionLost &&
              st.message().find("ibv_post_send") != std::string::npos,
          "the receive ended " + st.to_string());
    std::printf("rank 0: the receive ended %s\n", st.to_string().c_str());
  } else {
    await_peer(r.c, peer, 70);
    fill_pattern(b.data(), kBig, 0xC75);
    Request s = isend(over_rdma, b.data(), kBig, peer, 12, "the rendezvous send");
    const Status st = s.wait(kWait);
    check(s.done() && st.code() == Errc::ConnectionLost, "the send ended " + st.to_string());
  }
}

// ---------------------------------------------------------------------------------------------
// orderly_close_lag: rank 0's softverbs makes its completions visible 300 ms late (delay), so the
// frame rank 1 sends over its message QP completes at rank 1 long before rank 0 can poll it. Rank
// 1 then closes its engine: its TCP Bye and end of stream reach rank 0 first. The link waits for
// rank 1's Bye on the message QP (after its last frame) instead of a 50 ms grace, so the message
// is delivered; a receive posted after it fails ConnectionLost (the link closed in order).

void scenario_rdma_orderly_close_lag(RdmaContext& r) {
  constexpr std::uint64_t kBytes = 3000;  // an eager frame
  constexpr int kWarmTag = 95, kLastTag = 96, kNothingTag = 97;
  Bytes out(kBytes), in(kBytes);
  const int peer = 1 - r.c.rank;
  // Both message QPs exist before the close.
  fill_pattern(out.data(), kBytes, 0xB0E + static_cast<std::uint64_t>(r.c.rank));
  std::vector<Request> both;
  both.push_back(accepted(r.c.comm.isend(out.data(), kBytes, peer, kWarmTag, r.rdma), "isend"));
  both.push_back(accepted(r.c.comm.irecv(in.data(), kBytes, peer, kWarmTag, r.rdma), "irecv"));
  wait_all_ok(both, "the warm-up messages");
  if (r.c.rank == 1) {
    await_peer(r.c, 0, 72);
    fill_pattern(out.data(), kBytes, 0xB1E);
    Request last = accepted(r.c.comm.isend(out.data(), kBytes, 0, kLastTag, r.rdma), "isend");
    wait_ok(last, "the last message");
    check_ok(r.c.comm.engine().close(std::chrono::seconds(30)), "engine close after the send");
    return;
  }
  Request last = accepted(r.c.comm.irecv(in.data(), kBytes, 1, kLastTag, r.rdma), "irecv");
  softverbs_control("delay soft_0 300000");
  signal_peer(r.c, 1, 72);
  const Status st = last.wait(kWait);
  check(st.ok(), "the message sent before the peer's orderly close ended " + st.to_string());
  check_pattern(in.data(), kBytes, 0xB1E, "the message sent before the peer's orderly close");
  softverbs_control("delay soft_0 0");
  Request nothing = accepted(r.c.comm.irecv(in.data(), kBytes, 1, kNothingTag, r.rdma), "irecv");
  const Status lost = nothing.wait(kWait);
  check(lost.code() == Errc::ConnectionLost, "a receive after the close ended " + lost.to_string());
  std::printf("rank 0: the last message arrived 300 ms after the peer's close\n");
  check_ok(r.c.comm.engine().close(std::chrono::seconds(30)), "engine close");
}

}  // namespace orbite::probe
