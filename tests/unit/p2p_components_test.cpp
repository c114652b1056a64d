// The data path's codecs, each on its own: the control frame header, the connection handshake and
// RemoteRegion descriptors. (The queues and the region registry are in
// p2p_queues_registry_test.cpp; the shared-memory ring and the shm configuration checks in
// p2p_shm_ring_test.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <orbite/config.h>
#include <orbite/transfer.h>

#include "../support/config_test_helpers.h"
#include "common/wire.h"
#include "p2p/control/handshake.h"
#include "p2p/frame.h"

namespace orbite {
namespace {

using p2p::ConnectBlob;
using p2p::decode_handshake;
using p2p::decode_header;
using p2p::encode_handshake;
using p2p::encode_header;
using p2p::FrameHeader;
using p2p::FrameType;
using p2p::Handshake;
using p2p::kFrameHeaderBytes;
using p2p::kMaxControlPayload;
using p2p::kMaxFramePayload;
using p2p::kMaxFrameType;
using p2p::TransportId;

using HeaderBytes = std::array<std::byte, kFrameHeaderBytes>;

HeaderBytes encoded(const FrameHeader& h) {
  HeaderBytes out{};
  encode_header(h, out.data());
  return out;
}

std::uint8_t u8(const HeaderBytes& b, std::size_t i) {
  return static_cast<std::uint8_t>(b[i]);
}

std::uint64_t le_at(const HeaderBytes& b, std::size_t at, std::size_t width) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < width; ++i) v |= static_cast<std::uint64_t>(u8(b, at + i)) << (8 * i);
  return v;
}

bool carries_bulk(FrameType t) {
  return t == FrameType::Eager || t == FrameType::Data;
}

// ------------------------------------------------------------------------------------------------
// Frame header

TEST(FrameHeader, EveryTypeRoundTripsWithItsWireLayout) {
  for (std::uint8_t t = 1; t <= kMaxFrameType; ++t) {
    SCOPED_TRACE(static_cast<int>(t));
    FrameHeader h;
    h.type = static_cast<FrameType>(t);
    h.payload_len = carries_bulk(h.type) ? kMaxFramePayload : kMaxControlPayload;
    h.id = 0x0102030405060708ULL + t;
    h.a = 0x1112131415161718ULL;
    h.b = std::numeric_limits<std::uint64_t>::max();
    h.c = 0;
    h.d = 0x8000000000000001ULL;
    const HeaderBytes b = encoded(h);

    // Magic "OF", version, type, then little-endian payload_len and the five 64-bit fields.
    EXPECT_EQ(u8(b, 0), 'O');
    EXPECT_EQ(u8(b, 1), 'F');
    EXPECT_EQ(u8(b, 2), p2p::kFrameVersion);
    EXPECT_EQ(u8(b, 3), t);
    EXPECT_EQ(le_at(b, 4, 4), h.payload_len);
    EXPECT_EQ(le_at(b, 8, 8), h.id);
    EXPECT_EQ(le_at(b, 16, 8), h.a);
    EXPECT_EQ(le_at(b, 24, 8), h.b);
    EXPECT_EQ(le_at(b, 32, 8), h.c);
    EXPECT_EQ(le_at(b, 40, 8), h.d);

    auto back = decode_header(b.data());
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->type, h.type);
    EXPECT_EQ(back->payload_len, h.payload_len);
    EXPECT_EQ(back->id, h.id);
    EXPECT_EQ(back->a, h.a);
    EXPECT_EQ(back->b, h.b);
    EXPECT_EQ(back->c, h.c);
    EXPECT_EQ(back->d, h.d);
    EXPECT_STRNE(p2p::frame_type_name(h.type), "?");
  }
}

TEST(FrameHeader, RejectsBadMagic) {
  FrameHeader h;
  h.type = FrameType::Put;
  for (std::size_t at : {0, 1}) {
    HeaderBytes b = encoded(h);
    b[at] = std::byte{'X'};
    auto r = decode_header(b.data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Errc::Protocol);
    EXPECT_CONTAINS(r.status().message(), "magic");
    EXPECT_CONTAINS(r.status().message(), "58");  // 'X' in hex
  }
}

