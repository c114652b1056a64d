// The RDMA transport's pure bookkeeping, without verbs: the slice planner (design 4.2), the send
// ledger and exact WR identities (4.5) and the READ depth clamp. (Key history and range locks are
// in rdma_keys_test.cpp, the wire codecs and the receipt binding in rdma_codec_test.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "p2p/rdma/qp.h"
#include "p2p/rdma/slicing.h"

namespace orbite::rdma {
namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

// ------------------------------------------------------------------------------------------------
// Slice planner

std::vector<std::uint64_t> lengths(std::uint64_t length, std::uint64_t base, std::uint32_t max) {
  return plan_slices(length, base, max).lengths;
}

TEST(SlicePlan, MaximaAreTheDesignsCounts) {
  EXPECT_EQ(kMaxReadSlices, 64u);
  EXPECT_EQ(kMaxWriteSlices, 32u);
}

TEST(SlicePlan, ZeroLengthHasNoSlice) {
  EXPECT_TRUE(lengths(0, 64 * KiB, 32).empty());
  EXPECT_TRUE(lengths(0, 64 * KiB, 64).empty());
}

TEST(SlicePlan, OneByteIsOneSlice) {
  EXPECT_EQ(lengths(1, 64 * KiB, 32), std::vector<std::uint64_t>{1});
  EXPECT_EQ(lengths(1, 64 * KiB, 64), std::vector<std::uint64_t>{1});
}

TEST(SlicePlan, ShortTailIsFoldedIntoOneSlice) {
  // 65,537 = one base block and one byte: the byte is folded into its predecessor.
  const SlicePlan p = plan_slices(65537, 64 * KiB, 32);
  EXPECT_EQ(p.block, 64 * KiB);
  EXPECT_EQ(p.lengths, std::vector<std::uint64_t>{65537});
}

TEST(SlicePlan, QuarterBlockTailStaysItsOwnSlice) {
  // 80 KiB: the 16 KiB tail is exactly a quarter block, not under it.
  EXPECT_EQ(lengths(80 * KiB, 64 * KiB, 32), (std::vector<std::uint64_t>{64 * KiB, 16 * KiB}));
  // 129 KiB: the third slice would be 1 KiB, so it is folded.
  EXPECT_EQ(lengths(129 * KiB, 64 * KiB, 32), (std::vector<std::uint64_t>{64 * KiB, 65 * KiB}));
}

TEST(SlicePlan, FourMiBPlus100ForARead) {
  const SlicePlan p = plan_slices(4 * MiB + 100, 64 * KiB, 64);
  EXPECT_EQ(p.block, 128 * KiB);
  ASSERT_EQ(p.lengths.size(), 32u);
  for (std::size_t i = 0; i + 1 < p.lengths.size(); ++i) EXPECT_EQ(p.lengths[i], 128 * KiB) << i;
  EXPECT_EQ(p.lengths.back(), 131172u);
}

TEST(SlicePlan, FourMiBPlus100ForAWrite) {
  const SlicePlan p = plan_slices(4 * MiB + 100, 64 * KiB, 32);
  EXPECT_EQ(p.block, 192 * KiB);
  ASSERT_EQ(p.lengths.size(), 22u);
  for (std::size_t i = 0; i + 1 < p.lengths.size(); ++i) EXPECT_EQ(p.lengths[i], 192 * KiB) << i;
  EXPECT_EQ(p.lengths.back(), 65636u);
}

TEST(SlicePlan, HundredMiBPlus5ForARead) {
  // 62 slices of 1,703,936 (26 base blocks): 61 full ones and a tail of
  // 104,857,605 - 61 * 1,703,936 = 917,509 (over a quarter block, so it is not folded).
  const SlicePlan p = plan_slices(100 * MiB + 5, 64 * KiB, 64);
  EXPECT_EQ(p.block, 1703936u);
  ASSERT_EQ(p.lengths.size(), 62u);
  for (std::size_t i = 0; i + 1 < p.lengths.size(); ++i) EXPECT_EQ(p.lengths[i], 1703936u) << i;
  EXPECT_EQ(p.lengths.back(), 917509u);
}

TEST(SlicePlan, EightMiBPlus160WithAOneMiBBase) {
  const SlicePlan p = plan_slices(8 * MiB + 160, 1 * MiB, 32);
  EXPECT_EQ(p.block, 1 * MiB);
  ASSERT_EQ(p.lengths.size(), 8u);
  for (std::size_t i = 0; i + 1 < p.lengths.size(); ++i) EXPECT_EQ(p.lengths[i], 1 * MiB) << i;
  EXPECT_EQ(p.lengths.back(), 1 * MiB + 160);
}

// The rules of 4.2 over one plan.
void expect_plan_rules(std::uint64_t length, std::uint64_t base, std::uint32_t max) {
  SCOPED_TRACE(::testing::Message() << "length " << length << " base " << base << " max " << max);
  const SlicePlan p = plan_slices(length, base, max);
  ASSERT_FALSE(p.lengths.empty());
  ASSERT_LE(p.lengths.size(), max);
  ASSERT_GT(p.block, 0u);
  EXPECT_EQ(p.block % base, 0u);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < p.lengths.size(); ++i) {
    EXPECT_GT(p.lengths[i], 0u) << "slice " << i;
    if (i + 1 < p.lengths.size()) {
      EXPECT_EQ(p.lengths[i], p.block) << "slice " << i;
    }
    sum += p.lengths[i];
  }
  EXPECT_EQ(sum, length);
  EXPECT_LE(p.lengths.back(), p.block + p.block / 4);
  // A tail of its own is at least a quarter block (a shorter one is folded).
  if (p.lengths.size() > 1) {
    EXPECT_GE(p.lengths.back(), p.block / 4);
  }
  // The block is the smallest multiple of the base that fits the count.
  if (p.block > base) {
    EXPECT_GT(length, (p.block - base) * max);
  }
  // Under the base: one slice.
  if (length <= base) {
    EXPECT_EQ(p.lengths.size(), 1u);
  }
}

