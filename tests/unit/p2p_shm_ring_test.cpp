// The shared-memory ring on its own: two mappings of one segment in this process, the creator as
// producer and an opened mapping as consumer (or one mapping in both roles, as the self link
// uses it). Also the configuration checks that keep shm.ring_bytes and shm.eager_limit sane.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <orbite/config.h>

#include "../support/config_test_helpers.h"
#include "p2p/frame.h"
#include "p2p/shm/shm_ring.h"

namespace orbite {
namespace {

using p2p::decode_header;
using p2p::FrameHeader;
using p2p::FrameType;
using p2p::kFrameHeaderBytes;
using p2p::ShmRing;

constexpr std::uint64_t kRing = 64 * kKiB;
constexpr std::size_t kRecordPrefix = 8;  // u32 record length, u32 record kind

std::string unique_name() {
  static std::atomic<int> counter{0};
  return "/orbite-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

bool name_exists(const std::string& name) {
  return ::access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

std::uint64_t align8(std::uint64_t v) {
  return (v + 7) & ~std::uint64_t{7};
}

std::string pattern(std::uint64_t seq, std::size_t len) {
  std::string out(len, '\0');
  for (std::size_t i = 0; i < len; ++i) out[i] = static_cast<char>((seq * 131 + i * 7 + 1) & 0xff);
  return out;
}

// Pushes a frame whose payload is gathered from two pieces.
bool push(ShmRing& ring, FrameHeader h, const std::string& a, const std::string& b = {}) {
  h.payload_len = static_cast<std::uint32_t>(a.size() + b.size());
  iovec iov[2] = {{const_cast<char*>(a.data()), a.size()}, {const_cast<char*>(b.data()), b.size()}};
  return ring.try_push(h, std::span<const iovec>(iov, 2));
}

FrameHeader data_frame(std::uint64_t seq) {
  FrameHeader h;
  h.type = FrameType::Data;
  h.id = seq;
  h.a = seq * 3;
  h.b = ~seq;
  h.c = 17;
  h.d = seq << 20;
  return h;
}

// Pops the oldest frame and checks it is data_frame(seq) carrying pattern(seq, len).
void expect_frame(ShmRing& ring, std::uint64_t seq, std::size_t len) {
  SCOPED_TRACE("frame " + std::to_string(seq));
  const std::byte* p = ring.peek();
  ASSERT_NE(p, nullptr) << ring.corrupt();
  auto h = decode_header(p);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  const FrameHeader want = data_frame(seq);
  EXPECT_EQ(h->type, want.type);
  EXPECT_EQ(h->id, want.id);
  EXPECT_EQ(h->a, want.a);
  EXPECT_EQ(h->b, want.b);
  EXPECT_EQ(h->c, want.c);
  EXPECT_EQ(h->d, want.d);
  ASSERT_EQ(h->payload_len, len);
  ASSERT_GE(ring.current_frame_room(), kFrameHeaderBytes + len);
  const std::string expected = pattern(seq, len);
  EXPECT_EQ(std::memcmp(p + kFrameHeaderBytes, expected.data(), len), 0);
  ring.pop();
}

struct Pair {
  ShmRing producer;
  ShmRing consumer;
};

Pair make_pair(const std::string& name, std::uint64_t capacity = kRing) {
  auto created = ShmRing::create(name, capacity);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (!created.ok()) return {};
  auto opened = ShmRing::open(name, capacity);
  EXPECT_TRUE(opened.ok()) << opened.status().to_string();
  if (!opened.ok()) return {};
  return Pair{std::move(*created), std::move(*opened)};
}

TEST(ShmRing, PushPeekPopRoundTrip) {
  const std::string name = unique_name();
  Pair p = make_pair(name);
  ASSERT_TRUE(p.producer.valid() && p.consumer.valid());
  EXPECT_EQ(p.consumer.capacity(), kRing);
  EXPECT_EQ(p.consumer.max_payload(), kRing / 4);
  EXPECT_EQ(p.consumer.name(), name);
  EXPECT_TRUE(p.consumer.empty());
  EXPECT_EQ(p.consumer.peek(), nullptr);
  EXPECT_TRUE(p.consumer.corrupt().empty());

  FrameHeader h;
  h.type = FrameType::Eager;
  h.id = 99;
  h.a = p2p::pack_comm_tag(7, -3);
  h.b = 5;
  h.c = 11;
  h.d = 0xdeadbeef;
  ASSERT_TRUE(push(p.producer, h, "hello ", "world"));
  EXPECT_FALSE(p.consumer.empty());
  const std::byte* frame = p.consumer.peek();
  ASSERT_NE(frame, nullptr) << p.consumer.corrupt();
  auto back = decode_header(frame);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->type, FrameType::Eager);
  EXPECT_EQ(back->payload_len, 11U);
  EXPECT_EQ(back->id, 99U);
  EXPECT_EQ(back->a, h.a);
  EXPECT_EQ(back->b, 5U);
  EXPECT_EQ(back->c, 11U);
  EXPECT_EQ(back->d, 0xdeadbeefU);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(frame) + kFrameHeaderBytes, 11),
            "hello world");
  EXPECT_EQ(p.consumer.current_frame_room(),
            align8(kRecordPrefix + kFrameHeaderBytes + 11) - kRecordPrefix);
  EXPECT_EQ(p.consumer.peek(), frame) << "peek does not consume";
  p.consumer.pop();
  EXPECT_TRUE(p.consumer.empty());
  EXPECT_EQ(p.consumer.peek(), nullptr);