TEST(FrameHeader, RejectsOtherVersions) {
  FrameHeader h;
  h.type = FrameType::Ack;
  // Version 1 is the handshake before connect blobs, version 2 the frames before staging,
  // version 3 the exposure word without its device bit, version 4 the shm connect blob without
  // its proof nonce, version 5 the frames before RtsRma and Abandon, version 6 the frames before
  // Notify: their peers fail the handshake.
  for (std::uint8_t v : {0, 1, 2, 3, 4, 5, 6, 8, 255}) {
    HeaderBytes b = encoded(h);
    b[2] = static_cast<std::byte>(v);
    auto r = decode_header(b.data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Errc::Protocol);
    EXPECT_CONTAINS(r.status().message(), "version " + std::to_string(v));
    EXPECT_CONTAINS(r.status().message(), "speaks 7");
  }
}

TEST(FrameHeader, RejectsUnknownTypes) {
  FrameHeader h;
  for (int t : {0, kMaxFrameType + 1, 255}) {
    HeaderBytes b = encoded(h);
    b[3] = static_cast<std::byte>(t);
    auto r = decode_header(b.data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Errc::Protocol);
    EXPECT_CONTAINS(r.status().message(), "frame type " + std::to_string(t));
  }
}

TEST(FrameHeader, ControlPayloadIsBounded) {
  for (std::uint8_t t = 1; t <= kMaxFrameType; ++t) {
    const auto type = static_cast<FrameType>(t);
    if (carries_bulk(type)) continue;
    SCOPED_TRACE(p2p::frame_type_name(type));
    FrameHeader h;
    h.type = type;
    h.payload_len = kMaxControlPayload + 1;
    auto r = decode_header(encoded(h).data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Errc::Protocol);
    EXPECT_CONTAINS(r.status().message(), std::string(p2p::frame_type_name(type)) +
                                              " frame payload_len " +
                                              std::to_string(kMaxControlPayload + 1));
    EXPECT_CONTAINS(r.status().message(), std::to_string(kMaxControlPayload));
  }
}

TEST(FrameHeader, BulkPayloadIsBounded) {
  for (FrameType type : {FrameType::Eager, FrameType::Data}) {
    SCOPED_TRACE(p2p::frame_type_name(type));
    FrameHeader h;
    h.type = type;
    h.payload_len = kMaxControlPayload + 1;  // bulk frames may exceed the control bound
    EXPECT_TRUE(decode_header(encoded(h).data()).ok());
    for (std::uint32_t len : {kMaxFramePayload + 1, std::numeric_limits<std::uint32_t>::max()}) {
      h.payload_len = len;
      auto r = decode_header(encoded(h).data());
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), Errc::Protocol);
      EXPECT_CONTAINS(r.status().message(), "payload_len " + std::to_string(len));
      EXPECT_CONTAINS(r.status().message(), std::to_string(kMaxFramePayload));
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Handshake

Handshake full_handshake() {
  Handshake h;
  h.engine_id = "0123456789abcdef0123456789abcdef";
  h.host_id = "node7:6f1b2c3d-boot";
  h.pid = 4242;
  h.eager_credit = 4 << 20;
  h.transports.push_back(ConnectBlob{TransportId::Shm, std::string("\x00\x00\x10\x00", 4)});
  h.transports.push_back(ConnectBlob{TransportId::Tcp, ""});
  return h;
}

void expect_handshake_rejected(const std::string& bytes, const std::string& names) {
  auto r = decode_handshake(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::Protocol);
  EXPECT_CONTAINS(r.status().message(), names);
}

TEST(Handshake, RoundTripsWithItsConnectBlobs) {
  const Handshake h = full_handshake();
  auto back = decode_handshake(encode_handshake(h));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->engine_id, h.engine_id);
  EXPECT_EQ(back->host_id, h.host_id);
  EXPECT_EQ(back->pid, h.pid);
  EXPECT_EQ(back->eager_credit, h.eager_credit);
  EXPECT_FALSE(back->join.has_value());
  ASSERT_EQ(back->transports.size(), 2U);
  EXPECT_EQ(back->transports[0].id, TransportId::Shm);
  EXPECT_EQ(back->transports[0].blob, h.transports[0].blob);
  EXPECT_EQ(back->transports[1].id, TransportId::Tcp);
  EXPECT_TRUE(back->transports[1].blob.empty());
  ASSERT_NE(back->find(TransportId::Tcp), nullptr);
  EXPECT_EQ(back->find(TransportId::Rdma), nullptr);
}

