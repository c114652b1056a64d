// The collectives' building blocks that need no peer: reduction kernels (every type and op,
// float16/bfloat16 rounding), type and op names, and the algorithm rule and its override parser.
#include <gtest/gtest.h>

#include <orbite/collectives.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "coll/algorithms.h"
#include "coll/reduce.h"
#include "coll/select.h"

namespace orbite::coll {
namespace {

TEST(HalfConversion, EveryHalfWidensExactlyAsTheCompilersFloat16) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    _Float16 ref;
    std::memcpy(&ref, &h, 2);
    const float want = static_cast<float>(ref);
    const float got = half_to_float(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
          << std::hex << bits;
    }
  }
}

TEST(HalfConversion, NarrowingRoundsToNearestEvenAsTheCompilersFloat16) {
  std::mt19937 gen(7);
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               65504.0f,
                               65519.99f,
                               65520.0f,
                               1e-8f,
                               5.96e-8f,
                               2.98e-8f,
                               6.1e-5f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               1.0f + 0x1p-11f,
                               1.0f + 0x1p-11f + 0x1p-12f,
                               1.0f + 3 * 0x1p-11f};
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(any(gen));
    if (!std::isnan(f)) values.push_back(f);
  }
  // Every half's midpoints with its neighbours: the ties.
  for (std::uint32_t bits = 0; bits < 0x7c00; ++bits) {
    const float lo = half_to_float(static_cast<std::uint16_t>(bits));
    const float hi = half_to_float(static_cast<std::uint16_t>(bits + 1));
    values.push_back(lo + (hi - lo) / 2);
  }
  for (float f : values) {
    const auto ref = static_cast<_Float16>(f);
    std::uint16_t want;
    std::memcpy(&want, &ref, 2);
    EXPECT_EQ(float_to_half(f), want) << f;
  }
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
}

TEST(Bfloat16Conversion, RoundsToNearestEvenAndKeepsNanAndInfinity) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80);             // tie, to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);         // tie, to even (up)
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bfloat16(-2.5f), 0xc020);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  for (std::uint32_t bits = 0; bits < 0x10000; bits += 7) {
    const auto b = static_cast<std::uint16_t>(bits);
    const float f = bfloat16_to_float(b);
    if (!std::isnan(f)) {
      EXPECT_EQ(float_to_bfloat16(f), b) << std::hex << bits;
    }
  }
}

// Reference: one element at a time in double (exact for these small values) or the wrapping
// integer type.
template <class T>
T ref_combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::Prod:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case ReduceOp::Min: return std::min(a, b);
      case ReduceOp::Max: return std::max(a, b);
    }
  } else {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: return a + b;
      case ReduceOp::Prod: return a * b;
      case ReduceOp::Min: return std::min(a, b);
      case ReduceOp::Max: return std::max(a, b);
    }
  }
  return a;
}

template <class T>
void check_type(DataType type) {
  constexpr std::size_t kCount = 1037;  // not a multiple of any vector width or of the 512 block
  std::mt19937 gen(static_cast<unsigned>(type));
  std::uniform_int_distribution<int> small(-60, 60);
  std::vector<T> a(kCount), b(kCount);
  for (std::size_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<T>(small(gen));
    b[i] = static_cast<T>(small(gen));
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
    std::vector<T> out(kCount);
    reduce(type, op, out.data(), a.data(), b.data(), kCount);
    std::vector<T> in_place = a;
    reduce(type, op, in_place.data(), in_place.data(), b.data(), kCount);
    for (std::size_t i = 0; i < kCount; ++i) {
      const T want = ref_combine(op, a[i], b[i]);
      ASSERT_EQ(out[i], want) << to_string(type) << " " << to_string(op) << " at " << i;
      ASSERT_EQ(in_place[i], want) << "in place, " << to_string(type) << " at " << i;
    }
  }
}

TEST(ReduceKernels, EveryIntegerAndFloatTypeAndOpMatchesElementwiseReference) {
  check_type<std::int8_t>(DataType::Int8);
  check_type<std::uint8_t>(DataType::Uint8);
  check_type<std::int32_t>(DataType::Int32);
  check_type<std::uint32_t>(DataType::Uint32);
  check_type<std::int64_t>(DataType::Int64);
  check_type<std::uint64_t>(DataType::Uint64);
  check_type<float>(DataType::Float32);
  check_type<double>(DataType::Float64);
}

