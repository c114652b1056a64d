#include "harness/coll_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace orbite::perf {
namespace {

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb3f97f4a7c15ULL;
  return x ^ (x >> 33);
}

bool reduces(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
}

// Element `index` of `rank`'s input. Ranks differ almost everywhere, so a block delivered from
// the wrong rank or to the wrong offset is caught, not only a corrupted one.
std::int64_t input_value(const CheckSpec& s, int rank, std::uint64_t index) {
  const std::uint64_t h = mix(index * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(rank));
  if (!reduces(s.coll)) return static_cast<std::int64_t>(h & 63);
  if (s.op == RedOp::Prod) return 1 + static_cast<std::int64_t>(h & 1);
  return static_cast<std::int64_t>(h & 3);
}

// How a type stores a value: S is the storage, `integer` selects modular integer arithmetic
// for the reference; the float types go through double.
template <class T>
struct IntCodec {
  using S = T;
  static constexpr bool kInteger = true;
  static constexpr double kEpsilon = 0;  // integers compare exactly
  static S encode(std::int64_t v) { return static_cast<S>(v); }
  static double decode(S v) { return static_cast<double>(v); }
};
template <class T>
struct RealCodec {
  using S = T;
  static constexpr bool kInteger = false;
  static constexpr double kEpsilon = std::numeric_limits<T>::epsilon();
  static S encode(double v) { return static_cast<S>(v); }
  static double decode(S v) { return static_cast<double>(v); }
};
struct HalfCodec {
  using S = std::uint16_t;
  static constexpr bool kInteger = false;
  static constexpr double kEpsilon = 1.0 / 1024;
  static S encode(double v) { return float_to_half(static_cast<float>(v)); }
  static double decode(S v) { return half_to_float(v); }
};
struct Bfloat16Codec {
  using S = std::uint16_t;
  static constexpr bool kInteger = false;
  static constexpr double kEpsilon = 1.0 / 128;
  static S encode(double v) { return float_to_bfloat16(static_cast<float>(v)); }
  static double decode(S v) { return bfloat16_to_float(v); }
};

template <class F>
decltype(auto) with_codec(ElemType type, F&& f) {
  switch (type) {
    case ElemType::Int8: return f(IntCodec<std::int8_t>{});
    case ElemType::Uint8: return f(IntCodec<std::uint8_t>{});
    case ElemType::Int32: return f(IntCodec<std::int32_t>{});
    case ElemType::Uint32: return f(IntCodec<std::uint32_t>{});
    case ElemType::Int64: return f(IntCodec<std::int64_t>{});
    case ElemType::Uint64: return f(IntCodec<std::uint64_t>{});
    case ElemType::Float16: return f(HalfCodec{});
    case ElemType::Bfloat16: return f(Bfloat16Codec{});
    case ElemType::Float32: return f(RealCodec<float>{});
    case ElemType::Float64: break;
  }
  return f(RealCodec<double>{});
}

// The reduction of element `index` over every rank's input. Integers wrap as the narrow type
// does (the sum and product are computed modulo 2^64, then truncated); avg truncates.
template <class Codec>
typename Codec::S reduced(const CheckSpec& s, std::uint64_t index, double* as_double) {
  if constexpr (Codec::kInteger) {
    std::uint64_t acc = s.op == RedOp::Prod ? 1 : 0;
    std::int64_t low = std::numeric_limits<std::int64_t>::max();
    std::int64_t high = std::numeric_limits<std::int64_t>::min();
    for (int q = 0; q < s.ranks; ++q) {
      const std::int64_t v = input_value(s, q, index);
      if (s.op == RedOp::Prod) {
        acc *= static_cast<std::uint64_t>(v);
      } else {
        acc += static_cast<std::uint64_t>(v);
      }
      low = std::min(low, v);
      high = std::max(high, v);
    }
    std::int64_t r = static_cast<std::int64_t>(acc);
    if (s.op == RedOp::Min) r = low;
    if (s.op == RedOp::Max) r = high;
    if (s.op == RedOp::Avg) r = static_cast<std::int64_t>(acc) / s.ranks;
    const typename Codec::S out = Codec::encode(r);
    *as_double = Codec::decode(out);
    return out;
  } else {
    double acc = s.op == RedOp::Prod ? 1 : 0;
    double low = std::numeric_limits<double>::infinity();
    double high = -low;
    for (int q = 0; q < s.ranks; ++q) {
      const auto v = static_cast<double>(input_value(s, q, index));
      acc = s.op == RedOp::Prod ? acc * v : acc + v;
      low = std::min(low, v);
      high = std::max(high, v);
    }
    if (s.op == RedOp::Min) acc = low;
    if (s.op == RedOp::Max) acc = high;
    if (s.op == RedOp::Avg) acc /= s.ranks;
    const typename Codec::S out = Codec::encode(acc);
    *as_double = Codec::decode(out);
    return out;
  }
}

