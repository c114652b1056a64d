// TransferEngine put/get between two engines in this process, on loopback sockets and (engines in
// one process share the host identity) shared-memory rings. Every case runs for each progress
// mode with one and with three lanes. Remote memory is checked byte for byte, guard bytes around
// every registration included. Fault cases with a hand-played peer are in engine_fault_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <orbite/transfer.h>

#include "../support/config_test_helpers.h"
#include "engine_test_support.h"
#include "p2p/shm/vm_copy.h"
#include "proxy/engine_core.h"

namespace orbite {
namespace {

using testing::Guarded;
using testing::import;
using testing::kWait;
using testing::make_engine;
using testing::Mode;
using testing::must_register;

class EngineTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    a_ = make_engine(config());
    b_ = make_engine(config());
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  void TearDown() override {
    for (auto* e : {&a_, &b_}) {
      if (*e) {
        EXPECT_TRUE((*e)->close(kWait).ok());
      }
    }
  }
  [[nodiscard]] EngineConfig config() const { return testing::loopback_config(GetParam()); }

  // Registers `len` bytes on B, puts a pattern there from A and gets a second pattern back,
  // checking every byte and the guards on both sides.
  void put_then_get(TransferEngine& a, TransferEngine& b, Transport t, std::uint64_t len) {
    SCOPED_TRACE(std::string(to_string(t)) + " " + std::to_string(len) + " bytes");
    Guarded src(len), dst(len), back(len);
    src.fill(len + 1);
    MemoryRegion src_r = must_register(a, src.data(), len);
    MemoryRegion back_r = must_register(a, back.data(), len);
    MemoryRegion dst_r = must_register(b, dst.data(), len);
    const RemoteRegion remote = import(dst_r);
    TransferOptions opts;
    opts.transport = t;
    const EngineStats a_before = a.stats();
    const EngineStats b_before = b.stats();

    auto put = a.put(src_r, 0, remote, 0, len, opts);
    ASSERT_TRUE(put.ok()) << put.status().to_string();
    Status st = put->wait(kWait);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(put->done());
    EXPECT_EQ(put->bytes(), len);
    EXPECT_EQ(dst.mismatch(0, len, len + 1), std::nullopt);
    EXPECT_TRUE(dst.guards_intact());

    dst.fill(len + 2);
    auto get = a.get(back_r, 0, remote, 0, len, opts);
    ASSERT_TRUE(get.ok()) << get.status().to_string();
    st = get->wait(kWait);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(get->status().has_value());
    EXPECT_TRUE(get->status()->ok());
    EXPECT_EQ(get->bytes(), len);
    EXPECT_EQ(back.mismatch(0, len, len + 2), std::nullopt);
    EXPECT_EQ(src.mismatch(0, len, len + 1), std::nullopt) << "a put leaves its source alone";
    EXPECT_TRUE(src.guards_intact() && back.guards_intact() && dst.guards_intact());
    expect_route(a_before, a.stats(), b_before, b.stats(), t, len, a.config().shm.enable);
  }

  // The route a request meant carried its bytes: the put's and the get's payload (2 * len) on
  // the transport the table picks (tcp when forced or when shm is off, shm otherwise between
  // these same-host engines), and not a frame on the other.
  static void expect_route(const EngineStats& a0, const EngineStats& a1, const EngineStats& b0,
                           const EngineStats& b1, Transport t, std::uint64_t len, bool shm) {
    const Transport used = t == Transport::Tcp || !shm ? Transport::Tcp : Transport::Shm;
    const Transport other = used == Transport::Tcp ? Transport::Shm : Transport::Tcp;
    // A byte copied by one side (single copy) counts once, on the copying side; through frames,
    // on both: the two engines together count every byte at least once.
    const auto moved = [&](Transport x) {
      const auto delta = [x](const EngineStats& before, const EngineStats& after) {
        return after.of(x).bytes_sent - before.of(x).bytes_sent + after.of(x).bytes_received -
               before.of(x).bytes_received;
      };
      return delta(a0, a1) + delta(b0, b1);
    };
    EXPECT_GE(moved(used), 2 * len) << to_string(used) << " carried the payload";
    EXPECT_GT(a1.of(used).frames_sent, a0.of(used).frames_sent);
    EXPECT_GT(b1.of(used).frames_received, b0.of(used).frames_received);
    EXPECT_EQ(a1.of(other).frames_sent, a0.of(other).frames_sent)
        << "nothing on " << to_string(other);
    EXPECT_EQ(b1.of(other).frames_sent, b0.of(other).frames_sent)
        << "nothing on " << to_string(other);
    EXPECT_EQ(a1.of(Transport::Rdma).frames_sent + a1.of(Transport::Nvlink).frames_sent, 0U);
  }

