// Notifications (TransferOptions::notification, TransferEngine::notify() and notifications())
// between two engines in this process: the owner of the remote region holds a put's message only
// once the put's bytes are in place (checked before the requester's request is waited for), a
// get's once the bytes were read, a batch's once after all its ranges; a failed transfer
// notifies nobody; a full box fails the sender's request; bad input changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <orbite/communicator.h>
#include <orbite/transfer.h>

#include "../support/config_test_helpers.h"
#include "../support/local_comms.h"
#include "engine_test_support.h"
#include "p2p/notifications.h"

namespace orbite {
namespace {

using testing::Guarded;
using testing::import;
using testing::kWait;
using testing::make_engine;
using testing::must_register;

constexpr auto kQuiet = std::chrono::milliseconds(100);

class NotificationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = make_engine(testing::loopback_config({}));
    b_ = make_engine(testing::loopback_config({}));
    ASSERT_TRUE(a_ && b_);
    src_r_ = must_register(*a_, src_.data(), src_.size());
    dst_r_ = must_register(*b_, dst_.data(), dst_.size());
  }
  void TearDown() override {
    src_r_ = MemoryRegion();
    dst_r_ = MemoryRegion();
    for (auto* e : {&a_, &b_}) {
      if (*e) {
        EXPECT_TRUE((*e)->close(kWait).ok());
      }
    }
  }
  // Notifications `e` holds, waiting until `n` came (or kWait passed).
  static std::vector<Notification> take(TransferEngine& e, std::size_t n) {
    std::vector<Notification> out;
    const auto until = std::chrono::steady_clock::now() + kWait;
    while (out.size() < n && std::chrono::steady_clock::now() < until) {
      for (auto& got : e.notifications(std::chrono::milliseconds(200))) {
        out.push_back(std::move(got));
      }
    }
    return out;
  }

  // A puts `len` bytes with a notification into B over `t`; B sees the message without anyone
  // waiting on the request, and by then the bytes are there.
  // GCC 12 at -O1 inlines Guarded into this loop and warns of a memset bound near 2^64 on a
  // path where len + 512 wrapped, which no caller reaches (len is at most kMiB + 3).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
  void put_notified(Transport t, std::uint64_t len) {
    SCOPED_TRACE(std::string(to_string(t)) + " " + std::to_string(len) + " bytes");
    Guarded src(len), dst(len);
    src.fill(len);
    MemoryRegion src_r = must_register(*a_, src.data(), len);
    MemoryRegion dst_r = must_register(*b_, dst.data(), len);
    TransferOptions opts;
    opts.transport = t;
    opts.notification = "put " + std::string(to_string(t)) + " " + std::to_string(len);
    const EngineStats before = a_->stats();
    auto put = a_->put(src_r, 0, import(dst_r), 0, len, opts);
    ASSERT_TRUE(put.ok()) << put.status().to_string();
    const std::vector<Notification> got = take(*b_, 1);
    ASSERT_EQ(got.size(), 1U);
    EXPECT_EQ(got[0].peer, a_->id());
    EXPECT_EQ(got[0].message, *opts.notification);
    EXPECT_EQ(dst.mismatch(0, len, len), std::nullopt) << "the notification came first";
    EXPECT_TRUE(dst.guards_intact());
    const Status st = put->wait(kWait);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(put->bytes(), len);
    // The message took the put's route (shm between these same-host engines unless forced).
    const Transport used = t == Transport::Tcp ? Transport::Tcp : Transport::Shm;
    const Transport other = used == Transport::Tcp ? Transport::Shm : Transport::Tcp;
    const EngineStats after = a_->stats();
    EXPECT_GT(after.of(used).frames_sent, before.of(used).frames_sent);
    EXPECT_EQ(after.of(other).frames_sent, before.of(other).frames_sent);
  }
#pragma GCC diagnostic pop

  std::shared_ptr<TransferEngine> a_, b_;
  // 64 bytes of A's and 64 of B's, registered: what the small cases put from and into.
  Guarded src_{64}, dst_{64};
  MemoryRegion src_r_, dst_r_;
};

TEST_F(NotificationTest, APutsNotificationArrivesAfterItsBytesOnEachTransport) {
  std::size_t sent = 0;
  for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Unspec}) {
    for (std::uint64_t len : {std::uint64_t{1}, std::uint64_t{4095}, kMiB + 3}) {
      put_notified(t, len);
      if (HasFatalFailure()) return;
      ++sent;
    }
  }
  const EngineStats b = b_->stats();
  EXPECT_EQ(b.notifications_received, sent);
  EXPECT_EQ(b.notifications_pending, 0U);
  EXPECT_EQ(b.notifications_refused, 0U);
  EXPECT_EQ(a_->stats().notifications_received, 0U);
  EXPECT_EQ(a_->stats().requests_failed, 0U);
}

