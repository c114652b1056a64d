// orbite-rdma-probe's cleanup scenarios (see rdma_probe.cpp): segments given back with status-1
// receipts when a deadline passes during the payload; the idle-QP reaper; the destruction window
// of a parent whose flush completions never come.
#include <cstdio>

#include "rdma_probe.h"

namespace orbite::probe {

// ---------------------------------------------------------------------------------------------
// released_segments: two QPs per array (ORBITE_NUM_LANES=2 from the test), so a 1 MiB put is two
// segments of 512 KiB. Rank 0 (hook hold_later_segments) posts only the first before the put's
// 50 ms deadline; when it passes, the second goes back with a status-1 receipt instead of its
// payload. The put fails Timeout naming the release; rank 1 closes the grant at once (not after
// rdma.grant_timeout), counts the released segment, and holds the first segment's bytes and its
// own in the second; the link stays healthy, so a put without a deadline then lands.

void scenario_rdma_released_segments(RdmaContext& r) {
  constexpr std::uint64_t kLength = 1 * kMiB;
  constexpr std::uint64_t kHalf = kLength / 2;
  auto [mine, remote] = setup_region(r, kLength, 0xA0, 0xA1);
  TransferEngine& engine = r.c.comm.engine();
  barrier(r.c, "released: regions");
  if (r.c.rank == 0) {
    TransferOptions soon = r.rdma;
    soon.deadline = Clock::now() + std::chrono::milliseconds(50);
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, soon), "deadlined put");
    const Status st = q.wait(kWait);
    std::printf("rank 0: released_segments: %s\n", st.to_string().c_str());
    check(
        st.code() == Errc::Timeout && st.message().find("released unwritten") != std::string::npos,
        "the put whose deadline passed during its payload: " + st.to_string());
    const RdmaStats s = engine.rdma_stats();
    check(s.receipts_released == 1, sz(s.receipts_released) + " status-1 receipts, not 1");
    check(s.direct_bytes_in_use == 0, "the requester's loan was not returned");
  } else {
    check(eventually([&] {
            const RdmaStats s = engine.rdma_stats();
            return s.grants > 0 && s.grants_active == 0 && s.grants_in_use == 0 &&
                   s.granted_bytes_in_use == 0;
          }),
          "the grant with a released segment kept its budgets");
    const RdmaStats s = engine.rdma_stats();
    check(s.segments_released == 1, sz(s.segments_released) + " segments released, not 1");
    check(s.grants_expired == 0, "the grant waited for rdma.grant_timeout");
    check(s.receipt_mismatches == 0, "a receipt was refused");
  }
  barrier(r.c, "released: done");
  if (r.c.rank == 1) {
    check_pattern(mine.bytes.data(), kHalf, 0xA1, "the segment posted before the deadline");
    check_pattern(mine.bytes.data() + kHalf, kHalf, 0xA0, "the released segment", kHalf);
  }
  barrier(r.c, "released: checked");
  if (r.c.rank == 0) {
    Request again = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "again");
    wait_ok(again, "the put without a deadline");
  }
  barrier(r.c, "released: again");
  if (r.c.rank == 1) check_pattern(mine.bytes.data(), kLength, 0xA1, "the put without a deadline");
  barrier(r.c, "released: again checked");
}

// ---------------------------------------------------------------------------------------------
// idle_reaper: with ORBITE_RDMA_IDLE_QP_TIMEOUT=200ms from the test, the payload QP a put built
// is retired at both ends once it carried nothing for 200 ms, while the lane is otherwise idle
// (its sleep ends for the reaper): the endpoint budget recovers on both ranks. A later put builds
// a new QP and lands.