  void put_get_everywhere(TransferEngine& a, TransferEngine& b) {
    for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Unspec}) {
      for (std::uint64_t len : {std::uint64_t{1}, std::uint64_t{4095}, kMiB + 3}) {
        put_then_get(a, b, t, len);
        if (HasFatalFailure()) return;
      }
    }
  }

  std::shared_ptr<TransferEngine> a_, b_;
};

TEST_P(EngineTest, PutGetOverEveryTransportSingleCopy) {
  put_get_everywhere(*a_, *b_);
  // Ring transfers above shm.eager_limit copy by address: the owner moved each byte of the 1 MiB+3
  // ranges of the shm and unspec rounds (a put and a get each) itself; 1 and 4095 bytes travel
  // inline through the ring.
  EXPECT_EQ(b_->stats().single_copy_bytes, 2 * 2 * (kMiB + 3));
  EXPECT_EQ(a_->stats().single_copy_bytes, 0U);
  EXPECT_EQ(a_->stats().requests_completed, 3 * 3 * 2U);
  EXPECT_EQ(a_->stats().requests_failed, 0U);
  EXPECT_EQ(a_->stats().peers_connected, 1U);
  EXPECT_EQ(b_->stats().peers_connected, 1U);
}

TEST_P(EngineTest, PutGetOverEveryTransportTwoCopy) {
  EngineConfig c = config();
  c.shm.single_copy = false;
  auto a = make_engine(c);
  auto b = make_engine(c);
  ASSERT_TRUE(a && b);
  put_get_everywhere(*a, *b);
  EXPECT_EQ(a->stats().single_copy_bytes, 0U);
  EXPECT_EQ(b->stats().single_copy_bytes, 0U);
  EXPECT_EQ(a->stats().requests_failed, 0U);
  EXPECT_TRUE(a->close(kWait).ok());
  EXPECT_TRUE(b->close(kWait).ok());
}

// A kernel that refuses process_vm_readv/writev at the owner: each put and get falls back to the
// ring for that range and still completes with the right bytes.
TEST_P(EngineTest, RefusedSingleCopyFallsBackToTheRing) {
  p2p::vm_copy_simulate_refusal(true);
  for (std::uint64_t len : {std::uint64_t{1}, kMiB + 3}) {
    put_then_get(*a_, *b_, Transport::Shm, len);
    if (HasFatalFailure()) break;
  }
  p2p::vm_copy_simulate_refusal(false);
  EXPECT_EQ(b_->stats().single_copy_bytes, 0U);
  EXPECT_EQ(a_->stats().requests_failed, 0U);
}

TEST_P(EngineTest, ShmDisabledStillServesUnspecAndTcp) {
  EngineConfig c = config();
  c.shm.enable = false;
  auto a = make_engine(c);
  auto b = make_engine(c);
  ASSERT_TRUE(a && b);
  put_then_get(*a, *b, Transport::Unspec, 4095);
  put_then_get(*a, *b, Transport::Tcp, kMiB + 3);
  Guarded mem(16);
  MemoryRegion local = must_register(*a, mem.data(), 16);
  MemoryRegion remote_r = must_register(*b, mem.data(), 16);
  const RemoteRegion remote = import(remote_r);
  EXPECT_EQ(remote.transports(), std::vector<Transport>{Transport::Tcp});
  TransferOptions shm;
  shm.transport = Transport::Shm;
  auto put = a->put(local, 0, remote, 0, 16, shm);
  ASSERT_TRUE(put.ok());
  Status st = put->wait(kWait);
  EXPECT_EQ(st.code(), Errc::Unavailable) << st.to_string();
  EXPECT_CONTAINS(st.message(), "shm");
}

