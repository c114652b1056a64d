// The shm handshake when the accepting peer leaves before the initiator completes it: the
// accepter writes into the initiator's ring as soon as it has accepted, and closing the link
// unlinks the accepter's own ring's name, so the initiator's completion finds that name gone.
// What the accepter sent is delivered all the same, and only then does sending fail the link.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include <orbite/config.h>

#include "p2p/peer.h"
#include "p2p/shm/connect_blob.h"
#include "p2p/shm/shm_transport.h"
#include "p2p/stream.h"  // PeerLink owns a FramedSocket
#include "p2p_recorder.h"
#include "p2p_shm_pair.h"

namespace orbite::p2p {
namespace {

using detail::PeerLink;
using detail::SendItem;
using testing::Recorder;

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

SendItem frame(std::uint64_t id, std::string owned) {
  SendItem item;
  item.header.type = FrameType::Eager;
  item.header.id = id;
  item.header.payload_len = static_cast<std::uint32_t>(owned.size());
  item.owned = std::move(owned);
  return item;
}

class ShmHandshake : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      ids_[i] =
          detail::Identity{testing::unique_engine_id(), "127.0.0.1:1", "host:boot", ::getpid()};
    }
    testing::link_same_host(a_link_, b_link_, ids_);
    a_ = std::make_unique<ShmLane>(config_, ids_[0], a_rec_, a_rec_);
    b_ = std::make_unique<ShmLane>(config_, ids_[1], b_rec_, b_rec_);
  }

  void TearDown() override {
    for (PeerLink* l : {&a_link_, &b_link_}) {
      for (auto& e : l->endpoints) e.reset();
    }
    a_.reset();
    b_.reset();
  }

  // A's passes until `done` or a bound passes.
  template <class F>
  bool pump_a_until(F done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      a_->progress();
    }
    return true;
  }

  // The first two steps of the join: A's offer (into offer_), then B's answer (into answer_).
  void offer() {
    auto blob = a_->offer(a_link_);
    ASSERT_TRUE(blob.has_value());
    offer_ = *blob;
  }
  void offer_and_answer() {
    ASSERT_NO_FATAL_FAILURE(offer());
    auto blob = b_->accept(b_link_, offer_);
    ASSERT_TRUE(blob.ok()) << blob.status().to_string();
    answer_ = *blob;
  }
  static ShmConnectBlob decoded(const std::string& blob) {
    auto d = decode_shm_blob(blob);
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    return d.ok() ? *d : ShmConnectBlob{};
  }

  EngineConfig config_;
  detail::Identity ids_[2];
  std::string offer_, answer_;
  Recorder a_rec_, b_rec_;
  PeerLink a_link_, b_link_;
  std::unique_ptr<ShmLane> a_, b_;
};

TEST_F(ShmHandshake, WhatAPeerSentBeforeItLeftMidHandshakeIsDeliveredThenSendingFailsTheLink) {
  ASSERT_NO_FATAL_FAILURE(offer_and_answer());
  PeerEndpoint* b_ep = b_link_.endpoint(TransportId::Shm);
  ASSERT_NE(b_ep, nullptr);
  b_ep->send(frame(1, "first"));
  b_ep->send(frame(2, "second"));
  b_->progress();
  // B closes the link and its lane: its ring's name goes with them.
  for (auto& e : b_link_.endpoints) e.reset();
  b_.reset();

  Status st = a_->complete(a_link_, answer_);
  ASSERT_TRUE(st.ok()) << "a peer that left is not a failed handshake: " << st.to_string();
  PeerEndpoint* a_ep = a_link_.endpoint(TransportId::Shm);
  ASSERT_NE(a_ep, nullptr) << "A keeps a receive-only endpoint to drain what B sent";
  ASSERT_TRUE(pump_a_until([&] { return a_rec_.arrived.size() == 2; }));
  EXPECT_EQ(a_rec_.arrived[0].id, 1U);
  EXPECT_EQ(a_rec_.arrived[0].payload, "first");
  EXPECT_EQ(a_rec_.arrived[1].id, 2U);
  EXPECT_EQ(a_rec_.arrived[1].payload, "second");
  EXPECT_TRUE(a_rec_.failures.empty()) << "nothing to send yet: no failure";

  EXPECT_FALSE(a_ep->send_now(FrameHeader{}, {})) << "nothing can be written to a peer that left";
  a_ep->send(frame(3, "to nobody"));
  EXPECT_TRUE(a_ep->busy());
  ASSERT_TRUE(pump_a_until([&] { return !a_rec_.failures.empty(); }));
  ASSERT_EQ(a_rec_.failures.size(), 1U);
  EXPECT_EQ(a_rec_.failures[0].code(), Errc::ConnectionLost) << a_rec_.failures[0].to_string();
  EXPECT_NE(a_rec_.failures[0].message().find("closed its shared-memory ring"), std::string::npos)
      << a_rec_.failures[0].message();
  EXPECT_EQ(a_rec_.written, 0U);
}

