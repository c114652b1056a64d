// The -c 1 check of the collective benchmarks: each rank's input is a deterministic pattern of
// small integers, so that every type (float16 and bfloat16 included) holds the inputs, their
// sums and their products exactly, and the host can compute what every result element must be.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/float16.h"
#include "harness/coll_driver.h"

namespace orbite::perf {

struct CheckSpec {
  Coll coll = Coll::AllReduce;
  ElemType type = ElemType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  int ranks = 1;
};

// Writes elements [first, first + elements) of `rank`'s input (its whole send buffer, counted
// in elements) to `out`. The values are 0..3 for a reduction (1..2 for prod, whose results are
// then powers of two), 0..63 for the collectives that only move data.
void fill_input(const CheckSpec& spec, int rank, std::byte* out, std::uint64_t first,
                std::uint64_t elements);

// Sets every byte to 0xff: NaN for the float types, all ones for the integers, so that a result
// element the collective never wrote is counted wrong.
void poison(std::byte* out, std::uint64_t bytes);

struct ElemMismatch {
  std::uint64_t wrong = 0;
  std::uint64_t first = 0;  // element index of the first wrong one
  double expected = 0;
  double actual = 0;
};

// Compares `rank`'s result of one call with `count` (CollShape::count) with the reference: the
// whole receive buffer (size() * count elements for all_gather and alltoall, count otherwise).
// avg of float types is compared within a few units in the last place, since an implementation
// may divide before or after summing; everything else must match exactly.
ElemMismatch check_result(const CheckSpec& spec, int rank, std::uint64_t count,
                          const std::byte* result);

// "3 wrong elements of 4096, first at element 17: expected 2, got nan".
std::string describe(const ElemMismatch& m, std::uint64_t elements);

// IEEE binary16 and bfloat16 conversions, rounding to nearest even: the library's own
// (src/common/float16.h, header-only, so the harness still links no OrbiTE library).
using float16::bfloat16_to_float;
using float16::float_to_bfloat16;
using float16::float_to_half;
using float16::half_to_float;

}  // namespace orbite::perf
