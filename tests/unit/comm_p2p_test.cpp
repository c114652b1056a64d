// Send/recv between two communicators in this process (threads, an in-process store): the
// same-host rendezvous paths, including the split copy and its fallbacks when the kernel refuses
// single copy, checked byte for byte.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include <orbite/communicator.h>
#include <orbite/store.h>
#include <orbite/transfer.h>

#include "../support/local_comms.h"
#include "p2p/shm/vm_copy.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;

std::vector<std::uint8_t> pattern(std::uint64_t n, unsigned seed) {
  std::vector<std::uint8_t> out(n);
  for (std::uint64_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>((i * 131 + seed) >> 3);
  return out;
}

class CommP2p : public ::testing::Test {
 protected:
  virtual EngineConfig config() const {
    EngineConfig config;
    config.tcp.interface = "lo";
    config.bootstrap.timeout = 30s;
    return config;
  }

  void SetUp() override {
    comms_ = testing::local_communicators(2, this->config());
    ASSERT_EQ(comms_.size(), 2U);
  }
  void TearDown() override { p2p::vm_copy_simulate_refusal(false); }

  // Rank 0 sends `n` bytes to rank 1 and rank 1 to rank 0 at once; every byte is checked.
  void exchange(std::uint64_t n, Transport transport) {
    std::vector<std::vector<std::uint8_t>> out = {pattern(n, 1), pattern(n, 2)};
    std::vector<std::vector<std::uint8_t>> in(2, std::vector<std::uint8_t>(n + 8, 0xee));
    TransferOptions opts;
    opts.transport = transport;
    std::vector<std::thread> threads;
    std::vector<Status> results(4);
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        auto& c = comms_[static_cast<size_t>(r)];
        auto recv = c.irecv(in[static_cast<size_t>(r)].data(), n, 1 - r, 7, opts);
        auto send = c.isend(out[static_cast<size_t>(r)].data(), n, 1 - r, 7, opts);
        results[static_cast<size_t>(2 * r)] = recv.ok() ? recv->wait(30s) : recv.status();
        results[static_cast<size_t>(2 * r + 1)] = send.ok() ? send->wait(30s) : send.status();
        if (recv.ok() && results[static_cast<size_t>(2 * r)].ok() && recv->bytes() != n) {
          results[static_cast<size_t>(2 * r)] =
              Status::error(Errc::Internal, "received " + std::to_string(recv->bytes()));
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const Status& st : results) ASSERT_TRUE(st.ok()) << n << " bytes: " << st.to_string();
    for (int r = 0; r < 2; ++r) {
      const auto& got = in[static_cast<size_t>(r)];
      const auto& want = out[static_cast<size_t>(1 - r)];
      for (std::uint64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], want[i]) << "rank " << r << " byte " << i << " of " << n;
      }
      for (std::uint64_t i = n; i < n + 8; ++i) ASSERT_EQ(got[i], 0xee) << "past the message";
    }
  }

  // Each rank sent `per_rank` bytes to the other over shm and nothing went over tcp. A byte
  // copied by one side (single copy) counts once, on that side; a byte through a ring counts on
  // both: the two engines together counted at least every byte once.
  void expect_shm_carried(std::uint64_t per_rank) {
    std::uint64_t counted = 0;
    for (auto& c : comms_) {
      const EngineStats s = c.engine().stats();
      counted += s.of(Transport::Shm).bytes_sent + s.of(Transport::Shm).bytes_received;
      EXPECT_EQ(s.of(Transport::Tcp).frames_sent, 0U);
      EXPECT_EQ(s.of(Transport::Tcp).frames_received, 0U);
    }
    EXPECT_GE(counted, 2 * per_rank);
  }

  std::vector<Communicator> comms_;
};

TEST_F(CommP2p, RendezvousSizesOverSharedMemory) {
  for (std::uint64_t n :
       {std::uint64_t{100000}, std::uint64_t{256 * 1024}, std::uint64_t{3000017}}) {
    exchange(n, Transport::Shm);
  }
  EXPECT_GT(comms_[0].engine().stats().single_copy_bytes, 0U);
  expect_shm_carried(100000U + 256 * 1024 + 3000017U);
}

TEST_F(CommP2p, RefusedSingleCopyFallsBackForEveryPart) {
  p2p::vm_copy_simulate_refusal(true);
  for (std::uint64_t n :
       {std::uint64_t{100000}, std::uint64_t{256 * 1024}, std::uint64_t{3000017}}) {
    exchange(n, Transport::Shm);
  }
  EXPECT_EQ(comms_[0].engine().stats().single_copy_bytes, 0U);
  EXPECT_EQ(comms_[1].engine().stats().single_copy_bytes, 0U);
  // Every byte went through the rings instead, none over tcp.
  expect_shm_carried(100000U + 256 * 1024 + 3000017U);
}

TEST_F(CommP2p, TcpBetweenSameHostRanks) {
  std::uint64_t total = 0;
  for (std::uint64_t n :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{70000}, std::uint64_t{5000011}}) {
    exchange(n, Transport::Tcp);
    total += n;
  }
  // Forced tcp between ranks of one host: every byte crossed the tcp transport, none the rings.
  for (auto& c : comms_) {
    const EngineStats s = c.engine().stats();
    EXPECT_GE(s.of(Transport::Tcp).bytes_sent, total);
    EXPECT_GE(s.of(Transport::Tcp).bytes_received, total);
    EXPECT_EQ(s.of(Transport::Shm).frames_sent, 0U);
    EXPECT_EQ(s.of(Transport::Shm).frames_received, 0U);
    EXPECT_EQ(s.single_copy_bytes, 0U);
  }
}