void scenario_rdma_idle_reaper(RdmaContext& r) {
  constexpr std::uint64_t kLength = 256 * kKiB;
  auto [mine, remote] = setup_region(r, kLength, 0x1D, 0x1E);
  TransferEngine& engine = r.c.comm.engine();
  barrier(r.c, "reaper: regions");
  const RdmaStats before = engine.rdma_stats();
  barrier(r.c, "reaper: counted");
  if (r.c.rank == 0) {
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
    wait_ok(q, "the put");
    const RdmaStats used = engine.rdma_stats();
    check(used.qps_created > before.qps_created, "the put built no QP");
    check(eventually([&] { return engine.rdma_stats().qps_reaped > 0; }),
          "the idle QP was never reaped");
    check(eventually([&] {
            const RdmaStats s = engine.rdma_stats();
            return s.qps_destroyed >= before.qps_destroyed + s.qps_reaped &&
                   s.endpoints_in_use + s.qps_reaped <= used.endpoints_in_use;
          }),
          "the reaped QP kept its endpoint charge");
    const RdmaStats reaped = engine.rdma_stats();
    std::printf("rank 0: endpoints in use %llu after the put, %llu after %llu reaped\n",
                static_cast<unsigned long long>(used.endpoints_in_use),
                static_cast<unsigned long long>(reaped.endpoints_in_use),
                static_cast<unsigned long long>(reaped.qps_reaped));
    signal_peer(r.c, 1, 70);
  } else {
    // The source's end goes with the requester's QpRetire.
    check(eventually([&] { return engine.rdma_stats().qps_destroyed > before.qps_destroyed; }),
          "the source's end of the reaped QP was never destroyed");
    await_peer(r.c, 0, 70);
    check(engine.rdma_stats().qps_reaped == 0, "the source reaped a QP of its own");
  }
  barrier(r.c, "reaper: reaped");
  if (r.c.rank == 0) {
    fill_pattern(mine.bytes.data(), kLength, 0x1F);
    const std::uint64_t created = engine.rdma_stats().qps_created;
    Request again = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "again");
    wait_ok(again, "the put after the reap");
    check(engine.rdma_stats().qps_created > created, "the put after the reap built no QP");
  }
  barrier(r.c, "reaper: again");
  if (r.c.rank == 1) check_pattern(mine.bytes.data(), kLength, 0x1F, "the put after the reap");
  barrier(r.c, "reaper: checked");
}

// ---------------------------------------------------------------------------------------------
// destroy_window: with ORBITE_RDMA_DESTROY_TIMEOUT=300ms from the test, softverbs holds back the
// flush completions of rank 0's device (hold_flush) and fails the second WRITE of a 1 MiB put.
// The WRs after it never complete: the put reports Unquiesced once the destruction window ran
// out (a timeout proves nothing: its loan stays charged, counted as retained), the retired QP is
// destroyed after its own window, and a new put over a new QP lands. Closing the engine then
// reports what it retained.

void scenario_rdma_destroy_window(RdmaContext& r) {
  constexpr std::uint64_t kLength = 1 * kMiB;
  auto [mine, remote] = setup_region(r, kLength, 0xD5, 0xD6);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    Request warm = accepted(engine.get(mine.region, 0, remote, 0, 1, r.rdma), "warm-up get");
    wait_ok(warm, "warm-up get");
    const RdmaStats before = engine.rdma_stats();
    softverbs_control("hold_flush soft_0 on");
    softverbs_control("fail_wr soft_0 * 2 REM_OP_ERR");
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
    const Status st = q.wait(kWait);
    std::printf("rank 0: destroy_window: %s\n", st.to_string().c_str());
    check(st.code() == Errc::Unquiesced &&
              st.message().find("did not drain within rdma.destroy_timeout") != std::string::npos,
          "the put whose flushes never came: " + st.to_string());
    const RdmaStats failed = engine.rdma_stats();
    check(failed.retained > before.retained, "the undrained parent was not retained");
    check(failed.direct_bytes_in_use == kLength,
          "the undrained parent's loan was returned: " + sz(failed.direct_bytes_in_use));
    check(eventually([&] { return engine.rdma_stats().qps_destroyed_undrained > 0; }),
          "the undrained QP was never destroyed");
    softverbs_control("hold_flush soft_0 off");
    fill_pattern(mine.bytes.data(), kLength, 0xD7);
    Request again = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "again");
    wait_ok(again, "the put after the destruction window");
    // The WRs of the destroyed QP left both payload ledgers with it: the selector's transmit
    // meter (which had kept them as posted for good) and the per-tier backlog.
    check(eventually([&] {
            for (const NicLoad& n : engine.nic_load_stats()) {
              const auto& t = n.outstanding_by_tier;
              if (n.posted_bytes != 0 || t[0] != 0 || t[1] != 0 || t[2] != 0) return false;
            }
            return true;
          }),
          "payload of the destroyed QP still counted as posted: " +
              sz(engine.nic_load_stats().front().posted_bytes) + " bytes");
    signal_peer(r.c, 1, 96);
  } else {
    await_peer(r.c, 0, 96);
    check_pattern(mine.bytes.data(), kLength, 0xD7, "the put after the destruction window");
  }
  barrier(r.c, "destroy_window: checked");
  const Status closed = engine.close(std::chrono::seconds(30));
  if (r.c.rank == 0) {
    check(
        closed.code() == Errc::Unquiesced && closed.message().find("retained") != std::string::npos,
        "close after an undrained parent: " + closed.to_string());
  } else {
    check_ok(closed, "engine close");
  }
}

