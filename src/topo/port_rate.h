// Port rates as the selector's bandwidth seed: ibv_query_port's speed and width codes decoded
// without verbs.h (the verbs provider is loaded at run time), and the validity rule that turns a
// reported rate into the effective one (the guide's "Bandwidth-aware RDMA selection"; TENT's
// notes §5.7).
#pragma once

#include <cstdint>

namespace orbite::topo {

// The validity range for a port rate: every rate port_rate_gbps() can decode, SDR 1x (2.5) to
// XDR 12x (2400). Anything outside it (including 0 = unknown) is replaced by
// default_bandwidth_gbps. TENT's range is [10, 800]: a real 1x SDR or DDR link (2.5, 5) then
// seeded at 400, and the estimates' clamp (at least 0.1 x seed, 40 Gb/s) kept them far above what
// the link carries, so selection never learnt it (issue 24, defect 0).
inline constexpr double kMinPortGbps = 2.5;
inline constexpr double kMaxPortGbps = 2400.0;

// ibv_port_attr carries two speed encodings. XDR (256) does not fit the 8-bit active_speed, so
// the 32-bit active_speed_ex wins whenever the provider filled it in (non-zero).
[[nodiscard]] std::uint32_t preferred_speed_code(std::uint8_t active_speed,
                                                 std::uint32_t active_speed_ex);

// Per-lane rate of the speed code times the lane count of the width code, in Gbps: SDR 1→2.5,
// DDR 2→5, QDR 4→10, FDR10 8→10, FDR 16→14, EDR 32→25, HDR 64→50, NDR 128→100, XDR 256→200;
// widths 1→1x, 2→4x, 4→8x, 8→12x, 16→2x. An unknown speed or width code gives 0 (unknown).
[[nodiscard]] double port_rate_gbps(std::uint32_t speed_code, std::uint8_t width_code);

// The rate the selector seeds from: the reported rate when it lies in [kMinPortGbps,
// kMaxPortGbps], otherwise default_gbps (0, NaN and out-of-range values alike).
[[nodiscard]] double effective_rate_gbps(double reported_gbps, double default_gbps);

// The monitor's memory of one port between scans. A failed ibv_query_port must not move the
// estimate (the guide: "a failed query keeps the last effective value"), so the caller feeds only
// successful queries, to the tracker and to the selector alike:
//
//   if (query_succeeded) {
//     const double gbps = port_rate_gbps(
//         preferred_speed_code(attr.active_speed, attr.active_speed_ex), attr.active_width);
//     if (tracker.update(gbps)) log the new effective rate;
//     selector.set_link_rate(nic, gbps);  // re-seeds only when the effective rate changed
//   }
//   // A failed query: no call at all; both keep their last values.
class PortRateTracker {
 public:
  // Before any successful query the port counts as unknown, i.e. default_gbps.
  explicit PortRateTracker(double default_gbps)
      : default_gbps_(default_gbps), effective_gbps_(effective_rate_gbps(0.0, default_gbps)) {}

  // Records a successful query's decoded rate. True when the effective rate changed, which is
  // when the selector's estimates must be re-seeded.
  bool update(double reported_gbps);

  [[nodiscard]] double reported_gbps() const { return reported_gbps_; }
  [[nodiscard]] double effective_gbps() const { return effective_gbps_; }

 private:
  double default_gbps_;
  double reported_gbps_ = 0.0;
  double effective_gbps_;
};

}  // namespace orbite::topo