// A sender far ahead of its receiver: 400 eager-sized messages (6.4 MiB) before any receive is
// posted. Credit holds the unexpected bytes at the receiver within eager_credit_bytes (256 KiB);
// the rest waits as rendezvous, and every message still arrives in order.
TEST_F(CommP2p, CreditBoundsUnexpectedEagerBytes) {
  for (Transport transport : {Transport::Shm, Transport::Tcp}) {
    constexpr int kCount = 400;
    constexpr std::uint64_t kSize = 16 * 1024;
    TransferOptions opts;
    opts.transport = transport;
    std::vector<std::vector<std::uint8_t>> out;
    for (int i = 0; i < kCount; ++i) out.push_back(pattern(kSize, static_cast<unsigned>(i)));
    std::vector<std::vector<std::uint8_t>> in(kCount, std::vector<std::uint8_t>(kSize));
    std::vector<Request> sends;
    for (int i = 0; i < kCount; ++i) {
      auto s = comms_[0].isend(out[static_cast<size_t>(i)].data(), kSize, 1, 3, opts);
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      sends.push_back(*s);
    }
    // Let everything that can arrive, arrive, before the receiver posts anything.
    for (int i = 0; i < 200; ++i) {
      for (auto& s : sends) s.test();
      std::this_thread::sleep_for(1ms);
    }
    const EngineStats before = comms_[1].engine().stats();
    EXPECT_LE(before.unexpected_bytes_peak, comms_[1].config().eager_credit_bytes);
    EXPECT_GT(before.unexpected_bytes, 0U) << "some messages went eagerly";
    std::vector<Request> recvs;
    for (int i = 0; i < kCount; ++i) {
      auto r = comms_[1].irecv(in[static_cast<size_t>(i)].data(), kSize, 0, 3, opts);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      recvs.push_back(*r);
    }
    ASSERT_TRUE(wait_all(recvs, 60s).ok());
    ASSERT_TRUE(wait_all(sends, 60s).ok());
    for (int i = 0; i < kCount; ++i) {
      ASSERT_EQ(in[static_cast<size_t>(i)], out[static_cast<size_t>(i)]) << "message " << i;
    }
    EXPECT_LE(comms_[1].engine().stats().unexpected_bytes_peak,
              comms_[1].config().eager_credit_bytes);
    EXPECT_EQ(comms_[1].engine().stats().unexpected_bytes, 0U);
  }
}

// Several TCP streams per peer: the extra streams join after the first, and rendezvous Data is
// striped over them; messages of every size still arrive whole and in order.
class CommP2pStreams : public CommP2p {
 protected:
  EngineConfig config() const override {
    EngineConfig c = CommP2p::config();
    c.tcp.streams_per_peer = 3;
    c.shm.enable = false;
    return c;
  }
};

TEST_F(CommP2pStreams, StripedRendezvousArrivesWhole) {
  for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{70000}, std::uint64_t{5000011},
                          std::uint64_t{16 * 1024 * 1024 + 7}}) {
    exchange(n, Transport::Unspec);
  }
  EXPECT_EQ(comms_[0].engine().stats().single_copy_bytes, 0U);
  EXPECT_EQ(comms_[0].engine().stats().protocol_errors, 0U);
}

// A put opens its session with its Put frame: its Data stays behind it on the same stream (an
// earlier version striped it, and Data could overtake the Put on another stream: a protocol
// error). Gets stripe their replies. Large enough to be striped, many times over.
TEST_F(CommP2pStreams, StripedPutsAndGetsKeepTheirOrder) {
  constexpr std::uint64_t kLen = 5 * 1024 * 1024 + 11;
  std::vector<std::uint8_t> src = pattern(kLen, 5), dst(kLen, 0), back(kLen, 0);
  TransferEngine& a = comms_[0].engine();
  TransferEngine& b = comms_[1].engine();
  auto src_r = a.register_memory(src.data(), kLen);
  auto back_r = a.register_memory(back.data(), kLen);
  auto dst_r = b.register_memory(dst.data(), kLen);
  ASSERT_TRUE(src_r.ok() && back_r.ok() && dst_r.ok());
  auto remote = RemoteRegion::from_bytes(dst_r->export_descriptor().bytes());
  ASSERT_TRUE(remote.ok()) << remote.status().to_string();
  TransferOptions tcp;
  tcp.transport = Transport::Tcp;
  for (int round = 0; round < 12; ++round) {
    auto put = a.put(*src_r, 0, *remote, 0, kLen, tcp);
    ASSERT_TRUE(put.ok()) << put.status().to_string();
    ASSERT_TRUE(put->wait(30s).ok()) << "round " << round;
    auto get = a.get(*back_r, 0, *remote, 0, kLen, tcp);
    ASSERT_TRUE(get.ok()) << get.status().to_string();
    ASSERT_TRUE(get->wait(30s).ok()) << "round " << round;
  }
  EXPECT_EQ(dst, src);
  EXPECT_EQ(back, src);
  EXPECT_EQ(a.stats().protocol_errors + b.stats().protocol_errors, 0U);
}

}  // namespace
}  // namespace orbite
