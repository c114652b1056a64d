// The RDMA transport between real processes on softverbs (design test plan, docs/rdma.md): each
// case runs orbite-rdma-probe under orbite-run (or its ranks directly, when one is killed) with
// LD_LIBRARY_PATH at softverbs. The probe checks bytes, guards, errors and the route itself;
// this test requires every rank's PASS and no FAIL. The loader, the capability checks and the MR
// cache are in rdma_setup_test.cpp.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../support/direct_ranks.h"
#include "../support/subprocess.h"
#include "rdma_test_support.h"

namespace orbite {
namespace {

using namespace rdma_test;

// ---- put/get bytes, signal interval, event-driven progress, READ depths --------------------
// The full sweep runs once; the variants run the probe's short one (RDMA_TEST_BYTES_SHORT).

TEST(Rdma, PutAndGetEverySizeAtOddOffsetsWithGuards) {
  Outcome o = run_ranks("bytes", {});
  expect_pass(o, "bytes");
  EXPECT_EQ(count_of(o.out, "rank 0: route ok\n"), 1U) << o.out;
  EXPECT_EQ(count_of(o.out, "rank 1: route ok\n"), 1U) << o.out;
  // The READ depths applied are the HCA's (softverbs: 16) with the default request of 16.
  EXPECT_NE(o.out.find("max_rd_atomic 16 max_dest_rd_atomic 16"), std::string::npos) << o.out;
}

TEST(Rdma, SignalIntervalFourSignalsFewerPayloadWrs) {
  // The probe checks payload_send_cqes < completed WRs when the interval is above 1.
  expect_pass(
      run_ranks("bytes", {{"ORBITE_RDMA_SIGNAL_INTERVAL", "4"}, {"RDMA_TEST_BYTES_SHORT", "1"}}),
      "bytes");
}

TEST(Rdma, EventDrivenProgressLosesNoWakeUp) {
  expect_pass(run_ranks("bytes",
                        {{"ORBITE_PROGRESS_MODE", "event_driven"}, {"RDMA_TEST_BYTES_SHORT", "1"}}),
              "bytes");
}

TEST(Rdma, ReadDepthsAreClampedToTheHca) {
  for (const auto& [asked, applied] :
       std::vector<std::pair<std::string, std::string>>{{"1", "1"}, {"32", "16"}}) {
    Outcome o = run_ranks("bytes", {{"ORBITE_RDMA_MAX_RD_ATOMIC", asked},
                                    {"ORBITE_RDMA_MAX_DEST_RD_ATOMIC", asked},
                                    {"RDMA_TEST_BYTES_SHORT", "1"}});
    expect_pass(o, "bytes");
    EXPECT_NE(o.out.find("max_rd_atomic " + applied + " max_dest_rd_atomic " + applied),
              std::string::npos)
        << "asked " << asked << "\n"
        << o.out;
  }
}

// ---- authority --------------------------------------------------------------------------------

TEST(Rdma, AWriteWiderThanItsWindowIsRefusedAndWritesNothingPastIt) {
  expect_pass(run_ranks("widen_write", {}), "widen_write");
}

TEST(Rdma, AnInvalidatedKeyNeverRegainsAuthority) {
  expect_pass(run_ranks("replay_key", {}), "replay_key");
}

TEST(Rdma, AValidKeyOnAnotherQpIsRefused) {
  // Two lanes on both sides: arrays two QPs wide, one segment on each.
  expect_pass(run_ranks("other_qp", {{"ORBITE_NUM_LANES", "2"}}), "other_qp");
}

TEST(Rdma, TamperedDescriptorsAreRefusedByTheOwner) {
  expect_pass(run_ranks("tampered", {}), "tampered");
}

TEST(Rdma, DisjointGrantsProceedAndConflictingOnesAreRefused) {
  expect_pass(run_ranks("concurrent", {}), "concurrent");
}

TEST(Rdma, GrantRequestsBeyondTheConnectionsSendQueueWaitAtTheSourceInsteadOfFailing) {
  expect_pass(run_ranks("deferred", {{"ORBITE_RDMA_MAX_SEND_WR", "2"}}), "deferred");
}

// Issue 24, defect 1: each side's loan held the whole budget its peer's grant needed.
TEST(Rdma, CrossedMessagesThatEachNeedTheWholeDirectBudgetBothArrive) {
  expect_pass(run_ranks("crossed_messages", {{"ORBITE_RDMA_MAX_DIRECT_BYTES", "1MiB"}}),
              "crossed_messages");
}

// rdma.eager_limit: each side names its frame size in its connect blob and both use the smaller
// (64 KiB against 8 KiB), so a frame never exceeds the receiver's slots; messages up to it go
// eager, the rest rendezvous. And the largest limit (256 KiB) on both sides, with a credit
// window that holds such messages (the default, 256 KiB, holds none with its header).
TEST(RdmaFrames, EagerMessagesUpToTheSmallerOfTheTwoLimitsInOneFrame) {
  Outcome o = run_ranks("eager_frames", {{"ORBITE_RDMA_EAGER_LIMIT", "64KiB"},
                                         {"RDMA_PROBE_RANK_ENV", "1:ORBITE_RDMA_EAGER_LIMIT=8KiB"},
                                         {"EAGER_EXPECT", "8192"}});
  expect_pass(o, "eager_frames");
  EXPECT_EQ(count_of(o.out, "eager_frames 6 eager, 5 rendezvous, limit 8192"), 2U) << o.out;
  o = run_ranks("eager_frames", {{"ORBITE_RDMA_EAGER_LIMIT", "256KiB"},
                                 {"ORBITE_EAGER_CREDIT_BYTES", "4MiB"},
                                 {"EAGER_EXPECT", "262144"}});
  expect_pass(o, "eager_frames");
}

// Issue 24, defect 3: any slot below 1024 was accepted, each charging engine-wide budgets.
TEST(Rdma, AQpConnectBeyondTheLinksWidthIsRefusedAndChargesNothing) {
  expect_pass(run_ranks("connect_slot", {}), "connect_slot");
}

// Issue 24, defect 5: a failed ibv_destroy_qp returned the charges of a QP that still existed.
// The retained QP, its CQs and softverbs' state behind them are kept for good, on purpose: under
// ASan the ranks run without leak detection (everything else of ASan stays on).
TEST(Rdma, AFailedQpDestructionKeepsItsCharges) {
  expect_pass(run_ranks("failed_destroy", {{"ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1"}}),
              "failed_destroy");
}

// Issue 24, defect 6: a receipt's registered slot was lost when its post failed or its completion
// was an error. softverbs without inline data makes every receipt take a slot.
TEST(Rdma, AFailedReceiptGivesItsSlotBack) {
  testing::TempDir dir;
  const std::string config = dir.path() + "/no-inline.json";
  std::ofstream(config) << R"({"devices": [{"bind": "127.0.0.1", "max_inline_data": 0}]})";
  expect_pass(run_ranks("receipt_slots", {{"SOFTVERBS_CONFIG", config}}), "receipt_slots");
}

// Issue 24, defect 2: a grant whose receipts never came (the requester alive but stalled) held
// its slot, bytes, range lock and pin for ever.
TEST(Rdma, AGrantWithoutItsReceiptsIsRevokedAfterTheGrantTimeout) {
  expect_pass(run_ranks("grant_timeout", {{"ORBITE_RDMA_GRANT_TIMEOUT", "300ms"}}),
              "grant_timeout");
}

// Issue 24, defect 2 (second half): the source's queue of deferred GrantRequests had no bound.
TEST(Rdma, ARequesterFloodingDeferredGrantRequestsFailsItsLink) {
  expect_pass(run_ranks("deferred_limit", {}), "deferred_limit");
}

// A batch larger than the source's max_grants, from the one requester that spends it, is paced
// by the source rather than failed ResourceExhausted (issue 26, found measuring batches).
TEST(Rdma, ABatchBeyondTheGrantBudgetIsPacedNotFailed) {
  expect_pass(run_ranks("own_grants", {{"ORBITE_RDMA_MAX_GRANTS", "2"}}), "own_grants");
}

// The scheduler (issue 24) on one rail limited to 2.5 Gb/s with a 16 MiB direct-bytes budget.
std::map<std::string, std::string> slow_rail(const std::string& dir,
                                             std::map<std::string, std::string> extra) {
  const std::string config = dir + "/slow.json";
  std::ofstream(config) << R"({"devices": [{"bind": "127.0.0.1", "rate_gbps": 2.5}]})";
  extra.insert({"SOFTVERBS_CONFIG", config});
  extra.insert({"ORBITE_RDMA_MAX_DIRECT_BYTES", "16MiB"});
  return extra;
}

TEST(RdmaScheduling, HighWorkIsAdmittedBeforeWaitingLowWork) {
  testing::TempDir dir;
  expect_pass(run_ranks("priority",
                        slow_rail(dir.path(), {{"ORBITE_RDMA_PRIORITY_PROMOTION_TIMEOUT", "60s"}})),
              "priority");
}

TEST(RdmaScheduling, AgedLowWorkIsPromotedAheadOfNewHighWork) {
  testing::TempDir dir;
  expect_pass(run_ranks("promotion",
                        slow_rail(dir.path(), {{"ORBITE_RDMA_PRIORITY_PROMOTION_TIMEOUT", "5ms"}})),
              "promotion");
}

TEST(RdmaScheduling, ADeadlinePassingInAdmissionMovesNothing) {
  testing::TempDir dir;
  expect_pass(run_ranks("deadline_queued", slow_rail(dir.path(), {})), "deadline_queued");
}

TEST(RdmaScheduling, LowWorkWaitsForItsSharedSlot) {
  const std::string name = "/orbite-rdma-test-slots-" + std::to_string(::getpid());
  expect_pass(run_ranks("shared_slots", {{"ORBITE_RDMA_SHARED_QUOTA_SHM_PATH", name},
                                         {"ORBITE_RDMA_SLOT_ROTATION_INTERVAL", "20ms"},
                                         {"ORBITE_RDMA_PRIORITY_PROMOTION_TIMEOUT", "60s"}}),
              "shared_slots");
  ::shm_unlink(name.c_str());
}

TEST(RdmaScheduling, ADeadlinePassingAtTheSourceGrantsNothing) {
  expect_pass(run_ranks("source_deadline", {}), "source_deadline");
}

TEST(RdmaScheduling, ADeadlinePassingBeforeThePayloadGivesTheGrantBack) {
  expect_pass(run_ranks("grant_cancel", {}), "grant_cancel");
}

// Issue 24: a deadline passing after the payload started gives the unposted segments back with
// status-1 receipts (two segments: two QPs per array).
TEST(RdmaScheduling, ADeadlinePassingDuringThePayloadReleasesTheUnpostedSegments) {
  expect_pass(run_ranks("released_segments", {{"ORBITE_NUM_LANES", "2"}}), "released_segments");
}

// Issue 24: the idle-QP reaper (rdma.idle_qp_timeout), so that max_endpoints recovers.
TEST(Rdma, AnIdlePayloadQpIsReapedAtBothEnds) {
  expect_pass(run_ranks("idle_reaper", {{"ORBITE_RDMA_IDLE_QP_TIMEOUT", "200ms"}}), "idle_reaper");
}

// Issue 27: close_source refuses peers' grants (GrantNack, Cancelled) but not a rendezvous
// receive's; close_requester refuses the engine's own puts.
TEST(Rdma, ACloseSourceRefusesGrantsButNotMessagesAndCloseRequesterRefusesOwnPuts) {
  expect_pass(run_ranks("directional_close", {}), "directional_close");
}

// Issue 24: the destruction window, with softverbs holding the flush completions back. The
// retained loan is kept for good, on purpose: the ranks run without leak detection under ASan.
TEST(Rdma, AParentWhoseFlushesNeverComeReportsUnquiescedAfterTheDestructionWindow) {
  expect_pass(run_ranks("destroy_window", {{"ORBITE_RDMA_DESTROY_TIMEOUT", "300ms"},
                                           {"ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1"}}),
              "destroy_window");
}

TEST(Rdma, ARendezvousGrantRequestForAnUnmatchedReceiveIsRefusedAndBothSidesFail) {
  expect_pass(run_ranks("forged_rendezvous", {}), "forged_rendezvous");
}

// Issue 26: a message up to 1 MiB announces itself with its write's request (no Cts).
TEST(Rdma, AnAnnouncedRendezvousTakesNoClearToSend) {
  expect_pass(run_ranks("announced_rendezvous", {}), "announced_rendezvous");
}

TEST(Rdma, ASenderWithoutAnnouncementsStillMeetsAReceiverThatHasThem) {
  expect_pass(run_ranks("announced_fallback", {}), "announced_fallback");
}

TEST(Rdma, TheKeyHistoryParksSpentIndicesAndRefusesWhenFull) {
  // softverbs' strict window keys (a bind keeps the window's index) are on by default.
  expect_pass(run_ranks("key_history", {{"ORBITE_RDMA_MAX_WINDOW_KEY_INDICES", "2"}}),
              "key_history");
}

TEST(Rdma, APreAuthorityCacheMissReconnectsOnce) {
  expect_pass(run_ranks("cache_miss", {}), "cache_miss");
}

// ---- failures ----------------------------------------------------------------------------------

TEST(Rdma, AnErrorCompletionFailsTheParentAfterDrainWithoutReplay) {
  Outcome o = run_ranks("error_cqe", {});
  expect_pass(o, "error_cqe");
  EXPECT_NE(o.out.find("effect unknown"), std::string::npos) << o.out;
}

TEST(Rdma, AFailedPostReleasesOnlyAProvenUnacceptedSuffix) {
  Outcome o = run_ranks("failed_post", {});
  expect_pass(o, "failed_post");
  EXPECT_NE(o.out.find("ENOMEM at=2:"), std::string::npos) << o.out;
}

// Failed ibv_poll_cq calls lose nothing: the transfers complete, every failure is counted, and a
// run of them is logged when it starts and when it ends, not once a pass.
TEST(Rdma, FailedPollsLoseNoCompletionAndAreLoggedOncePerRun) {
  Outcome o = run_ranks("failed_polls", {});
  expect_pass(o, "failed_polls");
  EXPECT_NE(o.out.find("rank 0: failed polls: 800 counted"), std::string::npos) << o.out;
  const std::size_t started = count_of(o.err, "failed polls in a row");
  EXPECT_GE(started, 2U) << o.err;  // one run for the put, one for the get
  EXPECT_LE(started, 4U) << o.err;  // a line a second at most, and each run is brief
  EXPECT_EQ(count_of(o.err, "works again after 400 failed polls"), 2U) << o.err;
}

// An orderly close's last frame over RDMA arrives although the receiver polls it 300 ms after
// the TCP Bye: the link waits for the Bye on the message QP.
TEST(Rdma, AnOrderlyCloseWaitsForTheByeOnTheMessageQp) {
  Outcome o = run_ranks("orderly_close_lag", {});
  expect_pass(o, "orderly_close_lag");
  EXPECT_NE(o.out.find("rank 0: the last message arrived"), std::string::npos) << o.out;
}

// A CQ set whose polls fail for a second is replaced with its QPs (progress recovery), on the
// requester and on the owner of the memory; the work on it fails, everything after it works.
TEST(Rdma, ACqSetWhosePollsKeepFailingIsReplacedAndTheLinkCarriesOn) {
  for (const std::string who : {"requester", "source"}) {
    const std::string scenario = "progress_recovery_" + who;
    Outcome o = run_ranks(scenario, {});
    expect_pass(o, scenario);
    const std::string victim = who == "requester" ? "0" : "1";
    EXPECT_NE(o.out.find("rank " + victim + ": progress recovered"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("rank 0: the put across the lost CQs: ConnectionLost"), std::string::npos)
        << o.out;
    EXPECT_EQ(count_of(o.err, "the lane's CQ set is replaced"), 1U) << o.err;
    for (const char* rank : {"0", "1"}) {
      EXPECT_NE(o.out.find(std::string("rank ") + rank + ": after the recovery: put, get"),
                std::string::npos)
          << o.out;
    }
  }
}

// A Cts whose post fails fails the link and the receive that matched (found by the campaign).
TEST(Rdma, AReceiveWhoseCtsCannotBePostedFailsWithTheLink) {
  Outcome o = run_ranks("cts_post_fails", {});
  expect_pass(o, "cts_post_fails");
  EXPECT_NE(o.out.find("rank 0: the receive ended ConnectionLost"), std::string::npos) << o.out;
}

TEST(Rdma, UnregisterWaitsForAPublishedGrant) {
  expect_pass(run_ranks("unregister_busy", {}), "unregister_busy");
}

class RdmaKilled : public ::testing::TestWithParam<std::string> {};

TEST_P(RdmaKilled, SurvivorsGetABoundedConnectionLostAndTheRangeIsFreed) {
  const std::string scenario = GetParam();
  const bool requester_dies = scenario.starts_with("kill_requester");
  auto job = testing::start_direct_ranks(3, {ORBITE_RDMA_PROBE, scenario}, softverbs_env());
  ASSERT_EQ(job.ranks.size(), 3U);
  auto& ranks = job.ranks;
  const int victim = requester_dies ? 0 : 1;
  if (scenario == "kill_source_mid_payload") {
    ASSERT_TRUE(ranks[0]->read_until(
        [&] { return ranks[0]->out().find("rank 0: streaming\n") != std::string::npos; }, 90s))
        << job.shown();
    ASSERT_EQ(::kill(ranks[1]->pid(), SIGKILL), 0);
  }
  EXPECT_EQ(ranks[victim]->wait(120s), 128 + SIGKILL) << job.shown();
  for (int r = 0; r < 3; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(ranks[r]->wait(120s), 0) << "rank " << r << job.shown();
    EXPECT_EQ(count_of(ranks[r]->out(), pass_line(r, scenario)), 1U) << job.shown();
  }
  if (!requester_dies) {
    EXPECT_EQ(count_of(ranks[0]->out(), "rank 0: ConnectionLost after"), 1U) << job.shown();
  }
}

INSTANTIATE_TEST_SUITE_P(Phases, RdmaKilled,
                         ::testing::Values("kill_source_before_grant", "kill_source_after_grant",
                                           "kill_source_mid_payload", "kill_requester_mid_payload",
                                           "kill_requester_before_receipt"));

// ---- two rails: the DeviceSelector in the data path ---------------------------------------

class RdmaRails : public ::testing::Test {
 protected:
  // Two softverbs NICs per process (soft_0 on 127.0.0.1, soft_1 on 127.0.0.2), at these rates.
  std::map<std::string, std::string> rails(double gbps0, double gbps1) {
    const std::string path = dir_.path() + "/rails.json";
    std::ofstream f(path);
    f << R"({"devices": [{"bind": "127.0.0.1", "rate_gbps": )" << gbps0
      << R"(}, {"bind": "127.0.0.2", "rate_gbps": )" << gbps1 << "}]}";
    return {{"SOFTVERBS_CONFIG", path}, {"ORBITE_RDMA_BLOCK_SIZE", "1MiB"}};
  }
  void expect_rails(const Outcome& o) {
    expect_pass(o, "rails");
    EXPECT_EQ(count_of(o.out, "rank 0: rails ok\n"), 1U) << o.out;
    EXPECT_EQ(count_of(o.out, "rank 1: rails ok\n"), 1U) << o.out;
  }
  testing::TempDir dir_;
};

TEST_F(RdmaRails, PutAndGetSpreadOverBothRailsWithGuards) {
  auto env = rails(100, 100);
  env["RAILS_EXPECT"] = "both";
  expect_rails(run_ranks("rails", env));
}

// softverbs reports 4 and 8 Gb/s as SDR 1x and DDR 1x (2.5 and 5 Gb/s): at default settings (no
// block size, no default bandwidth given) those rates seed the estimates, and the 1:2 split
// follows them and what the completions measured through softverbs' token buckets. Before issue
// 24's defect 0 both rails seeded at 400 Gb/s, clamped at 40, and split 50/50.
TEST_F(RdmaRails, RatesOfFourAndEightGbpsSplitTheBytesOneToTwoAtDefaultSettings) {
  if (ORBITE_SANITIZED) {
    GTEST_SKIP() << "the split follows measured bandwidth, which a sanitizer's slowdown distorts "
                    "(TSan measured 2.4); the default build runs it";
  }
  auto env = rails(4, 8);
  env.erase("ORBITE_RDMA_BLOCK_SIZE");
  env["RAILS_EXPECT"] = "ratio:2";
  env["RAILS_ROUNDS"] = "3";
  expect_rails(run_ranks("rails", env));
}

TEST_F(RdmaRails, ADeviceMaskKeepsEveryByteOnItsRail) {
  auto env = rails(100, 100);
  env["RAILS_EXPECT"] = "only1";
  env["ORBITE_RDMA_DEVICE_MASK"] = "1";
  expect_rails(run_ranks("rails", env));
}

TEST_F(RdmaRails, APortDownMidTransferFailsThatParentAndTheOtherRailCarriesOn) {
  Outcome o = run_ranks("port_down", rails(100, 100));
  expect_pass(o, "port_down");
  EXPECT_EQ(count_of(o.out, "rank 0: port_down ok\n"), 1U) << o.out;
}

// NUMA placement: soft_0 claims node 0 and soft_1 node 1 (softverbs' sysfs look-alike), so the
// buffer's node (the kernel says which) has one local NIC and one across.
class RdmaNuma : public ::testing::Test {
 protected:
  std::map<std::string, std::string> numa(const std::string& expect) {
    const std::string path = dir_.path() + "/numa.json";
    std::ofstream f(path);
    f << R"({"devices": [{"bind": "127.0.0.1", "rate_gbps": 100, "numa_node": 0,)"
      << R"( "pci_bus_id": "0000:17:00.0"},)"
      << R"( {"bind": "127.0.0.2", "rate_gbps": 100, "numa_node": 1,)"
      << R"( "pci_bus_id": "0000:b3:00.0"}]})";
    return {
        {"SOFTVERBS_CONFIG", path}, {"SOFTVERBS_SYSFS_DIR", dir_.path()}, {"NUMA_EXPECT", expect}};
  }
  void expect_numa(const Outcome& o) {
    expect_pass(o, "numa");
    EXPECT_EQ(count_of(o.out, "rank 0: numa ok\n"), 1U) << o.out;
    EXPECT_EQ(count_of(o.out, "rank 1: numa ok\n"), 1U) << o.out;
  }
  testing::TempDir dir_;
};

TEST_F(RdmaNuma, TheBuffersOwnNodesNicCarriesMostBytes) {
  expect_numa(run_ranks("numa", numa("prefer")));
}

TEST_F(RdmaNuma, StrictLocalNumaNeverAllocatesACrossNumaNicProbesIncluded) {
  auto env = numa("strict");
  env["ORBITE_RDMA_STRICT_LOCAL_NUMA"] = "true";
  expect_numa(run_ranks("numa", env));
}

TEST_F(RdmaNuma, APreferredNumaNodeMovesTheBytesToItsNic) {
  auto env = numa("preferred");
  env["ORBITE_RDMA_STRICT_LOCAL_NUMA"] = "true";
  env["ORBITE_RDMA_PREFERRED_NUMA_NODE"] = "1";
  expect_numa(run_ranks("numa", env));
}

TEST_F(RdmaNuma, ADeviceMaskCannotOverrideStrictLocality) {
  auto env = numa("masked");
  env["ORBITE_RDMA_STRICT_LOCAL_NUMA"] = "true";
  env["ORBITE_RDMA_DEVICE_MASK"] = "1";
  expect_numa(run_ranks("numa", env));
}

TEST_F(RdmaRails, APeersPausedNicReachesUsInItsNicTableAndOurRailsMapAroundIt) {
  Outcome o = run_ranks("peer_port_down", rails(100, 100));
  expect_pass(o, "peer_port_down");
  EXPECT_EQ(count_of(o.out, "rank 0: peer_port_down ok\n"), 1U) << o.out;
  EXPECT_EQ(count_of(o.out, "rank 1: peer_port_down ok\n"), 1U) << o.out;
}

// Rail health: two injected error completions pause rank 0's soft_0 pair, parents avoid it, the
// first after the cooldown is its half-open trial and reopens it, a failed trial doubles the
// cooldown, and with both pairs paused a put fails before its payload.
TEST_F(RdmaRails, RailErrorsPauseThePairAndAHalfOpenTrialReopensIt) {
  auto env = rails(100, 100);
  env["ORBITE_RDMA_RAIL_ERROR_THRESHOLD"] = "2";
  env["ORBITE_RDMA_RAIL_COOLDOWN"] = "1s";
  env["ORBITE_RDMA_RAIL_PROBE_INTERVAL"] = "0s";
  Outcome o = run_ranks("rail_health", env);
  expect_pass(o, "rail_health");
  EXPECT_EQ(count_of(o.out, "rank 0: rail_health ok\n"), 1U) << o.out;
  EXPECT_EQ(count_of(o.out, "rank 1: rail_health ok\n"), 1U) << o.out;
  EXPECT_NE(o.out.find("paused by rail health"), std::string::npos) << o.out;
}

// Monitor recovery: rank 1's soft_0 loses its pinned GID (index 1), so its route is fenced, its
// QPs drain at both ends and it stays fenced without an address; the GID back publishes it and it
// carries again; a fatal device event fences it for good (docs/reliability.md).
TEST_F(RdmaRails, AFencedRouteDrainsAndIsPublishedAgainOnlyWithAValidAddress) {
  const std::string path = dir_.path() + "/gids.json";
  std::ofstream(path) << R"({"devices": [{"bind": "127.0.0.1", "gids": ["::ffff:127.0.0.1"]}, )"
                      << R"({"bind": "127.0.0.2", "gids": ["::ffff:127.0.0.2"]}]})";
  Outcome o = run_ranks("route_recovery", {{"SOFTVERBS_CONFIG", path},
                                           {"ORBITE_RDMA_BLOCK_SIZE", "1MiB"},
                                           {"ORBITE_RDMA_GID_INDEX", "1"},
                                           {"ORBITE_RDMA_MONITOR_INTERVAL", "100ms"}});
  expect_pass(o, "route_recovery");
  EXPECT_EQ(count_of(o.out, "rank 0: route_recovery ok\n"), 1U) << o.out;
  EXPECT_EQ(count_of(o.out, "rank 1: route_recovery ok\n"), 1U) << o.out;
}

TEST_F(RdmaRails, AForgedNicTableIsAProtocolErrorThatFailsTheLink) {
  Outcome o = run_ranks("forged_nic_table", rails(100, 100));
  expect_pass(o, "forged_nic_table");
  EXPECT_EQ(count_of(o.out, "rank 0: forged_nic_table ok\n"), 1U) << o.out;
}

// The same with a real link: each rank's rail 0 is a softverbs NIC whose sockets live in its own
// network namespace, the two joined by a veth pair (rail 1 stays on 127.0.0.1); rank 0 cuts the
// rail with `ip link set down` on its end. Each rank reads its own softverbs config (the rank's
// ORBITE_RANK picks it), so the two rail-0 NICs carry the same name on the two ends of the veth.
class RdmaRailCut : public ::testing::Test {
 protected:
  static bool sh(const std::string& cmd) {
    return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
  }
  // CI runs as root with veth: there a rail that cannot be built is a failure, not a skip.
  static bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci != nullptr && std::string(ci) == "true";
  }
  // Waits (up to 10 s) until the interface is operationally up.
  static bool running(const std::string& ns, const std::string& dev) {
    for (int i = 0; i < 200; ++i) {
      if (sh("ip -n " + ns + " link show " + dev + " | grep -q 'state UP'")) return true;
      usleep(50000);
    }
    return false;
  }
  void TearDown() override {
    for (const std::string& ns : namespaces_) sh("ip netns del " + ns);
  }
  std::vector<std::string> namespaces_;
  testing::TempDir dir_;
};

TEST_F(RdmaRailCut, AVethCutInANetworkNamespaceFailsThatParentAndTheOtherRailCarriesOn) {
  const std::string tag = std::to_string(getpid() % 100000);
  const std::string ns[2] = {"orc_a" + tag, "orc_b" + tag};
  const std::string veth[2] = {"orca" + tag, "orcb" + tag};
  const std::string addr[2] = {"10.214.0.1", "10.214.0.2"};
  std::string why;
  if (geteuid() != 0) {
    why = "network namespaces need root";
  } else if (!sh("ip netns add " + ns[0])) {
    why = "'ip netns add' failed (no CAP_SYS_ADMIN?)";
  } else {
    namespaces_.push_back(ns[0]);
    if (!sh("ip netns add " + ns[1])) why = "'ip netns add' failed for the second namespace";
  }
  if (why.empty()) {
    namespaces_.push_back(ns[1]);
    if (!sh("ip link add " + veth[0] + " netns " + ns[0] + " type veth peer name " + veth[1] +
            " netns " + ns[1])) {
      why = "'ip link add ... type veth' failed (no veth support?)";
    }
  }
  if (!why.empty()) {
    if (in_ci()) FAIL() << why << " (CI=true: the rail cut must be tested here)";
    GTEST_SKIP() << why;
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(sh("ip -n " + ns[i] + " addr add " + addr[i] + "/30 dev " + veth[i]));
    ASSERT_TRUE(sh("ip -n " + ns[i] + " link set " + veth[i] + " up"));
    std::ofstream f(dir_.path() + "/rank" + std::to_string(i) + ".json");
    f << R"({"devices": [{"bind": ")" << addr[i] << R"(", "netns": ")" << ns[i]
      << R"("}, {"bind": "127.0.0.1"}]})";
  }
  // The kernel reports a veth running a moment after both ends are up, and a softverbs port
  // follows it: a rank started before that fails its first WRITE with RETRY_EXC_ERR.
  ASSERT_TRUE(running(ns[0], veth[0]) && running(ns[1], veth[1])) << "the veth never came up";
  const std::string down = "ip -n " + ns[0] + " link set " + veth[0] + " down";
  const std::string up = "ip -n " + ns[0] + " link set " + veth[0] + " up";
  const Outcome o = run_per_rank_configs(dir_.path(), "port_down",
                                         {{"ORBITE_RDMA_BLOCK_SIZE", "1MiB"},
                                          {"PORT_DOWN_CMD", down},
                                          {"PORT_UP_CMD", up},
                                          {"PORT_DOWN_NIC", "0"}});
  expect_pass(o, "port_down");
  EXPECT_EQ(count_of(o.out, "rank 0: port_down ok\n"), 1U) << o.out;
}