TEST(SlicePlan, RulesHoldOverASampleOfLengths) {
  std::mt19937_64 rng(0x0b17e);
  std::vector<std::uint64_t> sample;
  // Log-uniform up to 256 MiB, so small and large lengths are both well represented.
  std::uniform_int_distribution<int> bits(0, 28);
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t top = std::uint64_t{1} << bits(rng);
    sample.push_back(1 + rng() % top);
  }
  // And the edges around every power of two and base multiple.
  for (int b = 0; b <= 28; ++b) {
    const std::uint64_t v = std::uint64_t{1} << b;
    for (std::uint64_t d : {v - 1, v, v + 1}) {
      if (d > 0) sample.push_back(d);
    }
  }
  for (std::uint64_t k : {1u, 2u, 31u, 32u, 33u, 63u, 64u, 65u, 4096u}) {
    sample.push_back(k * 64 * KiB);
    sample.push_back(k * 64 * KiB + 16 * KiB);
    sample.push_back(k * 64 * KiB + 16 * KiB - 1);
  }
  for (std::uint64_t length : sample) {
    for (std::uint32_t max : {kMaxWriteSlices, kMaxReadSlices}) {
      expect_plan_rules(length, 64 * KiB, max);
      expect_plan_rules(length, 1 * MiB, max);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Exact WR identities

TEST(WrId, PackAndUnpackRoundTripEveryKind) {
  for (WrKind kind : {WrKind::Payload, WrKind::Receipt, WrKind::Bind, WrKind::Recv}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const WrId id{kind, 0x1234, 0x567, 0x89abcdef};
    const std::uint64_t v = id.pack();
    EXPECT_EQ(v >> 60, static_cast<std::uint64_t>(kind));
    const WrId back = WrId::unpack(v);
    EXPECT_EQ(back.kind, kind);
    EXPECT_EQ(back.handle, 0x1234);
    EXPECT_EQ(back.generation, 0x567);
    EXPECT_EQ(back.seq, 0x89abcdefu);
  }
}

TEST(WrId, LayoutIsKind4Handle16Generation12Seq32) {
  EXPECT_EQ((WrId{WrKind::Receipt, 0, 0, 0}.pack()), 0x2000000000000000ull);
  EXPECT_EQ((WrId{WrKind::Payload, 0xffff, 0, 0}.pack()), 0x1ffff00000000000ull);
  EXPECT_EQ((WrId{WrKind::Payload, 0, 0xfff, 0}.pack()), 0x10000fff00000000ull);
  EXPECT_EQ((WrId{WrKind::Payload, 0, 0, 0xffffffff}.pack()), 0x10000000ffffffffull);
}

TEST(WrId, ExtremeValuesRoundTrip) {
  for (WrKind kind : {WrKind::Payload, WrKind::Receipt, WrKind::Bind, WrKind::Recv}) {
    for (const WrId id :
         {WrId{kind, 0xffff, 0xfff, 0xffffffff}, WrId{kind, 0, 0, 0}, WrId{kind, 0xffff, 0, 0},
          WrId{kind, 0, 0xfff, 0}, WrId{kind, 0, 0, 0xffffffff}}) {
      const WrId back = WrId::unpack(id.pack());
      EXPECT_EQ(back.kind, id.kind);
      EXPECT_EQ(back.handle, id.handle);
      EXPECT_EQ(back.generation, id.generation);
      EXPECT_EQ(back.seq, id.seq);
    }
  }
}

TEST(WrId, GenerationIsMaskedTo12Bits) {
  const WrId id{WrKind::Bind, 0x0001, 0xfabc, 7};
  const std::uint64_t v = id.pack();
  // The high generation bits neither survive nor leak into the handle or the kind.
  EXPECT_EQ(v, (WrId{WrKind::Bind, 0x0001, 0x0abc, 7}.pack()));
  const WrId back = WrId::unpack(v);
  EXPECT_EQ(back.kind, WrKind::Bind);
  EXPECT_EQ(back.handle, 0x0001);
  EXPECT_EQ(back.generation, 0x0abc);
  EXPECT_EQ(back.seq, 7u);
}

TEST(WrId, QpIdsCarryTheMaskedGeneration) {
  Qp qp(16);
  qp.handle = 0x00ab;
  qp.generation = 0x1fff;
  const WrId id = qp.id(WrKind::Receipt, 42);
  EXPECT_EQ(id.kind, WrKind::Receipt);
  EXPECT_EQ(id.handle, 0x00ab);
  EXPECT_EQ(id.generation, 0x0fff);
  EXPECT_EQ(id.seq, 42u);
}

// ------------------------------------------------------------------------------------------------
// SqLedger

using Resolved = std::vector<std::pair<WrRecord, bool>>;

WrRecord record(std::uint64_t owner, WrKind kind = WrKind::Payload) {
  WrRecord r;
  r.kind = kind;
  r.owner = owner;
  r.bytes = owner * 10;
  return r;
}

TEST(SqLedger, PushAssignsConsecutiveSeqsAndCountsRoom) {
  SqLedger l(8);
  EXPECT_EQ(l.room(), 8u);
  EXPECT_EQ(l.next_seq(), 0u);
  for (std::uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(l.push(record(i)), i);
    EXPECT_EQ(l.room(), 8 - (i + 1));
    EXPECT_EQ(l.outstanding(), i + 1);
  }
  EXPECT_EQ(l.next_seq(), 5u);
  ASSERT_EQ(l.records().size(), 5u);
  for (std::uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(l.records()[i].seq, i);
    EXPECT_EQ(l.records()[i].owner, i);
  }
}

TEST(SqLedger, SuccessResolvesEverythingUpToItInOrder) {
  SqLedger l(16);
  for (std::uint32_t i = 0; i < 6; ++i) l.push(record(100 + i));
  Resolved out;
  ASSERT_EQ(l.complete(3, true, out), SqLedger::Apply::Applied);
  ASSERT_EQ(out.size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].first.seq, i);
    EXPECT_EQ(out[i].first.owner, 100 + i);
    EXPECT_EQ(out[i].first.bytes, (100 + i) * 10);
    EXPECT_TRUE(out[i].second);
  }
  EXPECT_EQ(l.outstanding(), 2u);
  EXPECT_EQ(l.room(), 14u);
  EXPECT_EQ(l.records().front().seq, 4u);
  // Later records resolve from where the last completion stopped; `resolved` is appended to.
  ASSERT_EQ(l.complete(5, true, out), SqLedger::Apply::Applied);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[4].first.seq, 4u);
  EXPECT_EQ(out[5].first.seq, 5u);
  EXPECT_EQ(l.outstanding(), 0u);
  EXPECT_EQ(l.room(), 16u);
}

