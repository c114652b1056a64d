// TransferEngine's closes with work outstanding: close() that keeps waiting instead of cancelling,
// and the directional close_source() and close_requester(). A peer played by hand (FakePeer)
// holds work open exactly as long as a test needs; engine B is an ordinary peer of A.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include <orbite/transfer.h>

#include "../support/config_test_helpers.h"
#include "engine_test_support.h"
#include "p2p/frame.h"

namespace orbite {
namespace {

using p2p::FrameHeader;
using p2p::FrameType;
using testing::FakePeer;
using testing::foreign_descriptor;
using testing::Guarded;
using testing::import;
using testing::kWait;
using testing::make_engine;
using testing::Mode;
using testing::must_register;

constexpr auto kShort = std::chrono::milliseconds(150);

class EngineCloseTest : public testing::EnginePairTest {
 protected:
  std::unique_ptr<FakePeer> connected_fake() {
    auto fake = std::make_unique<FakePeer>(a_->control_address());
    if (!fake->connected()) return nullptr;
    auto ack = fake->hello();
    EXPECT_TRUE(ack.ok()) << ack.status().to_string();
    return ack.ok() ? std::move(fake) : nullptr;
  }

  // A get by A of 32 bytes of a region of the fake, which reads the Get frame and never answers
  // until told to; *wire_id is the frame's id.
  Request pending_get(FakePeer& fake, std::uint64_t* wire_id) {
    const RemoteRegion remote = foreign_descriptor(fake.id(), FakePeer::kHostId, 7, 64);
    auto get = a_->get(local_r_, 0, remote, 8, 32);
    EXPECT_TRUE(get.ok()) << get.status().to_string();
    if (!get.ok()) return Request();
    std::string payload;
    auto h = fake.read_frame(payload);
    EXPECT_TRUE(h.ok()) << h.status().to_string();
    if (!h.ok()) return Request();
    EXPECT_EQ(h->type, FrameType::Get);
    *wire_id = h->id;
    return *get;
  }

  // The fake ends that get with an error answer.
  static void refuse(FakePeer& fake, std::uint64_t wire_id) {
    FrameHeader ack;
    ack.type = FrameType::Ack;
    ack.id = wire_id;
    ack.a = static_cast<std::uint64_t>(Errc::InvalidArgument);
    ASSERT_TRUE(fake.send_bytes(FakePeer::frame(ack, "refused by the fake")).ok());
  }

  // A put of 5000 bytes from `from` into a fresh region of `to`: its status, and when it
  // succeeded, every byte checked.
  static Status put_between(TransferEngine& from, TransferEngine& to, std::uint64_t seed) {
    Guarded src(5000), dst(5000);
    src.fill(seed);
    MemoryRegion src_r = must_register(from, src.data(), src.size());
    MemoryRegion dst_r = must_register(to, dst.data(), dst.size());
    auto put = from.put(src_r, 0, import(dst_r), 0, 5000);
    if (!put.ok()) return put.status();
    Status st = put->wait(kWait);
    if (st.ok()) {
      EXPECT_EQ(dst.mismatch(0, 5000, seed), std::nullopt);
    } else {
      EXPECT_TRUE(dst.zero(0, 5000)) << "a refused put wrote nothing";
    }
    EXPECT_TRUE(dst.guards_intact());
    return st;
  }
};

TEST_P(EngineCloseTest, CloseThatKeepsWaitingCancelsNothingAndALaterCloseFinishes) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  std::uint64_t wire_id = 0;
  Request get = pending_get(*fake, &wire_id);
  ASSERT_TRUE(get.valid());

  Status st = a_->close(kShort, CloseTimeout::KeepWaiting);
  EXPECT_EQ(st.code(), Errc::Unquiesced) << st.to_string();
  EXPECT_CONTAINS(st.message(), "nothing was cancelled");
  EXPECT_FALSE(get.done()) << "the get keeps running";
  st = a_->close(kShort, CloseTimeout::KeepWaiting);
  EXPECT_EQ(st.code(), Errc::Unquiesced) << "a second close keeps waiting: " << st.to_string();
  EXPECT_FALSE(get.done());
  auto put = a_->put(local_r_, 0, foreign_descriptor(fake->id(), FakePeer::kHostId, 7, 64), 0, 8);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), Errc::Cancelled) << "admission stays fenced";

  // The peer answers: the get ends with the peer's answer, not with the close.
  refuse(*fake, wire_id);
  st = get.wait(kWait);
  EXPECT_EQ(st.code(), Errc::InvalidArgument) << st.to_string();
  EXPECT_CONTAINS(st.message(), "refused by the fake");
  EXPECT_EQ(local_.mismatch(0, 64, 21), std::nullopt) << "nothing landed";
  EXPECT_TRUE(a_->close(kWait).ok()) << "the later close finds nothing left and closes";
}

