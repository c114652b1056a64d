// The store server's limits against a peer that holds resources rather than sending garbage: a
// value-sized frame announced before the hello, a connection that never speaks, more
// connections than the cap, a client parking requests without end, a table filled without end,
// and a process out of file descriptors (issue 27, findings 1 and 2).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../support/descriptors.h"
#include "../support/store_fixtures.h"
#include "bootstrap/store_protocol.h"
#include "common/clock.h"
#include "common/net.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;
namespace sp = store_protocol;

std::unique_ptr<TcpStoreServer> start_with(Duration frame_timeout, std::uint32_t max_connections,
                                           std::uint64_t max_table_bytes = 1 * kGiB) {
  TcpStoreServerOptions options;
  options.token = "tok";
  options.frame_timeout = frame_timeout;
  options.max_connections = max_connections;
  options.max_table_bytes = max_table_bytes;
  auto server = TcpStoreServer::start(options);
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return server.ok() ? std::move(*server) : nullptr;
}

net::Fd raw(const TcpStoreServer& server) {
  auto hp = net::parse_host_port(server.address());
  auto fd = net::connect_tcp(*hp, Deadline::after(5s));
  EXPECT_TRUE(fd.ok()) << fd.status().to_string();
  return fd.ok() ? std::move(*fd) : net::Fd();
}

void send_bytes(const net::Fd& fd, const std::string& bytes) {
  ASSERT_TRUE(
      net::write_all(fd.get(), std::as_bytes(std::span(bytes)), Deadline::after(5s), "test").ok());
}

using testing::closed_by_server;

// Appends what the server sends to `answer` until it holds `text`, the connection closes or
// `bound` passes.
void read_until(const net::Fd& fd, std::string& answer, const std::string& text, Duration bound) {
  Deadline deadline = Deadline::after(bound);
  while (answer.find(text) == std::string::npos && !deadline.expired()) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, deadline.poll_timeout_ms()) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n <= 0) return;
    answer.append(buf, static_cast<size_t>(n));
  }
}

// The server counts a rejected frame just after it closed the socket: waits for the count.
std::uint64_t rejected_frames_reach(const TcpStoreServer& server, std::uint64_t expected) {
  Deadline deadline = Deadline::after(5s);
  while (server.stats().rejected_frames < expected && !deadline.expired()) {
    std::this_thread::sleep_for(1ms);
  }
  return server.stats().rejected_frames;
}

std::string header_only(sp::Op op, std::uint32_t payload_len) {
  std::string frame;
  sp::Header h;
  h.op = static_cast<std::uint8_t>(op);
  h.payload_len = payload_len;
  sp::encode_header(frame, h);
  return frame;
}

std::string hello(const std::string& token) {
  sp::Request req;
  req.op = sp::Op::Hello;
  req.value = token;
  return sp::encode_request(1, req);
}

TEST(StoreLimits, AFrameLargerThanAHelloBeforeTheHelloIsRefusedAtItsHeader) {
  // A frame timeout far beyond the bound below: only the header check can close it in time.
  auto server = start_with(60s, 4096);
  ASSERT_NE(server, nullptr);
  net::Fd fd = raw(*server);
  // Well within max_value_bytes (64 MiB), far above a hello.
  send_bytes(fd, header_only(sp::Op::Hello, 48U << 20));
  EXPECT_TRUE(closed_by_server(fd, 5s));
  EXPECT_EQ(rejected_frames_reach(*server, 1), 1U);

  // The largest hello is still read: a 4096-byte wrong token is answered, not cut off.
  net::Fd largest = raw(*server);
  const std::string frame = hello(std::string(sp::kMaxKeyBytes, 't'));
  ASSERT_EQ(frame.size(), sp::kHeaderBytes + sp::kMaxHelloPayload);
  send_bytes(largest, frame);
  std::string answer;
  EXPECT_TRUE(closed_by_server(largest, 5s, &answer));
  EXPECT_NE(answer.find("store token refused"), std::string::npos) << answer;
  EXPECT_EQ(server->stats().refused_auth, 1U);
  EXPECT_EQ(server->stats().rejected_frames, 1U);

  // After its hello a client sends frames as large as the value limit allows.
  auto client = testing::connect_client(*server, "tok");
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE((*client)->set("big", std::string(1 << 20, 'v')).ok());
  auto back = (*client)->get("big", 1s);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->size(), 1U << 20);
}

TEST(StoreLimits, AConnectionThatNeverSaysHelloIsClosedAfterTheFrameTimeout) {
  auto server = start_with(300ms, 4096);
  ASSERT_NE(server, nullptr);
  net::Fd silent = raw(*server);
  EXPECT_TRUE(closed_by_server(silent, 10s));
  EXPECT_EQ(rejected_frames_reach(*server, 1), 1U);
  // An authenticated client idle for longer than the frame timeout keeps its connection.
  auto client = testing::connect_client(*server, "tok");
  ASSERT_TRUE(client.ok());
  std::this_thread::sleep_for(900ms);
  EXPECT_TRUE((*client)->set("k", "v").ok());
  EXPECT_EQ(server->stats().connections_open, 1U);
}

