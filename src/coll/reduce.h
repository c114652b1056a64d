// Element-wise reduction kernels. They run on the CPU, vectorized (AVX2 when the CPU has it,
// SSE2 otherwise); float16 and bfloat16 are widened to float32, reduced, and rounded back to
// nearest-even once per call.
#pragma once

#include <orbite/collectives.h>

#include <cstddef>
#include <cstdint>

namespace orbite::coll {

// dst[i] = a[i] op b[i] for i < count. dst may be a or b (not a partial overlap). Avg reduces as
// Sum; divide() finishes it. Integer Sum and Prod wrap around (two's complement).
void reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b, std::size_t count);

// dst[i] = dst[i] / divisor: Avg's final step (integers truncate toward zero).
void divide(DataType type, void* dst, std::size_t count, int divisor);

// The conversions reduce() uses, exposed for tests.
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bfloat16_to_float(std::uint16_t b);
std::uint16_t float_to_bfloat16(float f);

// Which kernel set runs here: "avx2" or "generic".
const char* reduce_isa();

}  // namespace orbite::coll
