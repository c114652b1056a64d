// Reduction kernels. One set of templates is compiled twice: in functions with AVX2/F16C enabled
// (chosen at run time when the CPU has them) and in baseline functions. The loops are plain
// element-wise loops that GCC and Clang vectorize (this file is built with -O3; see
// src/CMakeLists.txt); integer arithmetic runs in the unsigned type so that overflow wraps.
#include "coll/reduce.h"

#include <bit>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ORBITE_X86 1
#endif

namespace orbite::coll {

namespace {

struct Sum {
  template <class T>
  static T apply(T a, T b) {
    return a + b;
  }
};
struct Prod {
  template <class T>
  static T apply(T a, T b) {
    return a * b;
  }
};
struct Min {
  template <class T>
  static T apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <class T>
  static T apply(T a, T b) {
    return a < b ? b : a;
  }
};

// Integer sum and product in the unsigned type (wrap-around instead of undefined overflow).
template <class Op, class T>
[[gnu::always_inline]] inline T combine(T a, T b) {
  if constexpr (std::is_integral_v<T> && (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>)) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(Op::apply(static_cast<U>(a), static_cast<U>(b))));
  } else {
    return Op::apply(a, b);
  }
}

template <class Op, class T>
[[gnu::always_inline]] inline void loop(T* dst, const T* a, const T* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = combine<Op>(a[i], b[i]);
}

#ifdef ORBITE_X86
// F16C conversions of whole groups of 8; return how many elements they converted.
[[gnu::target("avx,f16c")]] std::size_t widen_f16c(const std::uint16_t* in, float* out,
                                                   std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  return i;
}

[[gnu::target("avx,f16c")]] std::size_t narrow_f16c(const float* in, std::uint16_t* out,
                                                    std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}
#endif

// Blocks of 16-bit floats go through float32 scratch on the stack.
constexpr std::size_t kBlock = 512;

template <class Op, bool kBf16, bool kF16c>
[[gnu::always_inline]] inline void loop16(std::uint16_t* dst, const std::uint16_t* a,
                                          const std::uint16_t* b, std::size_t n) {
  alignas(64) float fa[kBlock];
  alignas(64) float fb[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    const std::size_t m = n - base < kBlock ? n - base : kBlock;
    if constexpr (kBf16) {
      for (std::size_t i = 0; i < m; ++i) {
        fa[i] = std::bit_cast<float>(static_cast<std::uint32_t>(a[base + i]) << 16);
        fb[i] = std::bit_cast<float>(static_cast<std::uint32_t>(b[base + i]) << 16);
      }
    } else {
      std::size_t i = 0;
#ifdef ORBITE_X86
      if constexpr (kF16c) {
        i = widen_f16c(a + base, fa, m);
        widen_f16c(b + base, fb, m);
      }
#endif
      for (; i < m; ++i) {
        fa[i] = half_to_float(a[base + i]);
        fb[i] = half_to_float(b[base + i]);
      }
    }
    for (std::size_t i = 0; i < m; ++i) fa[i] = Op::apply(fa[i], fb[i]);
    if constexpr (kBf16) {
      for (std::size_t i = 0; i < m; ++i) {
        const std::uint32_t x = std::bit_cast<std::uint32_t>(fa[i]);
        const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
        dst[base + i] = static_cast<std::uint16_t>(
            (x & 0x7fffffffu) > 0x7f800000u ? ((x >> 16) | 0x40u) : rounded);
      }
    } else {
      std::size_t i = 0;
#ifdef ORBITE_X86
      if constexpr (kF16c) i = narrow_f16c(fa, dst + base, m);
#endif
      for (; i < m; ++i) dst[base + i] = float_to_half(fa[i]);
    }
  }
}

