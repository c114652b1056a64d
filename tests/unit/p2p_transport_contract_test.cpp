// The transport contract (src/p2p/transport.h), one suite instantiated once per transport as UCX
// instantiates its tests per resource: two endpoints of the transport under test, joined the way
// that transport joins them (tcp: a connected socket pair adopted by both lanes; shm: the offer /
// accept / complete of its connect blobs; rdma: the same on softverbs, its control messages
// carried between the two sides by the recorders), driven through the contract only, with a
// recording FrameHandler standing in for the protocol. cuda_ipc joins the list when it exists.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <orbite/config.h>

#include "../support/config_test_helpers.h"
#include "p2p/peer.h"
#include "p2p/poller.h"
#include "p2p/shm/shm_transport.h"
#include "p2p/tcp/tcp_transport.h"
#include "p2p_recorder.h"

#if ORBITE_WITH_RDMA && defined(ORBITE_SOFTVERBS_DIR) && defined(ORBITE_CONTRACT_RDMA_ONLY)
#include <cstdlib>
#include <deque>

#include "p2p/rdma/engine.h"
#include "p2p/rdma/lane.h"
#define ORBITE_CONTRACT_RDMA 1
#endif

namespace orbite::p2p {
namespace {

using detail::PeerLink;
using detail::SendItem;
using detail::Sink;
using testing::Arrived;
using testing::Recorder;

// One side: its lane transport, its link to the other side, and what its protocol saw.
struct Side {
  Poller poller;
  Recorder handler;
  PeerLink link;
  std::unique_ptr<LaneTransport> lane;
  PeerEndpoint* ep = nullptr;

  std::deque<std::pair<std::uint64_t, std::string>> inbox;  // control messages for `lane`

  int pump() {
    // Delivered here, between passes, as the protocol would: never inside the sender's call.
    while (!inbox.empty()) {
      auto [kind, body] = std::move(inbox.front());
      inbox.pop_front();
      if (Status st = lane->on_control(link, kind, body); !st.ok()) {
        handler.failures.push_back(st);
      }
    }
    int work = lane->progress() + poller.poll();
    poller.flush_deferred();
    poller.end_pass();
    return work;
  }
};

struct Param {
  const char* name;
  TransportId id;
};

class TransportContract : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    config_.tcp.interface = "lo";
    for (Side* s : {&a_, &b_}) ASSERT_TRUE(s->poller.init().ok());
    ids_[0] = detail::Identity{std::string(32, 'a'), "127.0.0.1:1", "host:boot", ::getpid()};
    ids_[1] = detail::Identity{std::string(32, 'b'), "127.0.0.1:2", "host:boot", ::getpid()};
    a_.link.ep = ids_[1];
    b_.link.ep = ids_[0];
    for (Side* s : {&a_, &b_}) {
      s->link.same_host = true;
      s->link.state = PeerLink::State::Established;
    }
    if (GetParam().id == TransportId::Tcp) {
      join_tcp();
    } else if (GetParam().id == TransportId::Shm) {
      join_shm();
    } else {
      join_rdma();
    }
    ASSERT_FALSE(HasFatalFailure());
    a_.ep = a_.link.endpoint(GetParam().id);
    b_.ep = b_.link.endpoint(GetParam().id);
    ASSERT_NE(a_.ep, nullptr);
    ASSERT_NE(b_.ep, nullptr);
  }

  void TearDown() override {
    // Endpoints go before their lanes, and both before the pollers they registered with.
    for (Side* s : {&a_, &b_}) {
      for (auto& e : s->link.endpoints) e.reset();
      if (s->lane) s->lane->shutdown(Status::error(Errc::ConnectionLost, "the test ends"));
      s->lane.reset();
      s->poller.end_pass();
    }
  }

  void join_rdma() {
#ifdef ORBITE_CONTRACT_RDMA
    // softverbs' default device (one soft_0 on 127.0.0.1) unless the environment names one. This
    // binary runs the rdma instance alone, so softverbs is the first verbs library it loads.
    ::setenv("SOFTVERBS_CONFIG", "", 0);
    config_.rdma.enable = rdma::RdmaEnable::On;
    config_.rdma.ibverbs_library = ORBITE_SOFTVERBS_DIR "/libibverbs.so.1";
    a_.handler.to_peer = &b_.inbox;
    b_.handler.to_peer = &a_.inbox;
    int i = 0;
    for (Side* s : {&a_, &b_}) {
      auto engine = rdma::RdmaEngine::install(config_, ids_[i]);
      ASSERT_TRUE(engine.ok()) << engine.status().to_string();
      domains_[i] = std::make_unique<rdma::RdmaDomain>(std::move(*engine));
      auto lane =
          std::make_unique<rdma::RdmaLane>(domains_[i]->engine(), domains_[i]->cache(), ids_[i],
                                           regions_[i], s->poller, s->handler, s->handler);
      ASSERT_TRUE(lane->init().ok());
      s->lane = std::move(lane);
      ++i;
    }
    auto offer = a_.lane->offer(a_.link);
    ASSERT_TRUE(offer.has_value());
    auto answer = b_.lane->accept(b_.link, *offer);
    ASSERT_TRUE(answer.ok()) << answer.status().to_string();
    ASSERT_TRUE(a_.lane->complete(a_.link, *answer).ok());
#else
    GTEST_SKIP() << "built without RDMA or softverbs";
#endif
  }