TEST(Handshake, AJoinNamesItsTransportAndIndex) {
  Handshake h = full_handshake();
  h.transports.clear();
  h.join = TransportId::Tcp;
  h.join_index = 3;
  auto back = decode_handshake(encode_handshake(h));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_TRUE(back->join.has_value());
  EXPECT_EQ(*back->join, TransportId::Tcp);
  EXPECT_EQ(back->join_index, 3U);
}

TEST(Handshake, EveryTruncationAndTrailingBytesAreMalformed) {
  const std::string bytes = encode_handshake(full_handshake());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    SCOPED_TRACE(n);
    expect_handshake_rejected(bytes.substr(0, n), "handshake");
  }
  expect_handshake_rejected(bytes + '\0', "is malformed");
}

TEST(Handshake, WrongMagicIsMalformed) {
  std::string bytes = encode_handshake(full_handshake());
  bytes[0] = static_cast<char>(bytes[0] ^ 0x20);
  expect_handshake_rejected(bytes, "is malformed");
}

TEST(Handshake, OversizedFieldIsMalformed) {
  Handshake h = full_handshake();
  h.host_id = std::string(513, 'h');
  expect_handshake_rejected(encode_handshake(h), "is malformed");
  h = full_handshake();
  h.transports[0].blob = std::string(p2p::kMaxConnectBlob + 1, 'b');
  expect_handshake_rejected(encode_handshake(h), "is malformed");
}

TEST(Handshake, UnknownDuplicateOrTooManyTransportsAreRejected) {
  Handshake h = full_handshake();
  h.transports[1].id = static_cast<TransportId>(9);
  expect_handshake_rejected(encode_handshake(h), "names transport 9");
  h = full_handshake();
  h.transports[1].id = TransportId::Shm;
  expect_handshake_rejected(encode_handshake(h), "names transport shm twice");
  h = full_handshake();
  for (int i = 0; i < 3; ++i) h.transports.push_back(ConnectBlob{TransportId::Rdma, ""});
  expect_handshake_rejected(encode_handshake(h), "lists 5 transports");
  h = full_handshake();
  h.join = static_cast<TransportId>(7);
  expect_handshake_rejected(encode_handshake(h), "joins transport 7");
}

TEST(Handshake, EngineIdMustBe32Characters) {
  for (const std::string id :
       {"", "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0"}) {
    Handshake h = full_handshake();
    h.engine_id = id;
    expect_handshake_rejected(encode_handshake(h), "engine '" + id + "'");
  }
}

TEST(Handshake, PidMustBePositive) {
  for (std::int64_t pid : {std::int64_t{0}, std::int64_t{-1}}) {
    Handshake h = full_handshake();
    h.pid = pid;
    expect_handshake_rejected(encode_handshake(h), "pid " + std::to_string(pid));
  }
}

TEST(Handshake, ZeroCreditIsRejected) {
  Handshake h = full_handshake();
  h.eager_credit = 0;
  expect_handshake_rejected(encode_handshake(h), "zero eager credit");
}

// ------------------------------------------------------------------------------------------------
// RemoteRegion descriptors (exported by a real engine on loopback)

std::shared_ptr<TransferEngine> loopback_engine(bool shm) {
  EngineConfig c;
  c.tcp.interface = "lo";
  c.shm.enable = shm;
  auto e = TransferEngine::create(c);
  if (!e.ok()) ADD_FAILURE() << e.status().to_string();
  return e.ok() ? *e : nullptr;
}

