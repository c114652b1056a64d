// orbite-rdma-probe's budget scenarios (see rdma_probe.cpp): crossed messages that each need the
// whole rdma.max_direct_bytes; QP slots beyond the link's width; a QP whose destruction fails;
// receipts' registered slots after a failed post or completion; a grant whose receipts never come;
// a requester that floods the source's queue of deferred GrantRequests; eager frames between two
// ranks with different rdma.eager_limit.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "rdma_probe.h"

namespace orbite::probe {

// ---------------------------------------------------------------------------------------------
// crossed_messages: with ORBITE_RDMA_MAX_DIRECT_BYTES=1MiB from the test, both ranks send the other
// a 1 MiB message over RDMA at once, then receive. Each sender's loan takes its whole budget at
// admission; each receiver's grant needs the same amount. With one pool for both roles neither
// grant could be made (issue 24, defect 1); both messages must arrive, byte for byte.

void scenario_rdma_crossed_messages(RdmaContext& r) {
  constexpr std::uint64_t kBytes = 1 * kMiB;
  constexpr int kTag = 90;
  const int peer = 1 - r.c.rank;
  const std::uint64_t mine_seed = 0xC205 + static_cast<std::uint64_t>(r.c.rank);
  const std::uint64_t their_seed = 0xC205 + static_cast<std::uint64_t>(peer);
  Bytes out(kBytes), in(kBytes);
  fill_pattern(out.data(), kBytes, mine_seed);
  fill_pattern(in.data(), kBytes, 0xBAD);
  barrier(r.c, "crossed: filled");
  std::vector<Request> both;
  both.push_back(accepted(r.c.comm.isend(out.data(), kBytes, peer, kTag, r.rdma), "isend"));
  both.push_back(accepted(r.c.comm.irecv(in.data(), kBytes, peer, kTag, r.rdma), "irecv"));
  wait_all_ok(both, "1 MiB both ways with a 1 MiB rdma.max_direct_bytes");
  check_pattern(in.data(), kBytes, their_seed, "the crossed message");
  const RdmaStats s = r.c.comm.engine().rdma_stats();
  check(s.direct_bytes_in_use == 0 && s.granted_bytes_in_use == 0,
        "charges left: " + sz(s.direct_bytes_in_use) + " lent, " + sz(s.granted_bytes_in_use) +
            " granted");
  barrier(r.c, "crossed: checked");
}

// ---------------------------------------------------------------------------------------------
// eager_frames: EAGER_EXPECT (bytes) is the smaller of the two ranks' rdma.eager_limit (the test
// gives them different ones). Each rank sends the other messages around that limit and 4 KiB over
// RDMA: those up to it go eager (one frame), the rest by rendezvous, on both sides, so no frame
// ever exceeds the receiver's slots (which would break the message QP); every byte arrives.
void scenario_rdma_eager_frames(RdmaContext& r) {
  const char* env = std::getenv("EAGER_EXPECT");
  check(env != nullptr, "EAGER_EXPECT is not set");
  const std::uint64_t limit = std::strtoull(env, nullptr, 10);
  const int peer = 1 - r.c.rank;
  const std::vector<std::uint64_t> sizes = {1,         4095,          4096,      4097,
                                            limit - 1, limit,         limit + 1, 2 * limit,
                                            64 * kKiB, 64 * kKiB + 1, 256 * kKiB};
  std::uint64_t eager = 0;
  std::uint64_t total = 0;
  for (std::uint64_t n : sizes) {
    eager += n <= limit ? 1 : 0;
    total += n;
  }
  const EngineStats before = r.c.comm.engine().stats();
  barrier(r.c, "eager_frames: counted");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::uint64_t n = sizes[i];
    const int tag = 300 + static_cast<int>(i);
    Bytes out(n), in(n + 64);
    fill_pattern(out.data(), n, 0xE6E0 + n + static_cast<std::uint64_t>(r.c.rank));
    fill_pattern(in.data(), n + 64, 0xBAD);
    std::vector<Request> both;
    both.push_back(accepted(r.c.comm.isend(out.data(), n, peer, tag, r.rdma), "isend"));
    both.push_back(accepted(r.c.comm.irecv(in.data(), n, peer, tag, r.rdma), "irecv"));
    wait_all_ok(both, "a message of " + sz(n) + " bytes both ways");
    check_pattern(in.data(), n, 0xE6E0 + n + static_cast<std::uint64_t>(peer),
                  "the message of " + sz(n) + " bytes");
    check_pattern(in.data() + n, 64, 0xBAD, "past the message of " + sz(n) + " bytes", n);
  }
  const EngineStats after = r.c.comm.engine().stats();
  const std::uint64_t eager_sent = after.eager_messages - before.eager_messages;
  const std::uint64_t rendezvous = after.rendezvous_messages - before.rendezvous_messages;
  check(eager_sent == eager && rendezvous == sizes.size() - eager,
        "sent " + sz(eager_sent) + " eager and " + sz(rendezvous) + " by rendezvous; expected " +
            sz(eager) + " and " + sz(sizes.size() - eager) + " for a limit of " + sz(limit));
  const std::uint64_t on_rdma =
      after.of(Transport::Rdma).bytes_sent - before.of(Transport::Rdma).bytes_sent;
  check(on_rdma >= total, "RDMA carried " + sz(on_rdma) + " of " + sz(total) + " bytes");
  std::printf("rank %d: eager_frames %llu eager, %llu rendezvous, limit %llu\n", r.c.rank,
              static_cast<unsigned long long>(eager_sent),
              static_cast<unsigned long long>(rendezvous), static_cast<unsigned long long>(limit));
  barrier(r.c, "eager_frames: checked");
}

