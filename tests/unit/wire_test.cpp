#include <gtest/gtest.h>

#include "common/wire.h"

namespace orbite {
namespace {

TEST(Wire, RoundTripIsLittleEndian) {
  std::string buf;
  wire::Writer w(buf);
  w.put<std::uint32_t>(0x01020304);
  w.put<std::int64_t>(-2);
  w.put_bytes("hi");
  ASSERT_EQ(buf.size(), 4U + 8U + 4U + 2U);
  EXPECT_EQ(static_cast<unsigned char>(buf[0]), 0x04);
  wire::Reader r(buf);
  EXPECT_EQ(r.get<std::uint32_t>(), 0x01020304U);
  EXPECT_EQ(r.get<std::int64_t>(), -2);
  EXPECT_EQ(r.get_bytes(16), "hi");
  EXPECT_TRUE(r.done());
}

TEST(Wire, ReaderNeverReadsPastTheEnd) {
  std::string buf;
  wire::Writer w(buf);
  w.put<std::uint32_t>(1000);  // claims 1000 bytes follow
  buf += "abc";
  wire::Reader r(buf);
  EXPECT_EQ(r.get_bytes(4096), "");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.get<std::uint8_t>(), 0);  // stays failed
  EXPECT_FALSE(r.ok());
}

TEST(Wire, LengthLimitIsEnforced) {
  std::string buf;
  wire::Writer w(buf);
  w.put_bytes("0123456789");
  wire::Reader r(buf);
  EXPECT_EQ(r.get_bytes(9), "");
  EXPECT_FALSE(r.ok());
}

TEST(Wire, TrailingBytesAreNotDone) {
  std::string buf;
  wire::Writer w(buf);
  w.put<std::uint8_t>(1);
  w.put<std::uint8_t>(2);
  wire::Reader r(buf);
  r.get<std::uint8_t>();
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.done());
}

}  // namespace
}  // namespace orbite