template <class Op, bool kF16c>
[[gnu::always_inline]] inline void by_type(DataType type, void* d, const void* a, const void* b,
                                           std::size_t n) {
  switch (type) {
#define ORBITE_CASE(E, T)                                                                \
  case DataType::E:                                                                      \
    loop<Op>(static_cast<T*>(d), static_cast<const T*>(a), static_cast<const T*>(b), n); \
    return;
    ORBITE_CASE(Int8, std::int8_t)
    ORBITE_CASE(Uint8, std::uint8_t)
    ORBITE_CASE(Int32, std::int32_t)
    ORBITE_CASE(Uint32, std::uint32_t)
    ORBITE_CASE(Int64, std::int64_t)
    ORBITE_CASE(Uint64, std::uint64_t)
    ORBITE_CASE(Float32, float)
    ORBITE_CASE(Float64, double)
#undef ORBITE_CASE
    case DataType::Float16:
      loop16<Op, false, kF16c>(static_cast<std::uint16_t*>(d), static_cast<const std::uint16_t*>(a),
                               static_cast<const std::uint16_t*>(b), n);
      return;
    case DataType::Bfloat16:
      loop16<Op, true, kF16c>(static_cast<std::uint16_t*>(d), static_cast<const std::uint16_t*>(a),
                              static_cast<const std::uint16_t*>(b), n);
      return;
  }
}

template <bool kF16c>
[[gnu::always_inline]] inline void by_op(DataType type, ReduceOp op, void* d, const void* a,
                                         const void* b, std::size_t n) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return by_type<Sum, kF16c>(type, d, a, b, n);
    case ReduceOp::Prod: return by_type<Prod, kF16c>(type, d, a, b, n);
    case ReduceOp::Min: return by_type<Min, kF16c>(type, d, a, b, n);
    case ReduceOp::Max: return by_type<Max, kF16c>(type, d, a, b, n);
  }
}

void reduce_generic(DataType type, ReduceOp op, void* d, const void* a, const void* b,
                    std::size_t n) {
  by_op<false>(type, op, d, a, b, n);
}

#ifdef ORBITE_X86
[[gnu::target("avx2,fma,f16c")]] void reduce_avx2(DataType type, ReduceOp op, void* d,
                                                  const void* a, const void* b, std::size_t n) {
  by_op<true>(type, op, d, a, b, n);
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
                          __builtin_cpu_supports("fma");
  return has;
}
#endif

template <class T>
void divide_loop(T* d, std::size_t n, int divisor) {
  if constexpr (std::is_integral_v<T>) {
    const T k = static_cast<T>(divisor);
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] / k);
  } else {
    const T k = static_cast<T>(divisor);
    for (std::size_t i = 0; i < n; ++i) d[i] = d[i] / k;
  }
}

}  // namespace

void reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b,
            std::size_t count) {
  if (count == 0) return;
#ifdef ORBITE_X86
  if (cpu_has_avx2()) return reduce_avx2(type, op, dst, a, b, count);
#endif
  reduce_generic(type, op, dst, a, b, count);
}

void divide(DataType type, void* dst, std::size_t count, int divisor) {
  switch (type) {
    case DataType::Int8: return divide_loop(static_cast<std::int8_t*>(dst), count, divisor);
    case DataType::Uint8: return divide_loop(static_cast<std::uint8_t*>(dst), count, divisor);
    case DataType::Int32: return divide_loop(static_cast<std::int32_t*>(dst), count, divisor);
    case DataType::Uint32: return divide_loop(static_cast<std::uint32_t*>(dst), count, divisor);
    case DataType::Int64: return divide_loop(static_cast<std::int64_t*>(dst), count, divisor);
    case DataType::Uint64: return divide_loop(static_cast<std::uint64_t*>(dst), count, divisor);
    case DataType::Float32: return divide_loop(static_cast<float*>(dst), count, divisor);
    case DataType::Float64: return divide_loop(static_cast<double*>(dst), count, divisor);
    case DataType::Float16:
    case DataType::Bfloat16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      const bool bf = type == DataType::Bfloat16;
      const float k = static_cast<float>(divisor);
      for (std::size_t i = 0; i < count; ++i) {
        const float v = (bf ? bfloat16_to_float(d[i]) : half_to_float(d[i])) / k;
        d[i] = bf ? float_to_bfloat16(v) : float_to_half(v);
      }
      return;
    }
  }
}

const char* reduce_isa() {
#ifdef ORBITE_X86
  if (cpu_has_avx2()) return "avx2";
#endif
  return "generic";
}

}  // namespace orbite::coll