TEST_P(EngineTest, BatchPutAndGetOfThreeRanges) {
  Guarded src(4096), dst(4096), back(4096);
  src.fill(7);
  MemoryRegion src_r = must_register(*a_, src.data(), 4096);
  MemoryRegion back_r = must_register(*a_, back.data(), 4096);
  MemoryRegion dst_r = must_register(*b_, dst.data(), 4096);
  const RemoteRegion remote = import(dst_r);
  const std::vector<TransferRange> ranges = {{0, 100, 10}, {50, 200, 7}, {1000, 4063, 33}};

  auto put = a_->put(src_r, remote, ranges);
  ASSERT_TRUE(put.ok()) << put.status().to_string();
  ASSERT_TRUE(put->wait(kWait).ok());
  EXPECT_EQ(put->bytes(), 50U);
  std::vector<bool> written(4096, false);
  for (const auto& r : ranges) {
    EXPECT_EQ(dst.mismatch(r.remote_offset, r.length, 7, r.local_offset), std::nullopt);
    for (std::uint64_t i = 0; i < r.length; ++i) written[r.remote_offset + i] = true;
  }
  for (std::size_t i = 0; i < 4096; ++i) {
    if (!written[i]) {
      ASSERT_EQ(dst[i], std::byte{0}) << "byte " << i << " outside the ranges";
    }
  }
  EXPECT_TRUE(dst.guards_intact());

  // And back: the same ranges read from B into a second buffer.
  dst.fill_zero();
  for (const auto& r : ranges) {
    for (std::uint64_t i = 0; i < r.length; ++i) {
      dst[r.remote_offset + i] = testing::pattern_at(8, r.local_offset + i);
    }
  }
  auto get = a_->get(back_r, remote, ranges);
  ASSERT_TRUE(get.ok()) << get.status().to_string();
  ASSERT_TRUE(get->wait(kWait).ok());
  EXPECT_EQ(get->bytes(), 50U);
  std::vector<bool> read(4096, false);
  for (const auto& r : ranges) {
    EXPECT_EQ(back.mismatch(r.local_offset, r.length, 8, r.local_offset), std::nullopt);
    for (std::uint64_t i = 0; i < r.length; ++i) read[r.local_offset + i] = true;
  }
  for (std::size_t i = 0; i < 4096; ++i) {
    if (!read[i]) {
      ASSERT_EQ(back[i], std::byte{0}) << "byte " << i << " outside the ranges";
    }
  }
  EXPECT_TRUE(back.guards_intact());
}

// Ranges that continue each other in both regions travel as one range (merge_requests, TENT's),
// in whatever order the batch lists them; ranges adjacent on one side only stay apart. With
// merge_requests false every range travels alone. The bytes are the same either way.
TEST_P(EngineTest, BatchJoinsRangesThatContinueEachOtherOnBothSides) {
  EngineConfig unmerged_config = config();
  unmerged_config.merge_requests = false;
  auto unmerged = make_engine(unmerged_config);
  ASSERT_NE(unmerged, nullptr);
  // Three blocks adjacent on both sides, listed out of order (two joins); two adjacent only
  // locally and two adjacent only remotely (no join).
  const std::vector<TransferRange> ranges = {{200, 1200, 100}, {0, 1000, 100},  {100, 1100, 100},
                                             {400, 2000, 50},  {450, 2100, 50}, {600, 3000, 30},
                                             {700, 3030, 30}};
  for (TransferEngine* a : {a_.get(), unmerged.get()}) {
    const bool merging = a == a_.get();
    SCOPED_TRACE(merging ? "merge_requests true" : "merge_requests false");
    Guarded src(4096), dst(4096), back(4096);
    src.fill(11);
    MemoryRegion src_r = must_register(*a, src.data(), 4096);
    MemoryRegion back_r = must_register(*a, back.data(), 4096);
    MemoryRegion dst_r = must_register(*b_, dst.data(), 4096);
    const RemoteRegion remote = import(dst_r);
    const std::uint64_t before = a->stats().ranges_merged;

    auto put = a->put(src_r, remote, ranges);
    ASSERT_TRUE(put.ok()) << put.status().to_string();
    ASSERT_TRUE(put->wait(kWait).ok());
    EXPECT_EQ(put->bytes(), 460U);
    EXPECT_EQ(a->stats().ranges_merged - before, merging ? 2U : 0U);
    std::vector<std::uint8_t> written(4096, 0);
    for (const auto& r : ranges) {
      EXPECT_EQ(dst.mismatch(r.remote_offset, r.length, 11, r.local_offset), std::nullopt)
          << r.length << " bytes at +" << r.remote_offset;
      for (std::uint64_t i = 0; i < r.length; ++i) written[r.remote_offset + i] = 1;
    }
    for (std::size_t i = 0; i < 4096; ++i) {
      if (written[i] == 0) {
        ASSERT_EQ(dst[i], std::byte{0}) << "byte " << i << " outside the ranges";
      }
    }
    EXPECT_TRUE(dst.guards_intact());

    auto get = a->get(back_r, remote, ranges);
    ASSERT_TRUE(get.ok()) << get.status().to_string();
    ASSERT_TRUE(get->wait(kWait).ok());
    EXPECT_EQ(a->stats().ranges_merged - before, merging ? 4U : 0U);
    for (const auto& r : ranges) {
      EXPECT_EQ(back.mismatch(r.local_offset, r.length, 11, r.local_offset), std::nullopt)
          << r.length << " bytes at +" << r.local_offset;
    }
    EXPECT_TRUE(back.guards_intact());
  }
  EXPECT_TRUE(unmerged->close(kWait).ok());
}

