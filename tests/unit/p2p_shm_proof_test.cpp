// Issue 27, finding 4: single copy reaches the process the kernel names when a peer proves itself
// (p2p/shm/peer_proof.h), never the pid the peer claims. Two shm lanes in this process, joined by
// their connect blobs as the engine joins them, each told that its peer is a forked child.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <orbite/config.h>

#include "../support/config_test_helpers.h"
#include "p2p/peer.h"
#include "p2p/shm/peer_proof.h"
#include "p2p/shm/shm_transport.h"
#include "p2p/stream.h"  // PeerLink owns a FramedSocket
#include "p2p_recorder.h"
#include "p2p_shm_pair.h"

namespace orbite::p2p {
namespace {

using detail::PeerLink;
using testing::Recorder;
using testing::unique_engine_id;

// A child process that only waits: the pid a lying peer claims. It is a fork of this process, so
// at any address of ours it holds what we held when it was forked.
class Bystander {
 public:
  Bystander() {
    if (::pipe(pipe_) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      char c;
      ::close(pipe_[1]);
      while (::read(pipe_[0], &c, 1) < 0) {
      }
      ::_exit(0);
    }
    ::close(pipe_[0]);
  }
  ~Bystander() {
    ::close(pipe_[1]);  // the child's read returns and it exits
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  int pipe_[2] = {-1, -1};
  pid_t pid_ = -1;
};

class ShmPeerProof : public ::testing::Test {
 protected:
  // Lanes for two engines whose links name `claimed` as the peer's pid.
  void make_lanes(pid_t claimed) {
    for (int i = 0; i < 2; ++i) {
      ids_[i] = detail::Identity{unique_engine_id(), "127.0.0.1:1", "host:boot", claimed};
    }
    testing::link_same_host(a_link_, b_link_, ids_);
    a_ = std::make_unique<ShmLane>(config_, ids_[0], a_rec_, a_rec_);
    b_ = std::make_unique<ShmLane>(config_, ids_[1], b_rec_, b_rec_);
  }

  // The engine's join: A offers, B accepts (and proves itself to A), A completes (and proves
  // itself to B). `to_b` may rewrite A's blob on its way.
  void join(const std::function<void(std::string&)>& to_b = {}) {
    auto offer = a_->offer(a_link_);
    ASSERT_TRUE(offer.has_value());
    std::string blob = *offer;
    if (to_b) to_b(blob);
    auto answer = b_->accept(b_link_, blob);
    ASSERT_TRUE(answer.ok()) << answer.status().to_string();
    ASSERT_TRUE(a_->complete(a_link_, *answer).ok());
  }

  void TearDown() override {
    for (PeerLink* l : {&a_link_, &b_link_}) {
      for (auto& e : l->endpoints) e.reset();
    }
    a_.reset();
    b_.reset();
  }

  PeerEndpoint* ep(PeerLink& link) { return link.endpoint(TransportId::Shm); }

