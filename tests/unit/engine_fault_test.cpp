// TransferEngine against a misbehaving peer, played by hand over a raw TCP socket (FakePeer): a
// peer that never answers, one that corrupts the control stream, one that sends garbage instead
// of a handshake; and close() with work outstanding. Engine A always keeps serving engine B.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <orbite/transfer.h>

#include "../support/config_test_helpers.h"
#include "../support/descriptors.h"
#include "common/host_identity.h"
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

constexpr std::uint64_t kFakeRegion = 7;
constexpr std::uint64_t kFakeLength = 64;

class EngineFaultTest : public testing::EnginePairTest {
 protected:
  // A fake peer of A that completed its handshake; checks A's HelloAck.
  std::unique_ptr<FakePeer> connected_fake() {
    auto fake = std::make_unique<FakePeer>(a_->control_address());
    if (!fake->connected()) return nullptr;
    auto ack = fake->hello();
    EXPECT_TRUE(ack.ok()) << ack.status().to_string();
    if (!ack.ok()) return nullptr;
    EXPECT_EQ(ack->engine_id, a_->id());
    EXPECT_EQ(ack->host_id, this_host().host_id);
    EXPECT_EQ(ack->pid, static_cast<std::int64_t>(::getpid()));
    EXPECT_FALSE(ack->join.has_value());
    EXPECT_EQ(ack->transports.size(), 1U) << "tcp only: no shared memory with another host";
    if (!ack->transports.empty()) {
      EXPECT_EQ(ack->transports[0].id, p2p::TransportId::Tcp);
    }
    EXPECT_EQ(ack->eager_credit, a_->config().eager_credit_bytes);
    return fake;
  }

  // A get by A of [8, 40) of the fake's region.
  Request submit_get(const std::string& fake_id) {
    const RemoteRegion remote =
        foreign_descriptor(fake_id, FakePeer::kHostId, kFakeRegion, kFakeLength);
    auto get = a_->get(local_r_, 0, remote, 8, 32);
    EXPECT_TRUE(get.ok()) << get.status().to_string();
    return get.ok() ? *get : Request();
  }

  // submit_get(), and the fake reads and checks the Get frame.
  Request get_from_fake(FakePeer& fake) {
    Request get = submit_get(fake.id());
    if (!get.valid()) return get;
    std::string payload;
    auto h = fake.read_frame(payload);
    EXPECT_TRUE(h.ok()) << h.status().to_string();
    if (h.ok()) {
      EXPECT_EQ(h->type, FrameType::Get);
      EXPECT_EQ(h->a, kFakeRegion);
      EXPECT_EQ(h->b, 1U);
      EXPECT_EQ(h->c, 8U);
      EXPECT_EQ(h->d, 32U);
      EXPECT_TRUE(payload.empty()) << "no single copy over TCP";
    }
    return get;
  }

  // A put from A to B still works, byte for byte.
  // `get` (from get_from_fake) ends ConnectionLost naming `named`, that link's one protocol
  // error, and A goes on serving B.
  void expect_fake_failed(Request& get, std::uint64_t errors_before, const std::string& named,
                          std::uint64_t seed) {
    Status st = get.wait(kWait);
    EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
    EXPECT_CONTAINS(st.message(), named);
    EXPECT_EQ(a_->stats().protocol_errors, errors_before + 1);
    expect_a_serves_b(seed);
  }

  void expect_a_serves_b(std::uint64_t seed) {
    Guarded src(5000), dst(5000);
    src.fill(seed);
    MemoryRegion src_r = must_register(*a_, src.data(), src.size());
    MemoryRegion dst_r = must_register(*b_, dst.data(), dst.size());
    auto put = a_->put(src_r, 0, import(dst_r), 0, 5000);
    ASSERT_TRUE(put.ok()) << put.status().to_string();
    Status st = put->wait(kWait);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(dst.mismatch(0, 5000, seed), std::nullopt);
    EXPECT_TRUE(dst.guards_intact());
  }
};