// ---------------------------------------------------------------------------------------------
// connect_slot: rank 0 (hook forge_connect_slot) names a QP slot one link width past the real
// one in every QpConnect of its parents. The source refuses each before creating anything
// (issue 24, defect 3: any slot below 1024 was accepted and charged the engine-wide endpoint
// and CQ budgets): the put fails naming the slot, nothing lands, rank 1's endpoints in use do not
// move, and messages over RDMA (the message slot) still flow.

void scenario_rdma_connect_slot(RdmaContext& r) {
  constexpr std::uint64_t kLength = 256 * kKiB;
  auto [mine, remote] = setup_region(r, kLength, 0xC0, 0xC1);
  TransferEngine& engine = r.c.comm.engine();
  Context over_rdma{r.c.comm, r.rdma, r.c.rank, r.c.size};
  Bytes note(100);
  // Message QPs both ways first, so that the count below sees only the forged connects.
  if (r.c.rank == 0) {
    fill_pattern(note.data(), note.size(), 7);
    send(over_rdma, note.data(), note.size(), 1, 91, "the message before");
    check(recv(over_rdma, note.data(), note.size(), 1, 92, "the reply") == note.size(), "reply");
  } else {
    check(recv(over_rdma, note.data(), note.size(), 0, 91, "the message before") == note.size(),
          "message");
    check_pattern(note.data(), note.size(), 7, "the message before");
    send(over_rdma, note.data(), note.size(), 0, 92, "the reply");
  }
  barrier(r.c, "connect_slot: message QPs up");
  const std::uint64_t endpoints_before = engine.rdma_stats().endpoints_in_use;
  barrier(r.c, "connect_slot: counted");
  if (r.c.rank == 0) {
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "forged put");
    const Status st = q.wait(kWait);
    std::printf("rank 0: the put with a forged slot: %s\n", st.to_string().c_str());
    check(st.code() == Errc::InvalidArgument &&
              st.message().find("QpConnect slot") != std::string::npos &&
              st.message().find("beyond this link's") != std::string::npos,
          "the forged slot's put: " + st.to_string());
    signal_peer(r.c, 1, 93);
  } else {
    await_peer(r.c, 0, 93);
    check_pattern(mine.bytes.data(), kLength, 0xC0, "the region behind the refused connects");
    const std::uint64_t after = engine.rdma_stats().endpoints_in_use;
    check(after == endpoints_before, "the refused connects charged endpoints: " +
                                         sz(endpoints_before) + " before, " + sz(after) + " after");
  }
  barrier(r.c, "connect_slot: checked");
  if (r.c.rank == 0) {
    send(over_rdma, note.data(), note.size(), 1, 94, "the message after");
  } else {
    check(recv(over_rdma, note.data(), note.size(), 0, 94, "the message after") == note.size(),
          "the message after");
  }
  barrier(r.c, "connect_slot: done");
}