TEST(SqLedger, ErrorFailsItsOwnRecordAndProvesTheEarlierOnes) {
  SqLedger l(16);
  for (std::uint32_t i = 0; i < 5; ++i) l.push(record(i));
  Resolved out;
  ASSERT_EQ(l.complete(2, false, out), SqLedger::Apply::Applied);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].first.seq, 0u);
  EXPECT_TRUE(out[0].second);
  EXPECT_EQ(out[1].first.seq, 1u);
  EXPECT_TRUE(out[1].second);
  EXPECT_EQ(out[2].first.seq, 2u);
  EXPECT_FALSE(out[2].second);
  // The flushes of the rest: each resolves exactly its own record.
  out.clear();
  ASSERT_EQ(l.complete(3, false, out), SqLedger::Apply::Applied);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first.seq, 3u);
  EXPECT_FALSE(out[0].second);
  EXPECT_EQ(l.outstanding(), 1u);
}

TEST(SqLedger, AResolvedSeqIsADuplicateAndChangesNothing) {
  SqLedger l(16);
  for (std::uint32_t i = 0; i < 4; ++i) l.push(record(i));
  Resolved out;
  ASSERT_EQ(l.complete(1, true, out), SqLedger::Apply::Applied);
  out.clear();
  EXPECT_EQ(l.complete(1, true, out), SqLedger::Apply::Duplicate);
  EXPECT_EQ(l.complete(0, false, out), SqLedger::Apply::Duplicate);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(l.outstanding(), 2u);
  EXPECT_EQ(l.records().front().seq, 2u);
}