TEST_P(EngineTest, BatchWithOneBadRangeIsRejectedWhole) {
  Guarded src(4096), dst(4096);
  src.fill(9);
  MemoryRegion src_r = must_register(*a_, src.data(), 4096);
  MemoryRegion dst_r = must_register(*b_, dst.data(), 4096);
  const RemoteRegion remote = import(dst_r);
  const auto submitted = a_->stats().requests_submitted;

  const std::vector<TransferRange> bad_remote = {{0, 0, 10}, {10, 10, 10}, {20, 4091, 10}};
  auto put = a_->put(src_r, remote, bad_remote);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), Errc::InvalidArgument);
  EXPECT_CONTAINS(put.status().message(), "put range 2: remote offset 4091 length 10");
  auto get = a_->get(src_r, remote, bad_remote);
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.status().code(), Errc::InvalidArgument);
  EXPECT_CONTAINS(get.status().message(), "get range 2");

  const std::vector<TransferRange> bad_local = {{0, 0, 10}, {4090, 100, 10}};
  put = a_->put(src_r, remote, bad_local);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), Errc::InvalidArgument);
  EXPECT_CONTAINS(put.status().message(), "put range 1: local offset 4090 length 10");
  EXPECT_EQ(a_->stats().requests_submitted, submitted);

  // A later put on the same connection completes after anything sent before it.
  auto fence = a_->put(src_r, 4095, remote, 4095, 1);
  ASSERT_TRUE(fence.ok());
  ASSERT_TRUE(fence->wait(kWait).ok());
  EXPECT_TRUE(dst.zero(0, 4095)) << "nothing of the rejected batches was written";
  EXPECT_EQ(dst.mismatch(4095, 1, 9, 4095), std::nullopt);
  EXPECT_TRUE(dst.guards_intact());
  EXPECT_EQ(src.mismatch(0, 4096, 9), std::nullopt);
}

TEST_P(EngineTest, RegisterMemoryBatchIsAllOrNothing) {
  Guarded mem(4096);
  const auto before = a_->stats().regions_registered;
  struct Case {
    RegistrationRequest bad;
    Errc code;
    const char* names;
  };
  const std::vector<Case> cases = {
      {{nullptr, 16, MemoryKind::Host, {}}, Errc::InvalidArgument, "data is null"},
      {{mem.data() + 64, 0, MemoryKind::Host, {}}, Errc::InvalidArgument, "length is 0"},
      {{mem.data() + 64, 16, MemoryKind::Host, {false, false}},
       Errc::InvalidArgument,
       "neither read nor write"},
      // No CUDA driver in this test's process: CUDA memory cannot be adopted.
      {{mem.data() + 64, 16, MemoryKind::Cuda, {}}, Errc::Unavailable, "libcuda.so.1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.names);
    const std::vector<RegistrationRequest> batch = {{mem.data(), 32, MemoryKind::Host, {}},
                                                    c.bad,
                                                    {mem.data() + 128, 32, MemoryKind::Host, {}}};
    auto r = a_->register_memory(batch);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code);
    EXPECT_CONTAINS(r.status().message(), "register_memory[1]");
    EXPECT_CONTAINS(r.status().message(), c.names);
    EXPECT_EQ(a_->stats().regions_registered, before);
    auto single = a_->register_memory(c.bad.data, c.bad.length, c.bad.kind, c.bad.access);
    ASSERT_FALSE(single.ok());
    EXPECT_EQ(single.status().code(), c.code);
    EXPECT_EQ(a_->stats().regions_registered, before);
  }
  {
    const std::vector<RegistrationRequest> good = {{mem.data(), 32, MemoryKind::Host, {}},
                                                   {mem.data() + 64, 32, MemoryKind::Host, {}},
                                                   {mem.data() + 128, 8, MemoryKind::Host, {}}};
    auto r = a_->register_memory(good);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->size(), 3U);
    EXPECT_EQ((*r)[2].data(), mem.data() + 128);
    EXPECT_EQ((*r)[2].length(), 8U);
    EXPECT_EQ(a_->stats().regions_registered, before + 3);
  }
  EXPECT_EQ(a_->stats().regions_registered, before) << "the destructors unregister";
}

