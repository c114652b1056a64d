// The RDMA transport's receipt binding: the 141-byte layout (design 3.3), its CRC32C, its field
// ranges and the mismatch report. (The connect blob and control frames are in rdma_codec_test.cpp.)
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "p2p/rdma/wire.h"
#include "rdma_wire_samples.h"

namespace orbite::rdma {
namespace {

using samples::key_of;

using Bytes = std::array<std::uint8_t, kBindingBytes>;

std::uint64_t le_at(const Bytes& b, std::size_t at, std::size_t width) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < width; ++i) v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}

// Every field set, to a value that differs from its neighbours'.
Binding sample_binding() {
  Binding b;
  b.version = 1;
  b.op = kOpWrite | 0x80;  // a WRITE into a receive
  b.first_slice = 5;
  b.slice_count = 7;
  b.source_engine = key_of(0x10);
  b.requester_engine = key_of(0xa0);
  b.link_incarnation = 0x0101010101010101ull;
  b.qp_incarnation = 0x0202020202020202ull;
  b.grant_id = 0x0303030303030303ull;
  b.grant_generation = 0x0404040404040404ull;
  b.grant_nonce = 0xfedcba9876543210ull;
  b.request_id = 0x0606060606060606ull;
  b.target_id = 0x0707070707070707ull;
  b.target_generation = 0x0808080808080808ull;
  b.offset = 0x0909090909090909ull;
  b.length = 0x0a0a0a0a0a0a0a0aull;
  b.rkey = 0x0b0b0b0bu;
  b.source_qpn = 0x00123456u;
  b.requester_qpn = 0x00654321u;
  b.payload_wrs = 7;
  b.status = 0;
  return b;
}

Result<Binding> decode(const Bytes& bytes) {
  return decode_binding(bytes.data(), bytes.size());
}

// ------------------------------------------------------------------------------------------------
// CRC32C and the binding

TEST(Crc32c, KnownVectors) {
  const std::string_view check = "123456789";
  EXPECT_EQ(crc32c(reinterpret_cast<const std::uint8_t*>(check.data()), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  // RFC 3720 B.4: 32 bytes of zeros, and of 0xff.
  std::array<std::uint8_t, 32> zeros{};
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::array<std::uint8_t, 32> ones{};
  ones.fill(0xff);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Binding, EncodesTheDesignLayout) {
  const Binding b = sample_binding();
  const Bytes e = encode(b);
  static_assert(kBindingBytes == 141);
  EXPECT_EQ(e.size(), 141u);
  EXPECT_EQ(e[0], 'O');
  EXPECT_EQ(e[1], 'B');
  EXPECT_EQ(e[2], 'N');
  EXPECT_EQ(e[3], 'D');
  EXPECT_EQ(le_at(e, 0, 4), kBindingMagic);
  EXPECT_EQ(e[4], 1);
  EXPECT_EQ(e[5], b.op);
  EXPECT_EQ(e[6], b.first_slice);
  EXPECT_EQ(e[7], b.slice_count);
  EXPECT_EQ(0, std::memcmp(e.data() + 8, b.source_engine.data(), 16));
  EXPECT_EQ(0, std::memcmp(e.data() + 24, b.requester_engine.data(), 16));
  EXPECT_EQ(le_at(e, 40, 8), b.link_incarnation);
  EXPECT_EQ(le_at(e, 48, 8), b.qp_incarnation);
  EXPECT_EQ(le_at(e, 56, 8), b.grant_id);
  EXPECT_EQ(le_at(e, 64, 8), b.grant_generation);
  EXPECT_EQ(le_at(e, 72, 8), b.grant_nonce);
  EXPECT_EQ(le_at(e, 80, 8), b.request_id);
  EXPECT_EQ(le_at(e, 88, 8), b.target_id);
  EXPECT_EQ(le_at(e, 96, 8), b.target_generation);
  EXPECT_EQ(le_at(e, 104, 8), b.offset);
  EXPECT_EQ(le_at(e, 112, 8), b.length);
  EXPECT_EQ(le_at(e, 120, 4), b.rkey);
  EXPECT_EQ(le_at(e, 124, 4), b.source_qpn);
  EXPECT_EQ(le_at(e, 128, 4), b.requester_qpn);
  EXPECT_EQ(le_at(e, 132, 4), b.payload_wrs);
  EXPECT_EQ(e[136], b.status);
  EXPECT_EQ(le_at(e, 137, 4), crc32c(e.data(), 137));
}

TEST(Binding, RoundTripsEveryField) {
  Binding b = sample_binding();
  auto got = decode(encode(b));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, b);
  EXPECT_EQ(binding_mismatch(b, *got), "");
  // The other ends of every range.
  b.op = kOpRead;
  b.first_slice = 63;
  b.slice_count = 64;
  b.status = 1;
  b.payload_wrs = 0;
  b.source_qpn = 0xffffffffu;
  b.length = ~0ull;
  got = decode(encode(b));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, b);
  b.first_slice = 0;
  b.slice_count = 1;
  got = decode(encode(b));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, b);
}

TEST(Binding, EverySingleByteFlipIsRejected) {
  const Bytes good = encode(sample_binding());
  for (std::size_t at = 0; at < kBindingBytes; ++at) {
    for (std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
      Bytes bad = good;
      bad[at] ^= flip;
      auto got = decode(bad);
      EXPECT_FALSE(got.ok()) << "byte " << at << " ^ " << int{flip};
      EXPECT_EQ(got.status().code(), Errc::Protocol);
    }
  }
}

