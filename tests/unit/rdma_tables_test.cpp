// The per-peer tables of the RDMA lane (issue 24's split): the requester's ParentTable with its
// GrantRequest window, the source's GrantTable with its bounded, tier-ordered deferred queue, and
// the MessageChannel's frames, each pin released once.
#include <gtest/gtest.h>

#include <vector>

#include "p2p/rdma/grant_table.h"
#include "p2p/rdma/message_channel.h"
#include "p2p/rdma/parent_table.h"

namespace orbite::rdma {
namespace {

// A GrantRequest of `parent` at tier `priority`, as the deferred queue sees it.
GrantRequest request(std::uint64_t parent, std::uint8_t priority) {
  GrantRequest m;
  m.parent = parent;
  m.priority = priority;
  return m;
}

Parent connecting(std::uint64_t id) {
  Parent p;
  p.id = id;
  p.state = ParentState::Connecting;
  return p;
}

TEST(RdmaTables, TheGrantRequestWindowHoldsParentsInOrderAndSkipsThoseThatMovedOn) {
  ParentTable t;
  for (std::uint64_t id = 1; id <= 3; ++id) t.insert(connecting(id));
  for (std::size_t i = 0; i < kMaxPendingGrantRequests; ++i) t.requested();
  ASSERT_TRUE(t.window_full());
  for (std::uint64_t id = 1; id <= 3; ++id) t.hold(*t.find(id));
  t.hold(*t.find(1));  // held once, however often it asks
  EXPECT_EQ(t.next_held(), nullptr) << "the window is full";
  t.find(1)->state = ParentState::Draining;  // failed while held
  t.erase(2);                                // ended while held
  t.answered();
  Parent* next = t.next_held();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->id, 3U);
  next->request_waiting = false;
  t.requested();
  EXPECT_EQ(t.next_held(), nullptr);
  t.reset_window();
  EXPECT_FALSE(t.window_full());
}

TEST(RdmaTables, AParentUsingAQpKeepsItFromTheReaper) {
  ParentTable t;
  Parent p = connecting(7);
  p.segments.push_back(Segment{});
  p.segments.back().qp_handle = 4;
  t.insert(std::move(p));
  EXPECT_TRUE(t.uses_qp(4));
  EXPECT_FALSE(t.uses_qp(5));
}

TEST(RdmaTables, DeferredGrantRequestsAreBoundedAndRetriedInTierOrder) {
  GrantTable t;
  bool first = false;
  ASSERT_TRUE(t.defer(request(1, 2), &first));
  EXPECT_TRUE(first);
  ASSERT_TRUE(t.defer(request(2, 0), &first));
  ASSERT_TRUE(t.defer(request(3, 2), &first));
  ASSERT_TRUE(t.defer(request(4, 0), &first));
  std::vector<std::uint64_t> order;
  for (const GrantRequest& m : t.take_deferred()) {
    order.push_back(m.parent);
    EXPECT_TRUE(m.deferred);
  }
  EXPECT_EQ(order, (std::vector<std::uint64_t>{2, 4, 1, 3}));  // High first, FIFO within
  EXPECT_FALSE(t.has_deferred());
  GrantRequest again = request(5, 1);
  again.deferred = true;  // waited before: not counted again
  ASSERT_TRUE(t.defer(again, &first));
  EXPECT_FALSE(first);
  for (std::size_t i = 1; i < kMaxPendingGrantRequests; ++i)
    ASSERT_TRUE(t.defer(request(9, 2), &first));
  EXPECT_FALSE(t.defer(request(10, 2), &first)) << "the bound was not enforced";
}

TEST(RdmaTables, ARequestWaitingForItsReceiveKeepsNoEngineBusy) {
  GrantTable t;
  bool first = false;
  GrantRequest m;
  m.parent = 1;
  ASSERT_TRUE(t.defer(m, &first, /*awaits_receive=*/true));
  EXPECT_TRUE(t.has_deferred());
  EXPECT_FALSE(t.has_deferred_work()) << "a message waiting for its receive counted as work";
  m.parent = 2;
  ASSERT_TRUE(t.defer(m, &first));
  EXPECT_TRUE(t.has_deferred_work());
  // Retried, a request says again why it waits: the mark is the latest deferral's.
  auto taken = t.take_deferred();
  ASSERT_EQ(taken.size(), 2u);
  ASSERT_TRUE(t.defer(taken.front(), &first, /*awaits_receive=*/false));
  EXPECT_TRUE(t.has_deferred_work());
}

TEST(RdmaTables, GrantsAreFoundTakenOnceAndExpireOnTheirTimer) {
  GrantTable t;
  const auto t0 = GrantTable::Clock::now();
  GrantState a;
  a.id = 1;
  a.parent = 11;
  a.started = t0;
  a.segments.push_back(GrantSegment{});
  a.segments.back().qp_handle = 3;
  t.insert(std::move(a));
  GrantState b;
  b.id = 2;
  b.parent = 12;
  b.started = t0 + std::chrono::seconds(5);
  t.insert(std::move(b));
  EXPECT_TRUE(t.has_parent(11));
  std::vector<std::uint64_t> ids;
  t.through(3, true, ids);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{1}));
  auto next = GrantTable::Clock::time_point::max();
  t.due(t0 + std::chrono::seconds(10), std::chrono::seconds(10), ids, next);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(next, t0 + std::chrono::seconds(15));
  EXPECT_TRUE(t.take(1).has_value());
  EXPECT_FALSE(t.take(1).has_value());
  EXPECT_EQ(t.find(1), nullptr);
  EXPECT_NE(t.find(2), nullptr);
  EXPECT_FALSE(t.has_parent(11)) << "the parent index kept a grant that was taken";
  EXPECT_TRUE(t.has_parent(12));
}

