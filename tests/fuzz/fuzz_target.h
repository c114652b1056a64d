// The contract of a fuzz target (tests/fuzz/*_fuzz.cpp): `accepts` (libFuzzer's entry point,
// defined once in fuzz_support.cpp, calls it), and the seed inputs the target knows to be valid
// (each built by the encoder it fuzzes the decoder of), which replay_main.cpp writes into the
// corpus and replays. A target aborts on a broken invariant; a rejected input is not a finding,
// only a crash, a sanitizer report or an abort is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace orbite::fuzz {

std::vector<std::string> seeds();

// Runs one input through the target (what LLVMFuzzerTestOneInput does) and says whether the
// decoder accepted it: the replay runner requires every seed to be accepted, so that the
// mutations start from valid messages.
bool accepts(const std::uint8_t* data, std::size_t size);

// Aborts with `what` when `ok` is false (an invariant of the decoder, not an input error).
void require(bool ok, const char* what);

}  // namespace orbite::fuzz
