#include "topo/port_rate.h"

namespace orbite::topo {

std::uint32_t preferred_speed_code(std::uint8_t active_speed, std::uint32_t active_speed_ex) {
  return active_speed_ex != 0 ? active_speed_ex : active_speed;
}

double port_rate_gbps(std::uint32_t speed_code, std::uint8_t width_code) {
  double lane = 0.0;
  switch (speed_code) {
    case 1: lane = 2.5; break;
    case 2: lane = 5.0; break;
    case 4: lane = 10.0; break;
    case 8: lane = 10.0; break;  // FDR10: QDR signalling with FDR's encoding
    case 16: lane = 14.0; break;
    case 32: lane = 25.0; break;
    case 64: lane = 50.0; break;
    case 128: lane = 100.0; break;
    case 256: lane = 200.0; break;  // XDR: only in active_speed_ex
    default: return 0.0;
  }
  int lanes = 0;
  switch (width_code) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0.0;
  }
  return lane * lanes;
}

double effective_rate_gbps(double reported_gbps, double default_gbps) {
  // Written so that NaN fails the test and falls back too.
  if (reported_gbps >= kMinPortGbps && reported_gbps <= kMaxPortGbps) return reported_gbps;
  return default_gbps;
}

bool PortRateTracker::update(double reported_gbps) {
  reported_gbps_ = reported_gbps;
  const double effective = effective_rate_gbps(reported_gbps, default_gbps_);
  if (effective == effective_gbps_) return false;
  effective_gbps_ = effective;
  return true;
}

}  // namespace orbite::topo