TEST(ReduceKernels, SixteenBitFloatsReduceThroughFloat32AndRoundOnce) {
  constexpr std::size_t kCount = 1037;
  for (DataType type : {DataType::Float16, DataType::Bfloat16}) {
    const bool bf = type == DataType::Bfloat16;
    auto to16 = [&](float f) { return bf ? float_to_bfloat16(f) : float_to_half(f); };
    auto from16 = [&](std::uint16_t h) { return bf ? bfloat16_to_float(h) : half_to_float(h); };
    std::vector<std::uint16_t> a(kCount), b(kCount), out(kCount);
    for (std::size_t i = 0; i < kCount; ++i) {
      a[i] = to16(0.1f * static_cast<float>(i % 97) - 3.0f);
      b[i] = to16(1.7f + 0.01f * static_cast<float>(i % 31));
    }
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
      reduce(type, op, out.data(), a.data(), b.data(), kCount);
      for (std::size_t i = 0; i < kCount; ++i) {
        const float want = ref_combine(op, from16(a[i]), from16(b[i]));
        ASSERT_EQ(out[i], to16(want)) << to_string(type) << " " << to_string(op) << " at " << i;
      }
    }
  }
}

TEST(ReduceKernels, IntegerSumWrapsAndAvgTruncatesTowardZero) {
  std::int8_t a[2] = {127, -7};
  std::int8_t b[2] = {1, 0};
  reduce(DataType::Int8, ReduceOp::Sum, a, a, b, 2);
  EXPECT_EQ(a[0], -128);
  divide(DataType::Int8, a, 2, 2);
  EXPECT_EQ(a[0], -64);
  EXPECT_EQ(a[1], -3);
  float f[1] = {1.0f};
  divide(DataType::Float32, f, 1, 4);
  EXPECT_EQ(f[0], 0.25f);
  std::uint16_t h[1] = {float_to_half(3.0f)};
  divide(DataType::Float16, h, 1, 2);
  EXPECT_EQ(half_to_float(h[0]), 1.5f);
}

TEST(CollectiveNames, TypesAndOpsRoundTripAndAcceptNcclAliases) {
  for (int t = 0; t < kDataTypeCount; ++t) {
    const auto type = static_cast<DataType>(t);
    auto parsed = parse_data_type(to_string(type));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, type);
    EXPECT_GT(size_of(type), 0U);
  }
  EXPECT_EQ(*parse_data_type("float"), DataType::Float32);
  EXPECT_EQ(*parse_data_type("half"), DataType::Float16);
  EXPECT_EQ(*parse_data_type("double"), DataType::Float64);
  auto bad = parse_data_type("complex");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'complex'"), std::string::npos);
  for (int o = 0; o < kReduceOpCount; ++o) {
    const auto op = static_cast<ReduceOp>(o);
    EXPECT_EQ(*parse_reduce_op(to_string(op)), op);
  }
  EXPECT_FALSE(parse_reduce_op("xor").ok());
}