// ---------------------------------------------------------------------------------------------
// failed_destroy: rank 0's put fails on an error completion (fail_wr), which retires its QP, and
// softverbs fails that QP's ibv_destroy_qp (fail_destroy). The QP still exists, so it keeps its
// endpoint charge (issue 24, defect 5: the charges came back while the QP lived on) and counts
// as retained; a later put builds a new QP beside it and succeeds. Closing rank 0's engine then
// reports Unquiesced naming the retained resource; rank 1 closes cleanly.

void scenario_rdma_failed_destroy(RdmaContext& r) {
  constexpr std::uint64_t kLength = 256 * kKiB;
  auto [mine, remote] = setup_region(r, kLength, 0xD0, 0xD1);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    Request warm = accepted(engine.get(mine.region, 0, remote, 0, 1, r.rdma), "warm-up get");
    wait_ok(warm, "warm-up get");
    const RdmaStats before = engine.rdma_stats();
    softverbs_control("fail_destroy soft_0 * 1 EIO");
    softverbs_control("fail_wr soft_0 * 1 REM_OP_ERR");
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
    check(q.wait(kWait).code() != Errc::Timeout, "the failed put never completed");
    check(q.status() && !q.status()->ok(), "the put with a failed WR succeeded");
    check(eventually([&] { return engine.rdma_stats().retained > before.retained; }),
          "the QP whose destruction failed was not retained");
    const RdmaStats after = engine.rdma_stats();
    std::printf("rank 0: endpoints in use %llu before, %llu after; retained %llu\n",
                static_cast<unsigned long long>(before.endpoints_in_use),
                static_cast<unsigned long long>(after.endpoints_in_use),
                static_cast<unsigned long long>(after.retained));
    check(after.endpoints_in_use == before.endpoints_in_use,
          "the retained QP's endpoint charge was returned: " + sz(before.endpoints_in_use) +
              " before, " + sz(after.endpoints_in_use) + " after");
    check(after.qps_destroyed == before.qps_destroyed, "a QP counted as destroyed");
    fill_pattern(mine.bytes.data(), kLength, 0xD2);
    Request again = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "again");
    wait_ok(again, "the put after the retained QP");
    check(engine.rdma_stats().endpoints_in_use == before.endpoints_in_use + 1,
          "the new QP beside the retained one is not charged once");
    signal_peer(r.c, 1, 95);
  } else {
    await_peer(r.c, 0, 95);
    check_pattern(mine.bytes.data(), kLength, 0xD2, "the put after the retained QP");
  }
  barrier(r.c, "failed_destroy: checked");
  const Status closed = engine.close(std::chrono::seconds(30));
  if (r.c.rank == 0) {
    check(
        closed.code() == Errc::Unquiesced && closed.message().find("retained") != std::string::npos,
        "close with a retained QP: " + closed.to_string());
  } else {
    check_ok(closed, "engine close");
  }
}

// ---------------------------------------------------------------------------------------------
// receipt_slots: softverbs' devices offer no inline data (max_inline_data 0, from the test), so
// every receipt goes from a registered slot. Rank 0's receipt post fails, proven unposted
// (fail_post at=0), then a receipt completes with an error (fail_wr on the WR after the
// payload's): each put fails, and each slot comes back to its pool (issue 24, defect 6: both
// were lost). A last put succeeds and lands.

void scenario_rdma_receipt_slots(RdmaContext& r) {
  constexpr std::uint64_t kLength = 64 * kKiB;  // one slice: a post for it, one for the receipt
  auto [mine, remote] = setup_region(r, kLength, 0xE0, 0xE1);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    auto slots = [&] { return engine.rdma_stats().receipt_slots_in_use; };
    Request warm = accepted(engine.get(mine.region, 0, remote, 0, 1, r.rdma), "warm-up get");
    wait_ok(warm, "warm-up get");
    check(eventually([&] { return slots() == 0; }), "the warm-up's receipt slot was kept");
    for (const std::string fault :
         {"fail_post soft_0 * 2 EIO at=0", "fail_wr soft_0 * 2 REM_OP_ERR"}) {
      softverbs_control(fault);
      Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
      check(q.wait(kWait).code() != Errc::Timeout, fault + ": the put never completed");
      check(q.status() && !q.status()->ok(), fault + ": the put succeeded");
      std::printf("rank 0: %s: %s\n", fault.c_str(), q.status()->to_string().c_str());
      check(q.status()->message().find("receipt") != std::string::npos,
            fault + ": not the receipt that failed: " + q.status()->to_string());
      check(eventually([&] { return slots() == 0; }),
            fault + ": " + sz(slots()) + " receipt slot(s) never came back");
    }
    fill_pattern(mine.bytes.data(), kLength, 0xE2);
    Request last = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "last put");
    wait_ok(last, "the put after the failed receipts");
    signal_peer(r.c, 1, 96);
  } else {
    await_peer(r.c, 0, 96);
    check_pattern(mine.bytes.data(), kLength, 0xE2, "the put after the failed receipts");
  }
  barrier(r.c, "receipt_slots: checked");
}

