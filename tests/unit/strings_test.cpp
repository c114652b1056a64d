#include <gtest/gtest.h>

#include "common/net.h"
#include "common/strings.h"

namespace orbite {
namespace {

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(join({"x", "y", "z"}, ", "), "x, y, z");
}

TEST(Strings, StrictIntegers) {
  EXPECT_EQ(parse_int64(" -12 "), -12);
  EXPECT_EQ(parse_int64("+7"), 7);
  EXPECT_FALSE(parse_int64("12abc"));
  EXPECT_FALSE(parse_int64(""));
  EXPECT_FALSE(parse_int64("1.5"));
  EXPECT_FALSE(parse_int64("99999999999999999999"));
  EXPECT_EQ(parse_uint64("18446744073709551615"), 18446744073709551615ULL);
  EXPECT_FALSE(parse_uint64("-1"));
}

TEST(Strings, DurationsNeedUnits) {
  EXPECT_EQ(parse_duration_ns("10ms"), 10'000'000);
  EXPECT_EQ(parse_duration_ns("1.5s"), 1'500'000'000);
  EXPECT_EQ(parse_duration_ns("250us"), 250'000);
  EXPECT_EQ(parse_duration_ns("2m"), 120'000'000'000);
  EXPECT_EQ(parse_duration_ns("7ns"), 7);
  EXPECT_FALSE(parse_duration_ns("10"));
  EXPECT_FALSE(parse_duration_ns("10 parsecs"));
  EXPECT_FALSE(parse_duration_ns("-1s"));
  EXPECT_EQ(format_duration_ns(30'000'000'000), "30s");
  EXPECT_EQ(format_duration_ns(10'000'000), "10ms");
  EXPECT_EQ(format_duration_ns(1'500'000), "1500us");
  EXPECT_EQ(format_duration_ns(0), "0s");
  for (std::int64_t ns : {1LL, 999LL, 2'000'000LL, 3'600'000'000'000LL, 61'000'000'000LL}) {
    EXPECT_EQ(parse_duration_ns(format_duration_ns(ns)), ns) << ns;
  }
}

TEST(Strings, Bytes) {
  EXPECT_EQ(parse_bytes("64MiB"), 64ULL << 20);
  EXPECT_EQ(parse_bytes("4096"), 4096U);
  EXPECT_EQ(parse_bytes("1GiB"), 1ULL << 30);
  EXPECT_EQ(parse_bytes("2KB"), 2000U);
  EXPECT_FALSE(parse_bytes("1.5B"));
  EXPECT_FALSE(parse_bytes("12 apples"));
}

TEST(Strings, QuoteEscapesAndBounds) {
  EXPECT_EQ(quote("abc"), "'abc'");
  EXPECT_EQ(quote(std::string("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(quote("abcdef", 3), "'abc...'");
  // A path keeps its tail however deep the checkout is (CI's prefix once cut a file name off).
  const std::string deep = "/" + std::string(300, 'd') + "/hwloc-segfault-attribute-name.xml";
  EXPECT_EQ(quote_path(deep), "'" + deep + "'");
}

TEST(Net, ParseHostPort) {
  auto v4 = net::parse_host_port("127.0.0.1:29500");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 29500);
  auto v6 = net::parse_host_port("[::1]:80");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(net::format_host_port("::1", 80), "[::1]:80");
  for (const char* bad : {"nohost", ":80", "host:", "host:65536", "host:x", "::1:80", "[::1]80"}) {
    auto r = net::parse_host_port(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument) << bad;
  }
}

TEST(Net, InterfaceSelection) {
  auto loop = net::select_interface("", /*prefer_loopback=*/true);
  ASSERT_TRUE(loop.ok());
  EXPECT_EQ(loop->address, "127.0.0.1");
  auto exact = net::select_interface("=lo", false);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->interface, "lo");
  auto none = net::select_interface("=no_such_if0", false);
  EXPECT_EQ(none.status().code(), Errc::Unavailable);
  EXPECT_NE(none.status().message().find("no_such_if0"), std::string::npos);
  auto excluded = net::select_interface("^lo", false);
  if (excluded.ok()) {
    EXPECT_NE(excluded->interface, "lo");
  }
}

TEST(Net, ConnectToClosedPortIsConnectionLost) {
  auto listener = net::listen_tcp({"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  auto bound = net::local_endpoint(listener->get());
  ASSERT_TRUE(bound.ok());
  listener->reset();  // nothing listens there any more
  auto r = net::connect_tcp(*bound, Deadline::after(std::chrono::seconds(2)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::ConnectionLost);
}

}  // namespace
}  // namespace orbite