TEST(RemoteRegion, ExportedBytesRoundTrip) {
  for (bool shm : {true, false}) {
    SCOPED_TRACE(shm ? "shm enabled" : "shm disabled");
    auto engine = loopback_engine(shm);
    ASSERT_NE(engine, nullptr);
    std::vector<std::byte> mem(1000);
    auto region = engine->register_memory(mem.data(), mem.size(), MemoryKind::Host, {true, false});
    ASSERT_TRUE(region.ok()) << region.status().to_string();
    const RemoteRegion exported = region->export_descriptor();
    const std::string bytes = exported.bytes();

    auto back = RemoteRegion::from_bytes(bytes);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->length(), 1000U);
    EXPECT_EQ(back->region_id(), exported.region_id());
    EXPECT_NE(back->region_id(), 0U);
    EXPECT_EQ(back->generation(), exported.generation());
    EXPECT_TRUE(back->access().read);
    EXPECT_FALSE(back->access().write);
    EXPECT_EQ(back->owner_id(), engine->id());
    EXPECT_EQ(back->owner_id().size(), 32U);
    EXPECT_EQ(back->owner_address(), engine->control_address());
    EXPECT_EQ(back->owner_address().rfind("127.0.0.1:", 0), 0U) << back->owner_address();
    EXPECT_EQ(back->owner_host_id(), exported.owner_host_id());
    EXPECT_FALSE(back->owner_host_id().empty());
    EXPECT_EQ(back->owner_pid(), static_cast<std::int64_t>(::getpid()));
    const std::vector<Transport> expected =
        shm ? std::vector<Transport>{Transport::Tcp, Transport::Shm}
            : std::vector<Transport>{Transport::Tcp};
    EXPECT_EQ(back->transports(), expected);
    EXPECT_EQ(back->bytes(), bytes);

    auto from_span = RemoteRegion::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
    ASSERT_TRUE(from_span.ok());
    EXPECT_EQ(from_span->bytes(), bytes);
    EXPECT_TRUE(region->unregister().ok());
    EXPECT_TRUE(engine->close(std::chrono::seconds(10)).ok());
  }
}

TEST(RemoteRegion, TruncatedFlippedOrExtendedBytesAreRejected) {
  auto engine = loopback_engine(true);
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> mem(64);
  auto region = engine->register_memory(mem.data(), mem.size());
  ASSERT_TRUE(region.ok());
  const std::string bytes = region->export_descriptor().bytes();

  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto r = RemoteRegion::from_bytes(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(r.ok()) << "truncated to " << n << " of " << bytes.size() << " bytes";
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument);
    EXPECT_CONTAINS(r.status().message(), "(" + std::to_string(n) + " bytes)");
  }
  auto extended = RemoteRegion::from_bytes(bytes + "x");
  ASSERT_FALSE(extended.ok());
  EXPECT_EQ(extended.status().code(), Errc::InvalidArgument);

  for (std::size_t at = 0; at < 4; ++at) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0xff);
    auto r = RemoteRegion::from_bytes(flipped);
    ASSERT_FALSE(r.ok()) << "magic byte " << at;
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument);
    EXPECT_CONTAINS(r.status().message(), "not a region descriptor");
  }
  std::string version = bytes;
  version[4] = 5;
  auto r = RemoteRegion::from_bytes(version);
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "descriptor version 5");
  // A version-4 body read as version 1 is not a descriptor.
  version[4] = 1;
  r = RemoteRegion::from_bytes(version);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::InvalidArgument);
  EXPECT_TRUE(engine->close(std::chrono::seconds(10)).ok());
}

// The fields every descriptor version shares, as RemoteRegion::bytes() writes them.
void descriptor_prefix(wire::Writer& w, std::uint8_t version, std::uint8_t rights) {
  w.put<std::uint32_t>(0x4f52524d);
  w.put<std::uint8_t>(version);
  w.put_bytes("0123456789abcdef0123456789abcdef");
  w.put_bytes("127.0.0.1:4000");
  w.put_bytes("node:boot");
  w.put<std::int64_t>(77);
  w.put<std::uint64_t>(5);
  w.put<std::uint64_t>(1);
  w.put<std::uint64_t>(4096);
  w.put<std::uint8_t>(rights);
}

// Version 1 (before per-transport blobs) named its transports by a mask; it still decodes, and
// re-encodes as version 4 with an empty blob per transport.
TEST(RemoteRegion, VersionOneStillDecodes) {
  std::string v1;
  wire::Writer w(v1);
  descriptor_prefix(w, 1, 1);  // read only
  w.put<std::uint32_t>((1u << static_cast<unsigned>(Transport::Tcp)) |
                       (1u << static_cast<unsigned>(Transport::Shm)));
  auto r = RemoteRegion::from_bytes(v1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->region_id(), 5U);
  EXPECT_EQ(r->length(), 4096U);
  EXPECT_TRUE(r->access().read);
  EXPECT_FALSE(r->access().write);
  EXPECT_EQ(r->transports(), (std::vector<Transport>{Transport::Tcp, Transport::Shm}));
  const std::string v2 = r->bytes();
  EXPECT_EQ(static_cast<int>(v2[4]), 4);
  auto again = RemoteRegion::from_bytes(v2);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->transports(), r->transports());
}

