// The shared segment of a single-host communicator (coll/shared_area.h): rank 0 creates a POSIX
// shared-memory object under a fresh name, the others open it once the name is in the store,
// each marks itself attached in it, and after the communicator's setup barrier rank 0 unlinks
// the name and every rank checks that all attached. From
// then on the segment has no name: it goes away with the last mapping, whatever way the ranks
// end, so a crashed job leaves nothing in /dev/shm. A name left by a creator that died during
// setup (between shm_open and the unlink) is removed by the next creator on the host.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <utility>

#include "coll/shared_area.h"
#include "comm/communicator_impl.h"
#include "common/log.h"
#include "common/shm_object.h"
#include "proxy/engine_core.h"

namespace orbite {

namespace {

constexpr std::string_view kPrefix = "orbite-coll-";

// Segments mapped by this process, by name: ranks that are threads of one process (tests) share
// one mapping, so that ThreadSanitizer sees one address per byte and pairs the counters'
// release and acquire.
std::mutex g_maps_mu;
std::map<std::string, std::weak_ptr<void>> g_maps;

// The CPUs this thread may run on: how many, and which when it is one (else -1). Unknown (the
// call failed): every online CPU, none in particular.
std::pair<int, int> cpu_placement() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) {
    return {static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)), -1};
  }
  const int count = CPU_COUNT(&set);
  if (count != 1) return {count, -1};
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return {1, cpu};
  }
  return {1, -1};
}

// Without a segment to compare the host's placements in, this rank's own mask stands in for
// the others' (as the widest does in SharedArea::oversubscribed): `k` ranks on fewer CPUs. A rank
// bound to one CPU cannot tell whether others share it, and says no.
bool oversubscribed_by_mask(int k) {
  const auto [cpus, only_cpu] = cpu_placement();
  return k >= 2 && only_cpu < 0 && cpus < k;
}

Status sys_error(const std::string& what, const std::string& name) {
  return Status::error(Errc::Unavailable, what + " of the collectives' shared segment " + name +
                                              " failed: " + std::strerror(errno));
}

// Names "orbite-coll-<pid>-..." whose creator no longer runs.
void remove_stale_names() {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  while (dirent* e = ::readdir(dir)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with(kPrefix)) continue;
    const std::string rest(name.substr(kPrefix.size()));
    char* end = nullptr;
    const long pid = std::strtol(rest.c_str(), &end, 10);
    if (pid <= 0 || end == nullptr || *end != '-') continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      ::shm_unlink(("/" + std::string(name)).c_str());
    }
  }
  ::closedir(dir);
}

std::shared_ptr<void> share_mapping(const std::string& name, void* p, std::uint64_t bytes) {
  std::shared_ptr<void> mapping(p, [bytes](void* q) { ::munmap(q, bytes); });
  std::lock_guard lock(g_maps_mu);
  std::erase_if(g_maps, [](const auto& kv) { return kv.second.expired(); });
  g_maps[name] = mapping;
  return mapping;
}

Result<std::shared_ptr<coll::SharedArea>> create_segment(const std::string& name, int ranks,
                                                         std::uint64_t slot_bytes) {
  const std::uint64_t bytes = coll::SharedArea::bytes_for(ranks, slot_bytes);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return sys_error("shm_open", name);
  if (const int e = size_shm_object(fd, bytes); e != 0) {
    errno = e;
    Status st = sys_error("sizing (" + std::to_string(bytes) + " bytes)", name);
    ::close(fd);
    ::shm_unlink(name.c_str());
    return st;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  Status mapped = p == MAP_FAILED ? sys_error("mmap", name) : Status{};
  ::close(fd);
  if (!mapped.ok()) {
    ::shm_unlink(name.c_str());
    return mapped;
  }
  auto area = std::make_shared<coll::SharedArea>(static_cast<std::byte*>(p), ranks, slot_bytes,
                                                 share_mapping(name, p, bytes));
  area->format();
  return area;
}

Result<std::shared_ptr<coll::SharedArea>> open_segment(const std::string& name, int ranks,
                                                       std::uint64_t slot_bytes) {
  const std::uint64_t bytes = coll::SharedArea::bytes_for(ranks, slot_bytes);
  std::shared_ptr<void> mapping;
  {
    std::lock_guard lock(g_maps_mu);
    if (auto it = g_maps.find(name); it != g_maps.end()) mapping = it->second.lock();
  }
  if (!mapping) {
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return sys_error("shm_open", name);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != bytes) {
      ::close(fd);
      return Status::error(Errc::Protocol, "the collectives' shared segment " + name + " has " +
                                               std::to_string(st.st_size) + " bytes, expected " +
                                               std::to_string(bytes));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    Status mapped = p == MAP_FAILED ? sys_error("mmap", name) : Status{};
    ::close(fd);
    ORBITE_RETURN_IF_ERROR(mapped);
    mapping = share_mapping(name, p, bytes);
  }
  auto area = std::make_shared<coll::SharedArea>(static_cast<std::byte*>(mapping.get()), ranks,
                                                 slot_bytes, mapping);
  if (!area->header_matches()) {
    return Status::error(Errc::Protocol, "the collectives' shared segment " + name +
                                             " has a foreign header (another job's name?)");
  }
  return area;
}

std::string fresh_name() {
  std::random_device rd;
  const std::uint64_t nonce = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(nonce));
  return "/" + std::string(kPrefix) + std::to_string(::getpid()) + "-" + hex;
}

}  // namespace