TEST_F(NotificationTest, AGetsNotificationTellsTheOwnerItsBytesWereRead) {
  for (Transport t : {Transport::Tcp, Transport::Shm}) {
    SCOPED_TRACE(to_string(t));
    const std::uint64_t len = kMiB + 5;
    Guarded owned(len), back(len);
    owned.fill(9);
    MemoryRegion owned_r = must_register(*b_, owned.data(), len);
    MemoryRegion back_r = must_register(*a_, back.data(), len);
    TransferOptions opts;
    opts.transport = t;
    opts.notification = std::string("read\0done", 9);  // any bytes, NUL included
    auto get = a_->get(back_r, 0, import(owned_r), 0, len, opts);
    ASSERT_TRUE(get.ok()) << get.status().to_string();
    const std::vector<Notification> got = take(*b_, 1);
    ASSERT_EQ(got.size(), 1U);
    EXPECT_EQ(got[0].message, *opts.notification);
    ASSERT_TRUE(get->wait(kWait).ok());
    EXPECT_EQ(back.mismatch(0, len, 9), std::nullopt);
    EXPECT_TRUE(back.guards_intact());
  }
}

TEST_F(NotificationTest, ABatchNotifiesOnceAfterAllItsRanges) {
  Guarded src(4096), dst(4096);
  src.fill(3);
  MemoryRegion src_r = must_register(*a_, src.data(), 4096);
  MemoryRegion dst_r = must_register(*b_, dst.data(), 4096);
  const std::vector<TransferRange> ranges = {{0, 100, 10}, {50, 200, 7}, {1000, 4063, 33}};
  TransferOptions opts;
  opts.notification = "batch";
  auto put = a_->put(src_r, import(dst_r), ranges, opts);
  ASSERT_TRUE(put.ok()) << put.status().to_string();
  const std::vector<Notification> got = take(*b_, 1);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].message, "batch");
  for (const TransferRange& r : ranges) {
    EXPECT_EQ(dst.mismatch(r.remote_offset, r.length, 3, r.local_offset), std::nullopt);
  }
  ASSERT_TRUE(put->wait(kWait).ok());
  EXPECT_EQ(put->bytes(), 50U);
  EXPECT_TRUE(b_->notifications(kQuiet).empty()) << "one notification per request";
}

TEST_F(NotificationTest, NotifyAloneArrivesInTheOrderMade) {
  const RemoteRegion remote = import(dst_r_);
  std::vector<Request> requests;
  for (int i = 0; i < 200; ++i) {
    auto r = a_->notify(remote, "n" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    requests.push_back(*r);
  }
  ASSERT_TRUE(wait_all(requests, kWait).ok());
  const std::vector<Notification> got = take(*b_, 200);
  ASSERT_EQ(got.size(), 200U);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(got[static_cast<std::size_t>(i)].message, "n" + std::to_string(i));
    EXPECT_EQ(got[static_cast<std::size_t>(i)].peer, a_->id());
  }
  EXPECT_EQ(requests[0].bytes(), 0U);
  EXPECT_EQ(b_->stats().notifications_received, 200U);
}

TEST_F(NotificationTest, AFailedTransferNotifiesNobody) {
  const RemoteRegion stale = import(dst_r_);
  ASSERT_TRUE(dst_r_.unregister(kWait).ok());
  TransferOptions opts;
  opts.notification = "never";
  auto put = a_->put(src_r_, 0, stale, 0, 64, opts);
  ASSERT_TRUE(put.ok()) << put.status().to_string();
  const Status st = put->wait(kWait);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message().find("notification"), std::string::npos) << st.message();
  EXPECT_TRUE(b_->notifications(kQuiet).empty());
  EXPECT_EQ(b_->stats().notifications_received, 0U);
}

TEST_F(NotificationTest, BadNotificationsAreRefusedBeforeAnythingMoves) {
  const RemoteRegion remote = import(dst_r_);
  TransferOptions opts;
  opts.notification = std::string(kMaxNotificationBytes + 1, 'x');
  auto put = a_->put(src_r_, 0, remote, 0, 64, opts);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), Errc::InvalidArgument);
  EXPECT_CONTAINS(put.status().message(), "options.notification is 4097 bytes");
  auto big = a_->notify(remote, std::string(kMaxNotificationBytes + 1, 'x'));
  ASSERT_FALSE(big.ok());
  EXPECT_CONTAINS(big.status().message(), "notify: the message is 4097 bytes");
  TransferOptions both;
  both.notification = "twice";
  auto twice = a_->notify(remote, "once", both);
  ASSERT_FALSE(twice.ok());
  EXPECT_CONTAINS(twice.status().message(), "options.notification is set");
  auto nowhere = a_->notify(RemoteRegion(), "x");
  ASSERT_FALSE(nowhere.ok());
  EXPECT_CONTAINS(nowhere.status().message(), "descriptor is empty");
  EXPECT_TRUE(dst_.zero(0, 64));
  EXPECT_EQ(a_->stats().requests_submitted, 0U);
  // The largest message goes through whole.
  std::string largest(kMaxNotificationBytes, '\0');
  for (std::size_t i = 0; i < largest.size(); ++i) largest[i] = static_cast<char>(i * 7);
  auto ok = a_->notify(remote, largest);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  ASSERT_TRUE(ok->wait(kWait).ok());
  const std::vector<Notification> got = take(*b_, 1);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].message, largest);
}

