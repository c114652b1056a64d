// Rail health (p2p/rdma/rail_health.h), rule by rule of the guide's "Rail health", on an injected
// clock: the threshold inside the window, the cooldown and the one half-open trial, a failed
// trial doubling the cooldown up to five minutes, only the current trial's receipt reopening the
// pair, a cancelled trial giving its turn back, lookups that arm nothing, and the bounded table.
#include "p2p/rdma/rail_health.h"

#include <gtest/gtest.h>

#include "../support/config_test_helpers.h"

namespace orbite::rdma {
namespace {

using namespace std::chrono_literals;
using V = RailHealth::Verdict;
using Clock = RailHealth::Clock;

const Clock::time_point t0 = Clock::time_point{} + 1h;
const RailPair kPair{7, 0, 1};
const RailPair kOther{7, 1, 1};

RdmaConfig defaults() {
  return RdmaConfig{};  // 3 errors in 10 s, 30 s cooldown, 1 s probe interval, 4096 pairs
}

// Pauses kPair with three errors at t0.
void trip(RailHealth& h, Clock::time_point at = t0) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.record_error(kPair, at).ok());
}

TEST(RailHealth, ThreeErrorsInsideTheWindowPauseThePairOnly) {
  RailHealth h(defaults());
  ASSERT_TRUE(h.record_error(kPair, t0).ok());
  ASSERT_TRUE(h.record_error(kPair, t0 + 4s).ok());
  EXPECT_TRUE(h.usable(kPair)) << "two errors are below the threshold";
  ASSERT_TRUE(h.record_error(kPair, t0 + 9s).ok());
  EXPECT_FALSE(h.usable(kPair));
  EXPECT_EQ(h.admit(kPair, t0 + 9s).verdict, V::Paused);
  EXPECT_TRUE(h.usable(kOther)) << "another NIC pair is not affected";
  EXPECT_EQ(h.admit(kOther, t0 + 9s).verdict, V::Open);
  EXPECT_TRUE(h.usable(RailPair{8, 0, 1})) << "another peer epoch is another pair";
  const auto s = h.stats();
  EXPECT_EQ(s.errors, 3U);
  EXPECT_EQ(s.paused, 1U);
  EXPECT_EQ(s.pauses, 1U);
  EXPECT_EQ(h.nic(0).errors, 3U);
  EXPECT_EQ(h.nic(0).paused, 1U);
  EXPECT_EQ(h.nic(1).paused, 0U);
}

TEST(RailHealth, ErrorsOlderThanTheWindowDoNotCount) {
  RailHealth h(defaults());
  ASSERT_TRUE(h.record_error(kPair, t0).ok());
  ASSERT_TRUE(h.record_error(kPair, t0 + 1s).ok());
  ASSERT_TRUE(h.record_error(kPair, t0 + 11s).ok());  // the first left the 10 s window
  EXPECT_TRUE(h.usable(kPair));
  ASSERT_TRUE(h.record_error(kPair, t0 + 11s).ok());  // with the one at 1 s, exactly 10 s old
  EXPECT_FALSE(h.usable(kPair));
}

TEST(RailHealth, TheCooldownAdmitsExactlyOneTrial) {
  RailHealth h(defaults());
  trip(h);
  EXPECT_EQ(h.admit(kPair, t0 + 29s).verdict, V::Paused) << "inside the cooldown";
  const auto first = h.admit(kPair, t0 + 30s);
  EXPECT_EQ(first.verdict, V::Trial);
  EXPECT_NE(first.trial, 0U);
  EXPECT_EQ(h.admit(kPair, t0 + 31s).verdict, V::Paused) << "one trial at a time";
  EXPECT_FALSE(h.usable(kPair)) << "a running trial does not make the pair usable";
  EXPECT_EQ(h.stats().probes, 1U);
  EXPECT_EQ(h.nic(0).probes, 1U);
}

TEST(RailHealth, LookingUpThePairNeverArmsATrial) {
  RailHealth h(defaults());
  trip(h);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(h.usable(kPair));
  EXPECT_EQ(h.stats().probes, 0U);
  EXPECT_EQ(h.admit(kPair, t0 + 30s).verdict, V::Trial) << "the lookups took no turn";
}