  EngineConfig config_;
  detail::Identity ids_[2];
  Recorder a_rec_, b_rec_;
  PeerLink a_link_, b_link_;
  std::unique_ptr<ShmLane> a_, b_;
};

// Both peers claim the pid of a forked child. Reading "the peer's" buffer must read this process
// (the prover), which changed the buffer after the fork: read at the claimed pid, it would return
// the child's stale copy.
TEST_F(ShmPeerProof, SingleCopyReachesTheProvenProcessNotTheClaimedPid) {
  std::vector<char> theirs(4096, 'o');  // what the child holds
  Bystander child;
  ASSERT_GT(child.pid(), 0);
  std::memset(theirs.data(), 'n', theirs.size());  // what this process holds now
  make_lanes(child.pid());
  join();
  for (PeerLink* l : {&a_link_, &b_link_}) {
    SCOPED_TRACE(l == &a_link_ ? "A reads B" : "B reads A");
    ASSERT_NE(ep(*l), nullptr);
    EXPECT_TRUE(ep(*l)->one_sided_usable());
    std::vector<char> mine(theirs.size(), '\0');
    Status st = ep(*l)->read_peer(reinterpret_cast<std::byte*>(mine.data()),
                                  reinterpret_cast<std::uint64_t>(theirs.data()), theirs.size());
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(std::string(mine.begin(), mine.end()), std::string(theirs.size(), 'n'))
        << "single copy read another process than the one that proved itself";
  }
  EXPECT_EQ(a_->proofs().accepted(), 1U);
  EXPECT_EQ(b_->proofs().accepted(), 1U);
}

// A peer that does not prove itself (it answers with a nonce it was not given) gets no single
// copy: the side it failed to convince neither offers nor performs one with it, naming why, and
// writes nothing anywhere. The other direction, proven, still works.
TEST_F(ShmPeerProof, APeerWithoutAProofGetsNoSingleCopy) {
  Bystander child;
  ASSERT_GT(child.pid(), 0);
  make_lanes(child.pid());
  join([](std::string& blob) { blob.back() = static_cast<char>(blob.back() ^ 1); });
  ASSERT_NE(ep(a_link_), nullptr);
  EXPECT_FALSE(ep(a_link_)->one_sided_usable());
  std::vector<char> target(64, 't');
  const std::vector<char> data(64, 'd');
  Status st = ep(a_link_)->write_peer(reinterpret_cast<const std::byte*>(data.data()),
                                      reinterpret_cast<std::uint64_t>(target.data()), 64);
  EXPECT_EQ(st.code(), Errc::Unavailable) << st.to_string();
  EXPECT_CONTAINS(st.message(), "has not proven its process");
  EXPECT_CONTAINS(st.message(), "claiming pid " + std::to_string(child.pid()));
  EXPECT_EQ(std::string(target.begin(), target.end()), std::string(64, 't'));
  EXPECT_EQ(a_->proofs().accepted(), 0U);
  EXPECT_EQ(a_->proofs().refused(), 1U);
  // B was given A's true nonce: A proved itself to B.
  ASSERT_NE(ep(b_link_), nullptr);
  EXPECT_TRUE(ep(b_link_)->one_sided_usable());
}

// A nonce proves one link once: replayed, or presented for another link, it is refused.
TEST_F(ShmPeerProof, ANonceProvesOneLinkOnce) {
  PeerProofs proofs;
  const std::string id = unique_engine_id();
  ASSERT_TRUE(proofs.open(id).ok());
  int first = 0, second = 0;
  const std::string nonce = proofs.issue(&first);
  proofs.issue(&second);
  EXPECT_EQ(proofs.proven(&first), 0);
  ASSERT_TRUE(PeerProofs::prove(id, proofs.index(), nonce).ok());
  EXPECT_EQ(proofs.proven(&first), ::getpid());
  // Taken, then refused.
  ASSERT_TRUE(PeerProofs::prove(id, proofs.index(), nonce).ok());
  EXPECT_EQ(proofs.proven(&second), 0);
  EXPECT_EQ(proofs.accepted(), 1U);
  EXPECT_EQ(proofs.refused(), 1U);
  // Another engine id or number is another socket: a proof sent there never reaches this one.
  EXPECT_EQ(PeerProofs::prove(unique_engine_id(), proofs.index(), nonce).code(), Errc::Unavailable);
  EXPECT_EQ(PeerProofs::prove(id, proofs.index() + 1000, nonce).code(), Errc::Unavailable);
  EXPECT_EQ(proofs.refused(), 1U);
}

// A connect blob without its nonce (an engine of frame version 4) is refused as malformed.
TEST_F(ShmPeerProof, ABlobWithoutANonceIsRefused) {
  make_lanes(::getpid());
  auto offer = a_->offer(a_link_);
  ASSERT_TRUE(offer.has_value());
  // Ring capacity and name only: without the proof socket's number and the nonce (u32 + u32
  // length + 16 bytes).
  std::string old = offer->substr(0, offer->size() - kProofNonceBytes - 8);
  auto answer = b_->accept(b_link_, old);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), Errc::Protocol) << answer.status().to_string();
  EXPECT_CONTAINS(answer.status().message(), "shm connect blob");
  EXPECT_EQ(ep(b_link_), nullptr);
  a_->forget(a_link_);
}

}  // namespace
}  // namespace orbite::p2p