TEST(RdmaTables, RequestsStillShortOfRoomStayQueuedAndTheRestAreTakenInTierOrder) {
  GrantTable t;
  bool first = false;
  for (auto [parent, tier] : {std::pair{1, 2}, {2, 2}, {3, 0}, {4, 2}, {5, 0}}) {
    ASSERT_TRUE(t.defer(request(parent, static_cast<std::uint8_t>(tier)), &first, false,
                        /*awaits_room=*/parent % 2 == 1));
  }
  std::vector<std::uint64_t> looked_at;
  auto taken = t.take_deferred([&](const GrantRequest& m) {
    looked_at.push_back(m.parent);
    return m.awaits_room;  // as if every connection were still short
  });
  EXPECT_EQ(looked_at, (std::vector<std::uint64_t>{3, 5, 1, 2, 4})) << "each looked at once";
  std::vector<std::uint64_t> order;
  for (const GrantRequest& m : taken) order.push_back(m.parent);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{2, 4}));
  // Those that stayed are still queued, in tier order, and still marked.
  order.clear();
  for (const GrantRequest& m : t.take_deferred()) {
    order.push_back(m.parent);
    EXPECT_TRUE(m.awaits_room);
  }
  EXPECT_EQ(order, (std::vector<std::uint64_t>{3, 5, 1}));
}

// The lane scans deferred requests only after an event of its own, unless one waits for a
// receive (posted by the user, no event of the lane's): the table must know while one does.
TEST(RdmaTables, TheTableKnowsWhileADeferredRequestWaitsForAReceive) {
  GrantTable t;
  bool first = false;
  EXPECT_FALSE(t.awaits_receives());
  ASSERT_TRUE(t.defer(request(1, 0), &first, /*awaits_receive=*/true));
  ASSERT_TRUE(t.defer(request(2, 0), &first, false, /*awaits_room=*/true));
  EXPECT_TRUE(t.awaits_receives());
  // The room waiter taken, the receive waiter kept: still waiting for a receive.
  auto taken = t.take_deferred([](const GrantRequest& m) { return m.awaits_receive; });
  ASSERT_EQ(taken.size(), 1U);
  EXPECT_EQ(taken[0].parent, 2U);
  EXPECT_TRUE(t.awaits_receives());
  // Taken too (its receive was posted): no longer.
  taken = t.take_deferred();
  ASSERT_EQ(taken.size(), 1U);
  EXPECT_FALSE(t.awaits_receives()) << "a taken request still counted as waiting";
  ASSERT_TRUE(t.defer(taken[0], &first, true));
  EXPECT_TRUE(t.awaits_receives());
  t.clear_deferred();
  EXPECT_FALSE(t.awaits_receives()) << "cleared, and still counted";
}

TEST(RdmaTables, OnlyDrainingParentsAreListedForTheDrainTimer) {
  ParentTable t;
  for (std::uint64_t id = 1; id <= 3; ++id) t.insert(connecting(id));
  const auto t0 = std::chrono::steady_clock::now();
  t.start_draining(*t.find(2), t0);
  t.start_draining(*t.find(2), t0 + std::chrono::seconds(1));  // listed once, from the first
  EXPECT_EQ(*t.find(2)->draining_since, t0);
  std::vector<std::uint64_t> ids;
  t.take_draining(ids);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{2}));
  std::vector<std::uint64_t> again;
  t.take_draining(again);
  EXPECT_TRUE(again.empty()) << "taken ids are gone until put back";
  t.keep_draining(2);
  t.take_draining(again);
  EXPECT_EQ(again, (std::vector<std::uint64_t>{2}));
}

TEST(RdmaTables, EveryFrameOfAChannelReleasesItsPinOnce) {
  detail::RegionRecord region;
  MessageChannel ch;
  for (int i = 0; i < 3; ++i) {
    detail::SendItem item;
    region.pins.fetch_add(1);
    item.pinned = &region;
    ch.queue(std::move(item));
  }
  ch.posted();  // the first is on the wire
  EXPECT_TRUE(ch.in_flight());
  ch.drop_unsent();  // the endpoint closed: the two unsent go
  EXPECT_EQ(region.pins.load(), 1);
  EXPECT_TRUE(ch.pending());
  std::optional<detail::SendItem> done = ch.completed();
  ASSERT_TRUE(done.has_value());
  MessageChannel::release(*done);
  MessageChannel::release(*done);  // a second release is a no-op
  EXPECT_EQ(region.pins.load(), 0);
  EXPECT_FALSE(ch.pending());
  EXPECT_FALSE(ch.completed().has_value());
}

}  // namespace
}  // namespace orbite::rdma