// The rail map's direct peer: rank 0 sends on its soft_1 alone (device_mask [1]); rank 1 has three
// NICs, so spreading by context would pick its second active one. Its soft_1 is preferred while
// it is active, even behind a paused soft_0; a paused soft_1 leaves the spread (soft_2). The
// route is read from log_slice_affinity's debug lines ("soft_1 -> soft_N").
class RdmaDirectPeer : public ::testing::Test {
 protected:
  Outcome run(const std::string& rank1_devices) {
    std::ofstream(dir_.path() + "/rank0.json")
        << R"({"devices": [{"bind": "127.0.0.1"}, {"bind": "127.0.0.2"}]})";
    std::ofstream(dir_.path() + "/rank1.json") << R"({"devices": [)" << rank1_devices << "]}";
    return run_per_rank_configs(dir_.path(), "rails",
                                {{"ORBITE_RDMA_BLOCK_SIZE", "1MiB"},
                                 {"RAILS_EXPECT", "only1"},
                                 {"ORBITE_RDMA_DEVICE_MASK", "1"},
                                 {"ORBITE_LOG_LEVEL", "debug"},
                                 {"ORBITE_LOG_SUBSYS", "rdma"},
                                 {"ORBITE_RDMA_LOG_SLICE_AFFINITY", "true"}});
  }
  testing::TempDir dir_;
};

