// orbite-run: starts N local ranks of a program around an embedded store server. The logic lives
// in src/bootstrap/launcher.cpp; see `orbite-run --help`.
#include <cstdio>

#include "bootstrap/launcher.h"

int main(int argc, char** argv) {
  auto opts = orbite::launcher::parse_args(argc, argv);
  if (!opts.ok()) {
    std::fprintf(stderr, "orbite-run: %s\nTry 'orbite-run --help' for more information.\n",
                 opts.status().message().c_str());
    return orbite::launcher::kExitUsage;
  }
  if (opts->help) {
    std::fputs(orbite::launcher::usage().c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  return orbite::launcher::run(*opts);
}
