// orbite-info: what this build contains, which optional libraries this machine provides, and
// validation of configuration files.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include <orbite/config.h>
#include <orbite/info.h>

namespace {

constexpr const char* kUsage = R"(usage: orbite-info [--json]
       orbite-info --config FILE
       orbite-info --config-reference

Prints OrbiTE's version, the optional features this build contains (RDMA, CUDA, MPI bootstrap)
and which run-time libraries this machine provides (libibverbs.so.1, libcuda.so.1, hwloc).

  --json              the same report as JSON
  --config FILE       validate a configuration file: print the effective configuration
                      (defaults filled in) as JSON and exit 0, or print the error (JSON path,
                      bad value, what was expected) and exit 1
  --config-reference  print the Markdown table of every configuration field
  --help              this text
)";

nlohmann::ordered_json probe_json(const orbite::LibraryProbe& p) {
  nlohmann::ordered_json j;
  j["library"] = p.library;
  j["built_with"] = p.built_with;
  j["found"] = p.found;
  j["path"] = p.path;
  j["version"] = p.version;
  j["detail"] = p.detail;
  return j;
}

void print_probe(const orbite::LibraryProbe& p) {
  std::string state = p.found ? "found" : (p.built_with ? "missing" : "not built");
  std::printf("  %-16s %-9s %s%s%s%s\n", p.library.c_str(), state.c_str(),
              p.version.empty() ? "" : ("version " + p.version + ", ").c_str(),
              p.path.empty() ? "" : p.path.c_str(), p.path.empty() ? "" : ": ", p.detail.c_str());
}

int report(bool as_json) {
  orbite::BuildInfo b = orbite::build_info();
  orbite::LibraryProbe probes[] = {orbite::probe_libibverbs(), orbite::probe_libcuda(),
                                   orbite::probe_hwloc()};
  if (as_json) {
    nlohmann::ordered_json j;
    j["version"] = b.version;
    j["build_type"] = b.build_type;
    j["compiler"] = b.compiler;
    j["features"] = {{"rdma", b.with_rdma}, {"cuda", b.with_cuda}, {"mpi", b.with_mpi}};
    j["hwloc_build_version"] = b.hwloc_build_version;
    j["libraries"] = nlohmann::ordered_json::array();
    for (const auto& p : probes) j["libraries"].push_back(probe_json(p));
    // A library path is file-system bytes, not necessarily UTF-8: replace rather than throw.
    std::cout << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("OrbiTE %s (%s, %s)\n", b.version.c_str(), b.build_type.c_str(), b.compiler.c_str());
  std::printf("features built:\n");
  std::printf("  RDMA  %-3s (libibverbs.so.1 is loaded at run time, never linked)\n",
              b.with_rdma ? "yes" : "no");
  std::printf("  CUDA  %-3s (libcuda.so.1 is loaded at run time, never linked)\n",
              b.with_cuda ? "yes" : "no");
  std::printf("  MPI   %-3s (bootstrap library orbite_mpi)\n", b.with_mpi ? "yes" : "no");
  std::printf("run-time libraries:\n");
  for (const auto& p : probes) print_probe(p);
  std::printf("  (hwloc headers at build time: API %s)\n", b.hwloc_build_version.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--json") {
      as_json = true;
    } else if (arg == "--config-reference") {
      std::cout << orbite::configuration_reference_markdown();
      return 0;
    } else if (arg == "--config") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "orbite-info: --config needs a file name\n");
        return 2;
      }
      auto config = orbite::EngineConfig::from_file(argv[++i]);
      if (!config.ok()) {
        std::fprintf(stderr, "orbite-info: %s\n", config.status().to_string().c_str());
        return 1;
      }
      std::cout << config->to_json();
      return 0;
    } else {
      std::fprintf(stderr, "orbite-info: unknown option '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  return report(as_json);
}