// ---------------------------------------------------------------------------------------------
// grant_timeout: rank 0 (hook withhold_receipt) moves its first put's payload and then stalls,
// alive, without sending the receipts. With ORBITE_RDMA_GRANT_TIMEOUT=300ms from the test the
// source revokes the grant (issue 24, defect 2: it held its slot, bytes, range lock and pin for
// good): the put fails Timeout naming rdma.grant_timeout, rank 1's grant budgets come back, and a
// second put to the same range (the lock freed) succeeds and lands.

void scenario_rdma_grant_timeout(RdmaContext& r) {
  constexpr std::uint64_t kLength = 256 * kKiB;
  auto [mine, remote] = setup_region(r, kLength, 0xF0, 0xF1);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "stalled put");
    // While it stalls (its payload posted, its receipts withheld), the state report
    // (docs/hangs.md) names its parent and the requester QP that carries it.
    std::string report;
    check(eventually([&] {
            report = engine.state_report();
            return report.find("parent 1: write 262144 B") != std::string::npos &&
                   report.find("requester, slot") != std::string::npos &&
                   report.find("RTS") != std::string::npos &&
                   report.find("waiting for admission") == std::string::npos;
          }),
          "the state report names no parent of the stalled put on its QP:\n" + report);
    const Status st = q.wait(kWait);
    std::printf("rank 0: the put whose receipts were withheld: %s\n", st.to_string().c_str());
    check(
        st.code() == Errc::Timeout && st.message().find("rdma.grant_timeout") != std::string::npos,
        "the stalled put: " + st.to_string());
    signal_peer(r.c, 1, 97);
    await_peer(r.c, 1, 98);
    fill_pattern(mine.bytes.data(), kLength, 0xF2);
    Request again = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "again");
    wait_ok(again, "the put after the revoked grant");
    signal_peer(r.c, 1, 99);
  } else {
    await_peer(r.c, 0, 97);
    check(eventually([&] {
            const RdmaStats s = engine.rdma_stats();
            return s.grants_active == 0 && s.grants_in_use == 0 && s.granted_bytes_in_use == 0;
          }),
          "the expired grant kept its budgets");
    const RdmaStats s = engine.rdma_stats();
    check(s.grants_expired == 1, sz(s.grants_expired) + " grants expired, not 1");
    check(s.windows_revoked > 0, "no window was revoked");
    signal_peer(r.c, 0, 98);
    await_peer(r.c, 0, 99);
    check_pattern(mine.bytes.data(), kLength, 0xF2, "the put after the revoked grant");
  }
  barrier(r.c, "grant_timeout: checked");
}

// ---------------------------------------------------------------------------------------------
// deferred_limit: rank 0 (hook flood_grant_requests) keeps every grant open (no receipts) and
// ignores kMaxPendingGrantRequests, with 320 puts at once into one region of rank 1. Rank 1 grants
// what its connections' receipt slots allow and defers the rest, until more than 256 wait: then
// it fails the link as a protocol error (issue 24, defect 2: the queue grew without bound and every
// pass re-ran it). Every put of rank 0 ends with an error well before the 60 s grant timeout, and
// rank 1's grants and budgets all come back.

namespace {

// `n` puts at once of `each` bytes, the i-th from and to offset i * each.
std::vector<Request> adjacent_puts(RdmaContext& r, const MemoryRegion& from, const RemoteRegion& to,
                                   std::uint64_t n, std::uint64_t each, const std::string& what) {
  std::vector<Request> puts;
  for (std::uint64_t i = 0; i < n; ++i) {
    puts.push_back(
        accepted(r.c.comm.engine().put(from, i * each, to, i * each, each, r.rdma), what));
  }
  return puts;
}

}  // namespace