TEST_P(EngineFaultTest, SilentPeerGetTimesOutAndKeepsRunning) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  Request get = get_from_fake(*fake);
  ASSERT_TRUE(get.valid());

  Status st = get.wait(std::chrono::milliseconds(50));
  EXPECT_EQ(st.code(), Errc::Timeout) << st.to_string();
  EXPECT_FALSE(get.done());
  EXPECT_FALSE(get.status().has_value());
  EXPECT_FALSE(get.test());

  // The peer goes away: the request fails, and nothing landed in the local buffer.
  fake->close();
  st = get.wait(kWait);
  EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
  EXPECT_TRUE(get.done());
  EXPECT_EQ(get.bytes(), 0U);
  EXPECT_EQ(local_.mismatch(0, 64, 21), std::nullopt);
  EXPECT_TRUE(local_.guards_intact());
  EXPECT_EQ(a_->stats().peers_lost, 1U);
  expect_a_serves_b(31);
}

TEST_P(EngineFaultTest, CorruptControlFrameFailsThatPeerOnly) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  const auto errors = a_->stats().protocol_errors;
  Request get = get_from_fake(*fake);
  ASSERT_TRUE(get.valid());

  // An Ack header whose magic is wrong.
  FrameHeader h;
  h.type = FrameType::Ack;
  std::string garbage = FakePeer::frame(h);
  garbage[0] = 'X';
  garbage[1] = 'Y';
  ASSERT_TRUE(fake->send_bytes(garbage).ok());

  Status st = get.wait(kWait);
  EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
  EXPECT_CONTAINS(st.message(), "protocol error");
  EXPECT_CONTAINS(st.message(), "magic");
  EXPECT_EQ(a_->stats().protocol_errors, errors + 1);
  EXPECT_EQ(a_->stats().peers_lost, 1U);
  EXPECT_TRUE(fake->closed_by_engine());
  EXPECT_EQ(local_.mismatch(0, 64, 21), std::nullopt);

  // New work for the lost peer fails at once; work for B goes on.
  Request again = submit_get(fake->id());
  ASSERT_TRUE(again.valid());
  st = again.wait(kWait);
  EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
  expect_a_serves_b(32);
}

TEST_P(EngineFaultTest, GarbageInsteadOfHelloIsDropped) {
  struct Garbage {
    const char* what;
    std::string bytes;
  };
  FrameHeader put;
  put.type = FrameType::Put;
  FrameHeader hello;
  hello.type = FrameType::Hello;
  std::string bad_handshake =
      p2p::encode_handshake(FakePeer::hello_body("fa4e0000000000000000000000000001"));
  bad_handshake[0] = static_cast<char>(bad_handshake[0] ^ 1);
  std::string old_version = FakePeer::frame(
      hello, p2p::encode_handshake(FakePeer::hello_body("fa4e0000000000000000000000000002")));
  old_version[2] = 1;  // the frame version before connect blobs
  const std::vector<Garbage> cases = {
      {"bytes", std::string(p2p::kFrameHeaderBytes, 'Z')},
      {"a Hello of frame version 1", old_version},
      {"a Put before Hello", FakePeer::frame(put)},
      {"a Hello with a malformed handshake", FakePeer::frame(hello, bad_handshake)},
  };
  std::uint64_t seed = 40;
  for (const Garbage& g : cases) {
    SCOPED_TRACE(g.what);
    const auto errors = a_->stats().protocol_errors;
    const auto peers = a_->stats().peers_connected;
    FakePeer fake(a_->control_address());
    ASSERT_TRUE(fake.connected());
    ASSERT_TRUE(fake.send_bytes(g.bytes).ok());
    EXPECT_TRUE(fake.closed_by_engine());
    EXPECT_EQ(a_->stats().protocol_errors, errors + 1);
    EXPECT_EQ(a_->stats().peers_connected, peers);
    expect_a_serves_b(seed++);
  }
}

