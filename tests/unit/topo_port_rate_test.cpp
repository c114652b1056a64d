// Port speed and width codes to link rates, and the rule for unknown or failed queries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "topo/port_rate.h"

namespace orbite::topo {
namespace {

TEST(PortRate, DecodesSpeedAndWidthCodes) {
  struct Case {
    std::uint32_t speed;
    std::uint8_t width;
    double gbps;
  };
  // XDR 4x, NDR 4x and 8x, HDR 2x and 4x, EDR 4x, FDR 4x, FDR10 4x, QDR 12x, DDR 1x, SDR 1x;
  // then unknown speed or width codes.
  const Case cases[] = {{256, 2, 800.0}, {128, 2, 400.0}, {128, 4, 800.0}, {64, 16, 100.0},
                        {64, 2, 200.0},  {32, 2, 100.0},  {16, 2, 56.0},   {8, 2, 40.0},
                        {4, 8, 120.0},   {2, 1, 5.0},     {1, 1, 2.5},     {0, 2, 0.0},
                        {3, 2, 0.0},     {512, 2, 0.0},   {128, 0, 0.0},   {128, 3, 0.0}};
  for (const Case& c : cases) {
    EXPECT_DOUBLE_EQ(port_rate_gbps(c.speed, c.width), c.gbps) << c.speed << " " << +c.width;
  }
  // XDR only fits the extended field; the extended field wins whenever it is filled in.
  EXPECT_EQ(preferred_speed_code(0, 256), 256u);
  EXPECT_EQ(preferred_speed_code(64, 64), 64u);
  EXPECT_EQ(preferred_speed_code(64, 0), 64u);
}

TEST(PortRate, EffectiveRateFallsBackOutsideTheValidRange) {
  // {reported, expected} with the default 400: every decodable rate, SDR 1x (2.5) to XDR 12x
  // (2400), is its own seed.
  const std::pair<double, double> cases[] = {
      {0.0, 400.0},     {2.4, 400.0},    {2.5, 2.5},     {5.0, 5.0},
      {10.0, 10.0},     {200.0, 200.0},  {800.0, 800.0}, {1600.0, 1600.0},
      {2400.0, 2400.0}, {2401.0, 400.0}, {-1.0, 400.0},  {std::nan(""), 400.0}};
  for (const auto& [reported, expected] : cases) {
    EXPECT_DOUBLE_EQ(effective_rate_gbps(reported, 400.0), expected) << reported;
  }
  EXPECT_DOUBLE_EQ(effective_rate_gbps(0.0, 100.0), 100.0);
}

TEST(PortRate, TrackerKeepsTheLastValueWhenAQueryFails) {
  PortRateTracker tracker(400.0);
  EXPECT_DOUBLE_EQ(tracker.effective_gbps(), 400.0);
  EXPECT_TRUE(tracker.update(200.0));
  EXPECT_FALSE(tracker.update(200.0));
  // A failed query makes no call: the last values stand.
  EXPECT_DOUBLE_EQ(tracker.reported_gbps(), 200.0);
  EXPECT_DOUBLE_EQ(tracker.effective_gbps(), 200.0);
  EXPECT_TRUE(tracker.update(0.0));  // unknown rate: back to the default
  EXPECT_DOUBLE_EQ(tracker.effective_gbps(), 400.0);
  EXPECT_FALSE(tracker.update(2500.0));  // out of range: still the default
  EXPECT_DOUBLE_EQ(tracker.reported_gbps(), 2500.0);
}

}  // namespace
}  // namespace orbite::topo