TEST(RailHealth, OnlyTheCurrentTrialsReceiptReopensThePair) {
  RailHealth h(defaults());
  trip(h);
  const auto trial = h.admit(kPair, t0 + 30s);
  ASSERT_EQ(trial.verdict, V::Trial);
  h.trial_succeeded(kPair, trial.trial + 1);  // a stale or foreign token
  EXPECT_FALSE(h.usable(kPair));
  h.trial_succeeded(kOther, trial.trial);  // the token of another pair's trial
  EXPECT_FALSE(h.usable(kPair));
  h.trial_succeeded(kPair, trial.trial);
  EXPECT_TRUE(h.usable(kPair));
  EXPECT_EQ(h.admit(kPair, t0 + 30s).verdict, V::Open);
  EXPECT_EQ(h.stats().recoveries, 1U);
  EXPECT_EQ(h.stats().paused, 0U);
  EXPECT_EQ(h.nic(0).paused, 0U);
  h.trial_succeeded(kPair, trial.trial);  // again: changes nothing
  EXPECT_EQ(h.stats().recoveries, 1U);
}

TEST(RailHealth, AFailedTrialDoublesTheCooldownUpToFiveMinutes) {
  RailHealth h(defaults());
  trip(h);
  Clock::time_point at = t0;
  Clock::duration cooldown = 30s;
  for (Clock::duration expected : {60s, 120s, 240s, 300s, 300s}) {
    at += cooldown;
    const auto trial = h.admit(kPair, at);
    ASSERT_EQ(trial.verdict, V::Trial) << "after " << cooldown.count();
    ASSERT_TRUE(h.record_error(kPair, at, trial.trial).ok());
    EXPECT_EQ(h.admit(kPair, at + expected - 1ms).verdict, V::Paused);
    cooldown = expected;
  }
  // A trial that then succeeds reopens the pair, and its next pause is 30 s again.
  at += cooldown;
  const auto trial = h.admit(kPair, at);
  ASSERT_EQ(trial.verdict, V::Trial);
  h.trial_succeeded(kPair, trial.trial);
  trip(h, at);
  EXPECT_EQ(h.admit(kPair, at + 30s).verdict, V::Trial);
}

TEST(RailHealth, AnErrorOutsideTheTrialLeavesTheCooldownIntact) {
  RailHealth h(defaults());
  trip(h);
  // Slices posted before the pause fail later: no new cooldown, no doubling.
  ASSERT_TRUE(h.record_error(kPair, t0 + 20s).ok());
  ASSERT_TRUE(h.record_error(kPair, t0 + 25s, /*trial=*/12345).ok());
  EXPECT_EQ(h.admit(kPair, t0 + 30s).verdict, V::Trial);
  EXPECT_EQ(h.stats().pauses, 1U);
}

TEST(RailHealth, ACancelledTrialGivesItsTurnBack) {
  RdmaConfig cfg = defaults();
  cfg.rail_probe_interval = 5s;
  RailHealth h(cfg);
  trip(h);
  const auto first = h.admit(kPair, t0 + 30s);
  ASSERT_EQ(first.verdict, V::Trial);
  h.trial_cancelled(kPair, first.trial + 1);  // not the current trial: nothing
  EXPECT_EQ(h.admit(kPair, t0 + 31s).verdict, V::Paused);
  h.trial_cancelled(kPair, first.trial);
  const auto second = h.admit(kPair, t0 + 31s);
  EXPECT_EQ(second.verdict, V::Trial) << "no probe interval to wait after a cancelled trial";
  EXPECT_NE(second.trial, first.trial);
  h.trial_succeeded(kPair, first.trial);  // the cancelled one's receipt cannot reopen it
  EXPECT_FALSE(h.usable(kPair));
}

TEST(RailHealth, TheProbeIntervalSpacesTrials) {
  RdmaConfig cfg = defaults();
  cfg.rail_cooldown = 1s;
  cfg.rail_probe_interval = 10s;
  RailHealth h(cfg);
  trip(h);
  const auto first = h.admit(kPair, t0 + 1s);
  ASSERT_EQ(first.verdict, V::Trial) << "the first trial comes with the end of the cooldown";
  ASSERT_TRUE(h.record_error(kPair, t0 + 1s, first.trial).ok());  // cooldown now 2 s
  EXPECT_EQ(h.admit(kPair, t0 + 3s).verdict, V::Paused) << "cooled, but 10 s since the trial";
  EXPECT_EQ(h.admit(kPair, t0 + 11s).verdict, V::Trial);
}

TEST(RailHealth, AZeroProbeIntervalAllowsAnImmediateTrial) {
  RdmaConfig cfg = defaults();
  cfg.rail_cooldown = 1ms;
  cfg.rail_probe_interval = 0s;
  RailHealth h(cfg);
  trip(h);
  const auto first = h.admit(kPair, t0 + 1ms);
  ASSERT_EQ(first.verdict, V::Trial);
  ASSERT_TRUE(h.record_error(kPair, t0 + 1ms, first.trial).ok());  // cooldown 2 ms
  EXPECT_EQ(h.admit(kPair, t0 + 3ms).verdict, V::Trial);
}