TEST_P(EngineFaultTest, ForcedShmTowardsAnotherHostIsUnavailable) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  const RemoteRegion remote =
      foreign_descriptor(fake->id(), FakePeer::kHostId, kFakeRegion, kFakeLength);
  EXPECT_EQ(remote.transports(), std::vector<Transport>{Transport::Tcp});
  TransferOptions shm;
  shm.transport = Transport::Shm;
  for (bool put : {true, false}) {
    auto r =
        put ? a_->put(local_r_, 0, remote, 0, 16, shm) : a_->get(local_r_, 0, remote, 0, 16, shm);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    Status st = r->wait(kWait);
    EXPECT_EQ(st.code(), Errc::Unavailable) << st.to_string();
    EXPECT_CONTAINS(st.message(), "shm");
  }
  EXPECT_EQ(local_.mismatch(0, 64, 21), std::nullopt);
}

// A peer of another frame version, as an initiator sees it: a listener played by hand that either
// answers A's Hello with a version-1 frame or closes the connection without answering. A's put
// fails with a message that names the versions, and A goes on serving B.
TEST_P(EngineFaultTest, PeerOfAnotherFrameVersionFailsTheHandshakeClearly) {
  for (bool answers : {true, false}) {
    SCOPED_TRACE(answers ? "answers with version 1" : "closes without answering");
    auto listener = net::listen_tcp(net::HostPort{"127.0.0.1", 0});
    ASSERT_TRUE(listener.ok()) << listener.status().to_string();
    auto where = net::local_endpoint(listener->get());
    ASSERT_TRUE(where.ok());
    char id[33];
    std::snprintf(id, sizeof id, "01d0%020x%08x", ::getpid(), answers ? 1 : 2);
    const RemoteRegion remote = foreign_descriptor(id, FakePeer::kHostId, kFakeRegion, kFakeLength,
                                                   net::format_host_port(where->host, where->port));
    auto put = a_->put(local_r_, 0, remote, 0, 16);
    ASSERT_TRUE(put.ok()) << put.status().to_string();

    net::Fd conn;
    const Deadline deadline = Deadline::after(kWait);
    while (!conn.valid() && !deadline.expired()) {
      auto fd = net::accept_nonblocking(listener->get());
      ASSERT_TRUE(fd.ok()) << fd.status().to_string();
      if (fd->valid()) {
        conn = std::move(*fd);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    ASSERT_TRUE(conn.valid()) << "A never connected";
    std::array<std::byte, p2p::kFrameHeaderBytes> hdr{};
    ASSERT_TRUE(net::read_exact(conn.get(), hdr, Deadline::after(kWait), "Hello").ok());
    auto hello = p2p::decode_header(hdr.data());
    ASSERT_TRUE(hello.ok()) << hello.status().to_string();
    EXPECT_EQ(hello->type, FrameType::Hello);
    if (answers) {
      FrameHeader ack;
      ack.type = FrameType::HelloAck;
      std::string reply = FakePeer::frame(ack);
      reply[2] = 1;
      ASSERT_TRUE(
          net::write_all(conn.get(),
                         std::span(reinterpret_cast<const std::byte*>(reply.data()), reply.size()),
                         Deadline::after(kWait), "reply")
              .ok());
    }
    conn.reset();
    Status st = put->wait(kWait);
    EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
    if (answers) {
      EXPECT_CONTAINS(st.message(),
                      "frame version 1, this engine speaks " + std::to_string(p2p::kFrameVersion));
    } else {
      EXPECT_CONTAINS(st.message(), "before answering the handshake");
      EXPECT_CONTAINS(st.message(), "speaks version " + std::to_string(p2p::kFrameVersion));
    }
  }
  expect_a_serves_b(77);
}

// TransportControl frames on the control connection are checked like every other frame: one for
// a transport this engine lacks, one of a kind its transport does not define, and one on a data
// stream are protocol errors that fail that peer only.
TEST_P(EngineFaultTest, BadTransportControlFailsThatPeerOnly) {
  struct Case {
    const char* what;
    std::uint64_t transport;
    std::uint64_t kind;
    bool on_control;
    const char* named;
  };
  const Case cases[] = {
      {"an unknown transport", 9, 1, true, "transport 9, which this engine does not have"},
      {"a kind shm does not define", 0, 7, true, "shm control message 7"},
      {"a kind tcp does not define", 3, 5, true, "tcp control message 5"},
      {"on a data stream", 3, 1, false, "TransportControl outside the control connection"},
  };
  std::uint64_t seed = 90;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto fake = connected_fake();
    ASSERT_NE(fake, nullptr);
    const auto errors = a_->stats().protocol_errors;
    Request get = get_from_fake(*fake);
    ASSERT_TRUE(get.valid());
    FrameHeader h;
    h.type = FrameType::TransportControl;
    h.a = c.transport;
    h.b = c.kind;
    const std::string frame = FakePeer::frame(h);
    ASSERT_TRUE((c.on_control ? fake->send_control_bytes(frame) : fake->send_bytes(frame)).ok());
    Status st = get.wait(kWait);
    EXPECT_EQ(st.code(), Errc::ConnectionLost) << st.to_string();
    EXPECT_CONTAINS(st.message(), c.named);
    EXPECT_EQ(a_->stats().protocol_errors, errors + 1);
    expect_a_serves_b(seed++);
  }
}

// Frames of `type` with sequences first..last on a tag no receive is posted for, each announcing
// `length` bytes (an Eager frame's length is its payload: 0 here).
std::string unmatched_frames(FrameType type, std::uint64_t first, std::uint64_t last,
                             std::uint64_t length) {
  std::string frames;
  frames.reserve((last - first + 1) * p2p::kFrameHeaderBytes);
  for (std::uint64_t seq = first; seq <= last; ++seq) {
    FrameHeader h;
    h.type = type;
    h.id = 1000 + seq;
    h.a = p2p::pack_comm_tag(0, 5);
    h.b = seq;
    h.c = length;
    frames += FakePeer::frame(h);
  }
  return frames;
}

// Issue 24, defect 7: rendezvous announcements that no receive matches were queued without a
// count limit. One past p2p::kMaxUnexpectedRts fails that peer's link, naming the limit.
TEST_P(EngineFaultTest, UnmatchedRendezvousAnnouncementsAreBounded) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  const auto errors = a_->stats().protocol_errors;
  Request get = get_from_fake(*fake);
  ASSERT_TRUE(get.valid());
  const std::string frames = unmatched_frames(FrameType::Rts, 0, p2p::kMaxUnexpectedRts, 1 << 20);
  ASSERT_TRUE(fake->send_bytes(frames).ok());
  expect_fake_failed(get, errors,
                     "more than 65536 rendezvous announcements (Rts) wait for receives", 40);
}