// Any other failure to open the peer's ring is still the handshake's failure: here an answer
// whose capacity does not match the ring it names.
TEST_F(ShmHandshake, AnAnswerNamingARingOfAnotherSizeFailsTheHandshake) {
  ASSERT_NO_FATAL_FAILURE(offer_and_answer());
  ShmConnectBlob forged = decoded(answer_);
  forged.bytes *= 2;
  Status st = a_->complete(a_link_, encode_shm_blob(forged));
  EXPECT_EQ(st.code(), Errc::Protocol) << st.to_string();
  EXPECT_NE(st.message().find("expected"), std::string::npos) << st.message();
  EXPECT_EQ(a_link_.endpoint(TransportId::Shm), nullptr);
}

// The names of both rings go even when the side that would remove them never gets to: the
// accepter removes the initiator's once it has mapped it (the initiator may die before it
// completes), and the initiator removes the answer's, which is named after its own, when its link
// fails without an answer (the accepter may die before answering).
TEST_F(ShmHandshake, NoRingNameOutlivesAHandshakeThatNeverCompletes) {
  ASSERT_NO_FATAL_FAILURE(offer());
  const std::string offered = decoded(offer_).name;
  ASSERT_TRUE(exists("/dev/shm" + offered));
  auto answer = b_->accept(b_link_, offer_);
  ASSERT_TRUE(answer.ok()) << answer.status().to_string();
  const std::string answered = decoded(*answer).name;
  EXPECT_FALSE(exists("/dev/shm" + offered)) << "the accepter mapped it: the name can go";
  ASSERT_TRUE(exists("/dev/shm" + answered));
  EXPECT_EQ(answered, offered + "-a");
  // A's link fails before B's answer arrives; B (still alive here) has not removed its name.
  a_->forget(a_link_);
  EXPECT_FALSE(exists("/dev/shm" + answered))
      << "the initiator removes the name the answer was given";
  EXPECT_EQ(a_link_.endpoint(TransportId::Shm), nullptr);
}

// A refused Hello (HelloNack: a crossed connection, a link already up or failed) leaves the
// offer's ring to its sender, which may be dead: the refusing side removes the name it read.
TEST_F(ShmHandshake, ARefusedOfferLosesItsRingName) {
  ASSERT_NO_FATAL_FAILURE(offer());
  const std::string offered = decoded(offer_).name;
  ASSERT_TRUE(exists("/dev/shm" + offered));
  b_->decline(b_link_, "not a blob");  // a malformed one changes nothing
  EXPECT_TRUE(exists("/dev/shm" + offered));
  b_->decline(b_link_, offer_);
  EXPECT_FALSE(exists("/dev/shm" + offered));
  // The sender, alive after all, drops its offer as usual.
  EXPECT_TRUE(a_->complete(a_link_, std::nullopt).ok());
  EXPECT_EQ(a_link_.endpoint(TransportId::Shm), nullptr);
}

// An answer naming a ring that was not named after the offer is not this handshake's answer.
TEST_F(ShmHandshake, AnAnswerNamingAnotherRingFailsTheHandshake) {
  ASSERT_NO_FATAL_FAILURE(offer_and_answer());
  ShmConnectBlob forged = decoded(answer_);
  forged.name += "x";
  Status st = a_->complete(a_link_, encode_shm_blob(forged));
  EXPECT_EQ(st.code(), Errc::Protocol) << st.to_string();
  EXPECT_NE(st.message().find("not the one named after ours"), std::string::npos) << st.message();
  EXPECT_EQ(a_link_.endpoint(TransportId::Shm), nullptr);
}

}  // namespace
}  // namespace orbite::p2p