// ---------------------------------------------------------------------------------------------
// directional_close: rank 1 closes its source role. Rank 0's put and get over RDMA are refused
// by a GrantNack (Cancelled, naming close_source) and nothing moves; a rendezvous send to rank 1
// still lands (its grant is the receive's, not a registration's). Rank 1's own put into rank 0
// still works until rank 1 also closes its requester role, which then refuses it.

void scenario_rdma_directional_close(RdmaContext& r) {
  constexpr std::uint64_t kLength = 64 * kKiB;
  Context over_rdma{r.c.comm, r.rdma, r.c.rank, r.c.size};
  auto [mine, remote] = setup_region(r, kLength, 0xD0, 0xD1);
  // Rank 1 needs rank 0's descriptor too, for its own puts.
  const RemoteRegion rank0 = share_descriptor(r, &mine.region, 0, 90);
  TransferEngine& engine = r.c.comm.engine();
  barrier(r.c, "directional: regions");
  if (r.c.rank == 1) {
    const Status st = engine.close_source(kWait);
    check(st.ok(), "close_source with nothing in flight: " + st.to_string());
  }
  barrier(r.c, "directional: source closed");
  Bytes message(1 * kMiB);
  if (r.c.rank == 0) {
    const RdmaStats before = engine.rdma_stats();
    for (bool put : {true, false}) {
      auto q = put ? engine.put(mine.region, 0, remote, 0, kLength, r.rdma)
                   : engine.get(mine.region, 0, remote, 0, kLength, r.rdma);
      const Status st = q.ok() ? q->wait(kWait) : q.status();
      std::printf("rank 0: %s into a closed source: %s\n", put ? "put" : "get",
                  st.to_string().c_str());
      check(st.code() == Errc::Cancelled && st.message().find("close_source") != std::string::npos,
            std::string(put ? "the put" : "the get") + " ended " + st.to_string());
    }
    check_pattern(mine.bytes.data(), kLength, 0xD1, "rank 0's buffer after the refused get");
    check(engine.rdma_stats().grants == before.grants, "a refused request got a grant");
    fill_pattern(message.data(), message.size(), 0xD5);
    send(over_rdma, message.data(), message.size(), 1, 91, "the rendezvous send");
  } else {
    recv(over_rdma, message.data(), message.size(), 0, 91, "the rendezvous receive");
    check_pattern(message.data(), message.size(), 0xD5, "the message after close_source");
    check(engine.rdma_stats().grant_nacks >= 2, "the refusals were not GrantNacks");
    check_pattern(mine.bytes.data(), kLength, 0xD0, "rank 1's region after the refused put");
    Request q = accepted(engine.put(mine.region, 0, rank0, 0, kLength, r.rdma), "rank 1's put");
    wait_ok(q, "rank 1's put after its close_source");
    check(engine.close_requester(kWait).ok(), "close_requester with nothing in flight");
    auto refused = engine.put(mine.region, 0, rank0, 0, kLength, r.rdma);
    check(!refused.ok() && refused.status().code() == Errc::Cancelled,
          "a put after close_requester: " +
              (refused.ok() ? std::string("accepted") : refused.status().to_string()));
  }
  barrier(r.c, "directional: done");
  if (r.c.rank == 0) check_pattern(mine.bytes.data(), kLength, 0xD0, "rank 1's put");
  barrier(r.c, "directional: checked");
}

}  // namespace orbite::probe
