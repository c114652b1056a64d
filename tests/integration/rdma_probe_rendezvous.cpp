// The announced rendezvous over RDMA (orbite-rdma-probe's announced_rendezvous scenario, and
// announced_fallback with rank 0's hook rts_cts). A message up to the announcement limit (1 MiB)
// travels as RtsRma with its write's GrantRequest beside it: the receiver answers no Cts, so it
// sends no frame at all for the message (its GrantRequest's answer is the transport's own
// control). Larger messages, and every message with the hook, wait for the Cts: one frame each.
// Each case checks every byte and the guards after the receive, with the receive posted first
// and after the announcement arrived; a truncated announced message fails both sides with
// InvalidArgument and writes nothing; 20 messages sent before any receive is posted go 16 by
// announcement and 4 by Cts (a sender keeps at most 16 announcements waiting per peer).
// And forged_rendezvous (below): GrantRequests that name a target that does not exist.
#include <cstdio>
#include <string>
#include <vector>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

constexpr std::uint64_t kSlack = 64;  // guard bytes past each receive

std::uint64_t rdma_frames_sent(RdmaContext& r) {
  return r.c.comm.engine().stats().of(Transport::Rdma).frames_sent;
}
std::uint64_t rdma_frames_received(RdmaContext& r) {
  return r.c.comm.engine().stats().of(Transport::Rdma).frames_received;
}

// Rank 0 sends `n` bytes to rank 1, which posts its receive first or once the announcement (a
// frame) arrived; rank 1 checks the bytes and counts the frames it sent for the message.
void one_message(RdmaContext& r, std::uint64_t n, bool receive_first, bool announced, int tag) {
  const std::string what = sz(n) + "-byte message, receive posted " +
                           (receive_first ? "first" : "after the announcement");
  if (r.c.rank == 0) {
    Bytes out(n);
    fill_pattern(out.data(), n, 0xA0 + static_cast<std::uint64_t>(tag));
    await_peer(r.c, 1, tag);  // the receiver counted (and posted, if first)
    Request s = accepted(r.c.comm.isend(out.data(), n, 1, tag, r.rdma), "isend");
    wait_ok(s, what + ": send");
    barrier(r.c, what);
    return;
  }
  Bytes in(n + kSlack);
  fill_pattern(in.data(), in.size(), 0xBAD);
  const std::uint64_t sent_before = rdma_frames_sent(r);
  const std::uint64_t received_before = rdma_frames_received(r);
  Request q;
  if (receive_first) q = accepted(r.c.comm.irecv(in.data(), n, 0, tag, r.rdma), "irecv");
  signal_peer(r.c, 0, tag);
  if (!receive_first) {
    check(eventually([&] { return rdma_frames_received(r) > received_before; }),
          what + ": no announcement arrived");
    q = accepted(r.c.comm.irecv(in.data(), n, 0, tag, r.rdma), "irecv");
  }
  wait_ok(q, what + ": receive");
  check_pattern(in.data(), n, 0xA0 + static_cast<std::uint64_t>(tag), what);
  check_pattern(in.data() + n, kSlack, 0xBAD, what + ": past the receive", n);
  const std::uint64_t frames = rdma_frames_sent(r) - sent_before;
  std::printf("rank 1: %s: %llu frame(s) sent back\n", what.c_str(),
              static_cast<unsigned long long>(frames));
  check(announced ? frames == 0 : frames == 1,
        what + ": the receiver sent " + sz(frames) + " frames over RDMA; expected " +
            (announced ? "none (announced: no Cts)" : "one (the Cts)"));
  barrier(r.c, what);
}