template <class Codec>
typename Codec::S single(const CheckSpec& s, int rank, std::uint64_t index, double* as_double) {
  const std::int64_t v = input_value(s, rank, index);
  typename Codec::S out;
  if constexpr (Codec::kInteger) {
    out = Codec::encode(v);
  } else {
    out = Codec::encode(static_cast<double>(v));
  }
  *as_double = Codec::decode(out);
  return out;
}

template <class Codec>
ElemMismatch check_with(const CheckSpec& s, int rank, std::uint64_t count, const std::byte* data) {
  using S = typename Codec::S;
  const bool gathered = s.coll == Coll::AllGather || s.coll == Coll::AllToAll;
  const std::uint64_t elements = gathered ? count * static_cast<std::uint64_t>(s.ranks) : count;
  const bool tolerant = !Codec::kInteger && s.op == RedOp::Avg && reduces(s.coll);
  ElemMismatch m;
  for (std::uint64_t e = 0; e < elements; ++e) {
    double expected = 0;
    S want{};
    switch (s.coll) {
      case Coll::AllReduce:
      case Coll::Reduce: want = reduced<Codec>(s, e, &expected); break;
      case Coll::ReduceScatter:
        want = reduced<Codec>(s, static_cast<std::uint64_t>(rank) * count + e, &expected);
        break;
      case Coll::Broadcast: want = single<Codec>(s, s.root, e, &expected); break;
      case Coll::AllGather:
        want = single<Codec>(s, static_cast<int>(e / count), e % count, &expected);
        break;
      case Coll::AllToAll:
        want = single<Codec>(s, static_cast<int>(e / count),
                             static_cast<std::uint64_t>(rank) * count + e % count, &expected);
        break;
    }
    S got;
    std::memcpy(&got, data + e * sizeof(S), sizeof(S));
    bool ok = got == want;
    if (!ok && tolerant) {
      const double actual = Codec::decode(got);
      ok = std::fabs(actual - expected) <= 4 * Codec::kEpsilon * std::max(1.0, std::fabs(expected));
    }
    if (ok) continue;
    if (m.wrong++ == 0) {
      m.first = e;
      m.expected = expected;
      m.actual = Codec::decode(got);
    }
  }
  return m;
}

}  // namespace

void fill_input(const CheckSpec& spec, int rank, std::byte* out, std::uint64_t first,
                std::uint64_t elements) {
  with_codec(spec.type, [&](auto codec) {
    using Codec = decltype(codec);
    using S = typename Codec::S;
    for (std::uint64_t e = 0; e < elements; ++e) {
      const std::int64_t v = input_value(spec, rank, first + e);
      S s;
      if constexpr (Codec::kInteger) {
        s = Codec::encode(v);
      } else {
        s = Codec::encode(static_cast<double>(v));
      }
      std::memcpy(out + e * sizeof(S), &s, sizeof(S));
    }
  });
}

void poison(std::byte* out, std::uint64_t bytes) {
  std::memset(out, 0xff, bytes);
}

ElemMismatch check_result(const CheckSpec& spec, int rank, std::uint64_t count,
                          const std::byte* result) {
  return with_codec(spec.type, [&](auto codec) {
    return check_with<decltype(codec)>(spec, rank, count, result);
  });
}

std::string describe(const ElemMismatch& m, std::uint64_t elements) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%llu wrong elements of %llu, first at element %llu: expected %g, got %g",
                static_cast<unsigned long long>(m.wrong), static_cast<unsigned long long>(elements),
                static_cast<unsigned long long>(m.first), m.expected, m.actual);
  return buf;
}

}  // namespace orbite::perf
