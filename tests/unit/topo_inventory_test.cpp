// Discovery against real hwloc topologies (tests/data/topologies, expectations written by reading
// each PCI tree by hand: tests/data/topologies/README.md), the joins with the verbs provider's and
// the CUDA driver's lists, filters and locations.
#include <gtest/gtest.h>

#include <orbite/transfer.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/config_internal.h"
#include "proxy/host_topology.h"
#include "topo/inventory.h"
#include "topo/tiers.h"

namespace orbite::topo {
namespace {

const std::string kData = std::string(ORBITE_SOURCE_DIR) + "/tests/data/topologies/";
const std::string kXe8640 = kData + "dell-xe8640-h100x4-cx7-cx6_flux-ipa20.xml";

Inventory load(const std::string& path, DiscoveryInput in = {}) {
  in.hwloc_xml = path;
  auto inv = discover(in);
  EXPECT_TRUE(inv.ok()) << path << ": " << inv.status().to_string();
  return inv.ok() ? *inv : Inventory{};
}

std::vector<std::string> names(const Inventory& inv, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(inv.nics.at(static_cast<std::size_t>(id)).name);
  return out;
}

std::vector<std::vector<std::string>> tier_names(const Inventory& inv, const LocationTiers& row) {
  std::vector<std::vector<std::string>> out;
  for (const auto& t : row.tiers) out.push_back(names(inv, t));
  return out;
}

nlohmann::json expectations() {
  std::ifstream f(kData + "expected.json");
  return nlohmann::json::parse(f);
}

// One test per fixture file: NICs, GPUs, NUMA nodes and every location's tiers.
class TopoFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TopoFixture, InventoryAndTiersMatchTheHandReadPciTree) {
  const nlohmann::json all = expectations();
  const nlohmann::json* e = nullptr;
  for (const auto& f : all["files"]) {
    if (f["file"] == GetParam()) e = &f;
  }
  ASSERT_NE(e, nullptr) << GetParam() << " has no entry in expected.json";
  const Inventory inv = load(kData + GetParam());
  SCOPED_TRACE(GetParam());

  EXPECT_EQ(inv.packages, (*e)["packages"].get<int>());
  std::vector<int> numa;
  for (const auto& n : inv.numa_nodes) numa.push_back(n.os_index);
  EXPECT_EQ(numa, (*e)["numa_nodes"].get<std::vector<int>>());

  ASSERT_EQ(inv.nics.size(), (*e)["nics"].size());
  for (std::size_t i = 0; i < inv.nics.size(); ++i) {
    const auto& want = (*e)["nics"][i];
    const NicInfo& nic = inv.nics[i];
    EXPECT_EQ(nic.id, static_cast<int>(i));
    EXPECT_EQ(nic.name, want["name"].get<std::string>());
    EXPECT_EQ(nic.pci ? nic.pci->address.to_string() : "", want["pci"].get<std::string>());
    EXPECT_EQ(nic.numa, want["numa"].get<int>()) << nic.name;
    EXPECT_EQ(nic.netdev, want["netdev"].get<std::string>()) << nic.name;
    EXPECT_TRUE(nic.seen_by_hwloc);
    EXPECT_FALSE(nic.seen_by_verbs);
  }