void truncated(RdmaContext& r) {
  constexpr std::uint64_t kSent = 256 * kKiB, kCapacity = 64 * kKiB;
  const std::string what = "a 256 KiB message to a 64 KiB receive";
  if (r.c.rank == 0) {
    Bytes out(kSent);
    fill_pattern(out.data(), kSent, 0x7A);
    Request s = accepted(r.c.comm.isend(out.data(), kSent, 1, 90, r.rdma), "isend");
    const Status st = s.wait(kWait);
    check(st.code() == Errc::InvalidArgument && st.message().find("truncated") != std::string::npos,
          "send of " + what + ": " + st.to_string());
  } else {
    Bytes in(kCapacity + kSlack);
    fill_pattern(in.data(), in.size(), 0xBAD);
    Request q = accepted(r.c.comm.irecv(in.data(), kCapacity, 0, 90, r.rdma), "irecv");
    expect_request_failure(q, {Errc::InvalidArgument}, "receive of " + what);
    check_pattern(in.data(), in.size(), 0xBAD, what + ": the receive buffer");
  }
  // The link goes on.
  Bytes note(100);
  Context over_rdma{r.c.comm, r.rdma, r.c.rank, r.c.size};
  if (r.c.rank == 0) {
    fill_pattern(note.data(), note.size(), 0x7B);
    send(over_rdma, note.data(), note.size(), 1, 91, "the message after truncation");
  } else {
    check(recv(over_rdma, note.data(), note.size(), 0, 91, "the message after") == 100, "size");
    check_pattern(note.data(), note.size(), 0x7B, "the message after truncation");
  }
  barrier(r.c, "truncation checked");
}

// 20 messages of 64 KiB sent before any receive: at most 16 announced at once.
void many_unmatched(RdmaContext& r, bool announcing) {
  constexpr int kCount = 20;
  constexpr std::uint64_t kN = 64 * kKiB;
  if (r.c.rank == 0) {
    std::vector<Bytes> out(kCount, Bytes(kN));
    std::vector<Request> sends;
    for (int i = 0; i < kCount; ++i) {
      fill_pattern(out[i].data(), kN, 0x500 + static_cast<std::uint64_t>(i));
      sends.push_back(accepted(r.c.comm.isend(out[i].data(), kN, 1, 200 + i, r.rdma), "isend"));
    }
    signal_peer(r.c, 1, 200);
    wait_all_ok(sends, "20 sends posted before their receives");
    barrier(r.c, "many unmatched");
    return;
  }
  await_peer(r.c, 0, 200);
  const std::uint64_t sent_before = rdma_frames_sent(r);
  std::vector<Bytes> in(kCount, Bytes(kN));
  std::vector<Request> receives;
  // In reverse tag order: each receive matches its own message, whatever came first.
  for (int i = kCount - 1; i >= 0; --i) {
    receives.push_back(accepted(r.c.comm.irecv(in[i].data(), kN, 0, 200 + i, r.rdma), "irecv"));
  }
  wait_all_ok(receives, "20 receives posted after their messages");
  for (int i = 0; i < kCount; ++i) {
    check_pattern(in[i].data(), kN, 0x500 + static_cast<std::uint64_t>(i),
                  "unmatched message " + std::to_string(i));
  }
  const std::uint64_t frames = rdma_frames_sent(r) - sent_before;
  const std::uint64_t want = announcing ? kCount - 16 : kCount;
  check(frames == want, "20 messages sent before their receives: the receiver sent " + sz(frames) +
                            " Cts; expected " + sz(want));
  barrier(r.c, "many unmatched");
}

}  // namespace

void scenario_rdma_announced_rendezvous(RdmaContext& r, bool announcing) {
  // Warm-up: the message QPs and payload QPs both ways.
  one_message(r, 64 * kKiB, true, announcing, 10);
  int tag = 11;
  for (const std::uint64_t n : {64 * kKiB + 7, kMiB, kMiB + 1}) {
    for (const bool first : {true, false}) {
      one_message(r, n, first, announcing && n <= kMiB, tag++);
    }
  }
  truncated(r);
  many_unmatched(r, announcing);
  const RdmaStats s = r.c.comm.engine().rdma_stats();
  std::printf("rank %d: grants %llu, deferred %llu, nacks %llu\n", r.c.rank,
              static_cast<unsigned long long>(s.grants),
              static_cast<unsigned long long>(s.grant_requests_deferred),
              static_cast<unsigned long long>(s.grant_nacks));
  barrier(r.c, "announced rendezvous checked");
}