  void join_tcp() {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    int i = 0;
    for (Side* s : {&a_, &b_}) {
      s->lane = std::make_unique<TcpLane>(config_, ids_[i], s->poller, s->handler, s->handler);
      ASSERT_TRUE(s->lane->accept(s->link, "").ok());
      ASSERT_TRUE(s->lane->adopt_connection(s->link, sv[i], 0).ok());
      ++i;
    }
  }

  void join_shm() {
    a_.lane = std::make_unique<ShmLane>(config_, ids_[0], a_.handler, a_.handler);
    b_.lane = std::make_unique<ShmLane>(config_, ids_[1], b_.handler, b_.handler);
    auto offer = a_.lane->offer(a_.link);
    ASSERT_TRUE(offer.has_value());
    auto answer = b_.lane->accept(b_.link, *offer);
    ASSERT_TRUE(answer.ok()) << answer.status().to_string();
    ASSERT_TRUE(a_.lane->complete(a_.link, *answer).ok());
  }

  // Passes on both sides until `done` or a bound passes.
  bool pump_until(const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      a_.pump();
      b_.pump();
    }
    return true;
  }

  static SendItem frame(FrameType type, std::uint64_t id, std::string owned = {},
                        const std::byte* data = nullptr, std::uint64_t len = 0) {
    SendItem item;
    item.header.type = type;
    item.header.id = id;
    item.owned = std::move(owned);
    item.data = data;
    item.data_len = len;
    item.header.payload_len = static_cast<std::uint32_t>(item.owned.size() + len);
    return item;
  }

  EngineConfig config_;
  detail::Identity ids_[2];
#ifdef ORBITE_CONTRACT_RDMA
  // Declared before the sides: the lanes go first (TearDown), then the domains and engines.
  RegionRegistry regions_[2];
  std::unique_ptr<rdma::RdmaDomain> domains_[2];
#endif
  Side a_, b_;
};

TEST_P(TransportContract, CapabilitiesNameTheTransportAndItsLimits) {
  const Capabilities& c = a_.ep->caps();
  EXPECT_EQ(c.id, GetParam().id);
  EXPECT_EQ(a_.lane->caps().id, GetParam().id);
  EXPECT_NE(c.reach & kReachSameHost, 0) << "both reach a peer on this host";
  EXPECT_TRUE(c.host_memory);
  EXPECT_GT(c.max_frame_payload, 0U);
  if (GetParam().id != TransportId::Rdma) {  // rdma's eager limit is its frame slot
    EXPECT_EQ(c.eager_limit, GetParam().id == TransportId::Tcp ? config_.tcp.eager_limit
                                                               : config_.shm.eager_limit);
  }
  EXPECT_GE(a_.ep->paths(), 1U);
}

TEST_P(TransportContract, FramesArriveInOrderWithTheirPayloads) {
  constexpr int kFrames = 200;
  std::vector<std::string> bodies;
  for (int i = 0; i < kFrames; ++i)
    bodies.push_back(std::string((i * 37) % 3000, char('a' + i % 26)));
  for (int i = 0; i < kFrames; ++i) {
    // Half the frames carry an owned payload, half borrow theirs.
    a_.ep->send(i % 2 == 0 ? frame(FrameType::Reject, i, bodies[i])
                           : frame(FrameType::Reject, i, {},
                                   reinterpret_cast<const std::byte*>(bodies[i].data()),
                                   bodies[i].size()));
  }
  ASSERT_TRUE(pump_until([&] { return b_.handler.arrived.size() == kFrames; }))
      << b_.handler.arrived.size() << " of " << kFrames;
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(b_.handler.arrived[i].id, static_cast<std::uint64_t>(i));
    EXPECT_EQ(b_.handler.arrived[i].payload, bodies[i]) << "frame " << i;
  }
  // Every frame is reported written once (rdma: at its SEND's completion, which may come after
  // the frame arrived).
  ASSERT_TRUE(pump_until([&] { return a_.handler.written >= kFrames; }));
  EXPECT_EQ(a_.handler.written, static_cast<std::uint64_t>(kFrames));
  EXPECT_TRUE(a_.handler.failures.empty() && b_.handler.failures.empty());
  ASSERT_TRUE(pump_until([&] { return !a_.ep->busy() && !b_.ep->busy(); }));
}