  // A frame without payload, and a self ring (one mapping in both roles).
  FrameHeader bell;
  bell.type = FrameType::Doorbell;
  ASSERT_TRUE(push(p.producer, bell, ""));
  const std::byte* f2 = p.consumer.peek();
  ASSERT_NE(f2, nullptr);
  EXPECT_EQ(decode_header(f2)->type, FrameType::Doorbell);
  EXPECT_EQ(decode_header(f2)->payload_len, 0U);
  p.consumer.pop();
  ASSERT_TRUE(push(p.producer, data_frame(1), pattern(1, 33)));
  expect_frame(p.producer, 1, 33);
  EXPECT_TRUE(p.consumer.empty());
  EXPECT_TRUE(p.consumer.corrupt().empty());
}

TEST(ShmRing, OddSizedFramesWrapAroundInterleaved) {
  Pair p = make_pair(unique_name());
  ASSERT_TRUE(p.producer.valid() && p.consumer.valid());
  constexpr std::uint64_t kFrames = 3000;
  std::deque<std::size_t> in_flight;  // payload sizes of pushed, unpopped frames
  std::uint64_t pushed = 0;
  std::uint64_t popped = 0;
  std::uint64_t bytes_through = 0;
  std::uint64_t rng = 12345;
  auto next = [&rng] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 33;
  };
  int full_hits = 0;
  while (popped < kFrames) {
    // Push until the ring refuses (or the sequence ends).
    while (pushed < kFrames) {
      // Odd sizes up to the ring's max payload, many small and some large.
      const std::size_t len =
          (next() % 4 == 0) ? next() % (p.producer.max_payload() + 1) : (next() % 300) | 1;
      const std::string payload = pattern(pushed, len);
      const std::size_t split = len / 3;  // gathered from two pieces
      if (!push(p.producer, data_frame(pushed), payload.substr(0, split), payload.substr(split))) {
        ++full_hits;
        break;
      }
      in_flight.push_back(len);
      bytes_through += align8(kRecordPrefix + kFrameHeaderBytes + len);
      ++pushed;
    }
    // Pop a varying number of frames, checking each.
    const std::uint64_t take = 1 + next() % 7;
    for (std::uint64_t i = 0; i < take && !in_flight.empty(); ++i) {
      expect_frame(p.consumer, popped, in_flight.front());
      if (::testing::Test::HasFatalFailure()) return;
      in_flight.pop_front();
      ++popped;
    }
  }
  EXPECT_TRUE(p.consumer.empty());
  EXPECT_TRUE(p.consumer.corrupt().empty());
  EXPECT_GT(full_hits, 10) << "the ring should have filled up repeatedly";
  EXPECT_GT(bytes_through, 20 * kRing) << "the ring should have wrapped many times";
}

TEST(ShmRing, TryPushFailsWhenFullAndSucceedsAfterPops) {
  Pair p = make_pair(unique_name());
  ASSERT_TRUE(p.producer.valid() && p.consumer.valid());
  // 8 + 48 + 968 = 1024-byte records; the ring keeps 8 bytes free (the zero length word that
  // ends the published records), so one record short of tiling the ring fits.
  constexpr std::size_t kLen = 1024 - kRecordPrefix - kFrameHeaderBytes;
  std::uint64_t seq = 0;
  while (seq < 1000 && push(p.producer, data_frame(seq), pattern(seq, kLen))) ++seq;
  EXPECT_EQ(seq, kRing / 1024 - 1);
  EXPECT_FALSE(push(p.producer, data_frame(seq), pattern(seq, kLen)));

  expect_frame(p.consumer, 0, kLen);
  ASSERT_TRUE(push(p.producer, data_frame(seq), pattern(seq, kLen)));
  EXPECT_FALSE(push(p.producer, data_frame(seq + 1), pattern(seq + 1, kLen)));
  for (std::uint64_t i = 1; i <= seq; ++i) expect_frame(p.consumer, i, kLen);
  EXPECT_TRUE(p.consumer.empty());

  // A frame larger than the ring never fits, even when it is empty.
  EXPECT_FALSE(push(p.producer, data_frame(0), std::string(kRing, 'x')));
}

