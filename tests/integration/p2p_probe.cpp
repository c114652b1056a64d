// orbite-p2p-probe: a rank program for tests/integration/p2p_test.cpp, run under orbite-run (or
// started directly with ORBITE_* variables). argv[1] names a scenario; P2P_TEST_TRANSPORT
// (unspec, tcp or shm) picks the transport of every operation. Each rank prints
// "rank R: PASS <scenario>" and exits 0, or "rank R: FAIL <detail>" and exits 1 at the first
// failed check. Every byte received is checked and every wait is bounded; nothing is timed.
//
// This file holds main and the send/recv scenarios; p2p_probe_rma.cpp holds put/get,
// p2p_probe_faults.cpp the killed peer and p2p_probe_support.cpp the shared helpers.
#include "p2p_probe.h"

#include <orbite/bootstrap.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace orbite::probe {

namespace {

// Bytes around receive buffers that nothing may write.
constexpr std::uint64_t kGuard = 64;
constexpr std::uint64_t kGuardSeed = 0xD0D0;

// ---------------------------------------------------------------------------------------------
// ordering: 200 messages on tags 0..3 interleaved; the receiver posts tag by tag in another
// order. Matching is per (peer, tag) in send order, so each receive's size and content (seeded by
// tag and sequence) prove which message it got. Round 0 sends before the receives exist
// (unexpected path), round 1 posts the receives first (expected path). Sizes straddle the eager
// limits (shm 16 KiB, tcp 64 KiB), so eager and rendezvous messages interleave on one tag.

struct Planned {
  int tag;
  std::uint64_t seq;
  std::uint64_t size;
};

std::vector<Planned> ordering_plan() {
  constexpr std::uint64_t kSizes[] = {8, 100, 1500, 16385, 65537, 200000, 40, 70000};
  std::vector<Planned> plan;
  std::uint64_t next_seq[4] = {};
  for (int i = 0; i < 200; ++i) {
    int tag = (i * 3 + i / 5) % 4;
    plan.push_back({tag, next_seq[tag]++, kSizes[(i * 5 + tag) % 8]});
  }
  return plan;
}

std::uint64_t ordering_seed(int round, const Planned& p) {
  return 0x100000 + (static_cast<std::uint64_t>(round) << 16) +
         (static_cast<std::uint64_t>(p.tag) << 8) + p.seq;
}

void scenario_ordering(Context& c) {
  const std::vector<Planned> plan = ordering_plan();
  for (int round = 0; round < 2; ++round) {
    const bool receives_first = round == 1;
    std::vector<Bytes> buffers;
    std::vector<Request> requests;
    std::vector<const Planned*> posted;
    if (c.rank == 0) {
      if (receives_first) barrier(c, "ordering round " + sz(round));
      for (const Planned& p : plan) {
        Bytes& b = buffers.emplace_back(p.size);
        fill_pattern(b.data(), p.size, ordering_seed(round, p));
        requests.push_back(isend(c, b.data(), p.size, 1, 100 + p.tag,
                                 "isend tag " + sz(p.tag) + " seq " + sz(p.seq)));
      }
      if (!receives_first) barrier(c, "ordering round " + sz(round));
      wait_all_ok(requests, "ordering sends, round " + sz(round));
      continue;
    }
    if (!receives_first) barrier(c, "ordering round " + sz(round));
    // Tag by tag in an order unrelated to the send order; in send order within a tag. The extra
    // room after each message makes a mismatched size visible and must stay untouched.
    for (int tag : {3, 1, 0, 2}) {
      for (const Planned& p : plan) {
        if (p.tag != tag) continue;
        Bytes& b = buffers.emplace_back(p.size + kGuard);
        fill_pattern(b.data(), b.size(), kGuardSeed);
        requests.push_back(irecv(c, b.data(), b.size(), 0, 100 + p.tag,
                                 "irecv tag " + sz(p.tag) + " seq " + sz(p.seq)));
        posted.push_back(&p);
      }
    }
    if (receives_first) barrier(c, "ordering round " + sz(round));
    wait_all_ok(requests, "ordering receives, round " + sz(round));
    for (size_t i = 0; i < posted.size(); ++i) {
      const Planned& p = *posted[i];
      const std::string what = "round " + sz(round) + " tag " + sz(p.tag) + " receive " + sz(p.seq);
      check(requests[i].bytes() == p.size, what + ": received " + sz(requests[i].bytes()) +
                                               " bytes, expected " + sz(p.size) +
                                               " (out of order within the tag?)");
      check_pattern(buffers[i].data(), p.size, ordering_seed(round, p), what);
      check_pattern(buffers[i].data() + p.size, kGuard, kGuardSeed, what + " (room after it)",
                    p.size);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// zero_bytes: empty messages with and without a buffer, received as size 0 into null and
// non-empty buffers (which stay untouched), then a non-empty message on the same tag.

void scenario_zero_bytes(Context& c) {
  const int peer = 1 - c.rank;
  for (int sender : {0, 1}) {
    const int tag = 10 + sender;
    if (c.rank == sender) {
      Bytes payload(5);
      fill_pattern(payload.data(), payload.size(), 0x200 + sender);
      std::vector<Request> r;
      r.push_back(isend(c, nullptr, 0, peer, tag, "isend(nullptr, 0)"));
      r.push_back(isend(c, payload.data(), 0, peer, tag, "isend(buffer, 0)"));
      r.push_back(isend(c, payload.data(), payload.size(), peer, tag, "isend 5 bytes"));
      wait_all_ok(r, "zero-byte sends");
      continue;
    }
    Bytes room(16);
    fill_pattern(room.data(), room.size(), kGuardSeed);
    Request null_recv = irecv(c, nullptr, 0, peer, tag, "irecv(nullptr, 0)");
    Request room_recv = irecv(c, room.data(), room.size(), peer, tag, "irecv(16 bytes) of 0");
    wait_ok(null_recv, "irecv(nullptr, 0)");
    wait_ok(room_recv, "irecv(16 bytes) of 0");
    check(null_recv.bytes() == 0, "irecv(nullptr, 0) received " + sz(null_recv.bytes()));
    check(room_recv.bytes() == 0,
          "irecv(16 bytes) of an empty message received " + sz(room_recv.bytes()));
    check_pattern(room.data(), room.size(), kGuardSeed, "buffer of an empty message");
    Bytes data(16);
    std::uint64_t got = recv(c, data.data(), data.size(), peer, tag, "recv 5 bytes after");
    check(got == 5, "message after the empty ones: received " + sz(got) + " bytes, expected 5");
    check_pattern(data.data(), 5, 0x200 + sender, "message after the empty ones");
  }
}

// ---------------------------------------------------------------------------------------------
// truncation: a message longer than the posted receive fails the receive with InvalidArgument and
// writes nothing outside the receive buffer, eager (100 bytes) and rendezvous (4 MiB), with the
// receive posted before or after the message arrives. A rendezvous send fails with
// InvalidArgument too; an eager send has completed when its bytes left (as in MPI), so the sender
// only logs the receiver's verdict. The truncated message is consumed: the next
// message on the same tag is received normally, and traffic flows both ways afterwards.

void scenario_truncation(Context& c) {
  struct Case {
    std::uint64_t sent;
    std::uint64_t capacity;
    bool receive_first;
  };
  constexpr Case kCases[] = {
      {100, 64, true}, {100, 64, false}, {4 * kMiB, 64, true}, {4 * kMiB, 4 * kMiB - 1, false}};
  int index = 0;
  for (const Case& k : kCases) {
    const int tag = 20 + index;
    const int step = index++;
    const std::string what = sz(k.sent) + "-byte message to a " + sz(k.capacity) + "-byte receive";
    if (c.rank == 0) {
      Bytes msg(k.sent);
      fill_pattern(msg.data(), msg.size(), 0x300 + tag);
      Request s;
      if (k.receive_first) {
        await_peer(c, 1, step);
        s = isend(c, msg.data(), msg.size(), 1, tag, what);
      } else {
        s = isend(c, msg.data(), msg.size(), 1, tag, what);
        signal_peer(c, 1, step);
      }
      if (k.sent > kMiB) {
        expect_request_failure(s, {Errc::InvalidArgument}, "send of a " + what);
      } else {
        Status st = s.wait(kWait);
        check(st.ok() || st.code() == Errc::InvalidArgument,
              "eager send of a " + what + ": " + st.to_string());
      }
      send(c, msg.data(), 100, 1, tag, "send after truncation");
      Bytes back(100);
      check(recv(c, back.data(), back.size(), 1, tag, "reply after truncation") == 100,
            "reply after truncation: wrong size");
      check_pattern(back.data(), back.size(), 0x400 + tag, "reply after truncation");
      continue;
    }
    Bytes buffer(kGuard + k.capacity + kGuard);
    fill_pattern(buffer.data(), buffer.size(), kGuardSeed);
    Request r;
    if (k.receive_first) {
      r = irecv(c, buffer.data() + kGuard, k.capacity, 0, tag, what);
      signal_peer(c, 0, step);
    } else {
      await_peer(c, 0, step);
      r = irecv(c, buffer.data() + kGuard, k.capacity, 0, tag, what);
    }
    expect_request_failure(r, {Errc::InvalidArgument}, "receive of a " + what);
    check_pattern(buffer.data(), kGuard, kGuardSeed, what + ": guard before the buffer");
    check_pattern(buffer.data() + kGuard + k.capacity, kGuard, kGuardSeed,
                  what + ": guard after the buffer", kGuard + k.capacity);
    Bytes next(128);
    std::uint64_t got = recv(c, next.data(), next.size(), 0, tag, "receive after truncation");
    check(got == 100, "message after truncation: received " + sz(got) + " bytes, expected 100");
    check_pattern(next.data(), 100, 0x300 + tag, "message after truncation");
    Bytes reply(100);
    fill_pattern(reply.data(), reply.size(), 0x400 + tag);
    send(c, reply.data(), reply.size(), 0, tag, "reply after truncation");
  }
}

// ---------------------------------------------------------------------------------------------
// same_buffer: a window of receives posted into one buffer, as osu_bw posts them: every receive
// completes with its full length, and the buffer then holds one message whole, never a mix
// (over RDMA the receiver's grants on the shared range take their writes one after another).

void scenario_same_buffer(Context& c) {
  constexpr int kWindow = 8;
  for (std::uint64_t size : {std::uint64_t{1000}, std::uint64_t{64 * 1024 + 1}, 2 * kMiB}) {
    std::vector<Request> requests;
    if (c.rank == 0) {
      std::vector<Bytes> sources;
      barrier(c, "same buffer posted " + sz(size));
      for (int i = 0; i < kWindow; ++i) {
        Bytes& b = sources.emplace_back(size);
        fill_pattern(b.data(), size, 0x5B0 + static_cast<std::uint64_t>(i));
        requests.push_back(isend(c, b.data(), size, 1, 45, "isend " + sz(i)));
      }
      wait_all_ok(requests, "sends into one buffer");
      continue;
    }
    Bytes buffer(size);
    for (int i = 0; i < kWindow; ++i) {
      requests.push_back(irecv(c, buffer.data(), size, 0, 45, "irecv " + sz(i)));
    }
    barrier(c, "same buffer posted " + sz(size));
    wait_all_ok(requests, "receives into one buffer");
    for (int i = 0; i < kWindow; ++i) {
      check(requests[i].bytes() == size, "receive " + sz(i) + " got " + sz(requests[i].bytes()));
    }
    int whole = -1;
    for (int i = 0; i < kWindow && whole < 0; ++i) {
      Bytes want(size);
      fill_pattern(want.data(), size, 0x5B0 + static_cast<std::uint64_t>(i));
      if (want == buffer) whole = i;
    }
    check(whole >= 0, "the shared buffer of " + sz(size) + " bytes holds no message whole");
  }
}

// ---------------------------------------------------------------------------------------------
// sizes: odd sizes at unaligned addresses both ways, into receives with room to spare; the
// received size, every byte, the bytes around the message and the unchanged source are checked.

void scenario_sizes(Context& c) {
  constexpr std::uint64_t kSizes[] = {1, 17, 4095, 65537, 8 * kMiB + 3};
  for (int sender : {0, 1}) {
    for (std::uint64_t size : kSizes) {
      for (std::uint64_t offset : {1, 3}) {
        const std::uint64_t seed = 0x500 + size * 4 + offset + static_cast<std::uint64_t>(sender);
        const std::string what = sz(size) + " bytes at +" + sz(offset) + " from rank " + sz(sender);
        if (c.rank == sender) {
          Bytes source(size + 8);
          fill_pattern(source.data() + offset, size, seed);
          send(c, source.data() + offset, size, 1 - sender, 30, "send " + what);
          check_pattern(source.data() + offset, size, seed, what + ": source changed");
          continue;
        }
        // The receive sits at the other odd offset, with 5 bytes more room than the message.
        const std::uint64_t at = kGuard + (4 - offset);
        const std::uint64_t capacity = size + 5;
        Bytes buffer(at + capacity + kGuard);
        fill_pattern(buffer.data(), buffer.size(), kGuardSeed);
        std::uint64_t got = recv(c, buffer.data() + at, capacity, sender, 30, "recv " + what);
        check(got == size, what + ": received " + sz(got) + " bytes");
        check_pattern(buffer.data() + at, size, seed, what);
        check_pattern(buffer.data(), at, kGuardSeed, what + ": bytes before the buffer");
        check_pattern(buffer.data() + at + size, buffer.size() - at - size, kGuardSeed,
                      what + ": bytes after the message", at + size);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// outstanding: 256 sends of mixed sizes posted before the receiver posts anything; the receiver
// posts 256 receives after a barrier. The engine must buffer or defer, never drop or reorder.

void scenario_outstanding(Context& c) {
  constexpr std::uint64_t kSizes[] = {1, 100, 4096, 16385, 65537, 256 * 1024, 7, 131072};
  constexpr int kCount = 256;
  auto size_of = [&](int i) { return kSizes[(i * 3 + i / 8) % 8]; };
  std::vector<Bytes> buffers;
  std::vector<Request> requests;
  if (c.rank == 0) {
    for (int i = 0; i < kCount; ++i) {
      Bytes& b = buffers.emplace_back(size_of(i));
      fill_pattern(b.data(), b.size(), 0x600 + i);
      requests.push_back(isend(c, b.data(), b.size(), 1, 40 + i % 3, "isend " + sz(i)));
    }
    barrier(c, "outstanding");
    wait_all_ok(requests, "outstanding sends");
    return;
  }
  barrier(c, "outstanding");
  for (int i = 0; i < kCount; ++i) {
    Bytes& b = buffers.emplace_back(size_of(i));
    requests.push_back(irecv(c, b.data(), b.size(), 0, 40 + i % 3, "irecv " + sz(i)));
  }
  wait_all_ok(requests, "outstanding receives");
  for (int i = 0; i < kCount; ++i) {
    check(requests[i].bytes() == size_of(i), "message " + sz(i) + ": received " +
                                                 sz(requests[i].bytes()) + " bytes, expected " +
                                                 sz(size_of(i)));
    check_pattern(buffers[i].data(), buffers[i].size(), 0x600 + i, "message " + sz(i));
  }
}

// ---------------------------------------------------------------------------------------------
// bidirectional: both ranks send 32 MiB to each other before either receives. Rendezvous both
// ways at once must not deadlock.

void scenario_bidirectional(Context& c) {
  constexpr std::uint64_t kBytes = 32 * kMiB;
  const int peer = 1 - c.rank;
  Bytes out(kBytes);
  Bytes in(kBytes);
  fill_pattern(out.data(), kBytes, 0x700 + c.rank);
  std::vector<Request> r;
  r.push_back(isend(c, out.data(), kBytes, peer, 50, "isend 32 MiB"));
  r.push_back(irecv(c, in.data(), kBytes, peer, 50, "irecv 32 MiB"));
  wait_all_ok(r, "bidirectional 32 MiB");
  check(r[1].bytes() == kBytes, "received " + sz(r[1].bytes()) + " bytes");
  check_pattern(in.data(), kBytes, 0x700 + peer, "32 MiB from rank " + sz(peer));
}

// ---------------------------------------------------------------------------------------------
// alltoall: every rank sends a small and a large message, each with its own content, to every
// other rank; all receives and sends are posted before any wait. Three rounds on the same tags.

void scenario_alltoall(Context& c) {
  constexpr std::uint64_t kSmall = 1024;
  constexpr std::uint64_t kLarge = kMiB;
  auto seed = [](int round, int src, int dst, int kind) {
    return 0x800000 + ((static_cast<std::uint64_t>(round) * 256 + src) * 256 + dst) * 2 + kind;
  };
  const int n = c.size;
  for (int round = 0; round < 3; ++round) {
    std::vector<Bytes> in(2 * n);
    std::vector<Bytes> out(2 * n);
    std::vector<Request> requests;
    std::vector<int> recv_slot;  // index into `in` for the receive at the same position
    for (int k = 1; k < n; ++k) {
      const int src = (c.rank + n - k) % n;
      for (int kind : {0, 1}) {
        Bytes& b = in[2 * src + kind];
        b.resize(kind == 0 ? kSmall : kLarge);
        requests.push_back(irecv(c, b.data(), b.size(), src, 60 + kind, "irecv from " + sz(src)));
        recv_slot.push_back(2 * src + kind);
      }
    }
    const size_t receives = requests.size();
    for (int k = 1; k < n; ++k) {
      const int dst = (c.rank + k) % n;
      for (int kind : {0, 1}) {
        Bytes& b = out[2 * dst + kind];
        b.resize(kind == 0 ? kSmall : kLarge);
        fill_pattern(b.data(), b.size(), seed(round, c.rank, dst, kind));
        requests.push_back(isend(c, b.data(), b.size(), dst, 60 + kind, "isend to " + sz(dst)));
      }
    }
    wait_all_ok(requests, "alltoall round " + sz(round));
    for (size_t i = 0; i < receives; ++i) {
      const int src = recv_slot[i] / 2;
      const int kind = recv_slot[i] % 2;
      const Bytes& b = in[recv_slot[i]];
      const std::string what =
          "round " + sz(round) + " " + (kind == 0 ? "1 KiB" : "1 MiB") + " from rank " + sz(src);
      check(requests[i].bytes() == b.size(), what + ": received " + sz(requests[i].bytes()));
      check_pattern(b.data(), b.size(), seed(round, src, c.rank, kind), what);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// self: messages to this rank, receive posted before and after the send, empty, eager and
// rendezvous sizes.

void scenario_self(Context& c) {
  struct Case {
    std::uint64_t size;
    bool receive_first;
  };
  constexpr Case kCases[] = {{100, true}, {100, false},     {0, true},
                             {0, false},  {4 * kMiB, true}, {4 * kMiB, false}};
  int tag = 70;
  for (const Case& k : kCases) {
    const std::string what = "self " + sz(k.size) + (k.receive_first ? " (receive first)" : "");
    const std::uint64_t seed = 0x900 + static_cast<std::uint64_t>(tag);
    Bytes out(k.size);
    fill_pattern(out.data(), out.size(), seed);
    Bytes in(k.size + kGuard);
    fill_pattern(in.data(), in.size(), kGuardSeed);
    std::vector<Request> r;
    if (k.receive_first) r.push_back(irecv(c, in.data(), in.size(), c.rank, tag, what));
    r.push_back(isend(c, out.data(), out.size(), c.rank, tag, what));
    if (!k.receive_first) r.push_back(irecv(c, in.data(), in.size(), c.rank, tag, what));
    wait_all_ok(r, what);
    const Request& received = k.receive_first ? r[0] : r[1];
    check(received.bytes() == k.size, what + ": received " + sz(received.bytes()));
    check_pattern(in.data(), k.size, seed, what);
    check_pattern(in.data() + k.size, kGuard, kGuardSeed, what + ": room after", k.size);
    ++tag;
  }
}

struct Scenario {
  std::function<void(Context&)> run;
  int min_ranks;
  int max_ranks;
};

const std::map<std::string_view, Scenario>& scenarios() {
  static const std::map<std::string_view, Scenario> table = {
      {"ordering", {scenario_ordering, 2, 2}},
      {"zero_bytes", {scenario_zero_bytes, 2, 2}},
      {"truncation", {scenario_truncation, 2, 2}},
      {"sizes", {scenario_sizes, 2, 2}},
      {"outstanding", {scenario_outstanding, 2, 2}},
      {"same_buffer", {scenario_same_buffer, 2, 2}},
      {"bidirectional", {scenario_bidirectional, 2, 2}},
      {"alltoall", {scenario_alltoall, 2, 256}},
      {"self", {scenario_self, 1, 256}},
      {"putget", {scenario_putget, 2, 2}},
      {"unregister_busy", {scenario_unregister_busy, 2, 2}},
      {"killed_peer", {scenario_killed_peer, 3, 3}},
      {"sender_left", {scenario_sender_left, 2, 2}},
      {"died_before_connecting", {scenario_died_before_connecting, 2, 2}},
      {"crossed_exit", {scenario_crossed_exit, 2, 2}},
  };
  return table;
}

Transport transport_from_env() {
  const char* raw = std::getenv("P2P_TEST_TRANSPORT");
  std::string_view name = raw == nullptr ? "unspec" : raw;
  if (name == "unspec" || name.empty()) return Transport::Unspec;
  if (name == "tcp") return Transport::Tcp;
  if (name == "shm") return Transport::Shm;
  if (name == "rdma") return Transport::Rdma;
  fail("P2P_TEST_TRANSPORT='" + std::string(name) + "' is not unspec, tcp, shm or rdma");
}

// The route the test means carried the bytes: with tcp forced, tcp frames both ways and no frame
// on shm (but the loopback of the self scenario); with shm or unspec between ranks of one host,
// shm frames and no frame on tcp; with single copy off, no byte copied by address.
void check_route(Context& c, const std::string& name) {
  const orbite::EngineStats s = c.comm.engine().stats();
  const orbite::TransportStats& tcp = s.of(Transport::Tcp);
  const orbite::TransportStats& shm = s.of(Transport::Shm);
  const orbite::TransportStats& rdma = s.of(Transport::Rdma);
  std::printf(
      "rank %d: route tcp %llu/%llu frames %llu/%llu bytes, shm %llu/%llu frames %llu/%llu "
      "bytes, rdma %llu/%llu frames %llu/%llu bytes, single copy %llu bytes\n",
      c.rank, static_cast<unsigned long long>(tcp.frames_sent),
      static_cast<unsigned long long>(tcp.frames_received),
      static_cast<unsigned long long>(tcp.bytes_sent),
      static_cast<unsigned long long>(tcp.bytes_received),
      static_cast<unsigned long long>(shm.frames_sent),
      static_cast<unsigned long long>(shm.frames_received),
      static_cast<unsigned long long>(shm.bytes_sent),
      static_cast<unsigned long long>(shm.bytes_received),
      static_cast<unsigned long long>(rdma.frames_sent),
      static_cast<unsigned long long>(rdma.frames_received),
      static_cast<unsigned long long>(rdma.bytes_sent),
      static_cast<unsigned long long>(rdma.bytes_received),
      static_cast<unsigned long long>(s.single_copy_bytes));
  if (name == "self") {
    // Messages to itself take the loopback whatever transport they name; nothing else moves.
    check(shm.frames_sent > 0 && shm.frames_received > 0, "route: the loopback carried no frame");
    check(tcp.frames_sent == 0 && tcp.frames_received == 0,
          "route: " + std::to_string(tcp.frames_sent) + " tcp frames to itself");
  } else if (c.options.transport == Transport::Rdma) {
    // Frames as SENDs, rendezvous and put/get payload by WRITE/READ: all of it on RDMA.
    check(rdma.frames_sent > 0 && rdma.frames_received > 0, "route: rdma carried no frame");
    check(rdma.bytes_sent + rdma.bytes_received > 0, "route: rdma carried no byte");
    check(tcp.frames_sent == 0 && tcp.frames_received == 0 && shm.frames_sent == 0 &&
              shm.frames_received == 0,
          "route: " + std::to_string(tcp.frames_sent + shm.frames_sent) +
              " tcp or shm frames with rdma forced");
  } else if (c.options.transport == Transport::Tcp) {
    check(tcp.frames_sent > 0 && tcp.frames_received > 0, "route: tcp carried no frame");
    check(shm.frames_sent == 0 && shm.frames_received == 0,
          "route: " + std::to_string(shm.frames_sent) + " shm frames with tcp forced");
  } else {
    check(shm.frames_sent > 0 && shm.frames_received > 0, "route: shm carried no frame");
    check(tcp.frames_sent == 0 && tcp.frames_received == 0,
          "route: " + std::to_string(tcp.frames_sent) + " tcp frames between ranks of one host");
  }
  const char* single = std::getenv("ORBITE_SHM_SINGLE_COPY");
  if (single != nullptr && std::string_view(single) == "false") {
    check(s.single_copy_bytes == 0, "route: " + std::to_string(s.single_copy_bytes) +
                                        " bytes copied by address with single copy off");
  }
  std::printf("rank %d: route ok\n", c.rank);
}

}  // namespace
}  // namespace orbite::probe

int main(int argc, char** argv) {
  using namespace orbite::probe;
  if (argc != 2 || scenarios().count(argv[1]) == 0) {
    std::fprintf(stderr, "usage: orbite-p2p-probe SCENARIO\nscenarios:");
    for (const auto& [name, s] : scenarios()) {
      std::fprintf(stderr, " %.*s", static_cast<int>(name.size()), name.data());
    }
    std::fprintf(stderr, "\n");
    return 2;
  }
  const std::string name = argv[1];
  const Scenario& scenario = scenarios().at(name);

  // Until the bootstrap says otherwise, failures name the rank the launcher gave.
  if (const char* env_rank = std::getenv("ORBITE_RANK")) set_rank_for_messages(std::atoi(env_rank));
  orbite::TransferOptions options;
  options.transport = transport_from_env();
  auto boot = orbite::Bootstrap::from_env();
  check_ok(boot.status(), "bootstrap");
  set_rank_for_messages(boot->rank());
  auto comm = orbite::Communicator::create(*boot);
  check_ok(comm.status(), "communicator");
  Context c{*comm, options, comm->rank(), comm->size()};
  check(c.size >= scenario.min_ranks && c.size <= scenario.max_ranks,
        name + " needs " + std::to_string(scenario.min_ranks) + " to " +
            std::to_string(scenario.max_ranks) + " ranks, got " + std::to_string(c.size));

  scenario.run(c);

  // killed_peer and sender_left close their own engines (a rank that left cannot join a barrier).
  // Elsewhere every rank waits for the others before closing, so that no rank tears down
  // connections a peer still uses; with every request finished, close() has nothing left to prove.
  if (name != "killed_peer" && name != "sender_left" && name != "died_before_connecting") {
    check_route(c, name);
    barrier(c, "before close");
    check_ok(c.comm.engine().close(std::chrono::seconds(30)), "engine close");
  }
  std::printf("rank %d: PASS %s\n", c.rank, name.c_str());
  std::fflush(stdout);
  return 0;
}
