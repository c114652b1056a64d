#include "p2p/shm/shm_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/shm_object.h"

namespace orbite::p2p {

namespace {
constexpr std::uint32_t kRingMagic = 0x4f52494e;  // "ORIN"
constexpr std::uint32_t kRingVersion = 1;
constexpr std::size_t kHeaderArea = 4096;
// A record: u32 total length (8-aligned), u32 kind, then the frame. kind 1 pads to the end.
constexpr std::uint32_t kRecordFrame = 0;
constexpr std::uint32_t kRecordPad = 1;
constexpr std::size_t kRecordPrefix = 8;

std::uint64_t align8(std::uint64_t v) {
  return (v + 7) & ~std::uint64_t{7};
}

// Segments this process created, by name. Two engines of one process (tests, or an application
// with two engines) share the creator's mapping instead of mapping the segment a second time:
// one address per byte keeps the ring's acquire/release pairs visible to ThreadSanitizer.
std::mutex g_maps_mu;
std::map<std::string, std::weak_ptr<void>> g_maps;

std::shared_ptr<void> own_mapping(void* p, std::size_t bytes) {
  return std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); });
}
}  // namespace

struct ShmRing::Header {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint64_t capacity;
  alignas(64) std::atomic<std::uint64_t> head;  // bytes published by the producer
  alignas(64) std::atomic<std::uint64_t> tail;  // bytes retired by the consumer
  alignas(64) std::atomic<std::uint32_t> consumer_sleeping;
};
static_assert(sizeof(std::atomic<std::uint64_t>) == 8);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

std::byte* ShmRing::data() const {
  return base_ + kHeaderArea;
}

Result<ShmRing> ShmRing::create(const std::string& name, std::uint64_t capacity) {
  if (capacity < 4096 || (capacity & (capacity - 1)) != 0) {
    return Status::error(Errc::InvalidArgument, "shm ring capacity " + std::to_string(capacity) +
                                                    " is not a power of two");
  }
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::error(Errc::Unavailable,
                         "shm_open(" + name + ") failed: " + std::string(std::strerror(errno)));
  }
  const std::size_t bytes = kHeaderArea + capacity;
  if (const int e = size_shm_object(fd, bytes); e != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    return Status::error(Errc::ResourceExhausted, "sizing shm segment " + name + " to " +
                                                      std::to_string(bytes) +
                                                      " bytes failed: " + std::strerror(e));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return Status::error(Errc::ResourceExhausted, "mmap of shm segment " + name + " failed");
  }
  ShmRing r;
  r.base_ = static_cast<std::byte*>(p);
  r.map_bytes_ = bytes;
  r.mapping_ = own_mapping(p, bytes);
  r.capacity_ = capacity;
  r.name_ = name;
  r.owner_ = true;
  {
    std::lock_guard lock(g_maps_mu);
    std::erase_if(g_maps, [](const auto& kv) { return kv.second.expired(); });
    g_maps[name] = r.mapping_;
  }
  auto* h = new (r.base_) Header();
  h->magic = kRingMagic;
  h->version = kRingVersion;
  h->capacity = capacity;
  h->head.store(0);
  h->tail.store(0);
  h->consumer_sleeping.store(0);
  return r;
}

Result<ShmRing> ShmRing::open(const std::string& name, std::uint64_t capacity) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    // NotFound: the name is gone (its owner unlinked it when it closed the link).
    return Status::error(
        errno == ENOENT ? Errc::NotFound : Errc::Unavailable,
        "opening the peer's shm ring " + name + " failed: " + std::string(std::strerror(errno)));
  }
  struct stat st {};
  const std::size_t bytes = kHeaderArea + capacity;
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != bytes) {
    ::close(fd);
    return Status::error(Errc::Protocol, "the peer's shm ring " + name + " has " +
                                             std::to_string(st.st_size) + " bytes, expected " +
                                             std::to_string(bytes));
  }
  std::shared_ptr<void> mapping;
  {
    std::lock_guard lock(g_maps_mu);
    if (auto it = g_maps.find(name); it != g_maps.end()) mapping = it->second.lock();
  }
  if (!mapping) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Status::error(Errc::ResourceExhausted,
                           "mmap of the peer's shm ring " + name + " failed");
    }
    mapping = own_mapping(p, bytes);
  }
  ::close(fd);
  ShmRing r;
  r.base_ = static_cast<std::byte*>(mapping.get());
  r.map_bytes_ = bytes;
  r.mapping_ = std::move(mapping);
  r.capacity_ = capacity;
  r.name_ = name;
  auto* h = r.header();
  if (h->magic != kRingMagic || h->version != kRingVersion || h->capacity != capacity) {
    return Status::error(Errc::Protocol, "the peer's shm ring " + name + " has a foreign header");
  }
  return r;
}

