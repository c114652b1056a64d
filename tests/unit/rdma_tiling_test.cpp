// A GrantRequest's segments against its range (check_tiling): what the source checks before any
// authority exists. (The codecs are in rdma_codec_test.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "p2p/rdma/wire.h"
#include "rdma_wire_samples.h"

namespace orbite::rdma {
namespace {

using samples::segment;

// A request whose segments tile it: [0, +10 x 64 KiB) in segments of 4, 4 and 2 slices.
GrantRequest tiled_request() {
  GrantRequest m;
  m.op = kOpWrite;
  m.length = 0x10000 * 10;
  m.slices = 10;
  m.segments = {segment(0, 4, 0), segment(4, 4, 1), segment(8, 2, 2)};
  return m;
}

TEST(GrantRequest, SegmentsMustTileTheRangeExactly) {
  EXPECT_TRUE(check_tiling(tiled_request()).ok());
  GrantRequest empty = tiled_request();
  empty.length = 0;
  empty.slices = 0;
  empty.segments.clear();
  EXPECT_TRUE(check_tiling(empty).ok());

  auto refused = [](const GrantRequest& m, const std::string& names) {
    const Status st = check_tiling(m);
    EXPECT_EQ(st.code(), Errc::Protocol) << st.to_string();
    EXPECT_NE(st.message().find(names), std::string::npos) << st.message();
  };
  GrantRequest gap = tiled_request();
  gap.segments[1].offset += 1;
  refused(gap, "segment 1 [");
  GrantRequest short_total = tiled_request();
  short_total.length += 1;
  refused(short_total, "do not cover");
  GrantRequest slices = tiled_request();
  slices.segments[2].first_slice = 7;
  refused(slices, "segment 2");
  GrantRequest zero = tiled_request();
  zero.segments.push_back(segment(10, 0, 3));
  refused(zero, "segment 3");
}

// Issue 24, defect 4: lengths that wrap 64-bit arithmetic once summed passed the old check.
TEST(GrantRequest, SegmentsThatWrapAroundAreRefused) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  // A first segment of 2^64 - 1 bytes brings the running offset back to offset - 1; a second one
  // of length + 1 bytes from there ends where the request ends.
  GrantRequest wrap = tiled_request();
  wrap.offset = 100;
  wrap.length = 50;
  wrap.slices = 2;
  wrap.segments = {segment(0, 1, 0), segment(1, 1, 0)};
  wrap.segments[0].offset = 100;
  wrap.segments[0].length = kMax;
  wrap.segments[1].offset = 99;
  wrap.segments[1].length = 51;
  const Status st = check_tiling(wrap);
  EXPECT_EQ(st.code(), Errc::Protocol);
  EXPECT_NE(st.message().find("segment 0 [100, +18446744073709551615)"), std::string::npos)
      << st.message();
  // A request range that itself wraps.
  GrantRequest whole = tiled_request();
  whole.offset = kMax - 10;
  whole.length = 20;
  whole.slices = 1;
  whole.segments = {segment(0, 1, 0)};
  whole.segments[0].offset = kMax - 10;
  whole.segments[0].length = 20;
  EXPECT_NE(check_tiling(whole).message().find("wraps"), std::string::npos);
}

TEST(GrantCancel, RoundTripsAndRejectsTruncationAndTrailingBytes) {
  const GrantCancel m{0x1111, 0x2222, 7};
  const std::string body = encode(m);
  auto got = decode_grant_cancel(body);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->parent, m.parent);
  EXPECT_EQ(got->grant, m.grant);
  EXPECT_EQ(got->generation, m.generation);
  EXPECT_EQ(decode_grant_cancel(body.substr(0, body.size() - 1)).status().code(), Errc::Protocol);
  EXPECT_EQ(decode_grant_cancel(body + "x").status().code(), Errc::Protocol);
}

}  // namespace
}  // namespace orbite::rdma
