// The installed tools and the demo program, as real processes (the perf harness:
// perf_harness_test.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include <orbite/config.h>
#include <orbite/info.h>
#include <orbite/store.h>
#include <orbite/version.h>

#include "../support/subprocess.h"
#include "common/net.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;
using testing::count_of;
using testing::Outcome;
using testing::run_program;
using testing::TempDir;

const std::string kBin = ORBITE_BIN_DIR;
const std::string kHello = std::string(ORBITE_BINARY_DIR) + "/examples/orbite-hello";

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::uint16_t free_port() {
  auto listener = net::listen_tcp({"127.0.0.1", 0});
  EXPECT_TRUE(listener.ok());
  return net::local_endpoint(listener->get())->port;
}

TEST(OrbiteInfo, ReportsVersionFeaturesAndLibraries) {
  Outcome o = run_program({kBin + "/orbite-info"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find(std::string("OrbiTE ") + ORBITE_VERSION_STRING), std::string::npos) << o.out;
  BuildInfo b = build_info();
  EXPECT_NE(o.out.find(std::string("RDMA  ") + (b.with_rdma ? "yes" : "no")), std::string::npos);
  EXPECT_NE(o.out.find(std::string("CUDA  ") + (b.with_cuda ? "yes" : "no")), std::string::npos);
  EXPECT_NE(o.out.find(std::string("MPI   ") + (b.with_mpi ? "yes" : "no")), std::string::npos);
  for (const char* lib : {"libibverbs.so.1", "libcuda.so.1", "libhwloc"}) {
    EXPECT_NE(o.out.find(lib), std::string::npos) << lib;
  }
}

TEST(OrbiteInfo, JsonReportAgreesWithTheLibrary) {
  Outcome o = run_program({kBin + "/orbite-info", "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_EQ(j["version"], ORBITE_VERSION_STRING);
  EXPECT_EQ(j["features"]["rdma"], build_info().with_rdma);
  ASSERT_EQ(j["libraries"].size(), 3U);
  LibraryProbe verbs = probe_libibverbs();
  EXPECT_EQ(j["libraries"][0]["library"], "libibverbs.so.1");
  EXPECT_EQ(j["libraries"][0]["found"], verbs.found);
  EXPECT_EQ(j["libraries"][1]["found"], probe_libcuda().found);
  EXPECT_EQ(j["libraries"][2]["found"], true);
}

TEST(OrbiteInfo, ValidatesConfigurationFiles) {
  TempDir dir;
  std::string good =
      write_file(dir, "good.json", R"({"num_lanes": 2, "rdma": {"cuda_memory": "direct"}})");
  Outcome ok = run_program({kBin + "/orbite-info", "--config", good});
  ASSERT_EQ(ok.status, 0) << ok.err;
  auto effective = nlohmann::json::parse(ok.out, nullptr, false);
  ASSERT_FALSE(effective.is_discarded()) << ok.out;
  EXPECT_EQ(effective["num_lanes"], 2);
  EXPECT_EQ(effective["rdma"]["cuda_memory"], "direct");
  EXPECT_EQ(effective["rdma"]["max_send_wr"], 16);  // defaults filled in
  EXPECT_EQ(effective["rdma"]["rail_cooldown"], "30s");
  // The effective configuration is itself a valid configuration.
  std::string again = write_file(dir, "again.json", ok.out);
  EXPECT_EQ(run_program({kBin + "/orbite-info", "--config", again}).status, 0);

  struct Bad {
    std::string text;
    std::string mention;
  };
  for (const Bad& bad : std::vector<Bad>{
           {R"({"rdma": {"max_send_wr": "16"}})", "rdma.max_send_wr"},
           {R"({"rdma": {"strict_local_numa": 1}})", "rdma.strict_local_numa"},
           {R"({"tcp": {"nodelay": "true"}})", "tcp.nodelay"},
           {R"({"rdma": {"max_sendwr": 16}})", "did you mean rdma.max_send_wr"},
           {R"({"rdma": {"disable_gpu_direct_rdma": true, "cuda_memory": "direct"}})",
            "rdma.disable_gpu_direct_rdma"},
           {R"({"num_lanes": 2,})", "invalid JSON"},
           {R"({"rdma": {"max_grants": 1e400}})", "rdma.max_grants: invalid JSON"},
           {R"({"rdma": {"default_bandwidth_gbps": -1e400}})",
            "rdma.default_bandwidth_gbps: invalid JSON"},
       }) {
    std::string path = write_file(dir, "bad.json", bad.text);
    Outcome o = run_program({kBin + "/orbite-info", "--config", path});
    EXPECT_EQ(o.status, 1) << bad.text;
    EXPECT_NE(o.err.find(bad.mention), std::string::npos) << bad.text << " -> " << o.err;
    EXPECT_NE(o.err.find("Configuration"), std::string::npos) << o.err;
    EXPECT_TRUE(o.out.empty()) << o.out;
  }
  Outcome missing = run_program({kBin + "/orbite-info", "--config", dir.path() + "/none.json"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("none.json"), std::string::npos) << missing.err;
}

// The issue's report: the parser's out_of_range exception aborted the tool (status 134).
TEST(OrbiteInfo, NumberBeyondADoubleIsAnErrorNotAnAbort) {
  TempDir dir;
  const std::string path = write_file(dir, "overflow.json", R"({"rdma": {"max_grants": 1e400}})");
  Outcome o = run_program({kBin + "/orbite-info", "--config", path});
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_EQ(o.err, "orbite-info: Configuration: " + path +
                       ": config: rdma.max_grants: invalid JSON: [json.exception.out_of_range.406] "
                       "number overflow parsing '1e400'\n");
  EXPECT_TRUE(o.out.empty()) << o.out;
}

TEST(OrbiteInfo, ConfigReferenceIsTheLibrarysTable) {
  Outcome o = run_program({kBin + "/orbite-info", "--config-reference"});
  ASSERT_EQ(o.status, 0);
  EXPECT_EQ(o.out, configuration_reference_markdown());
  EXPECT_EQ(run_program({kBin + "/orbite-info", "--bogus"}).status, 2);
}

// Starts orbite-store and returns the address it printed.
std::string start_store(testing::Child& store) {
  std::string address;
  std::regex line(R"(orbite-store listening on (\S+))");
  EXPECT_TRUE(store.read_until(
      [&] {
        std::smatch m;
        if (!std::regex_search(store.out(), m, line)) return false;
        address = m[1];
        return true;
      },
      20s))
      << store.out() << store.err();
  return address;
}

const std::string kTopoData = std::string(ORBITE_SOURCE_DIR) + "/tests/data/topologies/";

TEST(OrbiteTopo, PrintsInventoryAndTiersOfAFixture) {
  Outcome o = run_program(
      {kBin + "/orbite-topo", "--xml", kTopoData + "dell-xe8640-h100x4-cx7-cx6_flux-ipa20.xml"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("8 NUMA nodes"), std::string::npos) << o.out;
  EXPECT_TRUE(std::regex_search(o.out, std::regex("1 +mlx5_0 +hsi0 +3 +0000:4d:00.0"))) << o.out;
  EXPECT_TRUE(std::regex_search(o.out, std::regex("cuda:0 +0000:4e:00.0 +numa 3"))) << o.out;
  // The GPU under the switch shared with the dual-port CX-6 gets both ports in tier 0; the GPU
  // with no NIC on its switch or node gets every NIC in tier 2.
  EXPECT_TRUE(std::regex_search(o.out, std::regex("cuda:0 +mlx5_0 mlx5_1 +- +mlx5_2 mlx5_3\\n")))
      << o.out;
  EXPECT_TRUE(std::regex_search(o.out, std::regex("cuda:2 +- +- +mlx5_2 mlx5_0 mlx5_1 mlx5_3")))
      << o.out;
  EXPECT_NE(o.out.find("(discovery)"), std::string::npos);
}

// A cloud VM's NCCL topology file over a machine without PCI devices: the GPUs and NICs come
// from it, the NICs named by bus ID, each GPU's switch partners in tier 0.
TEST(OrbiteTopo, ReadsAnNcclTopologyFile) {
  Outcome o = run_program({kBin + "/orbite-topo", "--xml", kTopoData + "synthetic/no-io.xml",
                           "--nccl-xml", kTopoData + "nccl/aws-p4d-24xlarge-a100x8-efa.xml"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("NCCL topology"), std::string::npos) << o.out;
  EXPECT_TRUE(std::regex_search(o.out, std::regex("cuda:0 +pci:0000:10:1b.0 +pci:0000:20:1b.0 ")))
      << o.out;
  Outcome bad = run_program({kBin + "/orbite-topo", "--xml", kTopoData + "synthetic/no-io.xml",
                             "--nccl-xml", kTopoData + "synthetic/no-io.xml"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("topology.nccl_xml"), std::string::npos) << bad.err;
}

TEST(OrbiteTopo, JsonFormIsStableAndHonoursTheConfiguration) {
  TempDir dir;
  const std::string config = write_file(
      dir, "c.json",
      R"({"rdma": {"rdma_blacklist": ["mlx5_2"], "priority_matrix": {"cuda:1": [["mlx5_3"], []]}}})");
  Outcome o = run_program({kBin + "/orbite-topo", "--json", "--config", config, "--xml",
                           kTopoData + "dell-xe8640-h100x4-cx7-cx6_flux-ipa20.xml"});
  ASSERT_EQ(o.status, 0) << o.err;
  auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_EQ(j["format"], 1);
  ASSERT_EQ(j["nics"].size(), 3U);  // the blacklist applies before IDs are given
  EXPECT_EQ(j["nics"][0]["name"], "mlx5_0");
  EXPECT_EQ(j["nics"][0]["id"], 0);
  EXPECT_EQ(j["nics"][0]["pci"]["bus_id"], "0000:4d:00.0");
  EXPECT_EQ(j["gpus"].size(), 4U);
  EXPECT_EQ(j["gpus"][0]["cuda_visible"], false);
  EXPECT_EQ(j["priorities"]["origin"], "priority_matrix");
  bool found = false;
  for (const auto& row : j["priorities"]["rows"]) {
    if (row["location"] == "cuda:1") {
      found = true;
      EXPECT_EQ(row["tiers"][0], nlohmann::json::array({"mlx5_3"}));
    }
  }
  EXPECT_TRUE(found) << o.out;
}

#if defined(SOFTVERBS_DIR)
// On a verbs provider (softverbs here), discovery opens each device and queries its ports, so
// the inventory and the selector see the configured rates and states.
TEST(OrbiteTopo, SeesThePortStateAndRateOfTheProvidersDevices) {
  TempDir dir;
  const std::string sv = write_file(
      dir, "softverbs.json",
      R"({"devices": [{"rate_gbps": 200}, {"bind": "127.0.0.2", "rate_gbps": 25, "port_state": "DOWN"}]})");
  Outcome o = run_program({kBin + "/orbite-topo", "--json"}, std::chrono::seconds(60),
                          {{"LD_LIBRARY_PATH", SOFTVERBS_DIR}, {"SOFTVERBS_CONFIG", sv}});
  ASSERT_EQ(o.status, 0) << o.err;
  auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  ASSERT_EQ(j["nics"].size(), 2U) << o.out;
  EXPECT_EQ(j["nics"][0]["name"], "soft_0");
  ASSERT_EQ(j["nics"][0]["ports"].size(), 1U) << o.out;
  EXPECT_EQ(j["nics"][0]["ports"][0]["state"], "ACTIVE");
  EXPECT_DOUBLE_EQ(j["nics"][0]["ports"][0]["rate_gbps"].get<double>(), 200.0);  // HDR 4x
  EXPECT_EQ(j["nics"][1]["name"], "soft_1");
  ASSERT_EQ(j["nics"][1]["ports"].size(), 1U) << o.out;
  EXPECT_EQ(j["nics"][1]["ports"][0]["state"], "DOWN");
  EXPECT_DOUBLE_EQ(j["nics"][1]["ports"][0]["rate_gbps"].get<double>(), 25.0);  // EDR 1x
}
#endif

TEST(OrbiteTopo, BadInputsFailNamingThem) {
  Outcome missing = run_program({kBin + "/orbite-topo", "--xml", "/nonexistent/topo.xml"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("topology.hwloc_xml"), std::string::npos) << missing.err;
  TempDir dir;
  const std::string config =
      write_file(dir, "c.json", R"({"rdma": {"priority_matrix": {"cuda:0": [["nope0"], []]}}})");
  Outcome bad = run_program({kBin + "/orbite-topo", "--config", config, "--xml",
                             kTopoData + "dell-xe8640-h100x4-cx7-cx6_flux-ipa20.xml"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("nope0"), std::string::npos) << bad.err;
  EXPECT_EQ(run_program({kBin + "/orbite-topo", "--bogus"}).status, 2);
}

// Without --config the tool loads the environment, as every rank does: ORBITE_CONFIG's file.
TEST(OrbiteTopo, NumberBeyondADoubleInOrbiteConfigIsAnErrorNotAnAbort) {
  TempDir dir;
  const std::string path = write_file(dir, "overflow.json", R"({"rdma": {"max_grants": 1e400}})");
  Outcome o = run_program(
      {kBin + "/orbite-topo", "--xml", kTopoData + "dell-xe8640-h100x4-cx7-cx6_flux-ipa20.xml"},
      30s, {{"ORBITE_CONFIG", path}});
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_NE(o.err.find("orbite-topo: Configuration: ORBITE_CONFIG: " + path +
                       ": config: rdma.max_grants: invalid JSON"),
            std::string::npos)
      << o.err;
}

TEST(OrbiteTopo, SelectShowsTheSelectorsChoiceOnIdleNics) {
  const std::string xml = kTopoData + "dell-xe8640-h100x4-cx7-cx6_flux-ipa20.xml";
  Outcome o = run_program({kBin + "/orbite-topo", "--xml", xml, "--select", "cuda:0"});
  ASSERT_EQ(o.status, 0) << o.err;
  // Idle NICs score alike, so the tier weights (1, 1, 10, 10) set the shares: floor(64 / 2.2)
  // = 29 for each tier-0 port, floor(2.9) = 2 for the others, and the 2 left over go to the best.
  EXPECT_NE(o.out.find("one 64 KiB slice: mlx5_0"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("a 64-slice parent: mlx5_2=2 mlx5_0=31 mlx5_1=29 mlx5_3=2"),
            std::string::npos)
      << o.out;
  TempDir dir;
  const std::string config =
      write_file(dir, "c.json", R"({"rdma": {"strict_local_numa": true, "device_mask": [0]}})");
  Outcome none =
      run_program({kBin + "/orbite-topo", "--xml", xml, "--config", config, "--select", "cpu:3"});
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.out.find("no eligible NIC for cpu:3"), std::string::npos) << none.out;
  EXPECT_EQ(run_program({kBin + "/orbite-topo", "--xml", xml, "--select", "rocm:0"}).status, 2);
}

TEST(OrbiteTopo, LiveMachine) {
  Outcome o = run_program({kBin + "/orbite-topo"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("source: live machine"), std::string::npos) << o.out;
}

// The acceptance of the hang report: a 2-rank job that stalls on purpose (stall_probe.cpp), and
// orbite-dump given the launcher's pid asks both ranks (SIGUSR1) and prints their reports, which
// name the stalled receives by tag and peer rank, the message nobody received, and the collective
// one rank never joined.
TEST(OrbiteDump, NamesTheStalledReceivesOfATwoRankJob) {
  TempDir dir;
  testing::Child job(
      {kBin + "/orbite-run", "-n", "2", "--",
       std::string(ORBITE_BINARY_DIR) + "/tests/orbite-stall-probe", "--seconds", "120"},
      {{"ORBITE_DUMP_DIR", dir.path()}});
  ASSERT_TRUE(job.read_until([&] { return count_of(job.out(), "stalled") == 2; }, 60s))
      << job.out() << job.err();
  Outcome dump = run_program({kBin + "/orbite-dump", std::to_string(job.pid())}, 60s);
  ASSERT_EQ(dump.status, 0) << dump.out << dump.err;
  EXPECT_EQ(count_of(dump.out, "==> pid "), 2U) << dump.out;
  EXPECT_EQ(count_of(dump.out, "end of report"), 2U) << dump.out;
  const auto has = [&](const char* pattern) {
    return std::regex_search(dump.out, std::regex(pattern));
  };
  EXPECT_TRUE(
      has("posted receive \\(no message matched it yet\\): comm 0x[0-9a-f]{8} tag 42 "
          "from rank 1 [0-9a-f]{8}, 4096 B, for [0-9.]+ s"))
      << dump.out;
  EXPECT_TRUE(
      has("posted receive \\(no message matched it yet\\): comm 0x[0-9a-f]{8} tag 43 "
          "from rank 0 [0-9a-f]{8}, 4096 B"))
      << dump.out;
  EXPECT_TRUE(
      has("unexpected message \\(no receive posted for it\\): eager comm 0x[0-9a-f]{8} "
          "tag 7 from [0-9a-f]{8}, 100 B"))
      << dump.out;
  EXPECT_TRUE(has("collective all_reduce #0 \\(tag [0-9]+\\): running for [0-9.]+ s")) << dump.out;
  // A process that does not catch SIGUSR1 is never signalled (the default action would end it).
  testing::Child bystander({"sleep", "30"});
  Outcome refused = run_program({kBin + "/orbite-dump", std::to_string(bystander.pid())}, 30s);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("do not catch SIGUSR1"), std::string::npos) << refused.err;
  EXPECT_EQ(::kill(bystander.pid(), 0), 0) << "the bystander was signalled";
  ::kill(job.pid(), SIGTERM);  // orbite-run forwards it to the ranks
  job.wait(30s);
}

TEST(OrbiteStore, ServesAuthenticatedClientsUntilSigterm) {
  testing::Child store({kBin + "/orbite-store", "--listen", "127.0.0.1:0"},
                       {{"ORBITE_STORE_TOKEN", "tok"}});
  std::string address = start_store(store);
  ASSERT_FALSE(address.empty());
  TcpStoreClientOptions options;
  options.address = address;
  options.token = "tok";
  auto client = TcpStoreClient::connect(options);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE((*client)->set("k", "v").ok());
  EXPECT_EQ(*(*client)->get("k", 1s), "v");
  options.token = "";
  EXPECT_EQ(TcpStoreClient::connect(options).status().code(), Errc::PermissionDenied);
  ASSERT_EQ(::kill(store.pid(), SIGTERM), 0);
  EXPECT_EQ(store.wait(20s), 0) << store.err();
  EXPECT_EQ((*client)->set("k", "w").code(), Errc::ConnectionLost);
}

TEST(OrbiteStore, MaxConnectionsIsAppliedAndABadCountIsRefusedNamingIt) {
  for (const char* bad : {"0", "1048577", "many"}) {
    Outcome o = run_program({kBin + "/orbite-store", "--max-connections", bad});
    EXPECT_EQ(o.status, 2) << bad;
    EXPECT_NE(
        o.err.find("--max-connections needs a count in 1..1048576, got '" + std::string(bad) + "'"),
        std::string::npos)
        << o.err;
  }
  // With a cap of one, a second client's connection is closed at once.
  testing::Child store(
      {kBin + "/orbite-store", "--listen", "127.0.0.1:0", "--max-connections", "1"});
  std::string address = start_store(store);
  ASSERT_FALSE(address.empty());
  TcpStoreClientOptions options;
  options.address = address;
  options.connect_timeout = 5s;
  auto first = TcpStoreClient::connect(options);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto second = TcpStoreClient::connect(options);
  EXPECT_FALSE(second.ok());
  EXPECT_TRUE((*first)->set("k", "v").ok());
  ASSERT_EQ(::kill(store.pid(), SIGTERM), 0);
  EXPECT_EQ(store.wait(20s), 0) << store.err();
  EXPECT_NE(store.err().find("refusing a connection: 1 are open (max_connections)"),
            std::string::npos)
      << store.err();
}

TEST(Hello, FourRanksUnderOrbiteRun) {
  Outcome o = run_program({kBin + "/orbite-run", "-n", "4", "--tag-output", "--", kHello}, 60s);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  for (int r = 0; r < 4; ++r) {
    std::string rs = std::to_string(r);
    EXPECT_EQ(count_of(o.out, "[" + rs + "] rank " + rs + " of 4 on "), 1U) << o.out;
    // Each rank lists every peer once, itself marked.
    EXPECT_EQ(count_of(o.out, "[" + rs + "]   peer "), 4U) << o.out;
    EXPECT_EQ(count_of(o.out, "[" + rs + "]   peer " + rs + ": "), 1U) << o.out;
  }
  EXPECT_EQ(count_of(o.out, "(self)"), 4U);
  EXPECT_EQ(count_of(o.out, "local rank"), 4U);
}

TEST(Hello, TorchrunStyleRankZeroHostsTheStore) {
  std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<testing::Child>> ranks;
  for (int r = 1; r >= 0; --r) {  // rank 1 first: it must wait for rank 0's store
    ranks.push_back(std::make_unique<testing::Child>(
        std::vector<std::string>{kHello},
        std::map<std::string, std::string>{{"RANK", std::to_string(r)},
                                           {"WORLD_SIZE", "2"},
                                           {"LOCAL_RANK", std::to_string(r)},
                                           {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", port}}));
  }
  for (auto& child : ranks) {
    EXPECT_EQ(child->wait(60s), 0) << child->out() << child->err();
  }
  EXPECT_NE(ranks[1]->out().find("rank 0 of 2"), std::string::npos) << ranks[1]->out();
  EXPECT_NE(ranks[0]->out().find("rank 1 of 2"), std::string::npos) << ranks[0]->out();
  EXPECT_NE(ranks[1]->out().find("bootstrap torchrun"), std::string::npos) << ranks[1]->out();
}

TEST(Hello, MissingRankTimesOutNamingIt) {
  testing::Child store({kBin + "/orbite-store", "--listen", "127.0.0.1:0"});
  std::string address = start_store(store);
  ASSERT_FALSE(address.empty());
  Outcome o = run_program({kHello}, 60s,
                          {{"ORBITE_RANK", "0"},
                           {"ORBITE_WORLD_SIZE", "3"},
                           {"ORBITE_STORE", address},
                           {"ORBITE_BOOTSTRAP_TIMEOUT", "500ms"}});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("Timeout"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("(ranks 1,2;"), std::string::npos) << o.err;
  ::kill(store.pid(), SIGTERM);
  EXPECT_EQ(store.wait(20s), 0);
}

TEST(Hello, UnreachableStoreFailsWithinTheConnectBound) {
  std::string port = std::to_string(free_port());  // nothing listens there now
  Outcome o = run_program({kHello}, 60s,
                          {{"ORBITE_RANK", "1"},
                           {"ORBITE_WORLD_SIZE", "2"},
                           {"ORBITE_STORE", "127.0.0.1:" + port},
                           {"ORBITE_BOOTSTRAP_CONNECT_TIMEOUT", "300ms"}});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("cannot reach the store at 127.0.0.1:" + port), std::string::npos) << o.err;
  // The variable bounds the attempt (the default would be 60 s): a bound, not a measurement.
  EXPECT_LT(o.elapsed, 20s);
}

TEST(Hello, MistypedVariableIsReportedOnce) {
  // Both the bootstrap and the communicator load the configuration; the typo is named once.
  Outcome o = run_program({kHello}, 30s, {{"ORBITE_RDMA_DEVIC", "mlx5_0"}});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(count_of(o.err,
                     "ignoring unknown environment variable ORBITE_RDMA_DEVIC (did you "
                     "mean ORBITE_RDMA_DEVICE?)"),
            1U)
      << o.err;
}

TEST(Hello, NumberBeyondADoubleInOrbiteConfigIsAConfigurationError) {
  TempDir dir;
  const std::string path = write_file(dir, "overflow.json", R"({"rdma": {"max_grants": 1e400}})");
  Outcome o = run_program({kHello}, 30s, {{"ORBITE_CONFIG", path}});
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_NE(o.err.find("Configuration: ORBITE_CONFIG: " + path + ": config: rdma.max_grants"),
            std::string::npos)
      << o.err;
  EXPECT_EQ(o.err.find("terminate"), std::string::npos) << o.err;
}

TEST(Hello, BadLauncherVariableIsAConfigurationError) {
  Outcome o = run_program({kHello}, 30s, {{"ORBITE_RANK", "x"}, {"ORBITE_WORLD_SIZE", "2"}});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("Configuration: ORBITE_RANK='x'"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace orbite