ShmRing::ShmRing(ShmRing&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      map_bytes_(o.map_bytes_),
      mapping_(std::move(o.mapping_)),
      capacity_(o.capacity_),
      name_(std::move(o.name_)),
      owner_(std::exchange(o.owner_, false)),
      cached_tail_(o.cached_tail_) {}

ShmRing& ShmRing::operator=(ShmRing&& o) noexcept {
  if (this != &o) {
    reset();
    base_ = std::exchange(o.base_, nullptr);
    map_bytes_ = o.map_bytes_;
    mapping_ = std::move(o.mapping_);
    capacity_ = o.capacity_;
    name_ = std::move(o.name_);
    owner_ = std::exchange(o.owner_, false);
    cached_tail_ = o.cached_tail_;
  }
  return *this;
}

ShmRing::~ShmRing() {
  reset();
}

void ShmRing::reset() {
  mapping_.reset();  // unmaps when no other ring of this process shares the mapping
  if (owner_) unlink_name();
  base_ = nullptr;
}

void ShmRing::unlink_name() {
  if (owner_ && !name_.empty()) ::shm_unlink(name_.c_str());
  owner_ = false;
}

bool ShmRing::try_push(const FrameHeader& h, std::span<const iovec> payload) {
  Header* hd = header();
  const std::uint64_t need = align8(kRecordPrefix + kFrameHeaderBytes + h.payload_len);
  const std::uint64_t head = hd->head.load(std::memory_order_relaxed);
  const std::uint64_t pos = head & (capacity_ - 1);
  const std::uint64_t to_end = capacity_ - pos;
  // A record never wraps: pad to the end when it does not fit contiguously.
  const std::uint64_t pad = need > to_end ? to_end : 0;
  // The consumer's tail lives in its cache: read it only when the cached copy says "full". The
  // last kRecordPrefix bytes stay free for the zero length that ends the published records.
  const std::uint64_t want = need + pad + kRecordPrefix;
  if (want > capacity_ - (head - cached_tail_)) {
    cached_tail_ = hd->tail.load(std::memory_order_acquire);
    if (want > capacity_ - (head - cached_tail_)) return false;
  }
  const std::uint64_t at = head + pad;
  std::byte* rec = data() + (at & (capacity_ - 1));
  std::memcpy(rec + 4, &kRecordFrame, 4);
  encode_header(h, rec + kRecordPrefix);
  std::byte* out = rec + kRecordPrefix + kFrameHeaderBytes;
  for (const iovec& v : payload) {
    std::memcpy(out, v.iov_base, v.iov_len);
    out += v.iov_len;
  }
  // The consumer polls the length word where the next record will start: it must read zero
  // until that record is published, whatever an older record left there.
  length_word((at + need) & (capacity_ - 1)).store(0, std::memory_order_relaxed);
  // Publication: the length word last (release), the pad's before it is found (it is read
  // first). Dekker with prepare_sleep(): unless the length is stored sequentially consistent
  // (and the sleep flag read so), a producer may miss a consumer that is just falling asleep.
  // Strict mode pays for that on every push; otherwise the sleeper's bounded timeout covers it.
  const auto order = strict_wakeup_ ? std::memory_order_seq_cst : std::memory_order_release;
  length_word(at & (capacity_ - 1)).store(static_cast<std::uint32_t>(need), order);
  if (pad != 0) {
    std::memcpy(data() + pos + 4, &kRecordPad, 4);
    length_word(pos).store(static_cast<std::uint32_t>(pad), order);
  }
  hd->head.store(at + need, std::memory_order_relaxed);
  return true;
}

std::atomic_ref<std::uint32_t> ShmRing::length_word(std::uint64_t pos) const {
  return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(data() + pos));
}

bool ShmRing::take_doorbell_request() {
  Header* hd = header();
  if (hd->consumer_sleeping.load(strict_wakeup_ ? std::memory_order_seq_cst
                                                : std::memory_order_relaxed) == 0) {
    return false;
  }
  return hd->consumer_sleeping.exchange(0, std::memory_order_seq_cst) != 0;
}

const std::byte* ShmRing::peek() {
  Header* hd = header();
  for (;;) {
    const std::uint64_t tail = hd->tail.load(std::memory_order_relaxed);
    const std::uint64_t pos = tail & (capacity_ - 1);
    // One cache line carries the publication and the record: the consumer polls the length.
    const std::uint32_t len = length_word(pos).load(std::memory_order_acquire);
    if (len == 0) return nullptr;
    const std::byte* rec = data() + pos;
    std::uint32_t kind = 0;
    std::memcpy(&kind, rec + 4, 4);
    // The peer writes these bytes: check them before they steer a read.
    const std::uint64_t min_len = kRecordPrefix + (kind == kRecordPad ? 0 : kFrameHeaderBytes);
    if ((kind != kRecordPad && kind != kRecordFrame) || len < min_len || len % 8 != 0 ||
        len > capacity_ - pos) {
      corrupt_ = "ring record at " + std::to_string(tail) + " has kind " + std::to_string(kind) +
                 " and length " + std::to_string(len);
      return nullptr;
    }
    if (kind == kRecordPad) {
      hd->tail.store(tail + len, std::memory_order_release);
      continue;
    }
    current_len_ = len;
    return rec + kRecordPrefix;
  }
}

void ShmRing::pop() {
  Header* hd = header();
  const std::uint64_t tail = hd->tail.load(std::memory_order_relaxed);
  hd->tail.store(tail + current_len_, std::memory_order_release);
}

bool ShmRing::empty() const {
  const std::uint64_t tail = header()->tail.load(std::memory_order_relaxed);
  return length_word(tail & (capacity_ - 1)).load(std::memory_order_acquire) == 0;
}

bool ShmRing::prepare_sleep() {
  Header* hd = header();
  hd->consumer_sleeping.store(1, std::memory_order_seq_cst);
  const std::uint64_t tail = hd->tail.load(std::memory_order_relaxed);
  if (length_word(tail & (capacity_ - 1)).load(std::memory_order_seq_cst) != 0) {
    hd->consumer_sleeping.store(0, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void ShmRing::cancel_sleep() {
  header()->consumer_sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace orbite::p2p
