// orbite-rdma-probe: a rank program for tests/integration/rdma_test.cpp, run on softverbs (the
// test sets LD_LIBRARY_PATH and SOFTVERBS_CONFIG). argv[1] names a scenario; rank 0 is the
// requester and rank 1 the owner of the memory (the source of the grants). Each rank prints
// "rank R: PASS <scenario>" or "rank R: FAIL <detail>"; every byte and guard is checked, every
// wait bounded. Test hooks (ORBITE_RDMA_TEST_HOOKS) are set here, per rank, from the scenario.
//
// This file: main, helpers, bytes, forged accesses, tampered descriptors, concurrent grants and
// the cache-miss reconnect. rdma_probe_faults.cpp: the error CQE, unregister during a grant, and
// killed peers.
#include "rdma_probe.h"

#include <orbite/bootstrap.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

namespace orbite::probe {

namespace {

constexpr std::uint64_t kOwnerSeed = 0xA11CE;
constexpr std::uint64_t kRequesterSeed = 0xB0B;

}  // namespace

Region make_region(RdmaContext& r, std::uint64_t length, const std::string& what) {
  Region out;
  out.bytes.resize(length);
  auto reg = r.c.comm.engine().register_memory(out.bytes.data(), length);
  check_ok(reg.status(), "register " + what);
  out.region = std::move(*reg);
  return out;
}

RemoteRegion share_descriptor(RdmaContext& r, const MemoryRegion* region, int owner, int step) {
  if (r.c.rank == owner) {
    const std::string d = region->export_descriptor().bytes();
    for (int peer = 0; peer < r.c.size; ++peer) {
      if (peer != owner) send_string(r.c, d, peer, step);
    }
    return {};
  }
  auto d = RemoteRegion::from_bytes(std::string_view(recv_string(r.c, owner, step)));
  check_ok(d.status(), "import the descriptor");
  return *d;
}

Setup setup_region(RdmaContext& r, std::uint64_t length, std::uint64_t owner_seed,
                   std::uint64_t requester_seed) {
  Setup s;
  s.mine = make_region(r, length, "the region");
  s.remote = share_descriptor(r, &s.mine.region, 1, 1);
  fill_pattern(s.mine.bytes.data(), length, r.c.rank == 1 ? owner_seed : requester_seed);
  barrier(r.c, "filled");
  return s;
}

bool eventually(const std::function<bool()>& done) {
  const auto deadline = Clock::now() + kWait;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return done();
}

// 32 blocks of 16 KiB adjacent on both sides, listed in a shuffled order, and one more block that
// continues them on the remote side only (its local bytes lie elsewhere).
namespace {
std::vector<TransferRange> kv_blocks() {
  constexpr std::uint64_t kBlock = 16 * kKiB;
  constexpr std::uint64_t kBlocks = 32;
  std::vector<TransferRange> out;
  for (std::uint64_t i = 0; i < kBlocks; ++i) {
    const std::uint64_t j = (i * 13) % kBlocks;
    out.push_back({10 * kMiB + j * kBlock, 12 * kMiB + j * kBlock, kBlock});
  }
  out.push_back({9 * kMiB, 12 * kMiB + kBlocks * kBlock, kBlock});
  return out;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// bytes: put and get at every size of the issue at odd offsets (local 4099, remote 4101), each
// checked over the whole of both regions (so nothing outside the window moved), then a batched
// put and get of three ranges and a batch of adjacent blocks (one parent for them). The route: the
// payload counted on RDMA, none on tcp or shm.

void scenario_rdma_bytes(RdmaContext& r) {
  // RDMA_TEST_BYTES_SHORT: three sizes over a 24 MiB region, for the tests that vary a setting
  // (signal interval, progress mode, READ depths) rather than the sizes; every region pass is
  // checked whole, so the 64 MiB sweep dominates CI time under the sanitizers.
  const bool short_sweep = std::getenv("RDMA_TEST_BYTES_SHORT") != nullptr;
  const std::vector<std::uint64_t> sizes =
      short_sweep ? std::vector<std::uint64_t>{1, 65537, 4 * kMiB + 100}
                  : std::vector<std::uint64_t>{1,          4096,           65537,    80 * kKiB,
                                               129 * kKiB, 4 * kMiB + 100, 64 * kMiB};
  constexpr std::uint64_t kLocal = 4099;
  constexpr std::uint64_t kRemote = 4101;
  const std::uint64_t kLength = (short_sweep ? 24 * kMiB : 64 * kMiB) + 3 * 4096;
  Region mine = make_region(r, kLength, "the region");
  RemoteRegion remote = share_descriptor(r, &mine.region, 1, 1);
  TransferEngine& engine = r.c.comm.engine();
  const EngineStats before = engine.stats();
  std::uint64_t put_bytes = 0;
  std::uint64_t get_bytes = 0;
  std::uint64_t notice_bytes = 0;  // notifications' payloads: frames on RDMA's message QP
  int step = 10;
  auto fill_both = [&](std::uint64_t owner_seed, std::uint64_t requester_seed) {
    fill_pattern(mine.bytes.data(), kLength, r.c.rank == 1 ? owner_seed : requester_seed);
    barrier(r.c, "filled");
  };
  for (std::uint64_t n : sizes) {
    // put: the owner's region holds the requester's bytes in [kRemote, +n) and its own elsewhere.
    fill_both(kOwnerSeed + n, kRequesterSeed + n);
    if (r.c.rank == 0) {
      Request q =
          accepted(engine.put(mine.region, kLocal, remote, kRemote, n, r.rdma), "put " + sz(n));
      wait_ok(q, "put " + sz(n));
      put_bytes += n;
      signal_peer(r.c, 1, step);
    } else {
      await_peer(r.c, 0, step);
      const std::string what = "put of " + sz(n) + " bytes";
      check_pattern(mine.bytes.data(), kRemote, kOwnerSeed + n, what + ": bytes before the window");
      check_pattern(mine.bytes.data() + kRemote, n, kRequesterSeed + n, what, kLocal);
      check_pattern(mine.bytes.data() + kRemote + n, kLength - kRemote - n, kOwnerSeed + n,
                    what + ": bytes after the window", kRemote + n);
    }
    ++step;
    // get: the requester's buffer holds the owner's bytes in [kLocal, +n) and its own elsewhere.
    fill_both(kOwnerSeed + 7 * n, kRequesterSeed + 7 * n);
    if (r.c.rank == 0) {
      Request q =
          accepted(engine.get(mine.region, kLocal, remote, kRemote, n, r.rdma), "get " + sz(n));
      wait_ok(q, "get " + sz(n));
      get_bytes += n;
      const std::string what = "get of " + sz(n) + " bytes";
      check_pattern(mine.bytes.data(), kLocal, kRequesterSeed + 7 * n, what + ": before");
      check_pattern(mine.bytes.data() + kLocal, n, kOwnerSeed + 7 * n, what, kRemote);
      check_pattern(mine.bytes.data() + kLocal + n, kLength - kLocal - n, kRequesterSeed + 7 * n,
                    what + ": after", kLocal + n);
    }
    barrier(r.c, "get " + sz(n) + " checked");
  }
  // Batched: three ranges in one request each way.
  const std::vector<TransferRange> ranges = {
      {1, 3 * kMiB + 1, 70000}, {2 * kMiB + 5, 11, 1}, {5 * kMiB, 7 * kMiB + 3, 200001}};
  fill_both(0xBA7C0, 0xBA7C1);
  if (r.c.rank == 0) {
    // The get first (into other local bytes), while the owner's ranges hold its own pattern.
    std::vector<TransferRange> into = ranges;
    for (auto& t : into) t.local_offset += 16 * kMiB;
    Request g = accepted(engine.get(mine.region, remote, into, r.rdma), "batched get");
    wait_ok(g, "batched get");
    for (const auto& t : into) {
      check_pattern(mine.bytes.data() + t.local_offset, t.length, 0xBA7C0, "batched get range",
                    t.remote_offset);
    }
    // With a notification: the owner checks the ranges as soon as it holds it (below).
    TransferOptions notified = r.rdma;
    notified.notification = "batched put done";
    Request q = accepted(engine.put(mine.region, remote, ranges, notified), "batched put");
    wait_ok(q, "batched put");
    check(q.bytes() == 270002, "batched put moved " + sz(q.bytes()) + " bytes");
    put_bytes += 270002;
    get_bytes += 270002;
    // The notification's frame payload counts as bytes the transport carried, as any frame's.
    notice_bytes += notified.notification->size();
    // Adjacent blocks listed out of order travel as one parent and one grant (merge_requests);
    // a block adjacent to them on the remote side only is a parent of its own.
    const RdmaStats rs_before = engine.rdma_stats();
    const std::uint64_t merged_before = engine.stats().ranges_merged;
    const std::vector<TransferRange> blocks = kv_blocks();
    Request kv = accepted(engine.put(mine.region, remote, blocks, r.rdma), "batch of blocks");
    wait_ok(kv, "batch of blocks");
    put_bytes += kv.bytes();
    const std::uint64_t parents = engine.rdma_stats().parents - rs_before.parents;
    const std::uint64_t merged = engine.stats().ranges_merged - merged_before;
    check(parents == 2 && merged == blocks.size() - 2,
          "a batch of " + sz(blocks.size()) + " blocks took " + sz(parents) + " parents, " +
              sz(merged) + " ranges merged");
    signal_peer(r.c, 1, 90);
  } else {
    // The notification came over the message QP after the batch's WRITEs: its bytes are there.
    const std::vector<Notification> got = engine.notifications(kWait);
    check(got.size() == 1 && got[0].message == "batched put done",
          "the batched put's notification: " + sz(got.size()) + " notification(s)");
    for (const auto& t : ranges) {
      check_pattern(mine.bytes.data() + t.remote_offset, t.length, 0xBA7C1,
                    "batched put range (at its notification)", t.local_offset);
    }
    await_peer(r.c, 0, 90);
    for (const auto& t : kv_blocks()) {
      check_pattern(mine.bytes.data() + t.remote_offset, t.length, 0xBA7C1, "a block's put",
                    t.local_offset);
    }
  }
  barrier(r.c, "batched");

  // The route: every payload byte on RDMA, none as tcp or shm frames.
  const EngineStats after = engine.stats();
  const RdmaStats rs = engine.rdma_stats();
  auto delta = [&](Transport t, bool sent) {
    return sent ? after.of(t).bytes_sent - before.of(t).bytes_sent
                : after.of(t).bytes_received - before.of(t).bytes_received;
  };
  if (r.c.rank == 0) {
    check(delta(Transport::Rdma, true) == put_bytes + notice_bytes,
          "rdma bytes sent " + sz(delta(Transport::Rdma, true)) + " != " + sz(put_bytes) + " + " +
              sz(notice_bytes));
    check(delta(Transport::Rdma, false) == get_bytes, "rdma bytes received");
    check(delta(Transport::Tcp, true) + delta(Transport::Shm, true) < 64 * kKiB,
          "payload bytes went over tcp or shm");
    check(rs.completed_writes > 0 && rs.completed_reads > 0, "no RDMA WR completed");
    check(rs.bytes_written == put_bytes && rs.bytes_read == get_bytes,
          "rdma_stats bytes " + sz(rs.bytes_written) + "/" + sz(rs.bytes_read));
    check(rs.receipts_sent > 0, "no receipt was sent");
    const auto interval = r.c.comm.engine().config().rdma.signal_interval;
    if (interval > 1) {
      check(rs.payload_send_cqes < rs.completed_writes + rs.completed_reads,
            "signal_interval " + sz(interval) + ": " + sz(rs.payload_send_cqes) +
                " payload CQEs for " + sz(rs.completed_writes + rs.completed_reads) + " WRs");
    } else {
      check(rs.payload_send_cqes == rs.completed_writes + rs.completed_reads,
            "signal_interval 1: every payload WR has its CQE");
    }
    std::printf("rank 0: last_connected_qp max_rd_atomic %u max_dest_rd_atomic %u inline %u\n",
                rs.last_connected_qp.max_rd_atomic, rs.last_connected_qp.max_dest_rd_atomic,
                rs.last_connected_qp.max_inline_data);
    std::printf("rank 0: payload_send_cqes %llu completed_writes %llu completed_reads %llu\n",
                static_cast<unsigned long long>(rs.payload_send_cqes),
                static_cast<unsigned long long>(rs.completed_writes),
                static_cast<unsigned long long>(rs.completed_reads));
  } else {
    check(eventually([&] { return engine.rdma_stats().grants_active == 0; }),
          "grants still active");
    const RdmaStats s = engine.rdma_stats();
    check(s.grants > 0 && s.receipts == s.windows_invalidated && s.receipts >= s.grants,
          "grants " + sz(s.grants) + ", receipts " + sz(s.receipts) + ", windows invalidated " +
              sz(s.windows_invalidated));
    check(s.windows_revoked == 0 && s.receipt_mismatches == 0 && s.grant_nacks == 0,
          "a grant was revoked, refused or mismatched");
    check(s.grants_in_use == 0 && s.granted_bytes_in_use == 0, "grant budgets still charged");
  }
  std::printf("rank %d: route ok\n", r.c.rank);
}

// ---------------------------------------------------------------------------------------------
// forged: the requester misbehaves (ORBITE_RDMA_TEST_HOOKS on rank 0) and the source's windows
// stop it: a WRITE one byte past its window, a key of a grant already receipted, a valid key on
// another QP. The put fails, the byte past the window and every byte a stale or misplaced key
// aimed at are untouched, and a later get over a fresh connection still works.

void scenario_rdma_forged(RdmaContext& r, const std::string& hook) {
  constexpr std::uint64_t kLength = 4 * kMiB;
  constexpr std::uint64_t kFirst = 128 * kKiB;  // two slices: two segments with two lanes
  constexpr std::uint64_t kSecondAt = 2 * kMiB;
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  // replay_key needs a receipted grant first: a put that succeeds (its key is then stale).
  const bool replay = hook == "replay_key";
  if (r.c.rank == 0) {
    if (replay) {
      Request q = accepted(engine.put(mine.region, 0, remote, 0, kFirst, r.rdma), "first put");
      wait_ok(q, "the first put (its key becomes the stale one)");
    }
    const std::uint64_t at = replay ? kSecondAt : 0;
    Errc e = expect_failure(engine.put(mine.region, at, remote, at, kFirst, r.rdma),
                            {Errc::ConnectionLost, Errc::Unavailable}, hook + " put");
    std::printf("rank 0: %s refused (%s)\n", hook.c_str(), std::string(errc_name(e)).c_str());
    // Reads are not forged by these hooks: a get over a rebuilt connection works.
    Request g =
        accepted(engine.get(mine.region, kLength - 4096, remote, kLength - 4096, 4096, r.rdma),
                 "get after the refusal");
    wait_ok(g, "get after the refusal");
    check_pattern(mine.bytes.data() + kLength - 4096, 4096, kOwnerSeed, "get after the refusal",
                  kLength - 4096);
    signal_peer(r.c, 1, 20);
  } else {
    await_peer(r.c, 0, 20);
    if (replay) {
      check_pattern(mine.bytes.data(), kFirst, kRequesterSeed, "the first put");
      check_pattern(mine.bytes.data() + kSecondAt, kFirst, kOwnerSeed,
                    "bytes the stale key aimed at", kSecondAt);
    } else if (hook == "widen_write") {
      // Earlier slices may have landed (a WRITE is not atomic); the byte past the window never.
      check_pattern(mine.bytes.data() + kFirst, kLength - kFirst, kOwnerSeed,
                    "bytes past the window", kFirst);
    } else {
      check_pattern(mine.bytes.data(), kLength, kOwnerSeed, "bytes a misplaced key aimed at");
    }
    const RdmaStats s = engine.rdma_stats();
    check(eventually([&] { return engine.rdma_stats().grants_active == 0; }),
          "the forged grant was never closed");
    check(s.receipt_mismatches == 0, "a receipt mismatched");
  }
  barrier(r.c, "forged checked");
}

// ---------------------------------------------------------------------------------------------
// tampered: descriptors whose region id, generation or length were changed in their bytes. The
// owner refuses each before any authority exists (InvalidArgument), nothing is written.

void scenario_rdma_tampered(RdmaContext& r) {
  constexpr std::uint64_t kLength = 1 * kMiB + 4096;
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    struct Case {
      std::string field;
      std::uint64_t value;
      std::uint64_t offset;
    };
    for (const Case& k : {Case{"region_id", remote.region_id() + 1000, 0},
                          Case{"generation", remote.generation() + 1, 0},
                          Case{"length", kLength + 8 * kMiB, kLength - 10}}) {
      RemoteRegion forged = tampered(remote, k.field, k.value);
      expect_failure(engine.put(mine.region, 0, forged, k.offset, 4096, r.rdma),
                     {Errc::InvalidArgument},
                     "put through a descriptor with " + k.field + " changed");
      expect_failure(engine.get(mine.region, 0, forged, k.offset, 4096, r.rdma),
                     {Errc::InvalidArgument},
                     "get through a descriptor with " + k.field + " changed");
    }
    const RdmaStats s = engine.rdma_stats();
    check(s.parents_failed == 6, "6 refused parents, got " + sz(s.parents_failed));
    signal_peer(r.c, 1, 30);
  } else {
    await_peer(r.c, 0, 30);
    check_pattern(mine.bytes.data(), kLength, kOwnerSeed, "the region after tampered requests");
    const RdmaStats s = engine.rdma_stats();
    check(s.grant_nacks == 6 && s.grants == 0 && s.windows == 0,
          "6 refusals without a window, got " + sz(s.grant_nacks) + " refusals, " + sz(s.windows) +
              " windows");
  }
  barrier(r.c, "tampered checked");
}

// ---------------------------------------------------------------------------------------------
// concurrent: 8 puts to disjoint ranges at once all succeed (the owner held more than one grant
// at a time); WRITE after WRITE, WRITE after READ on an overlapping range, and WRITE through a
// second region aliasing the same memory are refused with "range busy"; READ with READ proceeds.

void scenario_rdma_concurrent(RdmaContext& r) {
  constexpr std::uint64_t kLength = 16 * kMiB;
  Region mine = make_region(r, kLength, "the region");
  // The owner's second registration of the same bytes: its grants alias the first one's.
  MemoryRegion alias;
  if (r.c.rank == 1) {
    auto reg = r.c.comm.engine().register_memory(mine.bytes.data(), kLength);
    check_ok(reg.status(), "register the alias");
    alias = std::move(*reg);
  }
  RemoteRegion remote = share_descriptor(r, &mine.region, 1, 1);
  RemoteRegion remote_alias = share_descriptor(r, &alias, 1, 2);
  TransferEngine& engine = r.c.comm.engine();
  fill_pattern(mine.bytes.data(), kLength, r.c.rank == 1 ? kOwnerSeed : kRequesterSeed);
  barrier(r.c, "filled");
  if (r.c.rank == 0) {
    std::vector<Request> disjoint;
    for (std::uint64_t k = 0; k < 8; ++k) {
      disjoint.push_back(accepted(engine.put(mine.region, k * kMiB, remote, k * kMiB, kMiB, r.rdma),
                                  "disjoint put"));
    }
    wait_all_ok(disjoint, "8 disjoint puts");
    // The second is submitted after the first (not as two arguments of one call: their order
    // of evaluation is unspecified), while the first holds its grant.
    using Submit = std::function<Result<Request>()>;
    auto conflict = [&](const Submit& first, const Submit& second, const std::string& what) {
      Request a = accepted(first(), what + " (first)");
      Errc e = expect_failure(second(), {Errc::Unavailable}, what + " (second)");
      check(e == Errc::Unavailable, what);
      wait_ok(a, what + " (first)");
    };
    conflict([&] { return engine.put(mine.region, 0, remote, 0, 8 * kMiB, r.rdma); },
             [&] { return engine.put(mine.region, 0, remote, kMiB, 4096, r.rdma); },
             "WRITE then WRITE");
    conflict([&] { return engine.get(mine.region, 8 * kMiB, remote, 0, 8 * kMiB, r.rdma); },
             [&] { return engine.put(mine.region, 0, remote, 4 * kMiB, 4096, r.rdma); },
             "READ then WRITE");
    conflict([&] { return engine.put(mine.region, 0, remote, 0, 8 * kMiB, r.rdma); },
             [&] { return engine.put(mine.region, 0, remote_alias, 2 * kMiB, 4096, r.rdma); },
             "WRITE then WRITE through an alias");
    Request g1 = accepted(engine.get(mine.region, 0, remote, 0, 8 * kMiB, r.rdma), "READ 1");
    Request g2 =
        accepted(engine.get(mine.region, 8 * kMiB, remote, kMiB, 4 * kMiB, r.rdma), "READ 2");
    wait_ok(g1, "READ with READ (1)");
    wait_ok(g2, "READ with READ (2)");
    signal_peer(r.c, 1, 40);
  } else {
    await_peer(r.c, 0, 40);
    const RdmaStats s = engine.rdma_stats();
    check(s.grants_peak > 1,
          "the owner never held two grants at once (peak " + sz(s.grants_peak) + ")");
    check(s.range_conflicts == 3, "3 range conflicts, got " + sz(s.range_conflicts));
    check(eventually([&] { return engine.rdma_stats().grants_active == 0; }), "grants active");
  }
  barrier(r.c, "concurrent checked");
}

// ---------------------------------------------------------------------------------------------
// deferred: with ORBITE_RDMA_MAX_SEND_WR=2 from the test, eight concurrent disjoint 1 MiB puts on
// one connection need more binds than the source's SQ holds: their GrantRequests wait at the
// source (none is refused), every put succeeds and every byte lands.

void scenario_rdma_deferred(RdmaContext& r) {
  constexpr std::uint64_t kLength = 8 * kMiB;
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    std::vector<Request> puts;
    for (std::uint64_t k = 0; k < 8; ++k) {
      puts.push_back(accepted(engine.put(mine.region, k * kMiB, remote, k * kMiB, kMiB, r.rdma),
                              "disjoint put"));
    }
    wait_all_ok(puts, "8 puts through a 2-WR send queue");
    signal_peer(r.c, 1, 40);
  } else {
    await_peer(r.c, 0, 40);
    check_pattern(mine.bytes.data(), kLength, kRequesterSeed, "the 8 puts");
    const RdmaStats s = engine.rdma_stats();
    std::printf("rank 1: %llu GrantRequests waited, %llu refused\n",
                static_cast<unsigned long long>(s.grant_requests_deferred),
                static_cast<unsigned long long>(s.grant_nacks));
    check(s.grant_requests_deferred > 0, "no GrantRequest waited for the source's SQ");
    check(s.grant_nacks == 0, sz(s.grant_nacks) + " GrantRequests were refused");
  }
  barrier(r.c, "deferred checked");
}

// ---------------------------------------------------------------------------------------------
// cache_miss: the owner's source-role QP is retired between the connect and the first grant
// request (hook retire_source_once on rank 1): the answer is a cache miss before any authority,
// the requester reconnects exactly once, and the put succeeds.

void scenario_rdma_cache_miss(RdmaContext& r) {
  constexpr std::uint64_t kLength = 1 * kMiB;
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
    wait_ok(q, "put after a cache miss");
    const RdmaStats s = engine.rdma_stats();
    check(s.reconnects == 1, "1 reconnect, got " + sz(s.reconnects));
    signal_peer(r.c, 1, 50);
  } else {
    await_peer(r.c, 0, 50);
    check_pattern(mine.bytes.data(), kLength, kRequesterSeed, "the put after a cache miss");
    check(engine.rdma_stats().grant_nacks == 1, "one cache-miss refusal");
  }
  barrier(r.c, "cache miss checked");
}