// The version-2 entries are checked: an unknown transport id or one listed twice is refused.
TEST(RemoteRegion, TransportEntriesAreChecked) {
  auto encode = [](std::vector<std::pair<std::uint8_t, std::string>> entries) {
    std::string out;
    wire::Writer w(out);
    descriptor_prefix(w, 2, 3);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(entries.size()));
    for (const auto& [id, blob] : entries) {
      w.put<std::uint8_t>(id);
      w.put_bytes(blob);
    }
    return out;
  };
  EXPECT_TRUE(RemoteRegion::from_bytes(encode({{3, ""}})).ok());
  auto unknown = RemoteRegion::from_bytes(encode({{3, ""}, {9, ""}}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_CONTAINS(unknown.status().message(), "transport id 9");
  auto twice = RemoteRegion::from_bytes(encode({{3, ""}, {3, ""}}));
  ASSERT_FALSE(twice.ok());
  EXPECT_CONTAINS(twice.status().message(), "tcp listed twice");
  auto big = RemoteRegion::from_bytes(encode({{3, std::string(4097, 'k')}}));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Errc::InvalidArgument);
}

// Version 4's entry flags name the GPUDirect routes of a registration (what
// RemoteRegion::gpu_direct_routes reports); version 3 knew only "staged", so they are refused
// there.
TEST(RemoteRegion, GpuDirectRouteFlagsAreVersionFour) {
  auto encode = [](std::uint8_t version, std::uint8_t flags) {
    std::string out;
    wire::Writer w(out);
    descriptor_prefix(w, version, 3);
    w.put<std::uint8_t>(1);  // kind: CUDA
    w.put<std::uint64_t>(0);
    w.put<std::uint8_t>(1);
    w.put<std::uint8_t>(2);  // rdma
    w.put<std::uint8_t>(flags);
    w.put_bytes("");
    return out;
  };
  auto both = RemoteRegion::from_bytes(encode(4, 2 | 4));
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->gpu_direct_routes(),
            (std::vector<rdma::GpuDirectRegistration>{rdma::GpuDirectRegistration::Dmabuf,
                                                      rdma::GpuDirectRegistration::Peermem}));
  // And they survive a re-encoding.
  auto again = RemoteRegion::from_bytes(both->bytes());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->gpu_direct_routes(), both->gpu_direct_routes());
  auto none = RemoteRegion::from_bytes(encode(4, 0));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->gpu_direct_routes().empty());
  auto v3 = RemoteRegion::from_bytes(encode(3, 2));
  ASSERT_FALSE(v3.ok());
  EXPECT_CONTAINS(v3.status().message(), "entry flags 2");
  auto unknown = RemoteRegion::from_bytes(encode(4, 8));
  ASSERT_FALSE(unknown.ok());
  EXPECT_CONTAINS(unknown.status().message(), "entry flags 8");
}

// A transport's entry is its memory domain's to check: tcp needs no key, so a descriptor whose
// tcp entry carries bytes (forged, or from a newer engine) decodes, but a put or get over it is
// refused before anything is queued, naming the transport.
TEST(RemoteRegion, ATransportsDomainRefusesABlobItDoesNotKnow) {
  auto engine = loopback_engine(true);
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> mem(64);
  auto local = engine->register_memory(mem.data(), mem.size());
  ASSERT_TRUE(local.ok());
  std::string bytes;
  wire::Writer w(bytes);
  descriptor_prefix(w, 2, 3);
  w.put<std::uint8_t>(1);
  w.put<std::uint8_t>(3);  // tcp
  w.put_bytes("key?");
  auto remote = RemoteRegion::from_bytes(bytes);
  ASSERT_TRUE(remote.ok()) << remote.status().to_string();
  const auto submitted = engine->stats().requests_submitted;
  for (bool put : {true, false}) {
    auto r = put ? engine->put(*local, 0, *remote, 0, 16) : engine->get(*local, 0, *remote, 0, 16);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument);
    EXPECT_CONTAINS(r.status().message(), "4 bytes for tcp, which needs none");
  }
  EXPECT_EQ(engine->stats().requests_submitted, submitted);
  EXPECT_TRUE(engine->close(std::chrono::seconds(10)).ok());
}

}  // namespace
}  // namespace orbite