  const PriorityTable table = discovered_priorities(inv);
  EXPECT_EQ(table.origin, "discovery");
  ASSERT_EQ(inv.gpus.size(), (*e)["gpus"].size());
  for (std::size_t i = 0; i < inv.gpus.size(); ++i) {
    const auto& want = (*e)["gpus"][i];
    const GpuInfo& gpu = inv.gpus[i];
    EXPECT_EQ(gpu.ordinal, want["ordinal"].get<int>());
    EXPECT_EQ(gpu.pci.address.to_string(), want["pci"].get<std::string>());
    EXPECT_EQ(gpu.numa, want["numa"].get<int>());
    EXPECT_FALSE(gpu.cuda_visible);  // no driver consulted: numbered in bus order
    const LocationTiers* row = table.find(Location::cuda(gpu.ordinal));
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(tier_names(inv, *row), (want["tiers"].get<std::vector<std::vector<std::string>>>()))
        << "cuda:" << gpu.ordinal << " " << gpu.pci.address.to_string();
  }
  for (const auto& [where, tiers] : (*e)["cpus"].items()) {
    auto loc = Location::parse(where);
    ASSERT_TRUE(loc.ok());
    const LocationTiers* row = table.find(*loc);
    ASSERT_NE(row, nullptr) << where;
    EXPECT_EQ(tier_names(inv, *row), (tiers.get<std::vector<std::vector<std::string>>>())) << where;
  }
  // "*" lists every NIC in tier 2, as TENT's discovery writes it.
  const LocationTiers* star = table.find(Location::any());
  ASSERT_NE(star, nullptr);
  EXPECT_TRUE(star->tiers[0].empty() && star->tiers[1].empty());
  EXPECT_EQ(star->tiers[2].size(), inv.nics.size());
}

std::vector<std::string> fixture_files() {
  std::vector<std::string> files;
  const nlohmann::json all = expectations();
  for (const auto& f : all["files"]) files.push_back(f["file"].get<std::string>());
  return files;
}

INSTANTIATE_TEST_SUITE_P(Files, TopoFixture, ::testing::ValuesIn(fixture_files()),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

TEST(TopoDiscovery, EveryRealFixtureIsCovered) {
  // The six real machines and the five synthetic edge cases.
  EXPECT_EQ(fixture_files().size(), 11U);
}

TEST(TopoDiscovery, NvSwitchesAreNotGpusAndPciFieldsAreRead) {
  const Inventory inv = load(kData + "nvidia-dgx2h-v100x16-nonic.xml");
  EXPECT_EQ(inv.gpus.size(), 16U);
  for (const auto& g : inv.gpus) {
    EXPECT_EQ(g.pci.vendor_id, 0x10de);
    EXPECT_EQ(g.pci.class_id >> 8, 0x03);
    EXPECT_GE(g.pci.bridges.size(), 2U) << "behind PLX switches";
  }
  EXPECT_TRUE(inv.nics.empty());
  const PriorityTable table = discovered_priorities(inv);
  EXPECT_TRUE(table.lookup(Location::cuda(3)).empty());
}

TEST(TopoDiscovery, PortStateAndGidsFromHwlocAttributes) {
  const Inventory inv = load(kXe8640);
  const NicInfo* up = inv.nic("mlx5_0");
  const NicInfo* down = inv.nic("mlx5_2");
  ASSERT_TRUE(up != nullptr && down != nullptr);
  ASSERT_EQ(up->ports.size(), 1U);
  EXPECT_EQ(up->ports[0].number, 1U);
  EXPECT_EQ(up->ports[0].state, "ACTIVE");
  ASSERT_EQ(up->ports[0].gids.size(), 1U);
  EXPECT_EQ(up->ports[0].gids[0], "fe80:0000:0000:0000:043f:7203:00ae:a282");
  EXPECT_EQ(down->ports.at(0).state, "DOWN");
  EXPECT_DOUBLE_EQ(up->link_gbps, 0.0);  // hwloc does not record rates
}

TEST(TopoDiscovery, MissingXmlIsAConfigurationErrorNamingTheField) {
  DiscoveryInput in;
  in.hwloc_xml = kData + "no-such-file.xml";
  auto inv = discover(in);
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), Errc::Configuration);
  EXPECT_NE(inv.status().message().find("topology.hwloc_xml"), std::string::npos);
  EXPECT_NE(inv.status().message().find("no-such-file.xml"), std::string::npos);
}

// hwloc 2.9.0 itself dies with SIGSEGV loading this file (one byte of nic-no-pci.xml changed: an
// attribute named completeFcpuset; found by the hwloc_xml fuzz target). The file is loaded in a
// checking child first, so the process gets an error naming the field, the file and the signal.
TEST(TopoDiscovery, AnXmlFileThatCrashesHwlocIsAConfigurationErrorNotACrash) {
  DiscoveryInput in;
  in.hwloc_xml = kData + "malformed/hwloc-segfault-attribute-name.xml";
  auto inv = discover(in);
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), Errc::Configuration) << inv.status().to_string();
  EXPECT_NE(inv.status().message().find("topology.hwloc_xml"), std::string::npos);
  EXPECT_NE(inv.status().message().find("hwloc-segfault-attribute-name.xml"), std::string::npos);
  EXPECT_NE(inv.status().message().find("crashed loading it (signal 11"), std::string::npos)
      << inv.status().message();
  // The process goes on: a good file still loads.
  EXPECT_FALSE(load(kData + "synthetic/nic-no-pci.xml").nics.empty());
}

