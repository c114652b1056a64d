#include <gtest/gtest.h>

#include "bootstrap/store_protocol.h"
#include "common/wire.h"

namespace orbite {
namespace {

namespace sp = store_protocol;

std::string payload_of(const std::string& frame) {
  return frame.substr(sp::kHeaderBytes);
}

TEST(StoreProtocol, RequestsRoundTrip) {
  sp::Request set;
  set.op = sp::Op::Set;
  set.key = "k";
  set.value = std::string("v\0w", 3);
  sp::Request wait;
  wait.op = sp::Op::Wait;
  wait.keys = {"a", "b", ""};
  wait.timeout_ms = 1234;
  sp::Request cas;
  cas.op = sp::Op::CompareSet;
  cas.key = "c";
  cas.value = "old";
  cas.desired = "new";
  sp::Request add;
  add.op = sp::Op::Add;
  add.key = "n";
  add.delta = -9;
  for (const sp::Request& req : {set, wait, cas, add}) {
    std::string frame = sp::encode_request(77, req);
    auto header = sp::decode_header(frame, 1 << 20);
    ASSERT_TRUE(header.ok()) << header.status().to_string();
    EXPECT_EQ(header->request_id, 77U);
    EXPECT_EQ(header->payload_len, frame.size() - sp::kHeaderBytes);
    auto back = sp::decode_request(header->op, payload_of(frame));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->op, req.op);
    EXPECT_EQ(back->key, req.key);
    EXPECT_EQ(back->value, req.value);
    EXPECT_EQ(back->desired, req.desired);
    EXPECT_EQ(back->keys, req.keys);
    EXPECT_EQ(back->delta, req.delta);
    EXPECT_EQ(back->timeout_ms, req.timeout_ms);
  }
}

TEST(StoreProtocol, HeaderRejectsBadFields) {
  sp::Request req;
  req.op = sp::Op::Erase;
  req.key = "k";
  std::string good = sp::encode_request(1, req);

  std::string bad_magic = good;
  bad_magic[0] = 'X';
  auto r1 = sp::decode_header(bad_magic, 1024);
  EXPECT_EQ(r1.status().code(), Errc::Protocol);
  EXPECT_NE(r1.status().message().find("magic"), std::string::npos);

  std::string bad_version = good;
  bad_version[4] = 9;
  EXPECT_NE(sp::decode_header(bad_version, 1024).status().message().find("version 9"),
            std::string::npos);

  std::string bad_flags = good;
  bad_flags[6] = 1;
  EXPECT_NE(sp::decode_header(bad_flags, 1024).status().message().find("flags"), std::string::npos);

  auto too_big = sp::decode_header(good, 2);
  EXPECT_NE(too_big.status().message().find("exceeds the limit of 2"), std::string::npos);

  EXPECT_FALSE(sp::decode_header(good.substr(0, 10), 1024).ok());
}

TEST(StoreProtocol, MalformedPayloadsAreRejected) {
  sp::Request req;
  req.op = sp::Op::Get;
  req.key = "key";
  req.timeout_ms = 5;
  std::string payload = payload_of(sp::encode_request(1, req));
  auto op = static_cast<std::uint8_t>(sp::Op::Get);
  EXPECT_TRUE(sp::decode_request(op, payload).ok());
  EXPECT_EQ(sp::decode_request(op, payload.substr(0, payload.size() - 1)).status().code(),
            Errc::Protocol);
  EXPECT_EQ(sp::decode_request(op, payload + "x").status().code(), Errc::Protocol);
  EXPECT_FALSE(sp::decode_request(0, payload).ok());
  EXPECT_FALSE(sp::decode_request(0x42, payload).ok());

  // A key longer than the limit.
  std::string long_key;
  wire::Writer w(long_key);
  w.put_bytes(std::string(sp::kMaxKeyBytes + 1, 'k'));
  EXPECT_FALSE(sp::decode_request(static_cast<std::uint8_t>(sp::Op::Erase), long_key).ok());

  // A key count beyond the limit, with no keys behind it.
  std::string many;
  wire::Writer w2(many);
  w2.put<std::uint32_t>(static_cast<std::uint32_t>(sp::kMaxKeysPerRequest + 1));
  EXPECT_FALSE(sp::decode_request(static_cast<std::uint8_t>(sp::Op::Check), many).ok());
}

TEST(StoreProtocol, RepliesCarryStatusAndEchoTheRequest) {
  std::string err =
      sp::encode_error_reply(5, static_cast<std::uint8_t>(sp::Op::Get), Errc::Timeout, "late");
  auto h = sp::decode_header(err, 1024);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->op, static_cast<std::uint8_t>(sp::Op::Get) | sp::kReplyBit);
  EXPECT_EQ(h->request_id, 5U);
  std::string payload = payload_of(err);
  wire::Reader r(payload);
  EXPECT_EQ(r.get<std::uint8_t>(), static_cast<std::uint8_t>(Errc::Timeout));
  EXPECT_EQ(r.get_bytes(100), "late");
  EXPECT_TRUE(r.done());
}

}  // namespace
}  // namespace orbite