TEST(StoreLimits, AConnectionBeyondTheCapIsClosedAtOnceAndTheCapFreesWithACloser) {
  auto server = start_with(60s, 3);
  ASSERT_NE(server, nullptr);
  auto client = testing::connect_client(*server, "tok");
  ASSERT_TRUE(client.ok());
  std::vector<net::Fd> held;
  held.push_back(raw(*server));
  held.push_back(raw(*server));
  ASSERT_TRUE(server->wait_for_connections_at_most(3, 5s).ok());
  net::Fd over = raw(*server);
  EXPECT_TRUE(closed_by_server(over, 5s));
  EXPECT_EQ(server->stats().refused_connections, 1U);
  EXPECT_EQ(server->stats().connections_open, 3U);
  EXPECT_TRUE((*client)->set("still", "served").ok());
  // One held connection goes: the next one is accepted and kept.
  held.pop_back();
  ASSERT_TRUE(server->wait_for_connections_at_most(2, 5s).ok());
  auto second = testing::connect_client(*server, "tok");
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  auto v = (*second)->get("still", 1s);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "served");
  EXPECT_EQ(server->stats().refused_connections, 1U);
}

TEST(StoreLimits, AClientParksAtMost1024RequestsAndTheNextIsRefusedNamingTheLimit) {
  auto server = start_with(60s, 4096);
  ASSERT_NE(server, nullptr);
  net::Fd fd = raw(*server);
  std::string burst = hello("tok");
  for (std::uint32_t i = 0; i < 1025; ++i) {
    sp::Request req;
    req.op = sp::Op::Get;
    req.key = "never-" + std::to_string(i);
    req.timeout_ms = 600'000;
    burst += sp::encode_request(10 + i, req);
  }
  send_bytes(fd, burst);
  const std::string expected = "already has 1024 get/wait requests waiting for keys";
  std::string answer;
  read_until(fd, answer, expected, 10s);
  EXPECT_NE(answer.find(expected), std::string::npos);
  EXPECT_EQ(server->stats().refused_waits, 1U);
  // The parked ones are still answered when their key appears.
  auto client = testing::connect_client(*server, "tok");
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->set("never-0", "now").ok());
  read_until(fd, answer, "now", 10s);
  EXPECT_NE(answer.find("now"), std::string::npos);
}

TEST(StoreLimits, WritesPastMaxTableBytesAreRefusedNamingItAndChangeNothing) {
  auto server = start_with(60s, 4096, 10 * kKiB);
  ASSERT_NE(server, nullptr);
  auto c = testing::connect_client(*server, "tok");
  ASSERT_TRUE(c.ok());
  TcpStoreClient& client = **c;
  ASSERT_TRUE(client.set("a", std::string(8 * kKiB, 'a')).ok());
  const Status over = client.set("b", std::string(4 * kKiB, 'b'));
  EXPECT_EQ(over.code(), Errc::ResourceExhausted) << over.to_string();
  EXPECT_NE(over.message().find("max_table_bytes 10240"), std::string::npos) << over.to_string();
  auto present = client.check(std::vector<std::string>{"b"});
  ASSERT_TRUE(present.ok());
  EXPECT_FALSE((*present)[0]);
  // compare_set and add are bounded alike, and leave the table as it was.
  auto swapped = client.compare_set("a", std::string(8 * kKiB, 'a'), std::string(12 * kKiB, 'x'));
  EXPECT_EQ(swapped.status().code(), Errc::ResourceExhausted);
  EXPECT_EQ(client.get("a", 1s)->size(), 8 * kKiB);
  ASSERT_TRUE(client.set("a", std::string(9 * kKiB + 1020, 'a')).ok());  // 10,237 bytes held
  EXPECT_EQ(client.add("counter", 1).status().code(), Errc::ResourceExhausted);
  // Overwriting with less, and erasing, make room.
  ASSERT_TRUE(client.set("a", std::string(2 * kKiB, 'a')).ok());
  ASSERT_TRUE(client.set("b", std::string(4 * kKiB, 'b')).ok());
  ASSERT_TRUE(*client.erase("a"));
  ASSERT_TRUE(client.set("c", std::string(5 * kKiB, 'c')).ok());
  EXPECT_EQ(*client.add("counter", 7), 7);
}

TEST(StoreLimits, OutOfDescriptorsTheListenerRestsInsteadOfSpinningAndRecovers) {
  auto server = start_with(60s, 4096);
  ASSERT_NE(server, nullptr);
  const std::uint16_t port = server->port();
  int client = -1;
  {
    testing::DescriptorsExhausted exhausted;
    // The one free descriptor goes to our client socket; the handshake completes in the
    // kernel's backlog and the server's accept finds no descriptor for its end.
    exhausted.free_one();
    client = testing::connect_loopback(port);
    ASSERT_GE(client, 0) << std::strerror(errno);
    std::this_thread::sleep_for(1s);
    // Rests of 100 ms: about ten in that second; a listener retrying at once makes thousands.
    const auto stats = server->stats();
    EXPECT_GE(stats.accept_pauses, 1U);
    EXPECT_LE(stats.accept_pauses, 30U);
    EXPECT_EQ(stats.connections_accepted, 0U);
  }
  // Descriptors back: the waiting connection is accepted from the backlog.
  net::Fd held(client);
  Deadline deadline = Deadline::after(5s);
  while (server->stats().connections_accepted == 0 && !deadline.expired()) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(server->stats().connections_accepted, 1U);
  send_bytes(held, hello("tok"));
  auto client_ok = testing::connect_client(*server, "tok");
  ASSERT_TRUE(client_ok.ok()) << client_ok.status().to_string();
  EXPECT_TRUE((*client_ok)->set("after", "exhaustion").ok());
}

}  // namespace
}  // namespace orbite