TEST(TopoDiscovery, LiveMachineLoads) {
  auto inv = discover({});
  ASSERT_TRUE(inv.ok()) << inv.status().to_string();
  EXPECT_GE(inv->pus, 1);
  EXPECT_FALSE(inv->numa_nodes.empty());
}

TEST(TopoDiscovery, VerbsListGivesOrderAndIdsAndHwlocPlacesThem) {
  DiscoveryInput in;
  VerbsDevice soft{"soft_0", std::nullopt, 0, {PortInfo{1, "ACTIVE", 100.0, {}}}};
  VerbsDevice by_bus{"renamed0", PciAddress::parse("0000:5e:00.0"), kUnknownNuma, {}};
  in.verbs = std::vector<VerbsDevice>{{"mlx5_3", {}, kUnknownNuma, {}}, soft, by_bus};
  const Inventory inv = load(kXe8640, in);
  ASSERT_EQ(inv.nics.size(), 3U);  // hwloc's mlx5_0..2 are not in the provider's list
  EXPECT_EQ(inv.nics[0].name, "mlx5_3");
  EXPECT_EQ(inv.nics[0].numa, 5);
  EXPECT_TRUE(inv.nics[0].seen_by_hwloc && inv.nics[0].seen_by_verbs);
  EXPECT_EQ(inv.nics[1].name, "soft_0");
  EXPECT_FALSE(inv.nics[1].pci.has_value());
  EXPECT_EQ(inv.nics[1].numa, 0);  // from the provider when hwloc does not know the device
  EXPECT_DOUBLE_EQ(inv.nics[1].link_gbps, 100.0);
  EXPECT_EQ(inv.nics[2].name, "renamed0");
  ASSERT_TRUE(inv.nics[2].pci.has_value());  // placed by bus ID
  EXPECT_EQ(inv.nics[2].numa, 1);
  EXPECT_FALSE(inv.nics[2].pci->bridges.empty());
  // GPU 5f shares a switch with the NIC at 5e:00.0, whatever its name.
  const PriorityTable table = discovered_priorities(inv);
  EXPECT_EQ(tier_names(inv, *table.find(Location::cuda(1)))[0],
            std::vector<std::string>{"renamed0"});
}

TEST(TopoDiscovery, CudaListGivesOrdinalsAndHidesTheOthers) {
  DiscoveryInput in;
  in.cuda = std::vector<CudaDevice>{{1, *PciAddress::parse("0000:4E:00.0"), "H100"},
                                    {0, *PciAddress::parse("0000:db:00.0"), "H100"}};
  const Inventory inv = load(kXe8640, in);
  ASSERT_EQ(inv.gpus.size(), 4U);
  EXPECT_EQ(inv.gpus[0].ordinal, 0);
  EXPECT_EQ(inv.gpus[0].pci.address.to_string(), "0000:db:00.0");
  EXPECT_TRUE(inv.gpus[0].cuda_visible);
  EXPECT_EQ(inv.gpus[0].numa, 5);
  EXPECT_EQ(inv.gpus[1].ordinal, 1);
  EXPECT_EQ(inv.gpus[1].name, "H100");
  EXPECT_EQ(inv.gpus[2].ordinal, -1);
  EXPECT_FALSE(inv.gpus[2].cuda_visible);
  const PriorityTable table = discovered_priorities(inv);
  EXPECT_EQ(tier_names(inv, *table.find(Location::cuda(0)))[0], std::vector<std::string>{"mlx5_3"});
  EXPECT_EQ(table.find(Location::cuda(2)), nullptr);
  // A hidden or absent GPU falls back to "*".
  EXPECT_EQ(table.lookup(Location::cuda(2)).location, Location::any());
}