TEST_F(RdmaDirectPeer, TheSameNamedPeerNicIsPreferredWhileActiveWhereverThePeerListsIt) {
  const Outcome o = run(R"({"bind": "127.0.0.3", "port_state": "DOWN"},)"
                        R"( {"bind": "127.0.0.4"}, {"bind": "127.0.0.5"})");
  expect_pass(o, "rails");
  EXPECT_GT(count_of(o.err, ": soft_1 -> soft_1, "), 0U) << o.err.substr(0, 4000);
  EXPECT_EQ(count_of(o.err, ": soft_1 -> soft_2, "), 0U) << o.err.substr(0, 4000);
}

TEST_F(RdmaDirectPeer, APausedDirectPeerLeavesTheSpreadToTheActiveOnes) {
  const Outcome o = run(R"({"bind": "127.0.0.3"}, {"bind": "127.0.0.4", "port_state": "DOWN"},)"
                        R"( {"bind": "127.0.0.5"})");
  expect_pass(o, "rails");
  EXPECT_EQ(count_of(o.err, ": soft_1 -> soft_1, "), 0U) << o.err.substr(0, 4000);
  EXPECT_GT(count_of(o.err, ": soft_1 -> soft_2, "), 0U) << o.err.substr(0, 4000);
}

}  // namespace
}  // namespace orbite
