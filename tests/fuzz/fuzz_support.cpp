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

// libFuzzer's entry point, the same for every target: the target's `accepts` runs the input (and
// aborts on a broken invariant); whether it was accepted matters only to the replay's seeds.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)orbite::fuzz::accepts(data, size);
  return 0;
}