// A device the driver lists and hwloc does not see (a container, softcuda's configured GPUs) keeps
// its bus ID and takes the driver's NUMA node, which places it for tier 1; hwloc's NUMA node wins
// where hwloc sees the device.
TEST(TopoDiscovery, DriverNumaPlacesAGpuHwlocDoesNotSee) {
  DiscoveryInput in;
  in.cuda = std::vector<CudaDevice>{{0, *PciAddress::parse("0000:77:00.0"), "ghost", 1},
                                    {1, *PciAddress::parse("0000:db:00.0"), "H100", 2}};
  const Inventory inv = load(kXe8640, in);
  ASSERT_GE(inv.gpus.size(), 2U);
  EXPECT_EQ(inv.gpus[0].pci.address.to_string(), "0000:77:00.0");
  EXPECT_EQ(inv.gpus[0].numa, 1);
  EXPECT_EQ(inv.gpus[1].numa, 5) << "hwloc's NUMA node, not the driver's";
  const PriorityTable table = discovered_priorities(inv);
  const LocationTiers& ghost = *table.find(Location::cuda(0));
  EXPECT_TRUE(ghost.tiers[0].empty()) << "no PCI path, so no shared bridge";
  std::vector<std::string> numa1;
  for (const auto& n : inv.nics) {
    if (n.numa == 1) numa1.push_back(n.name);
  }
  ASSERT_FALSE(numa1.empty()) << "the fixture has a NIC on NUMA node 1";
  EXPECT_EQ(tier_names(inv, ghost)[1], numa1);
}

TEST(TopoFilters, WhitelistWinsPrefixesAndPorts) {
  NicFilter f;
  EXPECT_TRUE(filter_allows(f, "mlx5_0"));
  f.blacklist = {"mlx5_1"};
  EXPECT_TRUE(filter_allows(f, "mlx5_0"));
  EXPECT_FALSE(filter_allows(f, "mlx5_1"));
  EXPECT_TRUE(filter_allows(f, "mlx5_10")) << "blacklist entries are exact";
  f.whitelist = {"mlx5_1"};
  EXPECT_TRUE(filter_allows(f, "mlx5_1")) << "a nonempty whitelist wins";
  EXPECT_FALSE(filter_allows(f, "mlx5_0"));
  f.whitelist = {"mlx5*"};
  EXPECT_TRUE(filter_allows(f, "mlx5_7"));
  EXPECT_FALSE(filter_allows(f, "bnxt_re0"));
  f.whitelist = {"mlx5_0:2"};
  EXPECT_TRUE(filter_allows(f, "mlx5_0", 2));
  EXPECT_FALSE(filter_allows(f, "mlx5_0", 1));
}

TEST(TopoFilters, FiltersApplyBeforeIdsAreGiven) {
  DiscoveryInput in;
  in.filter.blacklist = {"mlx5_2", "mlx5_0"};
  const Inventory inv = load(kXe8640, in);
  ASSERT_EQ(inv.nics.size(), 2U);
  EXPECT_EQ(inv.nics[0].name, "mlx5_1");
  EXPECT_EQ(inv.nics[0].id, 0);
  EXPECT_EQ(inv.nics[1].name, "mlx5_3");
  EXPECT_EQ(inv.nics[1].id, 1);
}

TEST(TopoFilters, HcaVariableInNcclSyntax) {
  using config_internal::parse_hca_list;
  auto a = parse_hca_list("mlx5_0,mlx5_1:1");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->exclude);
  EXPECT_EQ(a->entries, (std::vector<std::string>{"mlx5_0*", "mlx5_1*:1"}));
  auto b = parse_hca_list("^=mlx5_2");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->exclude);
  EXPECT_EQ(b->entries, std::vector<std::string>{"mlx5_2"});
  for (const char* bad : {"mlx5_0:0", "mlx5_0:x", ",", "^", "ml x5"}) {
    auto r = parse_hca_list(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Errc::Configuration);
    EXPECT_NE(r.status().message().find("NCCL_IB_HCA syntax"), std::string::npos);
  }
  // Through the loader: it replaces both lists.
  auto env = [](std::string_view name) -> std::optional<std::string> {
    if (name == "ORBITE_RDMA_HCA") return "^mlx5_2";
    if (name == "ORBITE_RDMA_RDMA_WHITELIST") return "[\"mlx5_0\"]";
    return std::nullopt;
  };
  auto cfg = config_internal::load(env);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_TRUE(cfg->rdma.rdma_whitelist.empty());
  EXPECT_EQ(cfg->rdma.rdma_blacklist, std::vector<std::string>{"mlx5_2*"});
  auto bad_env = [](std::string_view name) -> std::optional<std::string> {
    if (name == "ORBITE_RDMA_HCA") return "mlx5_0:300";
    return std::nullopt;
  };
  auto bad = config_internal::load(bad_env);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ORBITE_RDMA_HCA"), std::string::npos);
}