TEST(RailHealth, AFullTableKeepsPairsThatMatterAndRefusesTheNewOne) {
  RdmaConfig cfg = defaults();
  cfg.max_rail_pairs = 2;
  RailHealth h(cfg);
  trip(h);                                       // paused: kept
  ASSERT_TRUE(h.record_error(kOther, t0).ok());  // counting errors: kept
  const RailPair third{7, 2, 2};
  Status st = h.record_error(third, t0 + 1s);
  EXPECT_EQ(st.code(), Errc::ResourceExhausted) << st.to_string();
  EXPECT_CONTAINS(st.message(), "rdma.max_rail_pairs = 2");
  EXPECT_FALSE(h.usable(kPair)) << "the paused pair was not displaced";
  EXPECT_EQ(h.stats().pairs, 2U);
  EXPECT_EQ(h.stats().refused, 1U);
  EXPECT_EQ(h.stats().errors, 5U) << "the refused pair's error is still counted";
  // Once kOther's error leaves the window it holds nothing worth keeping: its place is taken.
  EXPECT_TRUE(h.record_error(third, t0 + 12s).ok());
  EXPECT_EQ(h.stats().pairs, 2U);
  EXPECT_FALSE(h.usable(kPair));
}

TEST(RailHealth, ThePeersNewConnectionStartsWithFreshPairs) {
  RailHealth h(defaults());
  trip(h);
  h.forget_epoch(kPair.peer_epoch);
  EXPECT_TRUE(h.usable(kPair));
  EXPECT_EQ(h.stats().paused, 0U);
  EXPECT_EQ(h.nic(0).paused, 0U);
  EXPECT_EQ(h.stats().pairs, 0U);
}

// The owner a parent holds: dropped unposted it gives the turn back, dropped after a post it only
// ends the trial (the next waits the probe interval), and a verdict ends it exactly once.
TEST(RailTrial, DroppedUnpostedGivesTheTurnBackAndPostedWaitsTheInterval) {
  RdmaConfig cfg = defaults();
  cfg.rail_probe_interval = 5s;
  RailHealth h(cfg);
  trip(h);
  auto a = h.admit(kPair, t0 + 30s);
  ASSERT_EQ(a.verdict, V::Trial);
  { RailTrial unposted(h, kPair, a.trial); }
  a = h.admit(kPair, t0 + 31s);
  ASSERT_EQ(a.verdict, V::Trial) << "an unposted trial's turn came back";
  {
    RailTrial posted(h, kPair, a.trial);
    posted.posted();
    RailTrial moved(std::move(posted));  // the owner moves; the trial ends once, with `moved`
    EXPECT_FALSE(posted.running());      // NOLINT(bugprone-use-after-move): checked on purpose
    EXPECT_TRUE(moved.running());
  }
  EXPECT_EQ(h.admit(kPair, t0 + 32s).verdict, V::Paused) << "abandoned after a post: 5 s to wait";
  EXPECT_FALSE(h.usable(kPair)) << "an abandoned trial proves nothing";
  a = h.admit(kPair, t0 + 36s);
  ASSERT_EQ(a.verdict, V::Trial);
  RailTrial t(h, kPair, a.trial);
  t.posted();
  t.succeeded();
  EXPECT_FALSE(t.running());
  EXPECT_TRUE(h.usable(kPair));
  EXPECT_EQ(h.stats().recoveries, 1U);
  EXPECT_EQ(h.stats().probes, 3U);
  EXPECT_EQ(h.nic(kPair.local_nic).probes, 3U);
}

TEST(RailTrial, AFailedTrialRecordsOneErrorWithItsToken) {
  RdmaConfig cfg = defaults();
  cfg.rail_probe_interval = 0s;
  RailHealth h(cfg);
  trip(h);
  auto a = h.admit(kPair, t0 + 30s);
  ASSERT_EQ(a.verdict, V::Trial);
  RailTrial t(h, kPair, a.trial);
  t.posted();
  ASSERT_TRUE(t.failed(t0 + 30s).ok());
  EXPECT_FALSE(t.running());
  t.end();  // nothing more: the verdict was given
  EXPECT_EQ(h.stats().errors, 4U);
  EXPECT_EQ(h.admit(kPair, t0 + 89s).verdict, V::Paused) << "the cooldown doubled to 60 s";
  EXPECT_EQ(h.admit(kPair, t0 + 90s).verdict, V::Trial);
}

}  // namespace
}  // namespace orbite::rdma