TEST(ShmRing, CreateAndOpenCheckTheirArguments) {
  for (std::uint64_t bad : {std::uint64_t{0}, std::uint64_t{2048}, std::uint64_t{100000}}) {
    auto r = ShmRing::create(unique_name(), bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument);
    EXPECT_CONTAINS(r.status().message(), std::to_string(bad));
  }
  const std::string name = unique_name();
  auto created = ShmRing::create(name, kRing);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  auto again = ShmRing::create(name, kRing);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Errc::Unavailable);
  EXPECT_CONTAINS(again.status().message(), name);

  for (std::uint64_t wrong : {kRing / 2, kRing * 2}) {
    auto r = ShmRing::open(name, wrong);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Errc::Protocol);
    EXPECT_CONTAINS(r.status().message(), name);
    EXPECT_CONTAINS(r.status().message(), "expected");
  }
  auto missing = ShmRing::open(unique_name(), kRing);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Errc::NotFound) << "the shm transport's receive-only case";
}

TEST(ShmRing, OpenRejectsASegmentWithoutARingHeader) {
  const std::string name = unique_name();
  auto created = ShmRing::create(name, kRing);
  ASSERT_TRUE(created.ok());
  // Stand-in for a foreign segment of the right size: zero the creator's header.
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const auto header_area = static_cast<std::size_t>(st.st_size) - kRing;
  void* m = ::mmap(nullptr, header_area, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(m, MAP_FAILED);
  std::memset(m, 0, 16);
  ::munmap(m, header_area);
  auto r = ShmRing::open(name, kRing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::Protocol);
  EXPECT_CONTAINS(r.status().message(), "foreign header");
}

TEST(ShmRing, DoorbellRequestProtocol) {
  Pair p = make_pair(unique_name());
  ASSERT_TRUE(p.producer.valid() && p.consumer.valid());
  EXPECT_FALSE(p.producer.take_doorbell_request()) << "nobody asked yet";

  // The consumer raises the request on an empty ring; the producer sees it exactly once.
  EXPECT_TRUE(p.consumer.prepare_sleep());
  EXPECT_TRUE(p.producer.take_doorbell_request());
  EXPECT_FALSE(p.producer.take_doorbell_request());

  // Cancelled before the producer looked: no request.
  EXPECT_TRUE(p.consumer.prepare_sleep());
  p.consumer.cancel_sleep();
  EXPECT_FALSE(p.producer.take_doorbell_request());

  // Frames already waiting: the consumer must not sleep, and asks for nothing.
  ASSERT_TRUE(push(p.producer, data_frame(0), pattern(0, 10)));
  EXPECT_FALSE(p.consumer.prepare_sleep());
  EXPECT_FALSE(p.producer.take_doorbell_request());
  expect_frame(p.consumer, 0, 10);

  // Raised, then a push: the producer rings once after the push.
  EXPECT_TRUE(p.consumer.prepare_sleep());
  ASSERT_TRUE(push(p.producer, data_frame(1), pattern(1, 10)));
  EXPECT_TRUE(p.producer.take_doorbell_request());
  EXPECT_FALSE(p.producer.take_doorbell_request());
  expect_frame(p.consumer, 1, 10);
}

TEST(ShmRing, CorruptRecordsAreReportedNotFollowed) {
  const std::string name = unique_name();
  Pair p = make_pair(name);
  ASSERT_TRUE(p.producer.valid() && p.consumer.valid());
  ASSERT_TRUE(push(p.producer, data_frame(0), pattern(0, 20)));
  const auto record = static_cast<std::uint32_t>(align8(kRecordPrefix + kFrameHeaderBytes + 20));

  // A third mapping, standing in for a misbehaving peer, reaches the first record's prefix.
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const auto bytes = static_cast<std::size_t>(st.st_size);
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(m, MAP_FAILED);
  auto* rec = static_cast<std::byte*>(m) + (bytes - kRing);  // the data area follows the header
  std::uint32_t len = 0;
  std::uint32_t kind = 0;
  std::memcpy(&len, rec, 4);
  std::memcpy(&kind, rec + 4, 4);
  ASSERT_EQ(len, record) << "the record prefix is where the layout says";
  ASSERT_EQ(kind, 0U);

  struct Garbage {
    std::uint32_t len;
    std::uint32_t kind;
  };
  // (A zero length means "not published yet": that is an empty ring, checked below. A longer
  // length that stays inside the ring cannot be told from a real one; it only reads bytes of the
  // ring, and the frame inside must still fit it.)
  for (Garbage g : {Garbage{12, 0}, Garbage{8, 0}, Garbage{0xfffffff8u, 0}, Garbage{record, 7},
                    Garbage{record, 0xffffffffu}}) {
    SCOPED_TRACE("length " + std::to_string(g.len) + " kind " + std::to_string(g.kind));
    std::memcpy(rec, &g.len, 4);
    std::memcpy(rec + 4, &g.kind, 4);
    EXPECT_EQ(p.consumer.peek(), nullptr);
    EXPECT_CONTAINS(p.consumer.corrupt(), "ring record at 0 has kind " + std::to_string(g.kind) +
                                              " and length " + std::to_string(g.len));
  }
  const std::uint32_t zero = 0;
  std::memcpy(rec, &zero, 4);
  EXPECT_EQ(p.consumer.peek(), nullptr);
  EXPECT_TRUE(p.consumer.empty()) << "an unpublished length reads as an empty ring";
  // Restored, the record reads again.
  std::memcpy(rec, &record, 4);
  std::memcpy(rec + 4, &kind, 4);
  expect_frame(p.consumer, 0, 20);
  ::munmap(m, bytes);
}

TEST(ShmRing, UnlinkNameRemovesTheSegmentNameOnly) {
  const std::string name = unique_name();
  {
    auto ring = ShmRing::create(name, kRing);
    ASSERT_TRUE(ring.ok());
    EXPECT_TRUE(name_exists(name));
    {
      auto opened = ShmRing::open(name, kRing);
      ASSERT_TRUE(opened.ok());
    }
    EXPECT_TRUE(name_exists(name)) << "the opening side never unlinks";
    ring->unlink_name();
    EXPECT_FALSE(name_exists(name));
    auto late = ShmRing::open(name, kRing);
    ASSERT_FALSE(late.ok());
    EXPECT_EQ(late.status().code(), Errc::NotFound);
    // The mapping stays usable.
    ASSERT_TRUE(push(*ring, data_frame(4), pattern(4, 100)));
    expect_frame(*ring, 4, 100);
    // Moving keeps the mapping; the moved-from ring is empty.
    ShmRing moved = std::move(*ring);
    EXPECT_FALSE(ring->valid());
    ASSERT_TRUE(moved.valid());
    ASSERT_TRUE(push(moved, data_frame(5), pattern(5, 1)));
    expect_frame(moved, 5, 1);
  }
  const std::string other = unique_name();
  {
    auto ring = ShmRing::create(other, kRing);
    ASSERT_TRUE(ring.ok());
    EXPECT_TRUE(name_exists(other));
  }
  EXPECT_FALSE(name_exists(other)) << "the creator's destructor unlinks a name it still holds";
}

// ------------------------------------------------------------------------------------------------
// Shared-memory configuration

TEST(ShmConfig, RingBytesMustBeAPowerOfTwo) {
  auto c = EngineConfig::from_json(R"({"shm": {"ring_bytes": 100000, "eager_limit": 1024}})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(c.status().message(), "shm.ring_bytes");
  EXPECT_CONTAINS(c.status().message(), "100000");
  EXPECT_CONTAINS(c.status().message(), "power of two");
  EXPECT_TRUE(
      EngineConfig::from_json(R"({"shm": {"ring_bytes": 131072, "eager_limit": 32768}})").ok());
  // A ring under four default eager messages (64 KiB each) needs the eager limit lowered too.
  auto small = EngineConfig::from_json(R"({"shm": {"ring_bytes": 131072}})");
  ASSERT_FALSE(small.ok());
  EXPECT_CONTAINS(small.status().message(), "shm.eager_limit = 65536");
}

TEST(ShmConfig, EagerLimitIsAtMostAQuarterOfTheRing) {
  auto c = EngineConfig::from_json(R"({"shm": {"ring_bytes": 65536, "eager_limit": 16385}})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_CONTAINS(c.status().message(), "shm.eager_limit");
  EXPECT_CONTAINS(c.status().message(), "16385");
  EXPECT_CONTAINS(c.status().message(), "65536");
  auto edge = EngineConfig::from_json(R"({"shm": {"ring_bytes": 65536, "eager_limit": 16384}})");
  ASSERT_TRUE(edge.ok()) << edge.status().to_string();
  EXPECT_EQ(edge->shm.eager_limit, 16384U);
}

}  // namespace
}  // namespace orbite