TEST_P(EngineTest, UnregisteredRegionRefusesItsOldDescriptor) {
  Guarded src(64), dst(64);
  src.fill(3);
  MemoryRegion src_r = must_register(*a_, src.data(), 64);
  MemoryRegion dst_r = must_register(*b_, dst.data(), 64);
  const RemoteRegion remote = import(dst_r);
  ASSERT_TRUE(dst_r.unregister().ok());
  EXPECT_FALSE(dst_r.valid());
  EXPECT_EQ(b_->stats().regions_registered, 0U);
  const auto failed = a_->stats().requests_failed;
  for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Unspec}) {
    SCOPED_TRACE(to_string(t));
    TransferOptions opts;
    opts.transport = t;
    for (bool put : {true, false}) {
      auto r =
          put ? a_->put(src_r, 0, remote, 0, 64, opts) : a_->get(src_r, 0, remote, 0, 64, opts);
      ASSERT_TRUE(r.ok()) << r.status().to_string();  // only the owner knows
      Status st = r->wait(kWait);
      EXPECT_EQ(st.code(), Errc::InvalidArgument) << st.to_string();
      EXPECT_CONTAINS(st.message(), "not registered");
      EXPECT_EQ(r->bytes(), 0U);
    }
  }
  EXPECT_EQ(a_->stats().requests_failed, failed + 6);
  EXPECT_TRUE(dst.zero(0, 64));
  EXPECT_TRUE(dst.guards_intact());
  EXPECT_EQ(src.mismatch(0, 64, 3), std::nullopt) << "a failed get leaves local memory alone";
}

TEST_P(EngineTest, DeadlineInThePastMovesNothing) {
  Guarded src(4096), dst(4096);
  src.fill(5);
  MemoryRegion src_r = must_register(*a_, src.data(), 4096);
  MemoryRegion dst_r = must_register(*b_, dst.data(), 4096);
  dst.fill(6);
  const RemoteRegion remote = import(dst_r);
  TransferOptions late;
  late.deadline = Clock::now() - std::chrono::seconds(1);
  for (bool put : {true, false}) {
    auto r =
        put ? a_->put(src_r, 0, remote, 0, 4096, late) : a_->get(src_r, 0, remote, 0, 4096, late);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    Status st = r->wait(kWait);
    EXPECT_EQ(st.code(), Errc::Timeout) << st.to_string();
    EXPECT_CONTAINS(st.message(), "deadline");
    EXPECT_TRUE(r->done());
    EXPECT_EQ(r->bytes(), 0U);
  }
  EXPECT_EQ(dst.mismatch(0, 4096, 6), std::nullopt);
  EXPECT_EQ(src.mismatch(0, 4096, 5), std::nullopt);
  // A deadline in the future does not get in the way.
  TransferOptions soon;
  soon.deadline = Clock::now() + kWait;
  auto r = a_->put(src_r, 0, remote, 0, 4096, soon);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->wait(kWait).ok());
  EXPECT_EQ(dst.mismatch(0, 4096, 5), std::nullopt);
}