TEST(SqLedger, ANeverPostedSeqIsInvalidAndChangesNothing) {
  SqLedger l(16);
  for (std::uint32_t i = 0; i < 4; ++i) l.push(record(i));
  Resolved out;
  EXPECT_EQ(l.complete(4, true, out), SqLedger::Apply::Invalid);
  EXPECT_EQ(l.complete(1000, true, out), SqLedger::Apply::Invalid);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(l.outstanding(), 4u);
  EXPECT_EQ(l.next_seq(), 4u);
}

TEST(SqLedger, AnEmptyLedgerTellsOldFromFuture) {
  SqLedger fresh(16);
  Resolved out;
  EXPECT_EQ(fresh.complete(0, true, out), SqLedger::Apply::Invalid);
  SqLedger l(16);
  for (std::uint32_t i = 0; i < 3; ++i) l.push(record(i));
  ASSERT_EQ(l.complete(2, true, out), SqLedger::Apply::Applied);
  ASSERT_EQ(l.outstanding(), 0u);
  out.clear();
  EXPECT_EQ(l.complete(0, true, out), SqLedger::Apply::Duplicate);
  EXPECT_EQ(l.complete(2, true, out), SqLedger::Apply::Duplicate);
  EXPECT_EQ(l.complete(3, true, out), SqLedger::Apply::Invalid);
  EXPECT_EQ(l.complete(50, true, out), SqLedger::Apply::Invalid);
  EXPECT_TRUE(out.empty());
}

