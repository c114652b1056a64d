// SOFTVERBS_CONFIG files with faults and network namespaces, seen by a separate verbs program
// (softverbs_devinfo_probe): the configuration is read once per process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

#if defined(SOFTVERBS_PROBE)
// Runs the probe with a config holding json; stdout and stderr together.
std::string probe(const std::string& json) {
  const std::string path = "/tmp/softverbs-config-test-" + std::to_string(getpid()) + ".json";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return "cannot write " + path;
  std::fputs(json.c_str(), f);
  std::fclose(f);
  std::string out;
  FILE* p = popen(("SOFTVERBS_CONFIG=" + path + " " SOFTVERBS_PROBE " 2>&1").c_str(), "r");
  if (p != nullptr) {
    char buf[512];
    while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    pclose(p);
  }
  std::remove(path.c_str());
  return out;
}

TEST(Config, FaultsRunAtFirstUse) {
  const std::string out = probe(
      R"({"devices": [{"faults": ["disable mw", "port down", "gid 1 fe80::9", "rate 25"]},
                      {"bind": "127.0.0.2"}]})");
  EXPECT_NE(out.find("soft_0 port=PORT_DOWN speed=32 width=1 max_mw=0 gids=2"), std::string::npos)
      << out;
  // Faults belong to their device: soft_1 is untouched.
  EXPECT_NE(out.find("soft_1 port=PORT_ACTIVE speed=32 width=2 max_mw=1048576 gids=1"),
            std::string::npos)
      << out;
}

TEST(Config, ABadFaultNamesTheDeviceTheEntryAndTheValue) {
  const std::string out = probe(R"({"devices": [{"faults": ["delay 5", "delay soon"]}]})");
  EXPECT_NE(out.find("soft_0: faults[1] \"delay soon\": delay: 'soon'"), std::string::npos) << out;
  EXPECT_NE(out.find("no devices"), std::string::npos) << out;
}

TEST(Config, AMissingNetworkNamespaceFailsOpenNotTheList) {
  const std::string out = probe(R"({"devices": [{"netns": "softverbs-no-such-namespace"}]})");
  EXPECT_NE(out.find("soft_0 open failed"), std::string::npos) << out;
}
#endif

}  // namespace