// ---------------------------------------------------------------------------------------------
// key_history: the owner's PD may record 2 window indices (ORBITE_RDMA_MAX_WINDOW_KEY_INDICES=2
// on every rank). Three grants at once need three windows: one is refused ResourceExhausted
// naming the budget. Then puts one at a time: each bind advances its window's 8-bit tag, an index
// whose 255 binds are spent is parked, and after 2 x 255 binds every new grant is refused, for
// good (an old key never comes back).

void scenario_rdma_key_history(RdmaContext& r) {
  constexpr std::uint64_t kLength = 3 * kMiB;
  auto [mine, remote] = setup_region(r, kLength, kOwnerSeed, kRequesterSeed);
  TransferEngine& engine = r.c.comm.engine();
  if (r.c.rank == 0) {
    std::vector<Request> three;
    for (std::uint64_t k = 0; k < 3; ++k) {
      three.push_back(accepted(engine.put(mine.region, k * kMiB, remote, k * kMiB, kMiB, r.rdma),
                               "concurrent put"));
    }
    int refused = 0;
    std::uint64_t ok = 0;
    for (Request& q : three) {
      Status st = q.wait(kWait);
      if (st.ok()) {
        ++ok;
        continue;
      }
      check(st.code() == Errc::ResourceExhausted &&
                st.message().find("max_window_key_indices") != std::string::npos,
            "expected the key history to be full, got " + st.to_string());
      ++refused;
    }
    check(refused >= 1, "three concurrent grants with room for two windows all succeeded");
    // One at a time until the history is spent: 2 x 255 binds in all.
    for (;;) {
      Request q = accepted(engine.put(mine.region, 0, remote, 0, 4096, r.rdma), "put");
      Status st = q.wait(kWait);
      if (!st.ok()) {
        check(st.code() == Errc::ResourceExhausted,
              "expected ResourceExhausted, got " + st.to_string());
        break;
      }
      check(++ok <= 510, "more than 2 x 255 binds through 2 window indices");
    }
    check(ok == 510, "2 x 255 binds, got " + sz(ok));
    Errc e = expect_failure(engine.put(mine.region, 0, remote, 0, 4096, r.rdma),
                            {Errc::ResourceExhausted}, "a put once the history is spent");
    check(e == Errc::ResourceExhausted, "spent history");
    signal_peer(r.c, 1, 55);
  } else {
    await_peer(r.c, 0, 55);
    const RdmaStats s = engine.rdma_stats();
    check(s.window_keys_used == 510 && s.window_indices == 2 && s.window_indices_parked == 2,
          "keys " + sz(s.window_keys_used) + ", indices " + sz(s.window_indices) + ", parked " +
              sz(s.window_indices_parked));
    check(s.budget_exhausted >= 2, "exhaustion not counted");
  }
  barrier(r.c, "key history checked");
}

}  // namespace orbite::probe

