// Who this process is on the network: host name, the identity that decides "same host", pid.
#pragma once

#include <cstdint>
#include <string>

namespace orbite {

struct HostIdentity {
  std::string hostname;
  // ORBITE_HOSTID when set; otherwise hostname + ":" + the kernel's boot id, so that two
  // containers with the same host name on different machines are told apart.
  std::string host_id;
  std::int64_t pid = 0;
};

const HostIdentity& this_host();

}  // namespace orbite
