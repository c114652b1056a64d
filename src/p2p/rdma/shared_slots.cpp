#include "p2p/rdma/shared_slots.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>

#include "common/log.h"
#include "common/shm_object.h"
#include "p2p/rdma/wire.h"

namespace orbite::rdma {

struct SharedSlots::Header {
  std::uint64_t magic;  // written last by the creator: the header is complete once it reads right
  std::uint32_t version;
  std::uint32_t header_bytes;
  std::uint64_t interval_ns;
  std::uint32_t clock_id;  // CLOCK_MONOTONIC: every participant reads the same clock
  std::uint32_t crc;       // CRC32C of the 28 bytes before it
  // (interval index << 2) | slot, in one word so that a reader never mixes two publications.
  std::atomic<std::uint64_t> published;
};

namespace {

constexpr std::size_t kCrcBytes = 28;
static_assert(offsetof(SharedSlots::Header, crc) == kCrcBytes);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
constexpr auto kInitWait = std::chrono::seconds(1);  // a creator's header appears within this

Status refuse(const std::string& name, const std::string& why) {
  return Status::error(Errc::Configuration, "config: rdma.shared_quota_shm_path '" + name +
                                                "': " + why + " (refused: the slots fail closed)");
}

Status sys_error(const std::string& name, const char* call) {
  return Status::error(Errc::Unavailable, "rdma.shared_quota_shm_path '" + name + "': " + call +
                                              " failed: " + std::strerror(errno));
}

// The fixed fields as the header lays them out (the CRC covers them, magic included).
struct Fixed {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t header_bytes;
  std::uint64_t interval_ns;
  std::uint32_t clock_id;
};
static_assert(offsetof(Fixed, clock_id) + sizeof(std::uint32_t) == kCrcBytes);

std::uint32_t header_crc(const SharedSlots::Header& h) {
  return crc32c(reinterpret_cast<const std::uint8_t*>(&h), kCrcBytes);
}

std::uint64_t load_magic(SharedSlots::Header* h) {
  return std::atomic_ref<std::uint64_t>(h->magic).load(std::memory_order_acquire);
}

}  // namespace

std::uint64_t SharedSlots::now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

Result<std::unique_ptr<SharedSlots>> SharedSlots::open(const std::string& configured,
                                                       std::chrono::nanoseconds interval) {
  const std::string name = configured.starts_with('/') ? configured : "/" + configured;
  const auto interval_ns = static_cast<std::uint64_t>(interval.count());
  if (interval_ns == 0) return refuse(name, "slot_rotation_interval is 0");
  bool creator = true;
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    creator = false;
    fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  }
  if (fd < 0) return sys_error(name, "shm_open");
  auto fail = [&](Status st) {
    ::close(fd);
    return st;
  };
  if (creator) {
    if (const int e = size_shm_object(fd, sizeof(Header)); e != 0) {
      errno = e;
      return fail(sys_error(name, "sizing"));
    }
  }
  // Another creator may still be sizing and writing it: wait, bounded, for the size and magic.
  const auto until = std::chrono::steady_clock::now() + kInitWait;
  struct stat st {};
  for (;;) {
    if (::fstat(fd, &st) != 0) return fail(sys_error(name, "fstat"));
    if (static_cast<std::uint64_t>(st.st_size) >= sizeof(Header)) break;
    if (std::chrono::steady_clock::now() >= until) {
      return fail(refuse(name, "the object holds " + std::to_string(st.st_size) +
                                   " bytes, not an OrbiTE slot header"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (static_cast<std::uint64_t>(st.st_size) != sizeof(Header)) {
    return fail(refuse(name, "the object holds " + std::to_string(st.st_size) + " bytes, not " +
                                 std::to_string(sizeof(Header))));
  }
  void* map = ::mmap(nullptr, sizeof(Header), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail(sys_error(name, "mmap"));
  auto* h = static_cast<Header*>(map);
  auto unmap_fail = [&](Status s) {
    ::munmap(map, sizeof(Header));
    return fail(std::move(s));
  };
  if (creator) {
    // The CRC is computed aside: the magic in the object stays 0 (ftruncate zero-fills) until
    // every other field is written, so a joiner never reads a half-written header as complete.
    const Fixed fixed{kSlotMagic, kSlotVersion, sizeof(Header), interval_ns, CLOCK_MONOTONIC};
    h->version = fixed.version;
    h->header_bytes = fixed.header_bytes;
    h->interval_ns = fixed.interval_ns;
    h->clock_id = fixed.clock_id;
    h->published.store(0, std::memory_order_relaxed);
    h->crc = crc32c(reinterpret_cast<const std::uint8_t*>(&fixed), kCrcBytes);
    std::atomic_ref<std::uint64_t>(h->magic).store(kSlotMagic, std::memory_order_release);
  }
  while (load_magic(h) == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::uint64_t magic = load_magic(h);
  if (magic != kSlotMagic) return unmap_fail(refuse(name, "no OrbiTE slot header (foreign magic)"));
  if (h->version != kSlotVersion || h->header_bytes != sizeof(Header)) {
    return unmap_fail(refuse(name, "slot header format " + std::to_string(h->version) + "/" +
                                       std::to_string(h->header_bytes) + ", this engine reads " +
                                       std::to_string(kSlotVersion) + "/" +
                                       std::to_string(sizeof(Header))));
  }
  if (h->crc != header_crc(*h)) return unmap_fail(refuse(name, "the slot header is damaged (CRC)"));
  if (h->clock_id != CLOCK_MONOTONIC) {
    return unmap_fail(refuse(name, "clock " + std::to_string(h->clock_id) + ", not the monotonic"));
  }
  if (h->interval_ns != interval_ns) {
    return unmap_fail(refuse(name, "slot_rotation_interval " + std::to_string(h->interval_ns) +
                                       " ns in the object, " + std::to_string(interval_ns) +
                                       " ns here: every participant needs the same"));
  }
  return std::unique_ptr<SharedSlots>(new SharedSlots(name, fd, h, interval_ns));
}

SharedSlots::SharedSlots(std::string name, int fd, Header* header, std::uint64_t interval_ns)
    : name_(std::move(name)), fd_(fd), header_(header), interval_ns_(interval_ns) {
  publisher_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

SharedSlots::~SharedSlots() {
  publisher_.request_stop();
  if (publisher_.joinable()) publisher_.join();
  ::munmap(header_, sizeof(Header));
  ::close(fd_);  // releases the publisher's lock, if this process held it
}

bool SharedSlots::admits(std::size_t tier, std::uint64_t now_ns) const {
  const std::uint64_t word = header_->published.load(std::memory_order_acquire);
  // A publication of an earlier interval is stale (its publisher stalled or died): High only.
  const std::uint64_t slot = (word >> 2) == now_ns / interval_ns_ ? (word & 3) : 0;
  return tier <= slot;
}

void SharedSlots::run(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    if (!publishing_.load(std::memory_order_relaxed)) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        publishing_.store(true, std::memory_order_release);
        ORBITE_LOG(Debug, Rdma) << name_ << ": this process publishes the priority slots";
      } else if (errno != EWOULDBLOCK) {
        ORBITE_LOG(Warn, Rdma) << name_ << ": flock failed: " << std::strerror(errno);
      }
    }
    if (publishing_.load(std::memory_order_relaxed)) {
      const std::uint64_t now = now_ns();
      header_->published.store(((now / interval_ns_) << 2) | slot_at(now, interval_ns_),
                               std::memory_order_release);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

}  // namespace orbite::rdma
