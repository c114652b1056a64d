// Element-wise reduction kernels. They run on the CPU, vectorized (AVX2 when the CPU has it,
// SSE2 otherwise); float16 and bfloat16 are widened to float32, reduced, and rounded back to
// nearest-even once per call.
#pragma once

#include <orbite/collectives.h>

#include <cstddef>
#include <cstdint>

#include "common/float16.h"

namespace orbite::coll {

// dst[i] = a[i] op b[i] for i < count. dst may be a or b (not a partial overlap). Avg reduces as
// Sum; divide() finishes it. Integer Sum and Prod wrap around (two's complement).
void reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b, std::size_t count);

// dst[i] = dst[i] / divisor: Avg's final step (integers truncate toward zero).
void divide(DataType type, void* dst, std::size_t count, int divisor);

// The conversions reduce() uses (common/float16.h).
using float16::bfloat16_to_float;
using float16::float_to_bfloat16;
using float16::float_to_half;
using float16::half_to_float;

// Which kernel set runs here: "avx2" or "generic".
const char* reduce_isa();

}  // namespace orbite::coll