TEST(AlgorithmRule, SmallAllReduceDoublesLargeRingsAndOverridesWin) {
  AlgoChoice none;
  EXPECT_EQ(choose(Collective::AllReduce, none, 8, 4, false), Algo::RecursiveDoubling);
  EXPECT_EQ(choose(Collective::AllReduce, none, kRecursiveDoublingMax, 4, false),
            Algo::RecursiveDoubling);
  EXPECT_EQ(choose(Collective::AllReduce, none, kRecursiveDoublingMax + 1, 4, false), Algo::Ring);
  EXPECT_EQ(choose(Collective::Broadcast, none, 1 << 20, 4, false), Algo::Chain);
  EXPECT_EQ(choose(Collective::Broadcast, none, 1024, 4, false), Algo::Binomial);
  EXPECT_EQ(choose(Collective::AllGather, none, 1024, 4, false), Algo::Bruck);
  EXPECT_EQ(choose(Collective::Barrier, none, 0, 4, false), Algo::Dissemination);

  // A single-host communicator with a segment: shm for every collective that has it, unless
  // an algorithm is asked for.
  for (Collective c : {Collective::AllReduce, Collective::Reduce, Collective::Broadcast,
                       Collective::AllGather, Collective::ReduceScatter, Collective::Barrier}) {
    EXPECT_EQ(choose(c, none, 64 * 1024, 4, true), Algo::Shm) << to_string(c);
  }
  EXPECT_EQ(choose(Collective::AllReduce, none, 8, 2, true), Algo::Shm);
  EXPECT_EQ(choose(Collective::AllReduce, none, kShmMax + 1, 2, true), Algo::Ring);
  EXPECT_EQ(choose(Collective::AllReduce, none, kShmMax, 4, true), Algo::Shm);
  EXPECT_EQ(choose(Collective::AllReduce, none, kShmMax + 1, 4, true), Algo::Ring);
  EXPECT_EQ(choose(Collective::Broadcast, none, 8, 4, true), Algo::Binomial);
  // On 2 ranks every collective with a segment form takes it up to kShmMax.
  for (Collective c : {Collective::ReduceScatter, Collective::AllGather, Collective::Broadcast,
                       Collective::Reduce}) {
    EXPECT_EQ(choose(c, none, 8, 2, true), Algo::Shm) << to_string(c);
    EXPECT_EQ(choose(c, none, kShmMax, 2, true), Algo::Shm) << to_string(c);
    EXPECT_NE(choose(c, none, kShmMax + 1, 2, true), Algo::Shm) << to_string(c);
  }
  // Ranks that outnumber their cores: the segment at every size (the rooted ones still keep
  // their trees below kShmRootedMin on more than two ranks); an override still wins.
  for (Collective c : {Collective::AllReduce, Collective::Reduce, Collective::Broadcast,
                       Collective::AllGather, Collective::ReduceScatter}) {
    EXPECT_EQ(choose(c, none, std::uint64_t{1} << 30, 4, true, false, true), Algo::Shm)
        << to_string(c);
    EXPECT_NE(choose(c, none, std::uint64_t{1} << 30, 4, true, false, false), Algo::Shm)
        << to_string(c);
  }
  EXPECT_EQ(choose(Collective::Broadcast, none, 8, 4, true, false, true), Algo::Binomial);
  EXPECT_EQ(choose(Collective::AllReduce, none, 8, 4, false, false, true), Algo::RecursiveDoubling);
  AlgoChoice forced;
  forced.forced[static_cast<std::size_t>(Collective::AllReduce)] = Algo::Ring;
  EXPECT_EQ(choose(Collective::AllReduce, forced, 1 << 30, 4, true, false, true), Algo::Ring);
  EXPECT_EQ(choose(Collective::AllToAll, none, 8, 2, true), Algo::Pairwise);
  EXPECT_EQ(choose(Collective::AllToAll, none, 8, 4, true), Algo::Pairwise);
  EXPECT_EQ(choose(Collective::Gather, none, 8, 4, true), Algo::Linear);

  // A communicator spanning hosts, some with several ranks: hierarchical all_reduce, reduce and
  // broadcast from kHierarchicalMin; the others, and smaller sizes, keep their rule; an override
  // still wins.
  for (Collective c : {Collective::AllReduce, Collective::Reduce, Collective::Broadcast}) {
    EXPECT_EQ(choose(c, none, kHierarchicalMin, 4, false, true), Algo::Hierarchical)
        << to_string(c);
    EXPECT_EQ(choose(c, none, 64 << 20, 4, false, true), Algo::Hierarchical) << to_string(c);
    EXPECT_NE(choose(c, none, kHierarchicalMin - 1, 4, false, true), Algo::Hierarchical)
        << to_string(c);
  }
  EXPECT_EQ(choose(Collective::AllReduce, none, 8, 4, false, true), Algo::RecursiveDoubling);
  EXPECT_EQ(choose(Collective::Barrier, none, 0, 4, false, true), Algo::Dissemination);
  // all_gather and reduce_scatter: hierarchical inside their window only.
  for (Collective c : {Collective::AllGather, Collective::ReduceScatter}) {
    EXPECT_NE(choose(c, none, kHierarchicalBlocksMin - 1, 4, false, true), Algo::Hierarchical)
        << to_string(c);
    EXPECT_EQ(choose(c, none, kHierarchicalBlocksMin, 4, false, true), Algo::Hierarchical)
        << to_string(c);
    EXPECT_EQ(choose(c, none, kHierarchicalBlocksMax, 4, false, true), Algo::Hierarchical)
        << to_string(c);
    EXPECT_EQ(choose(c, none, kHierarchicalBlocksMax + 1, 4, false, true), Algo::Ring)
        << to_string(c);
  }
  EXPECT_EQ(choose(Collective::AllGather, none, 1024, 4, false, false), Algo::Bruck);
  EXPECT_EQ(choose(Collective::ReduceScatter, none, 1024, 4, false, false), Algo::Ring);
  auto hier = parse_algo("hierarchical");
  ASSERT_TRUE(hier.ok());
  EXPECT_EQ(choose(Collective::AllReduce, *hier, 8, 4, false), Algo::Hierarchical);
  EXPECT_EQ(choose(Collective::AllGather, *hier, 1024, 4, false), Algo::Hierarchical);
  EXPECT_EQ(choose(Collective::ReduceScatter, *hier, 1024, 4, false), Algo::Hierarchical);
  EXPECT_EQ(choose(Collective::AllToAll, *hier, 1024, 4, false), Algo::Pairwise);
  auto ring_only = parse_algo("all_reduce=ring");
  ASSERT_TRUE(ring_only.ok());
  EXPECT_EQ(choose(Collective::AllReduce, *ring_only, 8, 4, false, true), Algo::Ring);
  auto no_hier = parse_algo("all_to_all=hierarchical");
  ASSERT_FALSE(no_hier.ok());
  EXPECT_NE(no_hier.status().message().find("all_to_all has no algorithm 'hierarchical'"),
            std::string::npos)
      << no_hier.status().message();
  auto shm = parse_algo("shm");
  ASSERT_TRUE(shm.ok());
  EXPECT_EQ(choose(Collective::AllReduce, *shm, 1 << 20, 4, false), Algo::Shm);
  EXPECT_EQ(choose(Collective::AllToAll, *shm, 8, 4, false), Algo::Pairwise);  // has no shm
  auto rd = parse_algo("all_reduce=recursive_doubling");
  ASSERT_TRUE(rd.ok());
  EXPECT_EQ(choose(Collective::AllReduce, *rd, 8, 4, true), Algo::RecursiveDoubling);
  EXPECT_FALSE(parse_algo("all_to_all=shm").ok());

  auto ring = parse_algo("ring");
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(choose(Collective::AllReduce, *ring, 8, 4, false), Algo::Ring);
  EXPECT_EQ(choose(Collective::AllGather, *ring, 8, 4, false), Algo::Ring);
  EXPECT_EQ(choose(Collective::Broadcast, *ring, 8, 4, false), Algo::Binomial);  // has no ring

  auto list = parse_algo(" all_reduce=recursive_doubling , broadcast=chain");
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  EXPECT_EQ(choose(Collective::AllReduce, *list, 1 << 30, 4, false), Algo::RecursiveDoubling);
  EXPECT_EQ(choose(Collective::Broadcast, *list, 8, 4, false), Algo::Chain);
  EXPECT_TRUE(parse_algo("auto").ok());
  EXPECT_TRUE(parse_algo("").ok());
}

