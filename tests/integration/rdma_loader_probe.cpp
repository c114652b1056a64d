// orbite-rdma-loader-probe: creates one engine from the environment's configuration (ORBITE_*)
// and prints what the RDMA install did, for rdma_test.cpp's loader and capability cases (one
// process per case: the first load of the verbs library in a process wins). Lines:
//   create: ok | <status>
//   rdma: installed <library> | not installed: <why>
//   context <name> (nic <id>): <state>
//   mapped: yes | no        (whether any libibverbs is in /proc/self/maps)
//   second: <status>        (argv[1] == "second PATH": a second engine naming another library)
#include <orbite/config.h>
#include <orbite/transfer.h>

#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  auto config = orbite::EngineConfig::load();
  if (!config.ok()) {
    std::printf("config: %s\n", config.status().to_string().c_str());
    return 2;
  }
  auto engine = orbite::TransferEngine::create(*config);
  if (!engine.ok()) {
    std::printf("create: %s\n", engine.status().to_string().c_str());
  } else {
    std::printf("create: ok\n");
    const orbite::RdmaStats s = (*engine)->rdma_stats();
    if (s.installed) {
      std::printf("rdma: installed %s\n", s.library.c_str());
    } else {
      std::printf("rdma: not installed: %s\n", s.why_not.c_str());
    }
    for (const auto& c : s.contexts) {
      std::printf("context %s (nic %d): %s\n", c.name.c_str(), c.nic_id, c.state.c_str());
    }
  }
  if (argc == 3 && std::string(argv[1]) == "second") {
    orbite::EngineConfig other = *config;
    other.rdma.ibverbs_library = argv[2];
    auto second = orbite::TransferEngine::create(other);
    std::printf("second: %s\n", second.ok() ? "ok" : second.status().to_string().c_str());
  }
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool mapped = false;
  while (std::getline(maps, line)) mapped = mapped || line.find("libibverbs") != std::string::npos;
  std::printf("mapped: %s\n", mapped ? "yes" : "no");
  return 0;
}