TEST(SqLedger, UnpostForgetsExactlyTheSuffix) {
  SqLedger l(16);
  for (std::uint32_t i = 0; i < 6; ++i) l.push(record(i));
  l.unpost_from(3);
  EXPECT_EQ(l.next_seq(), 3u);
  ASSERT_EQ(l.outstanding(), 3u);
  EXPECT_EQ(l.records().back().seq, 2u);
  EXPECT_EQ(l.room(), 13u);
  // The forgotten seqs are never-posted now, and are handed out again.
  Resolved out;
  EXPECT_EQ(l.complete(3, true, out), SqLedger::Apply::Invalid);
  EXPECT_EQ(l.push(record(33)), 3u);
  ASSERT_EQ(l.complete(3, true, out), SqLedger::Apply::Applied);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].first.owner, 33u);
}

TEST(SqLedger, UnpostOfEverythingAndOfNothing) {
  SqLedger l(16);
  for (std::uint32_t i = 0; i < 4; ++i) l.push(record(i));
  l.unpost_from(4);  // nothing past the last
  EXPECT_EQ(l.outstanding(), 4u);
  EXPECT_EQ(l.next_seq(), 4u);
  l.unpost_from(0);
  EXPECT_EQ(l.outstanding(), 0u);
  EXPECT_EQ(l.next_seq(), 0u);
  EXPECT_EQ(l.room(), 16u);
}

TEST(SqLedger, ClearForgetsEverythingButKeepsTheSeqs) {
  SqLedger l(4);
  for (std::uint32_t i = 0; i < 4; ++i) l.push(record(i));
  EXPECT_EQ(l.room(), 0u);
  l.clear();
  EXPECT_EQ(l.outstanding(), 0u);
  EXPECT_EQ(l.room(), 4u);
  EXPECT_EQ(l.next_seq(), 4u);
  Resolved out;
  EXPECT_EQ(l.complete(3, true, out), SqLedger::Apply::Duplicate);
  EXPECT_EQ(l.complete(4, true, out), SqLedger::Apply::Invalid);
  EXPECT_TRUE(out.empty());
}

// unpost_from on an empty ledger moves next_seq to any value, which reaches the wrap of the 32-bit
// seq without 2^32 pushes.
TEST(SqLedger, SeqsWrapAround) {
  SqLedger l(64);
  l.unpost_from(0xfffffff0u);
  ASSERT_EQ(l.next_seq(), 0xfffffff0u);
  for (std::uint32_t i = 0; i < 32; ++i) EXPECT_EQ(l.push(record(i)), 0xfffffff0u + i);
  EXPECT_EQ(l.next_seq(), 0x10u);
  Resolved out;
  EXPECT_EQ(l.complete(0x10, true, out), SqLedger::Apply::Invalid);
  EXPECT_EQ(l.complete(0xffffffe0u, true, out), SqLedger::Apply::Duplicate);
  ASSERT_EQ(l.complete(0x2, true, out), SqLedger::Apply::Applied);
  ASSERT_EQ(out.size(), 19u);
  for (std::uint32_t i = 0; i < 19; ++i) {
    EXPECT_EQ(out[i].first.seq, 0xfffffff0u + i);
    EXPECT_EQ(out[i].first.owner, i);
    EXPECT_TRUE(out[i].second);
  }
  out.clear();
  EXPECT_EQ(l.complete(0xffffffffu, true, out), SqLedger::Apply::Duplicate);
  EXPECT_EQ(l.complete(0x2, true, out), SqLedger::Apply::Duplicate);
  EXPECT_TRUE(out.empty());
  l.unpost_from(0x8);
  EXPECT_EQ(l.outstanding(), 5u);  // 3..7
  EXPECT_EQ(l.next_seq(), 0x8u);
  ASSERT_EQ(l.complete(0x7, false, out), SqLedger::Apply::Applied);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_FALSE(out.back().second);
  out.clear();
  // Empty again just after the wrap: an old seq from before it is still a duplicate.
  EXPECT_EQ(l.complete(0xfffffff5u, true, out), SqLedger::Apply::Duplicate);
  EXPECT_EQ(l.complete(0x8, true, out), SqLedger::Apply::Invalid);
}