// Without an RDMA domain, rdma is refused at submission (no request is made); nvlink (cuda_ipc,
// always built) is refused by the selection table: it carries device memory only.
TEST_P(EngineTest, RdmaIsUnavailableAtSubmissionAndNvlinkRefusesHostMemory) {
  Guarded mem(64), dst(64);
  MemoryRegion local = must_register(*a_, mem.data(), 64);
  MemoryRegion dst_r = must_register(*b_, dst.data(), 64);
  const RemoteRegion remote = import(dst_r);
  TransferOptions rdma;
  rdma.transport = Transport::Rdma;
  TransferOptions nvlink;
  nvlink.transport = Transport::Nvlink;
  for (bool put : {true, false}) {
    const auto submitted = a_->stats().requests_submitted;
    auto r = put ? a_->put(local, 0, remote, 0, 64, rdma) : a_->get(local, 0, remote, 0, 64, rdma);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Errc::Unavailable);
    EXPECT_CONTAINS(r.status().message(), "rdma");
    EXPECT_EQ(a_->stats().requests_submitted, submitted);
    auto n =
        put ? a_->put(local, 0, remote, 0, 64, nvlink) : a_->get(local, 0, remote, 0, 64, nvlink);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    const Status st = n->wait(kWait);
    EXPECT_EQ(st.code(), Errc::Unavailable);
    EXPECT_CONTAINS(st.message(), "transport nvlink cannot reach peer");
    EXPECT_CONTAINS(st.message(), "does not carry host memory");
  }
}

// tcp's data streams open on the link's first use of tcp, by the side that opened the control
// connection: here A opened it (over shm, which uses no tcp stream), and B, the acceptor, is the
// first to use tcp, so it asks A for the streams. Both directions then carry bytes over tcp.
TEST_P(EngineTest, TcpStreamsOpenOnFirstUseWhicheverSideUsesItFirst) {
  put_then_get(*a_, *b_, Transport::Shm, 4096);
  EXPECT_EQ(a_->stats().of(Transport::Tcp).frames_sent, 0U) << "no tcp traffic yet";
  EXPECT_EQ(b_->stats().of(Transport::Tcp).frames_sent, 0U);
  // The acceptor's first tcp frame waits for the streams it asked A for.
  put_then_get(*b_, *a_, Transport::Tcp, kMiB + 3);
  put_then_get(*a_, *b_, Transport::Tcp, 70000);
  EXPECT_EQ(a_->stats().peers_connected, 1U) << "one link, its streams added to it";
  EXPECT_EQ(a_->stats().protocol_errors + b_->stats().protocol_errors, 0U);
}

// Work a lane accepted while it was busy starts High, then Medium, then Low (FIFO within a
// tier). The lanes are held while three puts to one range are submitted Low, Medium, High; each
// put travels in order on its route, so the range ends up with the bytes of the last one
// started. FIFO would leave High's bytes there; the tiers leave Low's. Over every route.
TEST_P(EngineTest, PrioritiesStartHighThenMediumThenLow) {
  for (Transport t : {Transport::Tcp, Transport::Shm}) {
    SCOPED_TRACE(std::string(to_string(t)));
    Guarded dst(4096);
    std::vector<Guarded> srcs;
    std::vector<MemoryRegion> src_r;
    const Priority order[] = {Priority::Low, Priority::Medium, Priority::High};
    for (int i = 0; i < 3; ++i) srcs.emplace_back(4096);
    for (int i = 0; i < 3; ++i) {
      srcs[i].fill(100 + static_cast<std::uint64_t>(i));
      src_r.push_back(must_register(*a_, srcs[i].data(), 4096));
    }
    MemoryRegion dst_r = must_register(*b_, dst.data(), dst.size());
    const RemoteRegion remote = import(dst_r);
    // Connected first, so that the three wait in the lane's tiers rather than for the link.
    TransferOptions opts;
    opts.transport = t;
    auto warm = a_->put(src_r[0], 0, remote, 0, 8, opts);
    ASSERT_TRUE(warm.ok() && warm->wait(kWait).ok());

    std::vector<Request> reqs;
    {
      auto held = detail::EngineCore::hold_lanes(*a_);
      for (int i = 0; i < 3; ++i) {
        opts.priority = order[i];
        auto r = a_->put(src_r[i], 0, remote, 0, 4096, opts);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        reqs.push_back(*r);
      }
      for (auto& r : reqs) EXPECT_FALSE(r.done()) << "nothing starts while the lanes are held";
    }
    ASSERT_TRUE(wait_all(reqs, kWait).ok());
    EXPECT_EQ(dst.mismatch(0, dst.size(), 100), std::nullopt)
        << "the Low put (submitted first) started last";
    EXPECT_TRUE(dst.guards_intact());
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineTest,
                         ::testing::Values(Mode{ProgressMode::Polling, 1},
                                           Mode{ProgressMode::EventDriven, 1},
                                           Mode{ProgressMode::Polling, 3},
                                           Mode{ProgressMode::EventDriven, 3}),
                         testing::mode_name);

}  // namespace
}  // namespace orbite
