// Shared priority slots (p2p/rdma/shared_slots.h): one publisher among the participants, another
// taking over when it exits or is SIGKILLed, stale publications admitting High only, and a
// foreign, damaged or differently configured object refused by name.
#include "p2p/rdma/shared_slots.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

namespace orbite::rdma {
namespace {

using namespace std::chrono_literals;

// A fresh object name per test, unlinked when the test ends.
class Slots : public ::testing::Test {
 protected:
  void TearDown() override { ::shm_unlink(name_.c_str()); }
  std::string name_ = "/orbite-slots-test-" + std::to_string(::getpid()) + "-" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name();
};

bool eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

// Writes raw bytes into the object, as a damaged or foreign writer would.
void poke(const std::string& name, off_t at, const void* bytes, std::size_t n) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::pwrite(fd, bytes, n, at), static_cast<ssize_t>(n));
  ::close(fd);
}

TEST_F(Slots, SlotsRepeatHighThenHighMediumThenAll) {
  const std::uint64_t ms = 1000000;
  EXPECT_EQ(slot_at(0, 2 * ms), 0U);
  EXPECT_EQ(slot_at(2 * ms, 2 * ms), 1U);
  EXPECT_EQ(slot_at(5 * ms, 2 * ms), 2U);
  EXPECT_EQ(slot_at(6 * ms, 2 * ms), 0U);
}

TEST_F(Slots, OnePublisherAndAPublicationAdmitsItsTiers) {
  auto a = SharedSlots::open(name_, 1s);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = SharedSlots::open(name_.substr(1), 1s);  // the leading slash is optional
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  ASSERT_TRUE(eventually([&] { return (*a)->publishing() || (*b)->publishing(); }));
  std::this_thread::sleep_for(20ms);
  EXPECT_NE((*a)->publishing(), (*b)->publishing()) << "exactly one publishes";
  // Within the current interval the published slot holds; both readers see the same.
  ASSERT_TRUE(eventually([&] {
    const std::uint64_t now = SharedSlots::now_ns();
    const std::uint32_t slot = slot_at(now, 1000000000);
    bool ok = true;
    for (std::size_t tier = 0; tier < 3; ++tier) {
      ok = ok && (*a)->admits(tier, now) == (tier <= slot) &&
           (*b)->admits(tier, now) == (tier <= slot);
    }
    return ok;
  }));
  // A reader ten intervals later finds the publication stale: High only.
  const std::uint64_t later = SharedSlots::now_ns() + 10ULL * 1000000000;
  EXPECT_TRUE((*a)->admits(0, later));
  EXPECT_FALSE((*a)->admits(1, later));
  EXPECT_FALSE((*a)->admits(2, later));
}

TEST_F(Slots, AnotherParticipantTakesOverWhenThePublisherCloses) {
  auto a = SharedSlots::open(name_, 2ms);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(eventually([&] { return (*a)->publishing(); }));
  auto b = SharedSlots::open(name_, 2ms);
  ASSERT_TRUE(b.ok());
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE((*b)->publishing());
  a->reset();
  EXPECT_TRUE(eventually([&] { return (*b)->publishing(); }));
}