// ---------------------------------------------------------------------------------------------
// forged_rendezvous: rank 0's rendezvous GrantRequests name a target that does not exist (hook
// forge_rendezvous), in both flows: a message announced as RtsRma (64 KiB + 1) whose request
// names another message (refused once the announcement would long have arrived), with the
// receive posted before the sender gives up and after it; and a message past the announcement
// limit (1 MiB + 1) whose request after the Cts names a receive that was never matched. Each time
// the receiver refuses it before any authority; the send fails, the receive it was meant for
// fails too (the sender's Abandon or Reject), nothing lands, and the link goes on: an eager
// message afterwards arrives.

namespace {

constexpr std::uint64_t kForgedSenderSeed = 0xF0B;
constexpr std::uint64_t kForgedReceiverSeed = 0xF0A;

std::uint64_t engine_nacks(RdmaContext& r) {
  return r.c.comm.engine().rdma_stats().grant_nacks;
}

}  // namespace

void scenario_rdma_forged_rendezvous(RdmaContext& r) {
  struct Case {
    std::uint64_t n;
    bool receive_late;  // posted after the send failed
  };
  constexpr Case kCases[] = {{64 * kKiB + 1, false}, {64 * kKiB + 1, true}, {kMiB + 1, false}};
  Context over_rdma{r.c.comm, r.rdma, r.c.rank, r.c.size};
  int round = 0;
  for (const Case& k : kCases) {
    const int tag = 70 + 2 * round;
    const int step = 700 + round++;
    const std::string what =
        sz(k.n) + "-byte forged rendezvous" + (k.receive_late ? " (receive posted late)" : "");
    Bytes big(k.n), small(100);
    auto forged = [&](const Status& st) {
      return st.code() == Errc::InvalidArgument &&
             st.message().find("awaits no rendezvous write") != std::string::npos;
    };
    if (r.c.rank == 0) {
      fill_pattern(big.data(), k.n, kForgedSenderSeed);
      auto q = r.c.comm.isend(big.data(), k.n, 1, tag, r.rdma);
      const Status st = q.ok() ? q->wait(std::chrono::seconds(30)) : q.status();
      std::printf("rank 0: %s: the send: %s\n", what.c_str(), st.to_string().c_str());
      check(forged(st), what + ": the send " + st.to_string());
      if (k.receive_late) signal_peer(r.c, 1, step);
      fill_pattern(small.data(), small.size(), kForgedSenderSeed + 1);
      send(over_rdma, small.data(), small.size(), 1, tag + 1, "the message after");
    } else {
      fill_pattern(big.data(), k.n, kForgedReceiverSeed);
      const std::uint64_t nacks = engine_nacks(r);
      if (k.receive_late) await_peer(r.c, 0, step);
      auto q = r.c.comm.irecv(big.data(), k.n, 0, tag, r.rdma);
      const Status st = q.ok() ? q->wait(std::chrono::seconds(30)) : q.status();
      std::printf("rank 1: %s: the receive it aimed past: %s\n", what.c_str(),
                  st.to_string().c_str());
      check(forged(st), what + ": the receive " + st.to_string());
      check_pattern(big.data(), k.n, kForgedReceiverSeed, what + ": the receive's buffer");
      check(recv(over_rdma, small.data(), small.size(), 0, tag + 1, "the message after") == 100,
            "the message after: size");
      check_pattern(small.data(), small.size(), kForgedSenderSeed + 1, "the message after");
      check(engine_nacks(r) > nacks, what + ": the forged GrantRequest was not refused");
    }
  }
  barrier(r.c, "forged rendezvous checked");
}

}  // namespace orbite::probe
