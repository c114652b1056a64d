#include "common/host_identity.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/strings.h"

namespace orbite {

const HostIdentity& this_host() {
  static const HostIdentity identity = [] {
    HostIdentity h;
    char name[256] = {};
    h.hostname = gethostname(name, sizeof(name) - 1) == 0 ? name : "unknown-host";
    h.pid = static_cast<std::int64_t>(getpid());
    if (const char* forced = std::getenv("ORBITE_HOSTID"); forced != nullptr && *forced != '\0') {
      h.host_id = forced;
    } else {
      std::ifstream boot("/proc/sys/kernel/random/boot_id");
      std::string boot_id;
      std::getline(boot, boot_id);
      h.host_id = h.hostname + ":" + std::string(trim(boot_id));
    }
    return h;
  }();
  return identity;
}

}  // namespace orbite