TEST(AlgorithmRule, BadOverridesNameTheItemAndTheChoices) {
  auto unknown = parse_algo("fastest");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'fastest' is not an algorithm"), std::string::npos);
  auto wrong = parse_algo("broadcast=ring");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(
                "broadcast has no algorithm 'ring' (it has binomial, chain, shm, hierarchical)"),
            std::string::npos)
      << wrong.status().message();
  EXPECT_FALSE(parse_algo("allreduce=ring").ok());
  EXPECT_FALSE(parse_algo("ring,,chain").ok());
}

TEST(Pieces, SplitCoversTheRangeAndBalancedOffsetsPartitionTheCount) {
  std::vector<Piece> pieces;
  split_pieces(pieces, 0, 10, 25, 8);
  ASSERT_EQ(pieces.size(), 4U);
  EXPECT_EQ(pieces[3].off, 34U);
  EXPECT_EQ(pieces[3].len, 1U);
  pieces.clear();
  split_pieces(pieces, 0, 0, 0, 8);
  EXPECT_TRUE(pieces.empty());
  EXPECT_EQ(balanced_offset(10, 3, 0), 0U);
  EXPECT_EQ(balanced_offset(10, 3, 3), 10U);
  EXPECT_EQ(balanced_offset(~0ULL, 8, 8), ~0ULL);
}

}  // namespace
}  // namespace orbite::coll