// Issue 27, finding 5: unexpected eager messages are bounded by count as well as by bytes. Each
// one costs its header (p2p::kFrameHeaderBytes) against the credit, so a peer sending zero-byte
// messages that no receive matches is held to eager_credit_bytes / 48 of them: all of those are
// queued, and one more fails that peer's link, naming the credit.
TEST_P(EngineFaultTest, UnexpectedZeroByteMessagesAreBoundedByCount) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  const auto errors = a_->stats().protocol_errors;
  Request get = get_from_fake(*fake);
  ASSERT_TRUE(get.valid());
  const std::uint64_t fit = a_->config().eager_credit_bytes / p2p::kFrameHeaderBytes;
  const std::string frames = unmatched_frames(FrameType::Eager, 0, fit - 1, 0);
  const auto received = [&] { return a_->stats().of(Transport::Tcp).frames_received; };
  const auto before = received();
  ASSERT_TRUE(fake->send_bytes(frames).ok());
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (received() < before + fit && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(received(), before + fit);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the last one's checks ran
  EXPECT_FALSE(get.done()) << "the link failed within the credit: "
                           << (get.status() ? get.status()->to_string() : "");
  EXPECT_EQ(a_->stats().protocol_errors, errors);

  ASSERT_TRUE(fake->send_bytes(unmatched_frames(FrameType::Eager, fit, fit, 0)).ok());
  expect_fake_failed(get, errors,
                     "over the credit of " + std::to_string(a_->config().eager_credit_bytes), 41);
}