TEST_P(TransportContract, BulkDataLandsInTheSinkTheProtocolNames) {
  const std::uint64_t len = std::min<std::uint64_t>(a_.ep->caps().max_frame_payload, 192 * 1024);
  std::vector<std::byte> src(len), dst(len + 16, std::byte{0xee});
  for (std::uint64_t i = 0; i < len; ++i) src[i] = static_cast<std::byte>(i * 131 + 7);
  b_.handler.direct = dst.data();
  SendItem item = frame(FrameType::Data, 9, {}, src.data(), len);
  a_.ep->send(std::move(item));
  ASSERT_TRUE(pump_until([&] { return b_.handler.arrived.size() == 1; }));
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), len), 0);
  for (std::uint64_t i = len; i < dst.size(); ++i) EXPECT_EQ(dst[i], std::byte{0xee});
}

TEST_P(TransportContract, BothDirectionsAtOnce) {
  for (int i = 0; i < 50; ++i) {
    a_.ep->send(frame(FrameType::Ack, 1000 + i, "from a"));
    b_.ep->send(frame(FrameType::Ack, 2000 + i, "from b"));
  }
  ASSERT_TRUE(pump_until(
      [&] { return a_.handler.arrived.size() == 50 && b_.handler.arrived.size() == 50; }));
  EXPECT_EQ(a_.handler.arrived.back().id, 2049U);
  EXPECT_EQ(b_.handler.arrived.back().id, 1049U);
  EXPECT_EQ(a_.handler.arrived.front().payload, "from b");
}

TEST_P(TransportContract, SendNowIsAllOrNothing) {
  FrameHeader h;
  h.type = FrameType::Eager;
  h.id = 5;
  std::string body = "small";
  h.payload_len = static_cast<std::uint32_t>(body.size());
  iovec iov{body.data(), body.size()};
  const bool took = a_.ep->send_now(h, std::span<const iovec>(&iov, 1));
  if (!took) {
    // The transport always queues: nothing arrives from a refused send_now.
    for (int i = 0; i < 100; ++i) b_.pump();
    EXPECT_TRUE(b_.handler.arrived.empty());
    return;
  }
  ASSERT_TRUE(pump_until([&] { return b_.handler.arrived.size() == 1; }));
  EXPECT_EQ(b_.handler.arrived[0].payload, body);
  EXPECT_EQ(a_.handler.written, 0U) << "a frame handed over at once reports no frame_written";
}

TEST_P(TransportContract, OneSidedAccessIsNativeOrAnExplicitUnavailable) {
  std::vector<std::byte> theirs(4096), mine(4096);
  for (std::size_t i = 0; i < theirs.size(); ++i) theirs[i] = static_cast<std::byte>(i);
  Status st = a_.ep->read_peer(mine.data(), reinterpret_cast<std::uint64_t>(theirs.data()), 4096);
  if (!a_.ep->one_sided_usable()) {
    // No access by address (rdma's one-sided access runs through start_rma and its grants).
    EXPECT_EQ(st.code(), Errc::Unavailable) << st.to_string();
    EXPECT_EQ(a_.ep->write_peer(mine.data(), 0, 1).code(), Errc::Unavailable);
    EXPECT_TRUE(a_.ep->caps().rma || !a_.ep->caps().one_sided)
        << "one-sided by capability, yet by neither address nor start_rma";
    return;
  }
  // Both "processes" are this one: the peer's memory is ours.
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(mine, theirs);
}

TEST_P(TransportContract, AClosedEndpointReleasesWhatItWasGiven) {
  detail::RegionRecord region;
  ASSERT_TRUE(region.pin());
  a_.ep->close(false);
  SendItem item = frame(FrameType::Data, 1, {}, nullptr, 0);
  item.pinned = &region;
  a_.ep->send(std::move(item));
  a_.pump();
  EXPECT_EQ(region.pins.load(), 0) << "the pin of a frame that can no longer leave is released";
  EXPECT_FALSE(a_.ep->busy());
}

// rdma runs in a binary of its own (p2p_contract_rdma_test): the first verbs library a process
// loads is the one it keeps, and the other suites of p2p_unit_test load the system's.
#ifndef ORBITE_CONTRACT_RDMA
INSTANTIATE_TEST_SUITE_P(Transports, TransportContract,
                         ::testing::Values(Param{"tcp", TransportId::Tcp},
                                           Param{"shm", TransportId::Shm}),
                         [](const ::testing::TestParamInfo<Param>& p) { return p.param.name; });
#else
INSTANTIATE_TEST_SUITE_P(Transports, TransportContract,
                         ::testing::Values(Param{"rdma", TransportId::Rdma}),
                         [](const ::testing::TestParamInfo<Param>& p) { return p.param.name; });
#endif

}  // namespace
}  // namespace orbite::p2p