TEST_F(NotificationTest, SendAndRecvRefuseANotification) {
  auto comms = testing::local_communicators(2, testing::loopback_config({}));
  ASSERT_EQ(comms.size(), 2U);
  char byte = 0;
  TransferOptions opts;
  opts.notification = "x";
  auto s = comms[0].isend(&byte, 1, 1, 0, opts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Errc::InvalidArgument);
  EXPECT_CONTAINS(s.status().message(), "isend: options.notification is set");
  auto r = comms[1].irecv(&byte, 1, 0, 0, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "irecv: options.notification is set");
}

// An owner whose application never takes its notifications holds 64 MiB of them; the next
// sender's request fails (its bytes, had it any, moved), and taking them makes room again.
TEST_F(NotificationTest, AFullOwnerFailsTheSendersRequestUntilItTakesThem) {
  const RemoteRegion remote = import(dst_r_);
  const std::string block(kMaxNotificationBytes, 'n');
  const std::size_t fits = p2p::kMaxPendingNotificationBytes / kMaxNotificationBytes;
  for (std::size_t done = 0; done < fits;) {
    std::vector<Request> wave;
    for (std::size_t i = 0; i < 512 && done < fits; ++i, ++done) {
      auto r = a_->notify(remote, block);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      wave.push_back(*r);
    }
    const Status st = wait_all(wave, kWait);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  EXPECT_EQ(b_->stats().notifications_pending, fits);
  auto refused = a_->notify(remote, "one more");
  ASSERT_TRUE(refused.ok());
  const Status st = refused->wait(kWait);
  EXPECT_EQ(st.code(), Errc::ResourceExhausted) << st.to_string();
  EXPECT_CONTAINS(st.message(), "untaken notifications");
  EXPECT_CONTAINS(st.message(), "notification");
  EXPECT_EQ(b_->stats().notifications_refused, 1U);
  EXPECT_EQ(b_->notifications().size(), fits);
  auto again = a_->notify(remote, "room again");
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->wait(kWait).ok());
  const std::vector<Notification> got = take(*b_, 1);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].message, "room again");
}

TEST_F(NotificationTest, ClosingTheEngineWakesAThreadWaitingForNotifications) {
  std::vector<Notification> got{Notification{"x", "x"}};
  std::thread waiter([&] { got = b_->notifications(Duration::max()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(b_->close(kWait).ok());
  waiter.join();
  EXPECT_TRUE(got.empty());
}

TEST(NotificationBox, BoundsWaitsAndCloses) {
  p2p::NotificationBox box(3, 100);
  ASSERT_TRUE(box.push({"p", "one"}).ok());
  ASSERT_TRUE(box.push({"p", std::string(90, 'x')}).ok());
  Status full = box.push({"p", std::string(8, 'y')});  // 3 + 90 + 8 > 100 bytes
  EXPECT_EQ(full.code(), Errc::ResourceExhausted);
  EXPECT_CONTAINS(full.message(), "holds 2 untaken notifications (93 bytes)");
  ASSERT_TRUE(box.push({"q", "two"}).ok());
  full = box.push({"q", ""});
  EXPECT_EQ(full.code(), Errc::ResourceExhausted) << "three is the count bound";
  EXPECT_EQ(box.pending(), 3U);
  EXPECT_EQ(box.refused(), 2U);
  std::vector<Notification> got = box.take(Duration::zero());
  ASSERT_EQ(got.size(), 3U);
  EXPECT_EQ(got[0].message, "one");
  EXPECT_EQ(got[2].peer, "q");
  EXPECT_TRUE(box.take(std::chrono::milliseconds(10)).empty());
  std::thread pusher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(box.push({"r", "late"}).ok());
  });
  got = box.take(kWait);
  pusher.join();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].message, "late");
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    box.close();
  });
  EXPECT_TRUE(box.take(Duration::max()).empty());
  closer.join();
  EXPECT_EQ(box.push({"s", "after"}).code(), Errc::Cancelled);
  EXPECT_EQ(box.received(), 4U);
}

}  // namespace
}  // namespace orbite