// Issue 26: the announced rendezvous (RtsRma) exists only where the transport runs the write
// itself (RDMA); over tcp (a fake peer's stream) it fails that peer's link, naming the transport.
// An Abandon naming no announced message is ignored (its receive may have ended already).
TEST_P(EngineFaultTest, AnAnnouncedRendezvousOverTcpFailsThatPeerOnly) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  const auto errors = a_->stats().protocol_errors;
  Request get = get_from_fake(*fake);
  ASSERT_TRUE(get.valid());
  FrameHeader abandon;
  abandon.type = FrameType::Abandon;
  abandon.id = 77;
  abandon.a = static_cast<std::uint64_t>(Errc::Internal);
  ASSERT_TRUE(fake->send_bytes(FakePeer::frame(abandon)).ok());
  ASSERT_TRUE(fake->send_bytes(unmatched_frames(FrameType::RtsRma, 0, 0, 4096)).ok());
  expect_fake_failed(get, errors, "RtsRma frame of 4096 bytes with a payload of 0 bytes over tcp",
                     43);
}

// Messages that arrive ahead of a gap in the sequence wait for it, at most 65536 of them per link:
// a peer that never fills the gap (here: sequence 0 never comes) fails its link at the next one.
TEST_P(EngineFaultTest, MessagesHeldAheadOfASequenceGapAreBounded) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  const auto errors = a_->stats().protocol_errors;
  Request get = get_from_fake(*fake);
  ASSERT_TRUE(get.valid());
  constexpr std::uint64_t kHeld = 65536;
  ASSERT_TRUE(fake->send_bytes(unmatched_frames(FrameType::Rts, 1, kHeld + 1, 64)).ok());
  expect_fake_failed(get, errors,
                     "message sequence " + std::to_string(kHeld + 1) + " while expecting 0", 42);
}

TEST_P(EngineFaultTest, ClosedEngineCancelsNewWork) {
  Guarded dst(64);
  MemoryRegion dst_r = must_register(*b_, dst.data(), 64);
  const RemoteRegion remote = import(dst_r);
  ASSERT_TRUE(a_->close(kWait).ok());
  auto put = a_->put(local_r_, 0, remote, 0, 64);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), Errc::Cancelled) << put.status().to_string();
  auto get = a_->get(local_r_, 0, remote, 0, 64);
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.status().code(), Errc::Cancelled) << get.status().to_string();
  Guarded more(64);
  auto reg = a_->register_memory(more.data(), 64);
  ASSERT_FALSE(reg.ok());
  EXPECT_EQ(reg.status().code(), Errc::Cancelled) << reg.status().to_string();
  EXPECT_TRUE(a_->close(kWait).ok()) << "close() may be called again";
  EXPECT_TRUE(dst.zero(0, 64));
}

TEST_P(EngineFaultTest, CloseWithAGetOutstandingIsUnquiesced) {
  auto fake = connected_fake();
  ASSERT_NE(fake, nullptr);
  Request get = get_from_fake(*fake);
  ASSERT_TRUE(get.valid());

  Status st = a_->close(std::chrono::milliseconds(200));
  EXPECT_EQ(st.code(), Errc::Unquiesced) << st.to_string();
  EXPECT_TRUE(get.done()) << "close() finishes what it could not wait for";
  ASSERT_TRUE(get.status().has_value());
  EXPECT_EQ(get.status()->code(), Errc::Cancelled) << get.status()->to_string();
  EXPECT_EQ(get.wait(kWait).code(), get.status()->code());
  EXPECT_EQ(local_.mismatch(0, 64, 21), std::nullopt);

  Guarded dst(64);
  MemoryRegion dst_r = must_register(*b_, dst.data(), 64);
  auto put = a_->put(local_r_, 0, import(dst_r), 0, 64);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), Errc::Cancelled) << put.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineFaultTest,
                         ::testing::Values(Mode{ProgressMode::Polling, 1},
                                           Mode{ProgressMode::EventDriven, 1},
                                           Mode{ProgressMode::Polling, 3},
                                           Mode{ProgressMode::EventDriven, 3}),
                         testing::mode_name);