TEST(Binding, OnlyExactly141BytesDecode) {
  std::vector<std::uint8_t> buf(kBindingBytes + 1, 0);
  const Bytes good = encode(sample_binding());
  std::copy(good.begin(), good.end(), buf.begin());
  ASSERT_TRUE(decode_binding(buf.data(), 141).ok());
  for (std::size_t n :
       {std::size_t{0}, std::size_t{4}, std::size_t{137}, std::size_t{140}, std::size_t{142}}) {
    auto got = decode_binding(buf.data(), n);
    EXPECT_FALSE(got.ok()) << n;
    EXPECT_EQ(got.status().code(), Errc::Protocol);
  }
}

// A binding with one bad field, encoded with a correct CRC (encode computes it).
void expect_rejected(const char* what, const std::function<void(Binding&)>& spoil) {
  Binding b = sample_binding();
  spoil(b);
  auto got = decode(encode(b));
  EXPECT_FALSE(got.ok()) << what;
  EXPECT_EQ(got.status().code(), Errc::Protocol) << what;
}

TEST(Binding, FieldRangesAreChecked) {
  expect_rejected("version 0", [](Binding& b) { b.version = 0; });
  expect_rejected("version 2", [](Binding& b) { b.version = 2; });
  expect_rejected("op 0", [](Binding& b) { b.op = 0; });
  expect_rejected("op 3", [](Binding& b) { b.op = 3; });
  expect_rejected("op 0x83", [](Binding& b) { b.op = 0x83; });
  expect_rejected("op 0x80", [](Binding& b) { b.op = 0x80; });
  expect_rejected("op 0x41", [](Binding& b) { b.op = 0x41; });
  expect_rejected("op 0xc1", [](Binding& b) { b.op = 0xc1; });  // to a message, but a READ
  expect_rejected("op 0x42", [](Binding& b) { b.op = 0x42; });  // to a message, no receive
  expect_rejected("slice_count 0", [](Binding& b) { b.slice_count = 0; });
  expect_rejected("slice_count 65", [](Binding& b) { b.slice_count = 65; });
  expect_rejected("first_slice 64", [](Binding& b) { b.first_slice = 64; });
  expect_rejected("status 2", [](Binding& b) { b.status = 2; });
  expect_rejected("status 0xff", [](Binding& b) { b.status = 0xff; });
}

TEST(Binding, BadMagicIsRejectedEvenWithACorrectCrc) {
  Bytes e = encode(sample_binding());
  e[3] = 'E';
  const std::uint32_t crc = crc32c(e.data(), 137);
  for (int i = 0; i < 4; ++i) e[137 + i] = static_cast<std::uint8_t>(crc >> (8 * i));
  auto got = decode(e);
  EXPECT_FALSE(got.ok());
}

TEST(Binding, MismatchNamesExactlyTheFieldThatDiffers) {
  struct Field {
    const char* name;
    std::function<void(Binding&)> change;
  };
  const std::vector<Field> fields = {
      {"version", [](Binding& b) { b.version = 2; }},
      {"op", [](Binding& b) { b.op = kOpRead; }},
      {"first_slice", [](Binding& b) { b.first_slice = 6; }},
      {"slice_count", [](Binding& b) { b.slice_count = 8; }},
      {"source_engine", [](Binding& b) { b.source_engine[15] ^= 1; }},
      {"requester_engine", [](Binding& b) { b.requester_engine[0] ^= 1; }},
      {"link_incarnation", [](Binding& b) { ++b.link_incarnation; }},
      {"qp_incarnation", [](Binding& b) { ++b.qp_incarnation; }},
      {"grant_id", [](Binding& b) { ++b.grant_id; }},
      {"grant_generation", [](Binding& b) { ++b.grant_generation; }},
      {"grant_nonce", [](Binding& b) { b.grant_nonce ^= 1ull << 63; }},
      {"request_id", [](Binding& b) { ++b.request_id; }},
      {"target_id", [](Binding& b) { ++b.target_id; }},
      {"target_generation", [](Binding& b) { ++b.target_generation; }},
      {"offset", [](Binding& b) { ++b.offset; }},
      {"length", [](Binding& b) { --b.length; }},
      {"rkey", [](Binding& b) { ++b.rkey; }},
      {"source_qpn", [](Binding& b) { ++b.source_qpn; }},
      {"requester_qpn", [](Binding& b) { ++b.requester_qpn; }},
      {"payload_wrs", [](Binding& b) { b.payload_wrs = 0; }},
      {"status", [](Binding& b) { b.status = 1; }},
  };
  const Binding want = sample_binding();
  EXPECT_EQ(binding_mismatch(want, want), "");
  for (const Field& f : fields) {
    Binding got = want;
    f.change(got);
    EXPECT_EQ(binding_mismatch(want, got), f.name);
    EXPECT_EQ(binding_mismatch(got, want), f.name);
  }
  // With several fields off, the first in wire order is named.
  Binding got = want;
  got.status = 1;
  got.grant_nonce = 0;
  got.rkey = 0;
  EXPECT_EQ(binding_mismatch(want, got), "grant_nonce");
}

}  // namespace
}  // namespace orbite::rdma
