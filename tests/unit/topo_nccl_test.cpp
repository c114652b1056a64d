// NCCL topology XML (topology.nccl_xml) as inventory input: the four real files of
// tests/data/topologies/nccl laid over a machine without PCI devices (synthetic/no-io.xml), their
// GPUs, NICs, NUMA nodes and tiers as read by hand (tests/data/topologies/README.md); a file that
// moves a device hwloc knows; the verbs provider naming a NIC the file knows by bus ID only; and
// the errors of malformed files.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "topo/inventory.h"
#include "topo/nccl_xml.h"
#include "topo/tiers.h"

namespace orbite::topo {
namespace {

const std::string kTopoDir = std::string(ORBITE_SOURCE_DIR) + "/tests/data/topologies/";
const std::string kNoIo = kTopoDir + "synthetic/no-io.xml";

Inventory over_no_io(const std::string& nccl_file, DiscoveryInput in = {}) {
  in.hwloc_xml = kNoIo;
  in.nccl_xml = kTopoDir + "nccl/" + nccl_file;
  auto inv = discover(in);
  EXPECT_TRUE(inv.ok()) << nccl_file << ": " << inv.status().to_string();
  return inv.ok() ? *inv : Inventory{};
}

// The tiers of the GPU at `bus` as NIC names.
std::vector<std::vector<std::string>> tiers_of(const Inventory& inv, const std::string& bus) {
  const auto address = PciAddress::parse(bus);
  for (const GpuInfo& g : inv.gpus) {
    if (address && g.pci.address == *address) {
      std::vector<std::vector<std::string>> out;
      for (const auto& tier : gpu_tiers(inv, g).tiers) {
        out.emplace_back();
        for (int id : tier) out.back().push_back(inv.nics.at(static_cast<std::size_t>(id)).name);
      }
      return out;
    }
  }
  ADD_FAILURE() << "no GPU at " << bus;
  return {};
}

std::string temp_file(const std::string& text) {
  char path[] = "/tmp/orbite-nccl-topo-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::FILE* f = fdopen(fd, "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

TEST(TopoNccl, AzureNdv4TwoGpusAndTwoNicsPerPlaceholderSwitch) {
  const Inventory inv = over_no_io("azure-ndv4-a100x8-hdr.xml");
  EXPECT_NE(inv.source.find("NCCL topology"), std::string::npos) << inv.source;
  ASSERT_EQ(inv.gpus.size(), 8U);
  ASSERT_EQ(inv.nics.size(), 8U);
  EXPECT_EQ(inv.numa_nodes.size(), 4U) << "node 0 from hwloc, 1-3 from the file";
  EXPECT_EQ(inv.nics[0].name, "pci:0103:00:00.0") << "an unnamed NIC is listed by bus ID";
  EXPECT_FALSE(inv.nics[0].seen_by_hwloc);
  // GPUs numbered in bus order without a driver: 0001, 0002, 0003, ...
  EXPECT_EQ(inv.gpus[0].pci.address.to_string(), "0001:00:00.0");
  EXPECT_EQ(inv.gpus[0].numa, 1);
  const auto t = tiers_of(inv, "0003:00:00.0");
  EXPECT_EQ(t[0], (std::vector<std::string>{"pci:0103:00:00.0", "pci:0104:00:00.0"}));
  EXPECT_TRUE(t[1].empty());
  EXPECT_EQ(t[2].size(), 6U);
  EXPECT_EQ(tiers_of(inv, "000e:00:00.0")[0],
            (std::vector<std::string>{"pci:0107:00:00.0", "pci:0108:00:00.0"}));
  // The file's affinity masks become the nodes' CPU lists.
  for (const NumaNode& n : inv.numa_nodes) {
    if (n.os_index == 3) {
      EXPECT_EQ(n.cpuset, "72-95");
    }
  }
}

TEST(TopoNccl, AzureNdv5OneGpuAndOneNicPerSwitchFourSwitchesPerNode) {
  const Inventory inv = over_no_io("azure-ndv5-h100x8-ndr.xml");
  ASSERT_EQ(inv.gpus.size(), 8U);
  ASSERT_EQ(inv.nics.size(), 8U);
  const auto t = tiers_of(inv, "0008:00:00.0");
  EXPECT_EQ(t[0], (std::vector<std::string>{"pci:0104:00:00.0"}));
  EXPECT_EQ(t[1].size(), 3U) << "the other NICs of node 0";
  EXPECT_EQ(t[2].size(), 4U);
  for (const GpuInfo& g : inv.gpus) {
    EXPECT_EQ(g.pci.vendor_id, 0) << "no vendor stated for the GPUs";
    ASSERT_EQ(g.pci.bridges.size(), 1U);
    EXPECT_EQ(g.pci.bridges[0].domain, 0xffffU) << "the placeholder switch";
  }
}

TEST(TopoNccl, AwsP4dEfaNicsAreEthernetClassAndShareASwitchWithTwoGpus) {
  const Inventory inv = over_no_io("aws-p4d-24xlarge-a100x8-efa.xml");
  ASSERT_EQ(inv.gpus.size(), 8U);
  ASSERT_EQ(inv.nics.size(), 4U);
  EXPECT_EQ(inv.nics[0].pci->vendor_id, 0x1d0f);
  EXPECT_EQ(inv.nics[0].pci->class_id, 0x0200);
  const auto t = tiers_of(inv, "0000:10:1d.0");
  EXPECT_EQ(t[0], (std::vector<std::string>{"pci:0000:10:1b.0"}));
  EXPECT_EQ(t[1], (std::vector<std::string>{"pci:0000:20:1b.0"}));
  EXPECT_EQ(t[2].size(), 2U);
}

TEST(TopoNccl, RealDumpNamesItsNicAndGpusWithoutANicNearbyGetItInTierTwo) {
  const Inventory inv = over_no_io("rtx3090x8-cx6_nccl-dump.xml");
  ASSERT_EQ(inv.gpus.size(), 8U) << "VGA-class GeForce cards are GPUs";
  ASSERT_EQ(inv.nics.size(), 1U);
  EXPECT_EQ(inv.nics[0].name, "mlx5_0");
  EXPECT_EQ(inv.nics[0].numa, 1);
  EXPECT_DOUBLE_EQ(inv.nics[0].link_gbps, 56.0) << "<net speed> in Mb/s";
  const auto near = tiers_of(inv, "0000:9b:00.0");
  EXPECT_EQ(near[0], (std::vector<std::string>{"mlx5_0"}));
  const auto far = tiers_of(inv, "0000:0f:00.0");
  EXPECT_TRUE(far[0].empty() && far[1].empty());
  EXPECT_EQ(far[2], (std::vector<std::string>{"mlx5_0"}));
}

// Where hwloc and the file both know a device, the file places it: on the XE8640, GPU cb:00.0
// has no NIC under its switch (all tier 2); a file putting mlx5_3 under that GPU's switch makes
// it tier 0, and keeps hwloc's name and netdev for it.
TEST(TopoNccl, TheFileWinsOverHwlocForADeviceBothKnow) {
  const std::string file = temp_file(R"(<system version="1">
  <cpu numaid="7" affinity="ffffffff">
    <pci busid="0000:ca:01.0" class="0x060400">
      <pci busid="0000:cb:00.0" class="0x030200" vendor="0x10de" device="0x2330"/>
      <pci busid="0000:da:00.0" class="0x020700"><nic><net name="mlx5_3"/></nic></pci>
    </pci>
  </cpu>
</system>
)");
  DiscoveryInput in;
  in.hwloc_xml = kTopoDir + "dell-xe8640-h100x4-cx7-cx6_flux-ipa20.xml";
  in.nccl_xml = file;
  auto inv = discover(in);
  std::remove(file.c_str());
  ASSERT_TRUE(inv.ok()) << inv.status().to_string();
  EXPECT_EQ(inv->nics.size(), 4U) << "no NIC added: mlx5_3 was hwloc's already";
  const NicInfo* nic = inv->nic("mlx5_3");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->netdev, "ibp218s0");
  EXPECT_EQ(nic->numa, 7);
  EXPECT_EQ(tiers_of(*inv, "0000:cb:00.0")[0], (std::vector<std::string>{"mlx5_3"}));
}

// With a verbs provider, its names win: a NIC the file knows by bus ID only takes the
// provider's name and keeps the file's placement.
TEST(TopoNccl, TheVerbsProviderNamesANicTheFilePlaces) {
  DiscoveryInput in;
  in.verbs = std::vector<VerbsDevice>{{"mlx5_ib7", PciAddress::parse("0106:00:00.0"), -1, {}}};
  const Inventory inv = over_no_io("azure-ndv4-a100x8-hdr.xml", in);
  ASSERT_EQ(inv.nics.size(), 1U);
  EXPECT_EQ(inv.nics[0].name, "mlx5_ib7");
  EXPECT_EQ(inv.nics[0].numa, 3);
  EXPECT_EQ(tiers_of(inv, "000c:00:00.0")[0], (std::vector<std::string>{"mlx5_ib7"}));
}

TEST(TopoNccl, MalformedFilesAreConfigurationErrorsNamingTheLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"<system>\n<cpu numaid=\"0\">\n</system>", "line 3: </system> closes <cpu>"},
      {"<system>\n  <pci class=\"0x030200\"/>\n</system>", "line 2: <pci> without busid"},
      {"<system><pci busid=\"zz:00.0\" class=\"0x0302\"/></system>", "is not a bus ID"},
      {"<system><pci busid=\"00:01.0\" class=\"green\"/></system>", "is not a PCI class"},
      {"<system><cpu numaid=\"-1\"/></system>", "is not a NUMA node number"},
      {"<system><cpu numaid=\"0\" affinity=\"xyz\"/></system>", "is not a CPU mask"},
      {"<system><cpu numaid=0/></system>", "is not quoted"},
      {"<system>\n<!-- open", "line 2: an unterminated comment"},
      {"<system><cpu numaid=\"0\">", "<cpu> is not closed"},
      {"<!DOCTYPE x [<!ENTITY a \"b\">]><system/>", "DOCTYPE"},
      {"<system><net name=\"&bogus;\"/></system>", "unknown entity"},
      {"", "no <system> element"},
      {"<topology version=\"2.0\"/>", "no <system> element"},
  };
  for (const Case& c : cases) {
    auto parsed = parse_nccl_topology(c.text, "/etc/topo.xml");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), Errc::Configuration) << c.text;
    EXPECT_NE(parsed.status().message().find("topology.nccl_xml"), std::string::npos);
    EXPECT_NE(parsed.status().message().find(c.says), std::string::npos)
        << c.text << " -> " << parsed.status().message();
  }
  DiscoveryInput in;
  in.hwloc_xml = kNoIo;
  in.nccl_xml = "/nonexistent/nccl-topo.xml";
  auto missing = discover(in);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
  in.nccl_xml = kTopoDir + "nccl";  // a directory
  auto folder = discover(in);
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().code(), Errc::Configuration) << folder.status().to_string();
}

TEST(TopoNccl, CpuMasksBecomeHwlocLists) {
  EXPECT_EQ(cpu_list_of_mask("0000ffff,0000ffff"), "0-15,32-47");
  EXPECT_EQ(cpu_list_of_mask("00000000,00000000,00ffffff"), "0-23");
  EXPECT_EQ(cpu_list_of_mask("80000001"), "0,31");
  EXPECT_EQ(cpu_list_of_mask("0"), "");
  EXPECT_FALSE(cpu_list_of_mask("12,zz").has_value());
  EXPECT_FALSE(cpu_list_of_mask("").has_value());
}

}  // namespace
}  // namespace orbite::topo