void scenario_rdma_deferred_limit(RdmaContext& r) {
  constexpr std::uint64_t kPuts = 320;
  constexpr std::uint64_t kEach = 4 * kKiB;
  auto [mine, remote] = setup_region(r, kPuts * kEach, 0xD0, 0xD1);
  TransferEngine& engine = r.c.comm.engine();
  barrier(r.c, "deferred_limit: regions");
  if (r.c.rank == 0) {
    std::vector<Request> puts = adjacent_puts(r, mine.region, remote, kPuts, kEach, "flooding put");
    std::size_t failed = 0;
    std::string first;
    for (Request& q : puts) {
      const Status st = q.wait(std::chrono::seconds(20));
      check(st.code() != Errc::Timeout, "a flooding put still waits: " + st.to_string());
      if (!st.ok()) {
        if (first.empty()) first = st.to_string();
        ++failed;
      }
    }
    std::printf("rank 0: %zu of %zu puts failed, the first: %s\n", failed,
                static_cast<std::size_t>(kPuts), first.c_str());
    check(failed > kPuts - 64, "only " + sz(failed) + " puts failed");
  } else {
    // At least the 256 that filled the queue were counted (the one past it is refused, and
    // those deferred for SQ room and granted later count too).
    const bool drained = eventually([&] {
      const RdmaStats s = engine.rdma_stats();
      return s.grant_requests_deferred >= 256 && s.grants_active == 0 && s.grants_in_use == 0 &&
             s.granted_bytes_in_use == 0;
    });
    const RdmaStats s = engine.rdma_stats();
    check(drained, "the flooded source: " + sz(s.grant_requests_deferred) + " deferred, " +
                       sz(s.grants_active) + " grants active, " + sz(s.grants_in_use) +
                       " in use, " + sz(s.granted_bytes_in_use) + " bytes granted");
  }
  barrier(r.c, "deferred_limit: checked");
}

// ---------------------------------------------------------------------------------------------
// own_grants: with ORBITE_RDMA_MAX_GRANTS=2 from the test, rank 0 starts 64 puts of 4 KiB at once
// into rank 1's region (a batch far beyond the source's grant budget, which only this requester
// spends). Rank 1 paces them: a request that finds the budget spent by this peer's own grants
// waits for them instead of failing (a batch of 1,000 ranges failed ResourceExhausted with four
// lanes before). Every put succeeds and every byte lands; the budget was hit; nothing stays
// charged.

void scenario_rdma_own_grants(RdmaContext& r) {
  constexpr std::uint64_t kPuts = 64;
  constexpr std::uint64_t kEach = 4 * kKiB;
  auto [mine, remote] = setup_region(r, kPuts * kEach, 0xE0, 0xE1);
  TransferEngine& engine = r.c.comm.engine();
  barrier(r.c, "own_grants: regions");
  if (r.c.rank == 0) {
    fill_pattern(mine.bytes.data(), kPuts * kEach, 0xE2);
    std::vector<Request> puts =
        adjacent_puts(r, mine.region, remote, kPuts, kEach, "a put of the batch");
    for (Request& q : puts) wait_ok(q, "a put beyond the source's grant budget");
    signal_peer(r.c, 1, 91);
  } else {
    await_peer(r.c, 0, 91);
    check_pattern(mine.bytes.data(), kPuts * kEach, 0xE2, "the paced puts");
    const bool drained = eventually([&] {
      const RdmaStats s = engine.rdma_stats();
      return s.grants_active == 0 && s.grants_in_use == 0 && s.granted_bytes_in_use == 0;
    });
    const RdmaStats s = engine.rdma_stats();
    std::printf("rank 1: %llu grant requests deferred, budget hit %llu times\n",
                static_cast<unsigned long long>(s.grant_requests_deferred),
                static_cast<unsigned long long>(s.budget_exhausted));
    check(drained,
          "grants left: " + sz(s.grants_active) + " active, " + sz(s.grants_in_use) + " in use");
    check(s.budget_exhausted > 0 && s.grant_requests_deferred > 0,
          "the grant budget of 2 was never hit by 64 puts at once");
  }
  barrier(r.c, "own_grants: checked");
}

}  // namespace orbite::probe
