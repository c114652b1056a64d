#include "topo/hwloc_probe.h"

#include <hwloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/clock.h"
#include "common/strings.h"

namespace orbite::topo {
namespace {

// The checking child's status when hwloc refused the file without crashing.
constexpr int kLoadFailed = 42;

std::string version_text(unsigned v) {
  return std::to_string((v >> 16) & 0xff) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string(v & 0xff);
}

}  // namespace

std::string hwloc_build_version() {
  return version_text(HWLOC_API_VERSION);
}

std::string hwloc_runtime_version() {
  return version_text(hwloc_get_api_version());
}

Status check_xml_in_child(const std::string& xml_path, const char* field) {
  const std::string what = std::string(field) + ": " + quote_path(xml_path);
  const pid_t pid = ::fork();
  if (pid < 0) {
    return Status::error(Errc::Unavailable,
                         what + ": fork to check the file failed: " + std::strerror(errno));
  }
  if (pid == 0) {
    // A crash must end the child by its signal, not in a handler the application (Python's
    // faulthandler) or a sanitizer installed; one that still catches it exits with its own
    // status, which is not kLoadFailed either. _exit runs no handler of the parent's.
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(sig, &dfl, nullptr);
    }
    hwloc_topology_t t = nullptr;
    int rc = kLoadFailed;
    if (hwloc_topology_init(&t) == 0) {
      hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
      if (hwloc_topology_set_xml(t, xml_path.c_str()) == 0 && hwloc_topology_load(t) == 0) rc = 0;
    }
    ::_exit(rc);
  }
  const Deadline deadline = Deadline::after(std::chrono::seconds(30));
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      return Status::error(Errc::Internal, what + ": waitpid: " + std::strerror(errno));
    }
    if (deadline.expired()) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return Status::error(Errc::Configuration,
                           what + ": hwloc did not finish loading it within 30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (WIFSIGNALED(status)) {
    return Status::error(Errc::Configuration, what + ": hwloc crashed loading it (signal " +
                                                  std::to_string(WTERMSIG(status)) +
                                                  " in a checking child " +
                                                  "process): the file is malformed");
  }
  // hwloc leaks what a failed load allocated: the file is refused here instead of loaded again.
  if (WIFEXITED(status) && WEXITSTATUS(status) == kLoadFailed) {
    return Status::error(Errc::Configuration,
                         what + ": hwloc cannot read or load it (missing, unreadable, or not a " +
                             "hwloc v1/v2 topology)");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return Status::error(Errc::Configuration,
                         what + ": hwloc crashed loading it (a handler ended the checking child " +
                             "with status " + std::to_string(WEXITSTATUS(status)) +
                             "): the file is malformed");
  }
  return {};
}

Result<HwlocSummary> summarize_machine(const std::string& xml_path) {
  if (!xml_path.empty()) ORBITE_RETURN_IF_ERROR(check_xml_in_child(xml_path, "hwloc XML"));
  HwlocSummary s;
  s.runtime_version = hwloc_runtime_version();
  s.build_version = hwloc_build_version();
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) {
    return Status::error(Errc::Unavailable, "hwloc_topology_init failed");
  }
  if (!xml_path.empty() && hwloc_topology_set_xml(topology, xml_path.c_str()) != 0) {
    hwloc_topology_destroy(topology);
    return Status::error(Errc::Configuration, "hwloc cannot read XML topology '" + xml_path + "'");
  }
  if (hwloc_topology_load(topology) != 0) {
    hwloc_topology_destroy(topology);
    return Status::error(Errc::Unavailable, "hwloc_topology_load failed");
  }
  s.packages = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PACKAGE);
  s.cores = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE);
  s.pus = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PU);
  s.numa_nodes = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
  hwloc_topology_destroy(topology);
  return s;
}

}  // namespace orbite::topo
