// Bounce buffers over RDMA (orbite-rdma-probe's bounce scenario; rdma_test runs it at the default
// rdma.bounce_limit, with a pool of one chunk, and with bouncing off). Rank 0 sends, rank 1
// receives, every byte checked. What each side asserts from its own rdma_stats():
// - messages up to the limit register no MR at all once the pool's slabs are registered (one
//   warm-up message), and count as bounced on both sides; with a one-chunk pool some of eight
//   messages in flight fall back to registering their buffers; with the limit at 0 every
//   message registers its buffers and none bounces;
// - eight receives posted into one buffer all complete (each bounced write waits for no other);
// - a message above the limit registers the user's buffers for itself and deregisters them
//   before the next message: no MR of user memory outlives its message (the live count returns);
// - a send buffer and a receive buffer re-mapped between two messages (fresh pages at the same
//   address: what a registration cache must never reach through an old MR) carry the second
//   message's bytes, below and above the limit.
#include <sys/mman.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

constexpr std::uint64_t kSmall = 64 * kKiB;   // under the default limit (256 KiB)
constexpr std::uint64_t kLarge = 512 * kKiB;  // above it
constexpr int kInFlight = 8;

std::int64_t live_mrs(const RdmaStats& s) {
  return static_cast<std::int64_t>(s.mr_registrations) -
         static_cast<std::int64_t>(s.mr_deregistrations);
}

RdmaStats stats(RdmaContext& r) {
  return r.c.comm.engine().rdma_stats();
}