TEST(SqLedger, UnpostAcrossTheWrap) {
  SqLedger l(64);
  l.unpost_from(0xfffffffcu);
  for (std::uint32_t i = 0; i < 8; ++i) l.push(record(i));  // 0xfffffffc .. 0x3
  l.unpost_from(0xfffffffeu);
  EXPECT_EQ(l.outstanding(), 2u);
  EXPECT_EQ(l.next_seq(), 0xfffffffeu);
  EXPECT_EQ(l.records().back().seq, 0xfffffffdu);
}

// The payload a QP owes by tier: what keeps lower-tier WRs from going in front of a higher tier's
// receipt (RC serves the QP in order). Every way a record leaves the ledger forgets its tier.
TEST(SqLedger, CountsOutstandingPayloadByTier) {
  SqLedger l(16);
  auto tiered = [](std::uint64_t owner, std::uint8_t tier, WrKind kind = WrKind::Payload) {
    WrRecord r = record(owner, kind);
    r.tier = tier;
    return r;
  };
  EXPECT_FALSE(l.payload_above(2));
  l.push(tiered(1, 2));                   // seq 0: Low payload
  l.push(tiered(2, 0));                   // seq 1: High payload
  l.push(tiered(3, 0, WrKind::Receipt));  // seq 2: a receipt counts for no tier
  l.push(tiered(4, 1));                   // seq 3: Medium payload
  EXPECT_FALSE(l.payload_above(0));       // nothing is above High
  EXPECT_TRUE(l.payload_above(1));
  EXPECT_TRUE(l.payload_above(2));
  Resolved out;
  ASSERT_EQ(l.complete(1, true, out), SqLedger::Apply::Applied);  // the Low and the High one
  EXPECT_FALSE(l.payload_above(1));
  EXPECT_TRUE(l.payload_above(2));  // the Medium payload is still owed
  // A flush resolves it; an unposted High WR is forgotten; a destroyed QP owes nothing.
  ASSERT_EQ(l.complete(3, false, out), SqLedger::Apply::Applied);
  EXPECT_FALSE(l.payload_above(2));
  const std::uint32_t seq = l.push(tiered(5, 0));
  EXPECT_TRUE(l.payload_above(2));
  l.unpost_from(seq);
  EXPECT_FALSE(l.payload_above(2));
  l.push(tiered(6, 0));
  l.push(tiered(7, 1));
  l.clear();
  EXPECT_FALSE(l.payload_above(2));
  l.push(tiered(8, 2));
  EXPECT_FALSE(l.payload_above(2));  // a tier never waits for itself
}

// ------------------------------------------------------------------------------------------------
// READ depth clamp

TEST(ClampRdDepth, ZeroStaysZeroAndAPositiveRequestIsCapped) {
  EXPECT_EQ(clamp_rd_depth(0, 16), 0u);
  EXPECT_EQ(clamp_rd_depth(0, 0), 0u);
  EXPECT_EQ(clamp_rd_depth(32, 16), 16u);
  EXPECT_EQ(clamp_rd_depth(16, 16), 16u);
  EXPECT_EQ(clamp_rd_depth(1, 16), 1u);
  EXPECT_EQ(clamp_rd_depth(5, 0), 1u);
  EXPECT_EQ(clamp_rd_depth(1, 0), 1u);
}

}  // namespace
}  // namespace orbite::rdma
