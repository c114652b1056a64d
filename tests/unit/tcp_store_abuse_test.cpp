// Malformed, oversized, truncated, stalled and unauthenticated connections are closed by the
// server while it keeps serving well-behaved clients.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <string>

#include "../support/store_fixtures.h"
#include "bootstrap/store_protocol.h"
#include "common/net.h"
#include "common/wire.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;
namespace sp = store_protocol;

class StoreAbuse : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::start_server("tok", /*frame_timeout=*/300ms, /*max_value_bytes=*/4096);
    ASSERT_NE(server_, nullptr);
    auto good = testing::connect_client(*server_, "tok");
    ASSERT_TRUE(good.ok());
    good_ = *good;
    ASSERT_TRUE(good_->set("before", "1").ok());
  }

  net::Fd raw() {
    auto hp = net::parse_host_port(server_->address());
    auto fd = net::connect_tcp(*hp, Deadline::after(5s));
    EXPECT_TRUE(fd.ok());
    return fd.ok() ? std::move(*fd) : net::Fd();
  }

  static void send_bytes(const net::Fd& fd, const std::string& bytes) {
    ASSERT_TRUE(
        net::write_all(fd.get(), std::as_bytes(std::span(bytes)), Deadline::after(5s), "test")
            .ok());
  }

  static bool closed_by_server(const net::Fd& fd, Duration bound = 5s) {
    return testing::closed_by_server(fd, bound);
  }

  static std::string hello(const std::string& token) {
    sp::Request req;
    req.op = sp::Op::Hello;
    req.value = token;
    return sp::encode_request(1, req);
  }

  void expect_still_serving() {
    ASSERT_TRUE(good_->set("after", "2").ok());
    auto v = good_->get("before", 1s);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(*v, "1");
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<TcpStoreClient> good_;
};

TEST_F(StoreAbuse, GarbageHeaderClosesTheConnection) {
  net::Fd fd = raw();
  send_bytes(fd, std::string(64, '\x5a'));
  EXPECT_TRUE(closed_by_server(fd));
  expect_still_serving();
  EXPECT_GE(server_->stats().rejected_frames, 1U);
}

TEST_F(StoreAbuse, OversizedLengthIsRejectedBeforeReadingThePayload) {
  net::Fd fd = raw();
  std::string frame;
  sp::Header h;
  h.op = static_cast<std::uint8_t>(sp::Op::Set);
  h.payload_len = 0xfffffff0U;  // ~4 GiB promised, never sent
  sp::encode_header(frame, h);
  send_bytes(fd, hello("tok") + frame);
  EXPECT_TRUE(closed_by_server(fd));
  expect_still_serving();
}

TEST_F(StoreAbuse, TruncatedFrameThenDisconnect) {
  net::Fd fd = raw();
  sp::Request req;
  req.op = sp::Op::Set;
  req.key = "half";
  req.value = std::string(1000, 'v');
  std::string frame = sp::encode_request(2, req);
  send_bytes(fd, hello("tok") + frame.substr(0, frame.size() / 2));
  fd.reset();
  expect_still_serving();
  auto present = good_->check(std::vector<std::string>{"half"});
  ASSERT_TRUE(present.ok());
  EXPECT_FALSE((*present)[0]);  // nothing of the partial frame was applied
}

TEST_F(StoreAbuse, StalledPartialFrameIsClosedAfterTheFrameTimeout) {
  net::Fd fd = raw();
  std::string h = hello("tok");
  send_bytes(fd, h.substr(0, 5));  // a few header bytes, then silence
  EXPECT_TRUE(closed_by_server(fd, 10s));
  expect_still_serving();
}

TEST_F(StoreAbuse, MalformedPayloadClosesTheConnection) {
  net::Fd fd = raw();
  std::string payload;
  wire::Writer w(payload);
  w.put_bytes("key");
  payload += "trailing junk";
  std::string frame;
  sp::Header h;
  h.op = static_cast<std::uint8_t>(sp::Op::Erase);
  h.payload_len = static_cast<std::uint32_t>(payload.size());
  sp::encode_header(frame, h);
  send_bytes(fd, hello("tok") + frame + payload);
  EXPECT_TRUE(closed_by_server(fd));
  expect_still_serving();
}

TEST_F(StoreAbuse, RequestsBeforeHelloAreRefused) {
  net::Fd fd = raw();
  sp::Request req;
  req.op = sp::Op::Set;
  req.key = "sneaky";
  req.value = "x";
  send_bytes(fd, sp::encode_request(3, req));
  EXPECT_TRUE(closed_by_server(fd));
  auto present = good_->check(std::vector<std::string>{"sneaky"});
  ASSERT_TRUE(present.ok());
  EXPECT_FALSE((*present)[0]);
  EXPECT_GE(server_->stats().refused_auth, 1U);
}

TEST_F(StoreAbuse, UnknownOpAndWrongVersionCloseTheConnection) {
  for (int variant = 0; variant < 2; ++variant) {
    net::Fd fd = raw();
    std::string frame;
    sp::Header h;
    h.op = variant == 0 ? 0x33 : static_cast<std::uint8_t>(sp::Op::Hello);
    h.version = variant == 0 ? sp::kVersion : 2;
    sp::encode_header(frame, h);
    send_bytes(fd, (variant == 0 ? hello("tok") : std::string()) + frame);
    EXPECT_TRUE(closed_by_server(fd)) << "variant " << variant;
  }
  expect_still_serving();
}

TEST_F(StoreAbuse, ManyAbusiveConnectionsAtOnce) {
  std::vector<net::Fd> fds;
  for (int i = 0; i < 20; ++i) {
    fds.push_back(raw());
    send_bytes(fds.back(), std::string(static_cast<size_t>(17 + i), static_cast<char>(i)));
  }
  for (auto& fd : fds) EXPECT_TRUE(closed_by_server(fd));
  expect_still_serving();
}

}  // namespace
}  // namespace orbite