// Anonymous pages of `n` bytes, replaced in place (MAP_FIXED) by fresh ones on remap().
class Mapping {
 public:
  explicit Mapping(std::uint64_t n) : n_(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail(std::string("mmap: ") + std::strerror(errno));
    p_ = static_cast<std::byte*>(p);
  }
  ~Mapping() { munmap(p_, n_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void remap() {
    void* p = mmap(p_, n_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != p_) fail(std::string("mmap(MAP_FIXED) over the buffer: ") + std::strerror(errno));
  }
  std::byte* data() const { return p_; }

 private:
  std::byte* p_ = nullptr;
  std::uint64_t n_;
};

// `count` messages of `n` bytes from rank 0 to rank 1, all in flight at once; rank 1 posts them
// into distinct buffers, or all into one (`one_buffer`: every message then carries one pattern).
void messages(RdmaContext& r, std::uint64_t n, int count, bool one_buffer, int tag,
              const std::string& what) {
  auto seed = [&](int i) { return 0x3000 + (one_buffer ? 0 : static_cast<std::uint64_t>(i)); };
  if (r.c.rank == 0) {
    std::vector<Bytes> out(count, Bytes(n));
    std::vector<Request> sends;
    await_peer(r.c, 1, tag);
    for (int i = 0; i < count; ++i) {
      fill_pattern(out[i].data(), n, seed(i));
      sends.push_back(accepted(r.c.comm.isend(out[i].data(), n, 1, tag + i, r.rdma), "isend"));
    }
    wait_all_ok(sends, what + ": sends");
  } else {
    std::vector<Bytes> in(one_buffer ? 1 : count, Bytes(n));
    std::vector<Request> receives;
    for (int i = 0; i < count; ++i) {
      Bytes& b = in[one_buffer ? 0 : i];
      receives.push_back(accepted(r.c.comm.irecv(b.data(), n, 0, tag + i, r.rdma), "irecv"));
    }
    signal_peer(r.c, 0, tag);
    wait_all_ok(receives, what + ": receives");
    for (int i = 0; i < static_cast<int>(in.size()); ++i) {
      check_pattern(in[i].data(), n, seed(i), what + ": message " + std::to_string(i));
    }
  }
  barrier(r.c, what);
}

// Two messages of `n` bytes through the same two buffers, each re-mapped in between.
void remapped(RdmaContext& r, std::uint64_t n, int tag) {
  const std::string what = sz(n) + "-byte messages through re-mapped buffers";
  Mapping buffer(n);
  Context over_rdma{r.c.comm, r.rdma, r.c.rank, r.c.size};
  const std::int64_t base = live_mrs(stats(r));
  for (int round = 0; round < 2; ++round) {
    const std::uint64_t seed = 0x4000 + n + static_cast<std::uint64_t>(round);
    if (round == 1) {
      // No MR of the first message may still reach the old pages when the new ones take over.
      check(eventually([&] { return live_mrs(stats(r)) == base; }),
            what + ": " + std::to_string(live_mrs(stats(r)) - base) +
                " MR(s) of the first message still registered");
      buffer.remap();
    }
    if (r.c.rank == 0) {
      fill_pattern(buffer.data(), n, seed);
      send(over_rdma, buffer.data(), n, 1, tag + round, what);
    } else {
      std::memset(buffer.data(), 0, n);
      check(recv(over_rdma, buffer.data(), n, 0, tag + round, what) == n, what + ": size");
      check_pattern(buffer.data(), n, seed, what + ", round " + std::to_string(round));
    }
    barrier(r.c, what + " " + std::to_string(round));
  }
}

}  // namespace

void scenario_rdma_bounce(RdmaContext& r) {
  const auto& cfg = r.c.comm.engine().config().rdma;
  const bool off = cfg.bounce_limit == 0;
  const bool one_chunk = !off && cfg.bounce_pool_bytes < 2 * cfg.bounce_limit;
  const bool sender = r.c.rank == 0;
  // The pool's first slab is made and registered by the first message.
  messages(r, kSmall, 1, false, 100, "warm-up");

  RdmaStats before = stats(r);
  messages(r, kSmall, kInFlight, false, 200, "8 messages of 64 KiB");
  RdmaStats after = stats(r);
  const std::uint64_t registered = after.mr_registrations - before.mr_registrations;
  const std::uint64_t bounced =
      sender ? after.mr_cache.bounce_sends - before.mr_cache.bounce_sends
             : after.mr_cache.bounce_receives - before.mr_cache.bounce_receives;
  const std::uint64_t fallbacks =
      after.mr_cache.bounce_fallbacks - before.mr_cache.bounce_fallbacks;
  std::printf("rank %d: bounce: 8 messages of 64 KiB: %" PRIu64 " bounced, %" PRIu64
              " fallbacks, %" PRIu64 " MRs registered (limit %" PRIu64 ", pool %" PRIu64 ")\n",
              r.c.rank, bounced, fallbacks, registered, cfg.bounce_limit, cfg.bounce_pool_bytes);
  if (off) {
    check(bounced == 0 && fallbacks == 0, "a message bounced with rdma.bounce_limit = 0");
    check(registered >= kInFlight,
          "with bouncing off, 8 messages registered only " + sz(registered) + " MRs");
  } else if (one_chunk) {
    check(fallbacks > 0 && bounced + fallbacks == kInFlight && registered > 0,
          "a one-chunk pool: " + sz(bounced) + " bounced and " + sz(fallbacks) +
              " fell back (registering " + sz(registered) + " MRs) of 8 in flight");
  } else {
    check(bounced == kInFlight && fallbacks == 0,
          sz(bounced) + " of 8 messages bounced, " + sz(fallbacks) + " fell back");
    check(registered == 0, "bounced messages registered " + sz(registered) + " MRs");
  }
  check(eventually([&] { return stats(r).mr_cache.bounce_lent == 0; }),
        "bounce chunks still lent after every message ended");

  before = stats(r);
  messages(r, kSmall, kInFlight, true, 300, "8 receives of 64 KiB posted into one buffer");
  after = stats(r);
  if (!off && !one_chunk) {
    check(after.mr_registrations == before.mr_registrations,
          "receives into one buffer registered MRs");
  }

  before = stats(r);
  messages(r, kLarge, 1, false, 400, "a 512 KiB message");
  check(eventually([&] { return live_mrs(stats(r)) == live_mrs(before); }),
        "an MR of the 512 KiB message's user buffer outlived it");
  after = stats(r);
  check(after.mr_registrations > before.mr_registrations,
        "the 512 KiB message (above the limit) registered no MR");
  check(after.mr_cache.bounce_sends == before.mr_cache.bounce_sends &&
            after.mr_cache.bounce_receives == before.mr_cache.bounce_receives,
        "the 512 KiB message bounced");

  remapped(r, kSmall, 500);
  remapped(r, kLarge, 600);
  barrier(r.c, "bounce checked");
}

}  // namespace orbite::probe