// Issue 27, finding 3: the control listener's two faults. Connections beyond
// tcp.max_pending_handshakes wait in the kernel's backlog instead of being accepted, and are
// taken once the silent ones go.
TEST(EngineControlListener, HandshakesBeyondTheCapWaitInTheBacklogUntilSilentOnesGo) {
  EngineConfig c = testing::loopback_config(testing::Mode{});
  c.tcp.max_pending_handshakes = 2;
  auto a = make_engine(c);
  ASSERT_TRUE(a);
  std::vector<std::unique_ptr<FakePeer>> silent;
  for (int i = 0; i < 2; ++i) silent.push_back(std::make_unique<FakePeer>(a->control_address()));
  FakePeer third(a->control_address());
  ASSERT_TRUE(third.connected());
  const Deadline rested = Deadline::after(kWait);
  while (a->stats().control_listener_rests == 0 && !rested.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(a->stats().control_listener_rests, 1U);
  Result<p2p::Handshake> ack = Status::error(Errc::Internal, "not answered");
  std::thread hello([&] { ack = third.hello(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(a->stats().peers_connected, 0U) << "the third Hello was read while two were pending";
  silent.clear();
  hello.join();
  ASSERT_TRUE(ack.ok()) << ack.status().to_string();
  EXPECT_EQ(ack->engine_id, a->id());
  EXPECT_EQ(a->stats().peers_connected, 1U);
  EXPECT_TRUE(a->close(kWait).ok());
}

// Out of file descriptors, the listener rests 100 ms at a time instead of spinning the lane,
// and the waiting connection is taken once descriptors are free.
TEST(EngineControlListener, OutOfDescriptorsTheListenerRestsAndRecovers) {
  auto a = make_engine(testing::loopback_config(testing::Mode{ProgressMode::EventDriven, 1}));
  ASSERT_TRUE(a);
  auto where = net::parse_host_port(a->control_address());
  ASSERT_TRUE(where.ok());
  int waiting = -1;
  {
    testing::DescriptorsExhausted exhausted;
    exhausted.free_one();
    waiting = testing::connect_loopback(where->port);
    ASSERT_GE(waiting, 0) << std::strerror(errno);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    // About ten rests in that second; a listener reported again at once makes thousands.
    EXPECT_GE(a->stats().control_listener_rests, 1U);
    EXPECT_LE(a->stats().control_listener_rests, 30U);
  }
  net::Fd held(waiting);
  FakePeer fake(a->control_address());
  ASSERT_TRUE(fake.connected());
  auto ack = fake.hello();
  ASSERT_TRUE(ack.ok()) << ack.status().to_string();
  EXPECT_EQ(a->stats().peers_connected, 1U);
  held.reset();  // a pending accept keeps close() draining until its connect_timeout
  EXPECT_TRUE(a->close(kWait).ok());
}

// Issue 24: a field whose feature is not built is refused by name when the engine starts (with
// RDMA off it concerns nothing, so nothing refuses it).
TEST(EngineConfigRefusal, FieldsOfFeaturesNotBuiltAreRefusedByName) {
  if (!ORBITE_WITH_RDMA) GTEST_SKIP() << "built without RDMA: nothing reads these fields";
  EngineConfig c = testing::loopback_config(testing::Mode{});
  c.rdma.enable = rdma::RdmaEnable::Auto;
  c.rdma.gpu_source_reuse = true;
  auto refused = TransferEngine::create(c);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::Configuration) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("rdma.gpu_source_reuse"), std::string::npos)
      << refused.status().to_string();
  c.rdma.enable = rdma::RdmaEnable::Off;
  EXPECT_TRUE(TransferEngine::create(c).ok());
}

}  // namespace
}  // namespace orbite