TEST(TopoValues, PciAddressParseAndPrint) {
  auto a = PciAddress::parse("0033:01:00.1");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->domain, 0x33U);
  EXPECT_EQ(a->function, 1);
  EXPECT_EQ(a->to_string(), "0033:01:00.1");
  EXPECT_EQ(PciAddress::parse("4E:00.0")->to_string(), "0000:4e:00.0");
  for (const char* bad :
       {"", "4e:00", "0000:4e:00.8", "0000:4e:20.0", "zz:00.0", "0000:4e:00.0x"}) {
    EXPECT_FALSE(PciAddress::parse(bad).has_value()) << bad;
  }
}

TEST(TopoValues, LocationParseAndLookup) {
  EXPECT_EQ(Location::parse("*")->to_string(), "*");
  EXPECT_EQ(Location::parse("cpu:3")->to_string(), "cpu:3");
  EXPECT_EQ(Location::parse("gpu:2")->to_string(), "cuda:2");
  EXPECT_EQ(Location::parse("cuda:1")->memory_type(), MemoryType::Cuda);
  for (const char* bad : {"", "cpu", "cpu:", "cpu:-1", "rocm:0", "cuda:x", "cuda:1 "}) {
    auto r = Location::parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument);
  }
}

TEST(TopoValues, PreferredNumaNodeReplacesHostLocationsOnly) {
  EXPECT_EQ(selection_location(Location::cpu(1), std::nullopt), Location::cpu(1));
  EXPECT_EQ(selection_location(Location::cpu(1), 3U), Location::cpu(3));
  EXPECT_EQ(selection_location(Location::any(), 3U), Location::cpu(3));
  EXPECT_EQ(selection_location(Location::cuda(2), 3U), Location::cuda(2));
}

TEST(TopoHost, XmlConfigAndMatrixThroughTheCommunicatorGlue) {
  EngineConfig config;
  config.topology.hwloc_xml = kXe8640;
  config.rdma.priority_matrix = R"({"cuda:0": [["mlx5_3"], ["mlx5_0"]]})";
  auto host = proxy::discover_host_topology(config);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  EXPECT_EQ(host->priorities.origin, "priority_matrix");
  EXPECT_FALSE(host->verbs_note.empty());  // an XML describes another machine
  const LocationTiers& row = host->priorities.lookup(Location::cuda(0));
  EXPECT_EQ(tier_names(host->inventory, row)[0], std::vector<std::string>{"mlx5_3"});
  config.rdma.priority_matrix = R"({"cuda:0": [["mlx5_9"], []]})";
  auto bad = proxy::discover_host_topology(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::Configuration);
  EXPECT_NE(bad.status().message().find("mlx5_9"), std::string::npos);
}

TEST(TopoHost, AnInvalidExplicitMatrixFailsEngineCreation) {
  EngineConfig config;
  config.topology.hwloc_xml = kXe8640;
  config.rdma.priority_matrix = R"({"cuda:0": [["mlx5_3"], []]})";
  auto engine = TransferEngine::create(config);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  ASSERT_TRUE((*engine)->close(std::chrono::seconds(10)).ok());
  config.rdma.priority_matrix = R"({"cuda:7": [["mlx5_3"], []]})";
  auto bad = TransferEngine::create(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::Configuration);
  EXPECT_NE(bad.status().message().find("cuda:7"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace orbite::topo