TEST_F(Slots, AnotherParticipantTakesOverWhenThePublisherIsKilled) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The first participant: publishes, says so, and waits to be killed.
    auto mine = SharedSlots::open(name_, 2ms);
    if (!mine.ok()) ::_exit(2);
    while (!(*mine)->publishing()) std::this_thread::sleep_for(1ms);
    const char one = 1;
    if (::write(ready[1], &one, 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char got = 0;
  ASSERT_EQ(::read(ready[0], &got, 1), 1) << "the child never published";
  ::close(ready[0]);
  auto b = SharedSlots::open(name_, 2ms);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE((*b)->publishing()) << "the child holds the lock";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(eventually([&] { return (*b)->publishing(); })) << "no takeover after SIGKILL";
}

TEST_F(Slots, AStalledPublisherCannotExtendASlot) {
  { ASSERT_TRUE(SharedSlots::open(name_, 1s).ok()); }
  // The stalled publisher: it holds the lock and publishes no more. Its last word says slot 2
  // (all) for an interval long past.
  const int stalled = ::shm_open(name_.c_str(), O_RDWR, 0);
  ASSERT_GE(stalled, 0);
  ASSERT_EQ(::flock(stalled, LOCK_EX | LOCK_NB), 0);
  const std::uint64_t now = SharedSlots::now_ns();
  const std::uint64_t old = (((now / 1000000000) - 5) << 2) | 2;
  poke(name_, 32, &old, sizeof old);  // `published`, after the 32-byte fixed header
  auto b = SharedSlots::open(name_, 1s);
  ASSERT_TRUE(b.ok());
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE((*b)->publishing());
  EXPECT_TRUE((*b)->admits(0, now));
  EXPECT_FALSE((*b)->admits(1, now));
  EXPECT_FALSE((*b)->admits(2, now));
  ::close(stalled);
  EXPECT_TRUE(eventually([&] { return (*b)->publishing(); }));
}

// Two participants that start at once: one creates the object while the other joins it, and the
// joiner never reads a half-written header (it read the magic before the CRC was written, and
// refused the object as damaged).
TEST_F(Slots, ParticipantsStartingTogetherBothJoin) {
  for (int round = 0; round < 100; ++round) {
    const std::string name = name_ + "-" + std::to_string(round);
    Result<std::unique_ptr<SharedSlots>> first = Status::error(Errc::Internal, "not run");
    Result<std::unique_ptr<SharedSlots>> second = Status::error(Errc::Internal, "not run");
    std::thread other([&] { second = SharedSlots::open(name, 2ms); });
    first = SharedSlots::open(name, 2ms);
    other.join();
    ASSERT_TRUE(first.ok()) << "round " << round << ": " << first.status().to_string();
    ASSERT_TRUE(second.ok()) << "round " << round << ": " << second.status().to_string();
    ::shm_unlink(name.c_str());
  }
}

TEST_F(Slots, AnotherIntervalIsRefusedByName) {
  auto a = SharedSlots::open(name_, 2ms);
  ASSERT_TRUE(a.ok());
  auto b = SharedSlots::open(name_, 3ms);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Errc::Configuration);
  EXPECT_NE(b.status().message().find("slot_rotation_interval 2000000 ns in the object"),
            std::string::npos)
      << b.status().to_string();
  EXPECT_NE(b.status().message().find(name_), std::string::npos);
}

TEST_F(Slots, ADamagedOrForeignObjectIsRefused) {
  { ASSERT_TRUE(SharedSlots::open(name_, 2ms).ok()); }
  const std::uint32_t bad = 0x1234;
  poke(name_, 8, &bad, sizeof bad);  // the version: the CRC no longer matches either
  auto damaged = SharedSlots::open(name_, 2ms);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("format"), std::string::npos)
      << damaged.status().to_string();
  const std::uint32_t version = kSlotVersion;
  poke(name_, 8, &version, sizeof version);
  const std::uint32_t crc = 0;
  poke(name_, 28, &crc, sizeof crc);
  auto bad_crc = SharedSlots::open(name_, 2ms);
  ASSERT_FALSE(bad_crc.ok());
  EXPECT_NE(bad_crc.status().message().find("damaged (CRC)"), std::string::npos)
      << bad_crc.status().to_string();
  const std::uint64_t foreign = 0x0102030405060708ULL;
  poke(name_, 0, &foreign, sizeof foreign);
  auto other = SharedSlots::open(name_, 2ms);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("foreign magic"), std::string::npos);
  // Another size (someone else's object of the same name).
  const int fd = ::shm_open(name_.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  ::close(fd);
  auto sized = SharedSlots::open(name_, 2ms);
  ASSERT_FALSE(sized.ok());
  EXPECT_NE(sized.status().message().find("holds 4096 bytes"), std::string::npos)
      << sized.status().to_string();
}

}  // namespace
}  // namespace orbite::rdma
