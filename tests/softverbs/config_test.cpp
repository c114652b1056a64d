// SOFTVERBS_CONFIG files with faults and network namespaces, seen by a separate verbs program
// (softverbs_devinfo_probe): the configuration is read once per process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#ifndef SOFTVERBS_PROBE
#error \
    "SOFTVERBS_PROBE must name the softverbs_devinfo_probe program (tests/softverbs/CMakeLists.txt)"
#endif

namespace {

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

// A bad file is one line on stderr and an empty list; nothing may throw into the verbs program
// (an uncaught exception would abort it with "terminate called ...").
void expect_rejected(const std::string& json, const std::string& reason) {
  SCOPED_TRACE(json);
  const std::string out = probe(json);
  EXPECT_NE(out.find("softverbs: "), std::string::npos) << out;
  EXPECT_NE(out.find(reason), std::string::npos) << out;
  EXPECT_NE(out.find("; no devices"), std::string::npos) << out;
  EXPECT_EQ(out.find("terminate"), std::string::npos) << out;
}

TEST(Config, ANumberBeyondADoubleNamesTheFieldNotAnAbort) {
  expect_rejected(R"({"devices": [{"bind": "127.0.0.1"}, {"rate_gbps": 1e400}]})",
                  ": invalid JSON at devices[1].rate_gbps: [json.exception.out_of_range.406] "
                  "number overflow parsing '1e400'");
  expect_rejected(R"({"devices": [{"numa_node": -1e400}]})",
                  "invalid JSON at devices[0].numa_node: [json.exception.out_of_range.406]");
  expect_rejected(R"({"port_base": 1e400, "devices": []})",
                  "invalid JSON at port_base: [json.exception.out_of_range.406]");
}

TEST(Config, MalformedTextNamesWhereTheParserStopped) {
  expect_rejected(R"({"devices": [{"bind": )",
                  "invalid JSON at devices[0].bind: [json.exception.parse_error.101]");
  expect_rejected(R"({"devices": [{"gids": ["fe80::1", )",
                  "invalid JSON at devices[0].gids[1]: [json.exception.parse_error.101]");
  expect_rejected("", "invalid JSON: [json.exception.parse_error.101]");
}

TEST(Config, AValueOfTheWrongTypeNamesTheDeviceTheFieldAndTheValue) {
  expect_rejected(R"({"devices": [{"rate_gbps": "fast"}]})",
                  "device 0: rate_gbps: expected a number, got \"fast\"");
  expect_rejected(R"({"devices": [{}, {"bind": 127}]})",
                  "device 1: bind: expected a string, got 127");
  // Integers: no fractions, nothing beyond int, no negative other than -1.
  expect_rejected(R"({"devices": [{"numa_node": 1.5}]})",
                  "device 0: numa_node: expected a NUMA node (an integer, -1 for none), got 1.5");
  expect_rejected(R"({"devices": [{"numa_node": 4294967296}]})",
                  "device 0: numa_node: expected a NUMA node (an integer, -1 for none), got "
                  "4294967296");
  expect_rejected(R"({"devices": [{"numa_node": -2}]})", "device 0: numa_node: expected");
  expect_rejected(R"({"port_base": -1, "devices": []})",
                  "port_base must be a port number (0 to 65535), got -1");
  expect_rejected(R"({"port_base": "21000", "devices": []})",
                  "port_base must be a port number (0 to 65535), got \"21000\"");
  expect_rejected(R"({"devices": [{"gids": ["fe80::1", 5]}]})",
                  "device 0: gids[1]: expected a string, got 5");
  expect_rejected(R"({"devices": [{"faults": "delay 5"}]})",
                  "device 0: faults: expected an array of strings, got \"delay 5\"");
  expect_rejected(R"({"devices": [{"port_state": 1}]})",
                  "device 0: port_state: expected a string, got 1");
  // Something else where an object belongs.
  expect_rejected(R"({"devices": [{}, 5]})", "device 1: expected an object, got 5");
  expect_rejected(R"({"devices": {}})", "expected {\"devices\": [...]}");
}

// "mw_strict" and "mw_index_limit" set a device's window keys and indices from the start
// (docs/softverbs.md); the limit is the device's max_mw.
TEST(Config, MemoryWindowKeysAndIndexLimit) {
  const std::string out =
      probe(R"({"devices": [{"mw_index_limit": 2}, {"bind": "127.0.0.2", "mw_strict": false}]})");
  EXPECT_NE(out.find("soft_0 port=PORT_ACTIVE speed=32 width=2 max_mw=2 gids=1"), std::string::npos)
      << out;
  EXPECT_NE(out.find("mw_index_limit 2"), std::string::npos) << out;
  EXPECT_NE(out.find("soft_1 port=PORT_ACTIVE speed=32 width=2 max_mw=1048576 gids=1"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ok soft_1 port ACTIVE"), std::string::npos) << out;
  EXPECT_NE(out.find("mw_strict off"), std::string::npos) << out;
  EXPECT_EQ(out.find("ok soft_0 port ACTIVE link up rate 100 delay_us 0 mw_strict off"),
            std::string::npos)
      << out;  // soft_0 keeps the default, strict keys
  expect_rejected(R"({"devices": [{"mw_strict": "yes"}]})",
                  "device 0: mw_strict: expected true or false, got \"yes\"");
  expect_rejected(R"({"devices": [{"mw_index_limit": -1}]})",
                  "device 0: mw_index_limit: expected an integer 0..8388608, got -1");
  expect_rejected(R"({"devices": [{"mw_index_limit": 8388609}]})",
                  "device 0: mw_index_limit: expected an integer 0..8388608, got 8388609");
}

TEST(Config, NumaNodeMinusOneIsNone) {
  const std::string out = probe(R"({"devices": [{"numa_node": -1}, {"numa_node": 3}]})");
  EXPECT_NE(out.find("soft_0 port=PORT_ACTIVE"), std::string::npos) << out;
  EXPECT_NE(out.find("soft_1 port=PORT_ACTIVE"), std::string::npos) << out;
}

}  // namespace
