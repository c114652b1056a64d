// orbite-p2p-probe's killed_peer scenario (see p2p_probe.cpp). Three ranks started directly by the
// test, which SIGKILLs rank 2 once it prints "rank 2: streaming". Rank 2 streams 4 MiB messages to
// rank 0; rank 0 also has a send to rank 2 and a receive from it that rank 2 never matches, and
// exchanges 1 MiB messages with rank 1 in rounds. After the kill every request involving rank 2
// must fail with ConnectionLost, new ones too, while rank 0 <-> rank 1 rounds keep completing;
// then ranks 0 and 1 close their engines.
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "p2p_probe.h"

namespace orbite::probe {
namespace {

constexpr std::uint64_t kStream = 4 * kMiB;
constexpr std::uint64_t kRound = kMiB;
constexpr int kStreamTag = 80;
constexpr int kUnmatchedTag = 81;
constexpr int kControl = 82;  // rank 0 -> 1: 1 = another round, 0 = stop; 1 -> 0: the final ack
constexpr int kToRank1 = 83;
constexpr int kFromRank1 = 84;
// Rounds rank 0 and rank 1 complete after rank 0 saw the loss: their traffic outlives it.
constexpr int kRoundsAfterLoss = 5;
// How long after rank 2's last message the loss must be reported: a SIGKILLed process's sockets
// are closed by the kernel, and tcp.peer_timeout (10 s) covers a silent peer.
constexpr auto kLossBound = std::chrono::seconds(30);

std::uint64_t stream_seed(std::uint64_t seq) {
  return 0xC0000 + seq;
}
std::uint64_t round_seed(int round, int from) {
  return 0xD0000 + static_cast<std::uint64_t>(round) * 2 + static_cast<std::uint64_t>(from);
}

long long ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

[[noreturn]] void stream_until_killed(Context& c) {
  std::array<Bytes, 2> buffers{Bytes(kStream), Bytes(kStream)};
  std::array<Request, 2> inflight;
  const auto deadline = Clock::now() + 2 * kWait;
  bool announced = false;
  for (std::uint64_t seq = 0;; ++seq) {
    check(Clock::now() < deadline, "rank 2 was not killed within the bound");
    Request& slot = inflight[seq % 2];
    if (slot.valid()) {
      wait_ok(slot, "stream message " + sz(seq - 2));
      if (!announced) {
        // The test kills this process on this line; data has been flowing to rank 0 by then.
        std::printf("rank 2: streaming\n");
        std::fflush(stdout);
        announced = true;
      }
    }
    Bytes& b = buffers[seq % 2];
    fill_pattern(b.data(), kStream, stream_seed(seq));
    slot = isend(c, b.data(), kStream, 0, kStreamTag, "stream message " + sz(seq));
  }
}

void exchange_with_rank0(Context& c) {
  Bytes out(kRound);
  Bytes in(kRound);
  for (int round = 0;; ++round) {
    std::uint32_t control = 2;
    check(recv(c, &control, sizeof control, 0, kControl, "control " + sz(round)) == sizeof control,
          "control message size");
    if (control == 0) break;
    check(control == 1, "control message " + sz(control));
    fill_pattern(out.data(), kRound, round_seed(round, 1));
    std::vector<Request> r;
    r.push_back(isend(c, out.data(), kRound, 0, kFromRank1, "round " + sz(round) + " send"));
    r.push_back(irecv(c, in.data(), kRound, 0, kToRank1, "round " + sz(round) + " receive"));
    wait_all_ok(r, "round " + sz(round));
    check(r[1].bytes() == kRound, "round " + sz(round) + ": received " + sz(r[1].bytes()));
    check_pattern(in.data(), kRound, round_seed(round, 0), "round " + sz(round) + " from rank 0");
  }
  const std::uint32_t ack = 3;
  send(c, &ack, sizeof ack, 0, kControl, "final ack");
}

// Rank 0's rounds with rank 1, driven by test() from the same loop that watches rank 2.
class Rounds {
 public:
  explicit Rounds(Context& c) : c_(c), out_(kRound), in_(kRound) { start(); }

  // Whether the current round finished (and was checked); starts no new one.
  bool finished() {
    for (Request& r : requests_) {
      if (!r.test()) return false;
    }
    wait_all_ok(requests_, "round " + sz(round_) + " with rank 1");
    check(requests_[2].bytes() == kRound,
          "round " + sz(round_) + ": received " + sz(requests_[2].bytes()) + " bytes from rank 1");
    check_pattern(in_.data(), kRound, round_seed(round_, 1),
                  "round " + sz(round_) + " from rank 1");
    return true;
  }

  void next() {
    ++round_;
    start();
  }