bool Communicator::Impl::wants_segment() const {
  const auto k = static_cast<std::uint64_t>(hosts->of(rank).size());
  if (k < 2 || !config.shm.enable || config.coll.shm_slot_bytes == 0) return false;
  if (config.coll.transport != Transport::Unspec && config.coll.transport != Transport::Shm) {
    return false;
  }
  // reduce_scatter puts a piece of every rank's block in a slot.
  return config.coll.shm_slot_bytes >= 64 * k;
}

Status Communicator::Impl::attach_segment(const std::string& barrier_key) {
  Store& store = *bootstrap.store();
  const int n = static_cast<int>(peers.size());
  const Duration timeout = config.bootstrap.timeout;
  if (!wants_segment()) {
    if (oversubscribed_by_mask(static_cast<int>(hosts->of(rank).size()))) {
      core->yield_when_idle.store(true);
    }
    return store.barrier(barrier_key, rank, n, timeout);
  }
  // One segment per host, numbered by local rank; the host's first rank creates it.
  const std::vector<int>& mine = hosts->of(rank);
  const int k = static_cast<int>(mine.size());
  const int local = hosts->local_rank(rank);
  const std::string name_key =
      key("coll-segment/" + std::to_string(hosts->host_of[static_cast<std::size_t>(rank)]));
  const std::uint64_t slot = config.coll.shm_slot_bytes;
  Result<std::shared_ptr<coll::SharedArea>> area_or =
      Status::error(Errc::Unavailable, "the host's first rank could not create the segment");
  std::string name;
  if (local == 0) {
    remove_stale_names();
    name = fresh_name();
    area_or = create_segment(name, k, slot);
    ORBITE_RETURN_IF_ERROR(store.set(name_key, area_or.ok() ? name : std::string()));
  } else {
    ORBITE_ASSIGN_OR_RETURN(name, store.get(name_key, timeout));
    if (!name.empty()) area_or = open_segment(name, k, slot);
  }
  // Each rank that mapped the segment marks itself in it; after the barrier (every open tried)
  // the name goes, and every rank that mapped it sees whether all of its host did: all or none
  // of a host use it.
  if (area_or.ok()) {
    const auto [cpus, only_cpu] = cpu_placement();
    (*area_or)->mark_attached(local, cpus, only_cpu);
  }
  Status met = store.barrier(barrier_key, rank, n, timeout);
  if (local == 0 && !name.empty()) ::shm_unlink(name.c_str());
  ORBITE_RETURN_IF_ERROR(met);
  const int missing = area_or.ok() ? (*area_or)->first_unattached() : local;
  if (missing >= 0) {
    const int who = mine[static_cast<std::size_t>(missing)];
    ORBITE_LOG(Info, Coll) << "communicator " << tag << ": no shared segment for collectives ("
                           << (who == rank ? "this rank" : "rank " + std::to_string(who))
                           << " could not attach"
                           << (who == rank ? ": " + area_or.status().message() : "")
                           << "); they run over messages";
    if (oversubscribed_by_mask(k)) core->yield_when_idle.store(true);
    return {};
  }
  area = std::move(*area_or);
  area->set_crowded(area->oversubscribed());
  executor->set_yield_when_idle(area->crowded());
  if (area->crowded()) core->yield_when_idle.store(true);
  return {};
}

}  // namespace orbite