namespace {

using namespace orbite::probe;

struct Entry {
  std::function<void(RdmaContext&)> run;
  // ORBITE_RDMA_TEST_HOOKS per rank (before the engine exists).
  std::map<int, std::string> hooks;
  // The scenario closes the engine itself: started by the test without orbite-run (killed
  // peers), or expecting close to report what it retained.
  bool direct = false;
};

const std::map<std::string, Entry>& scenarios() {
  static const std::map<std::string, Entry> all = {
      {"bytes", {scenario_rdma_bytes, {}}},
      {"widen_write",
       {[](RdmaContext& r) { scenario_rdma_forged(r, "widen_write"); }, {{0, "widen_write"}}}},
      {"replay_key",
       {[](RdmaContext& r) { scenario_rdma_forged(r, "replay_key"); }, {{0, "replay_key"}}}},
      {"other_qp",
       {[](RdmaContext& r) { scenario_rdma_forged(r, "other_qp"); }, {{0, "other_qp"}}}},
      {"tampered", {scenario_rdma_tampered, {}}},
      {"concurrent", {scenario_rdma_concurrent, {}}},
      {"deferred", {scenario_rdma_deferred, {}}},
      {"crossed_messages", {scenario_rdma_crossed_messages, {}}},
      {"eager_frames", {scenario_rdma_eager_frames, {}}},
      {"connect_slot", {scenario_rdma_connect_slot, {{0, "forge_connect_slot"}}}},
      {"failed_destroy", {scenario_rdma_failed_destroy, {}, true}},
      {"receipt_slots", {scenario_rdma_receipt_slots, {}}},
      {"grant_timeout", {scenario_rdma_grant_timeout, {{0, "withhold_receipt"}}}},
      {"deferred_limit", {scenario_rdma_deferred_limit, {{0, "flood_grant_requests"}}}},
      {"own_grants", {scenario_rdma_own_grants, {}}},
      {"priority", {scenario_rdma_priority, {}}},
      {"promotion", {scenario_rdma_promotion, {}}},
      {"deadline_queued", {scenario_rdma_deadline_queued, {}}},
      {"grant_cancel", {scenario_rdma_grant_cancel, {{0, "hold_granted"}}}},
      {"shared_slots", {scenario_rdma_shared_slots, {}}},
      {"source_deadline", {scenario_rdma_source_deadline, {{1, "defer_deadlined"}}}},
      {"released_segments", {scenario_rdma_released_segments, {{0, "hold_later_segments"}}}},
      {"idle_reaper", {scenario_rdma_idle_reaper, {}}},
      {"directional_close", {scenario_rdma_directional_close, {}}},
      {"destroy_window", {scenario_rdma_destroy_window, {}, true}},
      {"forged_rendezvous", {scenario_rdma_forged_rendezvous, {{0, "forge_rendezvous"}}}},
      {"announced_rendezvous",
       {[](RdmaContext& r) { scenario_rdma_announced_rendezvous(r, true); }, {}}},
      {"announced_fallback",
       {[](RdmaContext& r) { scenario_rdma_announced_rendezvous(r, false); }, {{0, "rts_cts"}}}},
      {"cache_miss", {scenario_rdma_cache_miss, {{1, "retire_source_once"}}}},
      {"key_history", {scenario_rdma_key_history, {}}},
      {"rails", {scenario_rdma_rails, {}}},
      {"port_down", {scenario_rdma_port_down, {}}},
      {"numa", {scenario_rdma_numa, {}}},
      {"peer_port_down", {scenario_rdma_peer_port_down, {}}},
      {"rail_health", {scenario_rdma_rail_health, {}}},
      {"route_recovery", {scenario_rdma_route_recovery, {}}},
      {"forged_nic_table", {scenario_rdma_forged_nic_table, {{1, "forge_nic_table"}}}},
      {"mr_cache", {scenario_rdma_mr_cache, {}}},
      {"bounce", {scenario_rdma_bounce, {}}},
      {"error_cqe", {scenario_rdma_error_cqe, {}}},
      {"unregister_busy", {scenario_rdma_unregister_busy, {}}},
      {"failed_post", {scenario_rdma_failed_post, {}}},
      {"failed_polls", {scenario_rdma_failed_polls, {}}},
      {"orderly_close_lag", {scenario_rdma_orderly_close_lag, {}, true}},
      {"progress_recovery_requester",
       {[](RdmaContext& r) { scenario_rdma_progress_recovery(r, 0); }, {}}},
      {"progress_recovery_source",
       {[](RdmaContext& r) { scenario_rdma_progress_recovery(r, 1); }, {}}},
      {"cts_post_fails", {scenario_rdma_cts_post_fails, {}, true}},
      {"kill_source_before_grant",
       {[](RdmaContext& r) { scenario_rdma_killed(r, "source_before_grant"); },
        {{1, "kill_on_grant_request"}},
        true}},
      {"kill_source_after_grant",
       {[](RdmaContext& r) { scenario_rdma_killed(r, "source_after_grant"); },
        {{1, "kill_after_grant"}},
        true}},
      {"kill_source_mid_payload",
       {[](RdmaContext& r) { scenario_rdma_killed(r, "source_mid_payload"); }, {}, true}},
      {"kill_requester_mid_payload",
       {[](RdmaContext& r) { scenario_rdma_killed(r, "requester_mid_payload"); },
        {{0, "kill_after_payload"}},
        true}},
      {"kill_requester_before_receipt",
       {[](RdmaContext& r) { scenario_rdma_killed(r, "requester_before_receipt"); },
        {{0, "kill_before_receipt"}},
        true}},
  };
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || scenarios().count(argv[1]) == 0) {
    std::fprintf(stderr, "usage: orbite-rdma-probe SCENARIO\nscenarios:");
    for (const auto& [name, s] : scenarios()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  const std::string name = argv[1];
  const Entry& entry = scenarios().at(name);
  const int env_rank = std::getenv("ORBITE_RANK") ? std::atoi(std::getenv("ORBITE_RANK")) : -1;
  set_rank_for_messages(env_rank);
  if (auto it = entry.hooks.find(env_rank); it != entry.hooks.end()) {
    ::setenv("ORBITE_RDMA_TEST_HOOKS", it->second.c_str(), 1);
  }
  // RDMA_PROBE_RANK_ENV="R:NAME=VALUE": rank R alone sets NAME (a configuration that differs).
  if (const char* e = std::getenv("RDMA_PROBE_RANK_ENV"); e != nullptr) {
    const std::string spec = e;
    const auto colon = spec.find(':');
    const auto eq = spec.find('=');
    check(colon != std::string::npos && eq != std::string::npos && eq > colon,
          "RDMA_PROBE_RANK_ENV is not R:NAME=VALUE: " + spec);
    if (std::atoi(spec.substr(0, colon).c_str()) == env_rank) {
      ::setenv(spec.substr(colon + 1, eq - colon - 1).c_str(), spec.substr(eq + 1).c_str(), 1);
    }
  }
  auto boot = orbite::Bootstrap::from_env();
  check_ok(boot.status(), "bootstrap");
  set_rank_for_messages(boot->rank());
  auto comm = orbite::Communicator::create(*boot);
  check_ok(comm.status(), "communicator");
  const orbite::RdmaStats installed = comm->engine().rdma_stats();
  check(installed.installed, "RDMA is not installed: " + installed.why_not);
  Context c{*comm, {}, comm->rank(), comm->size()};
  orbite::TransferOptions rdma;
  rdma.transport = orbite::Transport::Rdma;
  RdmaContext r{c, rdma};
  entry.run(r);
  if (!entry.direct) {
    barrier(c, "before close");
    check_ok(c.comm.engine().close(std::chrono::seconds(30)), "engine close");
  }
  std::printf("rank %d: PASS %s\n", c.rank, name.c_str());
  std::fflush(stdout);
  return 0;
}