TEST_P(EngineCloseTest, CloseSourceRefusesPeersAndWaitsForTheAccessesAlreadyStarted) {
  constexpr std::uint64_t kBig = 32ULL << 20;  // far more than loopback's socket buffers
  Guarded big(kBig);
  big.fill(5);
  MemoryRegion big_r = must_register(*a_, big.data(), kBig);
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  // The fake asks for the whole region and reads one Data frame: A is serving it, and the rest
  // stays queued behind a socket nobody reads.
  FrameHeader get;
  get.type = FrameType::Get;
  get.id = 1;
  get.a = big_r.export_descriptor().region_id();
  get.b = 1;
  get.d = kBig;
  ASSERT_TRUE(fake->send_bytes(FakePeer::frame(get)).ok());
  std::string payload;
  auto first = fake->read_frame(payload);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_EQ(first->type, FrameType::Data);

  Status st = a_->close_source(kShort);
  EXPECT_EQ(st.code(), Errc::Unquiesced) << st.to_string();
  EXPECT_CONTAINS(st.message(), "access(es) by peers");

  // Peers are refused, on regions registered before and after the close, and nothing moves.
  Guarded b_side(64);
  MemoryRegion b_r = must_register(*b_, b_side.data(), 64);
  auto refused = b_->put(b_r, 0, import(big_r), 0, 64);
  ASSERT_TRUE(refused.ok()) << refused.status().to_string();
  st = refused->wait(kWait);
  EXPECT_EQ(st.code(), Errc::Cancelled) << st.to_string();
  EXPECT_CONTAINS(st.message(), "close_source");
  auto refused_get = b_->get(b_r, 0, import(big_r), 0, 64);
  ASSERT_TRUE(refused_get.ok());
  EXPECT_EQ(refused_get->wait(kWait).code(), Errc::Cancelled);
  EXPECT_TRUE(b_side.zero(0, 64));
  st = put_between(*b_, *a_, 9);
  EXPECT_EQ(st.code(), Errc::Cancelled) << "a region registered later: " << st.to_string();
  EXPECT_EQ(big.mismatch(0, kBig, 5), std::nullopt);

  // A's own requests go on: it still writes into B.
  EXPECT_TRUE(put_between(*a_, *b_, 11).ok());

  // The fake reads the rest: every byte is A's, then the access has ended.
  std::uint64_t got = first->payload_len;
  EXPECT_EQ(big.mismatch(0, payload.size(), 5), std::nullopt);
  for (;;) {
    auto h = fake->read_frame(payload);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    if (h->type == FrameType::Ack) {
      EXPECT_EQ(h->a, 0U) << payload;
      break;
    }
    ASSERT_EQ(h->type, FrameType::Data);
    ASSERT_EQ(h->b, got);
    ASSERT_EQ(std::memcmp(payload.data(), big.data() + got, payload.size()), 0) << "at " << got;
    got += payload.size();
  }
  EXPECT_EQ(got, kBig);
  st = a_->close_source(kWait);
  EXPECT_TRUE(st.ok()) << "called again, it keeps waiting: " << st.to_string();
}

TEST_P(EngineCloseTest, CloseRequesterRefusesNewPutsAndGetsAndWaitsForAcceptedOnes) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  std::uint64_t wire_id = 0;
  Request get = pending_get(*fake, &wire_id);
  ASSERT_TRUE(get.valid());

  Status st = a_->close_requester(kShort);
  EXPECT_EQ(st.code(), Errc::Unquiesced) << st.to_string();
  EXPECT_CONTAINS(st.message(), "1 put/get request(s)");
  EXPECT_FALSE(get.done()) << "nothing is cancelled";

  st = put_between(*a_, *b_, 13);
  EXPECT_EQ(st.code(), Errc::Cancelled) << st.to_string();
  EXPECT_CONTAINS(st.message(), "close_requester");
  // Peers' accesses to A go on.
  EXPECT_TRUE(put_between(*b_, *a_, 15).ok());

  refuse(*fake, wire_id);
  EXPECT_EQ(get.wait(kWait).code(), Errc::InvalidArgument);
  st = a_->close_requester(kWait);
  EXPECT_TRUE(st.ok()) << "called again, it keeps waiting: " << st.to_string();
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineCloseTest,
                         ::testing::Values(Mode{ProgressMode::Polling, 1},
                                           Mode{ProgressMode::EventDriven, 3}),
                         testing::mode_name);

}  // namespace
}  // namespace orbite