  void stop() {
    const std::uint32_t control = 0;
    send(c_, &control, sizeof control, 1, kControl, "stop rank 1");
    std::uint32_t ack = 0;
    recv(c_, &ack, sizeof ack, 1, kControl, "rank 1's final ack");
    check(ack == 3, "rank 1's final ack is " + sz(ack));
  }

  [[nodiscard]] int completed() const { return round_; }

 private:
  void start() {
    control_ = 1;
    fill_pattern(out_.data(), kRound, round_seed(round_, 0));
    requests_.clear();
    requests_.push_back(isend(c_, &control_, sizeof control_, 1, kControl, "control"));
    requests_.push_back(isend(c_, out_.data(), kRound, 1, kToRank1, "round send"));
    requests_.push_back(irecv(c_, in_.data(), kRound, 1, kFromRank1, "round receive"));
  }

  Context& c_;
  int round_ = 0;
  std::uint32_t control_ = 1;
  Bytes out_;
  Bytes in_;
  std::vector<Request> requests_;
};

void observe_the_loss(Context& c) {
  // Requests rank 2 never matches: a rendezvous-sized send and a receive.
  Bytes unmatched_out(16 * kMiB);
  Bytes unmatched_in(64);
  Request unmatched_send =
      isend(c, unmatched_out.data(), unmatched_out.size(), 2, kUnmatchedTag, "unmatched send");
  Request unmatched_recv =
      irecv(c, unmatched_in.data(), unmatched_in.size(), 2, kUnmatchedTag, "unmatched receive");

  struct Slot {
    Bytes buffer = Bytes(kStream);
    Request request;
    std::uint64_t seq = 0;
  };
  std::array<Slot, 2> slots;
  std::uint64_t next_seq = 0;
  for (Slot& s : slots) {
    s.seq = next_seq++;
    s.request = irecv(c, s.buffer.data(), kStream, 2, kStreamTag, "stream receive");
  }

  Rounds rounds(c);
  const auto start = Clock::now();
  const auto deadline = start + 2 * kWait;
  auto last_data = start;
  bool lost = false;
  std::uint64_t received = 0;
  int rounds_at_loss = 0;
  while (!lost || rounds.completed() < rounds_at_loss + kRoundsAfterLoss) {
    check(Clock::now() < deadline,
          "killed_peer did not finish within the bound (lost: " + std::string(lost ? "yes" : "no") +
              ", rounds " + sz(rounds.completed()) + ")");
    for (Slot& s : slots) {
      if (lost || !s.request.valid() || !s.request.test()) continue;
      if (failed_with(s.request, {Errc::ConnectionLost})) {
        lost = true;
        rounds_at_loss = rounds.completed();
        const auto now = Clock::now();
        check(now - last_data < kLossBound, "ConnectionLost came " +
                                                sz(ms_between(last_data, now)) +
                                                " ms after rank 2's last message, over the bound");
        std::printf(
            "rank 0: ConnectionLost from rank 2 %lld ms after its last message (%llu "
            "messages received)\n",
            ms_between(last_data, now), static_cast<unsigned long long>(received));
        std::fflush(stdout);
        s.request = Request();
        break;
      }
      wait_ok(s.request, "stream message " + sz(s.seq));
      check(s.request.bytes() == kStream,
            "stream message " + sz(s.seq) + ": received " + sz(s.request.bytes()) + " bytes");
      check_pattern(s.buffer.data(), kStream, stream_seed(s.seq), "stream message " + sz(s.seq));
      last_data = Clock::now();
      ++received;
      s.seq = next_seq++;
      s.request = irecv(c, s.buffer.data(), kStream, 2, kStreamTag, "stream receive");
    }
    if (rounds.finished()) rounds.next();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  while (!rounds.finished()) {
    check(Clock::now() < deadline, "the last round with rank 1 did not finish");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  rounds.stop();

  // Everything else that involves rank 2 fails the same way, and so does anything new.
  for (Slot& s : slots) {
    if (!s.request.valid()) continue;
    // Its message may have been complete before the kill (two were in flight); else it is lost.
    const std::string what = "stream message " + sz(s.seq);
    if (s.request.wait(kWait).ok()) {
      check(s.request.bytes() == kStream, what + ": received " + sz(s.request.bytes()));
      check_pattern(s.buffer.data(), kStream, stream_seed(s.seq), what);
    } else {
      expect_request_failure(s.request, {Errc::ConnectionLost}, what);
    }
  }
  expect_request_failure(unmatched_send, {Errc::ConnectionLost}, "send rank 2 never received");
  expect_request_failure(unmatched_recv, {Errc::ConnectionLost}, "receive rank 2 never sent to");
  Bytes fresh(64);
  expect_failure(c.comm.isend(fresh.data(), fresh.size(), 2, kUnmatchedTag, c.options),
                 {Errc::ConnectionLost}, "new send to the dead rank");
  expect_failure(c.comm.irecv(fresh.data(), fresh.size(), 2, kUnmatchedTag, c.options),
                 {Errc::ConnectionLost}, "new receive from the dead rank");
}

}  // namespace

void scenario_killed_peer(Context& c) {
  if (c.rank == 2) stream_until_killed(c);
  if (c.rank == 1) {
    exchange_with_rank0(c);
  } else {
    observe_the_loss(c);
  }
  // No barrier: rank 2 cannot join one. Rank 0 waited for rank 1's ack, so both are done with
  // each other; the lost peer must not keep close() from finishing.
  check_ok(c.comm.engine().close(std::chrono::seconds(30)), "engine close after the loss");
}

// sender_left (2 ranks): rank 1 sends two eager messages and closes its engine at once. Rank 0
// first waits until a receive nobody matches fails (the link is down), then receives both
// messages anyway, in its own order: a message that arrived whole before the peer left is
// delivered, as MPI delivers a completed send. One more receive fails with ConnectionLost.
void scenario_sender_left(Context& c) {
  constexpr int kFirst = 90, kSecond = 91, kNobody = 92;
  constexpr std::uint64_t kBytes = 1000;
  if (c.rank == 1) {
    Bytes a(kBytes), b(32);
    fill_pattern(a.data(), a.size(), 0x5E1);
    fill_pattern(b.data(), b.size(), 0x5E2);
    send(c, a.data(), a.size(), 0, kFirst, "first message");
    send(c, b.data(), b.size(), 0, kSecond, "second message");
    check_ok(c.comm.engine().close(std::chrono::seconds(30)), "engine close after the sends");
    return;
  }
  Bytes sink(8);
  Request nobody = irecv(c, sink.data(), sink.size(), 1, kNobody, "unmatched receive");
  const Status lost = nobody.wait(std::chrono::seconds(60));
  check(lost.code() == Errc::ConnectionLost, "the unmatched receive ended " + lost.to_string());
  Bytes a(kBytes), b(32);
  check(recv(c, b.data(), b.size(), 1, kSecond, "second message after the close") == 32,
        "second message size");
  check_pattern(b.data(), b.size(), 0x5E2, "second message after the close");
  check(recv(c, a.data(), a.size(), 1, kFirst, "first message after the close") == kBytes,
        "first message size");
  check_pattern(a.data(), a.size(), 0x5E1, "first message after the close");
  expect_failure(c.comm.irecv(a.data(), a.size(), 1, kFirst, c.options), {Errc::ConnectionLost},
                 "a receive with nothing left to match");
  std::printf("rank 0: messages delivered after the sender left\n");
  check_ok(c.comm.engine().close(std::chrono::seconds(30)), "engine close");
}

// died_before_connecting (2 ranks): rank 1 leaves before any traffic, without closing its
// engine (as a crash would). Rank 0's receive from it, posted afterwards, fails with
// ConnectionLost within the bound: posting it connects to the peer, which is gone. (Before, a
// receive only waited for the sender to connect, and nothing noticed that it never would.)
void scenario_died_before_connecting(Context& c) {
  if (c.rank == 1) {
    std::printf("rank 1: PASS died_before_connecting\n");
    std::fflush(stdout);
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Bytes sink(8);
  Request r = irecv(c, sink.data(), sink.size(), 1, 5, "receive from the peer that left");
  const Status st = r.wait(kWait);
  check(st.code() == Errc::ConnectionLost,
        "the receive from a peer that left before connecting ended " + st.to_string());
  check_ok(c.comm.engine().close(std::chrono::seconds(30)), "engine close after the loss");
}

// crossed_exit (2 ranks): both ranks send to each other at one moment, so their connections
// cross and one handshake loses; then each leaves without closing its engine, as a crashed
// process would. The test then looks in /dev/shm: no ring name of either process may stay (the
// losing handshake's ring is unlinked when the crossing resolves, the others once both ends
// mapped them).
void scenario_crossed_exit(Context& c) {
  check_ok(c.comm.store_barrier(), "aligned start");
  const int peer = 1 - c.rank;
  Bytes out(64), in(64);
  fill_pattern(out.data(), out.size(), 0xC0 + static_cast<std::uint64_t>(c.rank));
  Request s = isend(c, out.data(), out.size(), peer, 7, "crossing send");
  Request r = irecv(c, in.data(), in.size(), peer, 7, "crossing receive");
  wait_ok(s, "crossing send");
  wait_ok(r, "crossing receive");
  check_pattern(in.data(), in.size(), 0xC0 + static_cast<std::uint64_t>(peer), "crossing bytes");
  check_ok(c.comm.store_barrier(), "both connected");
  std::printf("rank %d: pid %d\nrank %d: PASS crossed_exit\n", c.rank, static_cast<int>(::getpid()),
              c.rank);
  std::fflush(stdout);
  ::_exit(0);
}

}  // namespace orbite::probe
