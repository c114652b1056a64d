// The RDMA transport's setup on softverbs, each case in processes of its own: loading the verbs
// library (orbite-rdma-loader-probe, where the first load in a process wins), the provider
// capability checks, and the MR cache of engine-owned memory under its budget (orbite-rdma-probe
// under orbite-run). The data path's cases are in rdma_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>

#include "../support/subprocess.h"
#include "rdma_test_support.h"

namespace orbite {
namespace {

using namespace rdma_test;

// ---- the loader and the capability checks ------------------------------------------------------

TEST(RdmaLoader, AMissingLibraryIsUnavailableNamingIt) {
  Outcome o = loader(
      {{"ORBITE_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1"}, {"ORBITE_RDMA_ENABLE", "on"}});
  EXPECT_NE(o.out.find("create: Unavailable"), std::string::npos) << o.out << o.err;
  EXPECT_NE(o.out.find("libibverbs.so.1 could not be loaded from '/nonexistent/libibverbs.so.1'"),
            std::string::npos)
      << o.out;
  // With auto the engine is created without RDMA, saying why.
  o = loader({{"ORBITE_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1"}});
  EXPECT_NE(o.out.find("create: ok\nrdma: not installed: libibverbs.so.1 could not be loaded"),
            std::string::npos)
      << o.out;
}

TEST(RdmaLoader, ALibraryWithoutARequiredExportNamesIt) {
  Outcome o =
      loader({{"ORBITE_IBVERBS_LIBRARY", ORBITE_STUB_IBVERBS}, {"ORBITE_RDMA_ENABLE", "on"}});
  EXPECT_NE(o.out.find("create: Unavailable"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("lacks the required export ibv_create_qp"), std::string::npos) << o.out;
}

TEST(RdmaLoader, DebiansLibraryWithoutADeviceSaysSo) {
  // No LD_LIBRARY_PATH: rdma-core's own library, and this machine has no RDMA device.
  Outcome o = loader({{"LD_LIBRARY_PATH", ""}, {"ORBITE_RDMA_ENABLE", "on"}});
  EXPECT_NE(o.out.find("create: Unavailable"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("no RDMA devices"), std::string::npos) << o.out;
  o = loader({{"LD_LIBRARY_PATH", ""}});
  EXPECT_NE(o.out.find("create: ok\nrdma: not installed"), std::string::npos) << o.out;
}

TEST(RdmaLoader, OffNeverLoadsTheLibrary) {
  Outcome o = loader({{"LD_LIBRARY_PATH", ORBITE_SOFTVERBS_DIR}, {"ORBITE_RDMA_ENABLE", "off"}});
  EXPECT_NE(o.out.find("create: ok\nrdma: not installed: rdma.enable is off"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("mapped: no"), std::string::npos) << o.out;
  // And auto on softverbs does load it (so the check above can fail).
  o = loader({{"LD_LIBRARY_PATH", ORBITE_SOFTVERBS_DIR}, {"SOFTVERBS_CONFIG", ""}});
  EXPECT_NE(o.out.find("rdma: installed"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("mapped: yes"), std::string::npos) << o.out;
}

TEST(RdmaLoader, TheFirstLoadInAProcessWins) {
  // A second engine naming another library fails even with rdma.enable = auto.
  Outcome o = loader({{"LD_LIBRARY_PATH", ORBITE_SOFTVERBS_DIR}, {"SOFTVERBS_CONFIG", ""}},
                     {"second", "/elsewhere/libibverbs.so.1"});
  EXPECT_NE(o.out.find("second: Configuration"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("the first load in a process wins"), std::string::npos) << o.out;
}

// ---- the MR cache of engine-owned memory (the collectives' scratch) ----------------------

std::map<std::string, std::string> mr_cache_env(const std::string& expect,
                                                const std::string& budget_bytes = "") {
  // 4 KiB frames keep the slabs' sizes below (rdma.eager_limit sizes the frame slots). No bounce
  // pool: its slabs are engine-owned ranges too, and these cases count the scratch's alone (the
  // bounce cases below count the pool's).
  std::map<std::string, std::string> env = {{"ORBITE_COLL_TRANSPORT", "rdma"},
                                            {"ORBITE_RDMA_EAGER_LIMIT", "4KiB"},
                                            {"ORBITE_RDMA_BOUNCE_LIMIT", "0"},
                                            {"MR_CACHE_EXPECT", expect}};
  if (!budget_bytes.empty()) env["ORBITE_RDMA_MAX_CACHED_MR_BYTES"] = budget_bytes;
  return env;
}

TEST(RdmaMrCache, CollectiveScratchStaysRegisteredAcrossCollectives) {
  expect_pass(run_ranks("mr_cache", mr_cache_env("kept")), "mr_cache");
}

TEST(RdmaMrCache, OnTwoRailsOnFourRanksEachRangeHasACopyPerContext) {
  auto env = mr_cache_env("kept");
  env["SOFTVERBS_CONFIG"] = ORBITE_SOFTVERBS_CONFIGS "/two-rails.json";
  expect_pass(run_ranks("mr_cache", env, 4), "mr_cache", 4);
}

// The lanes' slot slabs (a 64-slot receipt chunk and a 64-slot frame chunk of 4 KiB frames on one
// context, 16,384 + 265,216 bytes) are charged first; the scratch blocks are 4 MiB and 16 KiB. The
// budget holds the slabs and the larger block with 8 KiB to spare, so either block evicts the
// other.
TEST(RdmaMrCache, ABudgetHoldingOneRangeEvictsTheOtherAtEachSwitch) {
  constexpr std::uint64_t kBudget = 281600 + 4 * 1024 * 1024 + 8192;
  expect_pass(run_ranks("mr_cache", mr_cache_env("evict", std::to_string(kBudget))), "mr_cache");
}

TEST(RdmaMrCache, ARangeOverTheBudgetIsRegisteredPerRequestInstead) {
  expect_pass(run_ranks("mr_cache", mr_cache_env("refused", "512KiB")), "mr_cache");
}

TEST(RdmaMrCache, ABudgetWithoutRoomForTheSlotSlabsFailsTheCollectiveNamingIt) {
  const Outcome o = run_ranks("mr_cache", mr_cache_env("slabs_refused", "4096"));
  expect_pass(o, "mr_cache");
  EXPECT_NE(o.out.find("slot slab: a slab of"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("does not fit rdma.max_cached_mr_bytes = 4096"), std::string::npos) << o.out;
}

// ---- bounce buffers (rdma.bounce_limit): rendezvous messages without user registrations ------

TEST(RdmaBounce, MessagesUpToTheLimitRegisterNoUserBufferAndRemappedBuffersCarryNewBytes) {
  const Outcome o = run_ranks("bounce", {});
  expect_pass(o, "bounce");
  EXPECT_NE(o.out.find("8 messages of 64 KiB: 8 bounced, 0 fallbacks, 0 MRs registered"),
            std::string::npos)
      << o.out;
}

TEST(RdmaBounce, APoolOfOneChunkFallsBackToRegisteringTheBuffers) {
  expect_pass(run_ranks("bounce", {{"ORBITE_RDMA_BOUNCE_POOL_BYTES", "256KiB"}}), "bounce");
}

TEST(RdmaBounce, ALimitOfZeroRegistersEveryMessagesBuffers) {
  expect_pass(run_ranks("bounce", {{"ORBITE_RDMA_BOUNCE_LIMIT", "0"}}), "bounce");
}

class RdmaCapability : public ::testing::Test {
 protected:
  // soft_0 with `fault`, soft_1 healthy.
  std::map<std::string, std::string> config(const std::string& fault, bool second) {
    const std::string path = dir_.path() + "/softverbs.json";
    std::ofstream f(path);
    f << R"({"devices": [{"bind": "127.0.0.1", "faults": [")" << fault << R"("]})"
      << (second ? R"(, {"bind": "127.0.0.2"})" : "") << "]}";
    return {{"LD_LIBRARY_PATH", ORBITE_SOFTVERBS_DIR}, {"SOFTVERBS_CONFIG", path}};
  }
  testing::TempDir dir_;
};

TEST_F(RdmaCapability, AProviderWithoutType2BWindowsIsRefusedNamingIt) {
  auto env = config("disable mw", false);
  env["ORBITE_RDMA_ENABLE"] = "on";
  Outcome o = loader(env);
  EXPECT_NE(o.out.find("create: Unavailable"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Type-2B memory windows"), std::string::npos) << o.out;
}

TEST_F(RdmaCapability, AProviderWithoutSendWithInvalidateIsRefusedNamingIt) {
  auto env = config("disable send_inv", false);
  env["ORBITE_RDMA_ENABLE"] = "on";
  Outcome o = loader(env);
  EXPECT_NE(o.out.find("create: Unavailable"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("SEND_WITH_INV"), std::string::npos) << o.out;
}

TEST_F(RdmaCapability, AHealthyDeviceBesideARefusedOneIsUsedAndNumberingHolds) {
  Outcome o = loader(config("disable mw", true));
  EXPECT_NE(o.out.find("rdma: installed"), std::string::npos) << o.out;
  // The refused device keeps its NIC ID: the healthy one is still NIC 1.
  EXPECT_NE(o.out.find("context soft_0 (nic 0): inert: the provider lacks Type-2B memory windows"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("context soft_1 (nic 1): active"), std::string::npos) << o.out;
}

TEST_F(RdmaCapability, APinnedDeviceNeverFallsBack) {
  auto env = config("disable mw", true);
  env["ORBITE_RDMA_DEVICE"] = "soft_0";
  env["ORBITE_RDMA_ENABLE"] = "on";
  Outcome o = loader(env);
  EXPECT_NE(o.out.find("create: Unavailable"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("soft_0: inert"), std::string::npos) << o.out;
  env["ORBITE_RDMA_DEVICE"] = "soft_7";
  o = loader(env);
  EXPECT_NE(o.out.find("rdma.device 'soft_7' is not among the permitted RDMA devices"),
            std::string::npos)
      << o.out;
}

}  // namespace
}  // namespace orbite
