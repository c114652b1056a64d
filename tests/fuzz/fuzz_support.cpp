// What every fuzz target shares, under libFuzzer and in the replay runner alike.
#include <cstdio>
#include <cstdlib>

#include "fuzz_target.h"

namespace orbite::fuzz {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

}  // namespace orbite::fuzz
