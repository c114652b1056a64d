// The RDMA transport's wire: the connect blob and the control frames (design 3.2), and engine
// keys. (The 141-byte receipt binding is in rdma_binding_codec_test.cpp, planner and ledgers in
// rdma_logic_test.cpp, key history and range locks in rdma_keys_test.cpp.)
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

// ------------------------------------------------------------------------------------------------
// Frames: every decoder rejects a truncated body and a trailing byte

template <class Decode>
void expect_truncation_and_trailing_rejected(const std::string& body, Decode decode_fn) {
  ASSERT_FALSE(body.empty());
  auto shorter = decode_fn(std::string_view(body).substr(0, body.size() - 1));
  EXPECT_FALSE(shorter.ok()) << "truncated by 1";
  EXPECT_EQ(shorter.status().code(), Errc::Protocol);
  const std::string longer = body + '\0';
  auto trailing = decode_fn(longer);
  EXPECT_FALSE(trailing.ok()) << "1 trailing byte";
  EXPECT_EQ(trailing.status().code(), Errc::Protocol);
  auto empty = decode_fn(std::string_view());
  EXPECT_FALSE(empty.ok()) << "empty";
  EXPECT_EQ(empty.status().code(), Errc::Protocol);
}

template <class Decode>
void expect_rejected_body(const std::string& body, Decode decode_fn, const char* what) {
  auto got = decode_fn(body);
  EXPECT_FALSE(got.ok()) << what;
  EXPECT_EQ(got.status().code(), Errc::Protocol) << what;
}

NicRecord nic(std::uint8_t id, const char* name) {
  NicRecord n;
  n.nic_id = id;
  n.name = name;
  n.active = 1;
  n.port = 2;
  n.link_layer = 2;
  n.mtu = 5;
  n.lid = 0xbeef;
  n.gid_index = 3;
  for (std::size_t i = 0; i < n.gid.size(); ++i) n.gid[i] = static_cast<std::uint8_t>(id * 16 + i);
  n.route_generation = 0x1122334455667788ull + id;
  return n;
}

RdmaInfo sample_info() {
  RdmaInfo info;
  info.engine = key_of(0x40);
  info.rdma_incarnation = 0xdeadbeefcafef00dull;
  info.link_incarnation = 17;
  info.lanes = 4;
  info.frame_payload = 16384;
  info.nics = {nic(0, "mlx5_0"), nic(7, "rxe_eth1")};
  info.nics[1].active = 0;
  info.nics[1].mtu = 1;
  return info;
}

TEST(RdmaInfo, RoundTripsWithTwoNics) {
  const RdmaInfo info = sample_info();
  auto got = decode_info(encode(info));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->version, kRdmaWireVersion);
  EXPECT_EQ(got->engine, info.engine);
  EXPECT_EQ(got->rdma_incarnation, info.rdma_incarnation);
  EXPECT_EQ(got->link_incarnation, info.link_incarnation);
  EXPECT_EQ(got->lanes, info.lanes);
  EXPECT_EQ(got->frame_payload, info.frame_payload);
  ASSERT_EQ(got->nics.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const NicRecord& w = info.nics[i];
    const NicRecord& g = got->nics[i];
    EXPECT_EQ(g.nic_id, w.nic_id);
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.active, w.active);
    EXPECT_EQ(g.port, w.port);
    EXPECT_EQ(g.link_layer, w.link_layer);
    EXPECT_EQ(g.mtu, w.mtu);
    EXPECT_EQ(g.lid, w.lid);
    EXPECT_EQ(g.gid_index, w.gid_index);
    EXPECT_EQ(g.gid, w.gid);
    EXPECT_EQ(g.route_generation, w.route_generation);
  }
  expect_truncation_and_trailing_rejected(encode(info), decode_info);
}

TEST(RdmaInfo, OutOfRangeFieldsAreRejected) {
  auto spoil = [](const std::function<void(RdmaInfo&)>& f) {
    RdmaInfo info = sample_info();
    f(info);
    return encode(info);
  };
  // Version 1 had no priority or deadline in its GrantRequest: refused by name.
  expect_rejected_body(spoil([](RdmaInfo& i) { i.version = 1; }), decode_info, "version 1");
  EXPECT_NE(decode_info(spoil([](RdmaInfo& i) { i.version = 1; }))
                .status()
                .message()
                .find("wire version 1; this engine speaks 6"),
            std::string::npos);
  // Version 2 had no private grant path.
  expect_rejected_body(spoil([](RdmaInfo& i) { i.version = 2; }), decode_info, "version 2");
  // Version 3 had no frame payload.
  expect_rejected_body(spoil([](RdmaInfo& i) { i.version = 3; }), decode_info, "version 3");
  // Version 4 had no QpLost.
  expect_rejected_body(spoil([](RdmaInfo& i) { i.version = 4; }), decode_info, "version 4");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.version = 7; }), decode_info, "version 7");
  // A frame payload outside [4 KiB, 256 KiB] (rdma.eager_limit's bounds) is refused.
  expect_rejected_body(spoil([](RdmaInfo& i) { i.frame_payload = 0; }), decode_info, "frames 0");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.frame_payload = 4095; }), decode_info,
                       "frames 4095");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.frame_payload = 256 * 1024 + 1; }), decode_info,
                       "frames 256K+1");
  EXPECT_TRUE(decode_info(spoil([](RdmaInfo& i) { i.frame_payload = 4096; })).ok());
  EXPECT_TRUE(decode_info(spoil([](RdmaInfo& i) { i.frame_payload = 256 * 1024; })).ok());
  expect_rejected_body(spoil([](RdmaInfo& i) { i.version = 0; }), decode_info, "version 0");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.lanes = 0; }), decode_info, "lanes 0");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.lanes = 1025; }), decode_info, "lanes 1025");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.nics[0].nic_id = 64; }), decode_info, "nic 64");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.nics[1].active = 2; }), decode_info, "active 2");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.nics[0].mtu = 0; }), decode_info, "mtu 0");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.nics[0].mtu = 6; }), decode_info, "mtu 6");
  expect_rejected_body(spoil([](RdmaInfo& i) { i.nics[0].name = std::string(65, 'n'); }),
                       decode_info, "name of 65");
  // 64 NICs are the most; 65 are refused.
  RdmaInfo many = sample_info();
  many.nics.clear();
  for (std::uint8_t i = 0; i < 64; ++i) many.nics.push_back(nic(i, "n"));
  auto got = decode_info(encode(many));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->nics.size(), 64u);
  many.nics.push_back(nic(63, "n"));
  expect_rejected_body(encode(many), decode_info, "65 NICs");
}

QpEndpointInfo sample_qp() {
  QpEndpointInfo q;
  q.qpn = 0xabcdef;
  q.psn = 0x123456;
  q.nic_id = 3;
  q.remote_nic = 63;
  q.rd_atomic = 16;
  q.dest_rd_atomic = 8;
  return q;
}

void expect_qp_eq(const QpEndpointInfo& g, const QpEndpointInfo& w) {
  EXPECT_EQ(g.qpn, w.qpn);
  EXPECT_EQ(g.psn, w.psn);
  EXPECT_EQ(g.nic_id, w.nic_id);
  EXPECT_EQ(g.remote_nic, w.remote_nic);
  EXPECT_EQ(g.rd_atomic, w.rd_atomic);
  EXPECT_EQ(g.dest_rd_atomic, w.dest_rd_atomic);
}

TEST(QpConnect, RoundTripsAndBoundsItsFields) {
  QpConnect m;
  m.builder = 0x0102030405060708ull;
  m.slot = 1023;
  m.qp_incarnation = 99;
  m.qp = sample_qp();
  auto got = decode_qp_connect(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->builder, m.builder);
  EXPECT_EQ(got->slot, m.slot);
  EXPECT_EQ(got->qp_incarnation, m.qp_incarnation);
  expect_qp_eq(got->qp, m.qp);
  expect_truncation_and_trailing_rejected(encode(m), decode_qp_connect);

  auto spoil = [&](const std::function<void(QpConnect&)>& f) {
    QpConnect bad = m;
    f(bad);
    return encode(bad);
  };
  expect_rejected_body(spoil([](QpConnect& c) { c.qp.qpn = 0x1000000; }), decode_qp_connect,
                       "qpn over 24 bits");
  expect_rejected_body(spoil([](QpConnect& c) { c.qp.psn = 0x1000000; }), decode_qp_connect,
                       "psn over 24 bits");
  expect_rejected_body(spoil([](QpConnect& c) { c.qp.nic_id = 64; }), decode_qp_connect, "nic 64");
  expect_rejected_body(spoil([](QpConnect& c) { c.qp.remote_nic = 64; }), decode_qp_connect,
                       "remote nic 64");
  expect_rejected_body(spoil([](QpConnect& c) { c.slot = 1024; }), decode_qp_connect, "slot 1024");
}

TEST(QpAccept, RoundTripsWithAReason) {
  QpAccept m;
  m.builder = 5;
  m.errc = static_cast<std::uint32_t>(Errc::ResourceExhausted);
  m.qp_incarnation = 0xffffffffffffffffull;
  m.qp = sample_qp();
  m.reason = "no QP left on mlx5_0";
  auto got = decode_qp_accept(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->builder, m.builder);
  EXPECT_EQ(got->errc, m.errc);
  EXPECT_EQ(got->qp_incarnation, m.qp_incarnation);
  expect_qp_eq(got->qp, m.qp);
  EXPECT_EQ(got->reason, m.reason);
  expect_truncation_and_trailing_rejected(encode(m), decode_qp_accept);

  QpAccept bad = m;
  bad.errc = 256;
  expect_rejected_body(encode(bad), decode_qp_accept, "errc 256");
  bad = m;
  bad.qp.qpn = 0x1000000;
  expect_rejected_body(encode(bad), decode_qp_accept, "qpn over 24 bits");
  bad = m;
  bad.reason = std::string(1025, 'r');
  expect_rejected_body(encode(bad), decode_qp_accept, "reason of 1025");
  bad.reason = std::string(1024, 'r');
  EXPECT_TRUE(decode_qp_accept(encode(bad)).ok());
}

TEST(QpRetire, RoundTrips) {
  QpRetire m;
  m.slot = 12;
  m.qp_incarnation = 0x8000000000000001ull;
  auto got = decode_qp_retire(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->slot, m.slot);
  EXPECT_EQ(got->qp_incarnation, m.qp_incarnation);
  expect_truncation_and_trailing_rejected(encode(m), decode_qp_retire);
}

TEST(QpLost, RoundTrips) {
  QpLost m;
  m.slot = kMessageSlot;
  m.qp_incarnation = 0x8000000000000003ull;
  m.frames = 0xfffffffffull;
  auto got = decode_qp_lost(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->slot, m.slot);
  EXPECT_EQ(got->qp_incarnation, m.qp_incarnation);
  EXPECT_EQ(got->frames, m.frames);
  expect_truncation_and_trailing_rejected(encode(m), decode_qp_lost);
}

using samples::segment;

GrantRequest sample_request() {
  GrantRequest m;
  m.parent = 0x1111;
  m.target = 0x2222;
  m.target_generation = 3;
  m.offset = 4096;
  m.length = 0x10000 * 10;
  m.op = kOpWrite;
  m.slices = 10;
  m.link_incarnation = 77;
  m.segments = {segment(0, 4, 0), segment(4, 4, 1), segment(8, 2, 2)};
  m.priority = 2;
  m.deadline_us = 0x123456789ull;
  return m;
}

TEST(GrantRequest, RoundTripsWithThreeSegments) {
  const GrantRequest m = sample_request();
  auto got = decode_grant_request(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->parent, m.parent);
  EXPECT_EQ(got->target, m.target);
  EXPECT_EQ(got->target_generation, m.target_generation);
  EXPECT_EQ(got->offset, m.offset);
  EXPECT_EQ(got->length, m.length);
  EXPECT_EQ(got->op, m.op);
  EXPECT_EQ(got->slices, m.slices);
  EXPECT_EQ(got->link_incarnation, m.link_incarnation);
  EXPECT_EQ(got->priority, 2);
  EXPECT_EQ(got->deadline_us, m.deadline_us);
  ASSERT_EQ(got->segments.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const SegmentRequest& w = m.segments[i];
    const SegmentRequest& g = got->segments[i];
    EXPECT_EQ(g.first_slice, w.first_slice);
    EXPECT_EQ(g.slices, w.slices);
    EXPECT_EQ(g.slot, w.slot);
    EXPECT_EQ(g.offset, w.offset);
    EXPECT_EQ(g.length, w.length);
    EXPECT_EQ(g.qp_incarnation, w.qp_incarnation);
    EXPECT_EQ(g.requester_qpn, w.requester_qpn);
  }
  expect_truncation_and_trailing_rejected(encode(m), decode_grant_request);
  // A READ and a zero-length request (no segments) decode too.
  GrantRequest empty = m;
  empty.op = kOpRead;
  empty.length = 0;
  empty.slices = 0;
  empty.segments.clear();
  auto got_empty = decode_grant_request(encode(empty));
  ASSERT_TRUE(got_empty.ok()) << got_empty.status().to_string();
  EXPECT_EQ(got_empty->op, kOpRead);
  EXPECT_TRUE(got_empty->segments.empty());
}

TEST(GrantRequest, OutOfRangeFieldsAreRejected) {
  GrantRequest bad = sample_request();
  bad.op = 3;
  expect_rejected_body(encode(bad), decode_grant_request, "op 3");
  bad.op = 0;
  expect_rejected_body(encode(bad), decode_grant_request, "op 0");
  bad = sample_request();
  bad.slices = 65;
  expect_rejected_body(encode(bad), decode_grant_request, "65 slices");
  bad = sample_request();
  bad.priority = 3;
  expect_rejected_body(encode(bad), decode_grant_request, "priority 3");
  bad = sample_request();
  bad.segments.clear();
  for (std::uint8_t i = 0; i < 64; ++i) bad.segments.push_back(segment(i, 1, i));
  EXPECT_TRUE(decode_grant_request(encode(bad)).ok());
  bad.segments.push_back(segment(0, 1, 0));
  expect_rejected_body(encode(bad), decode_grant_request, "65 segments");
}

TEST(GrantRequest, ThePrivatePathCarriesTheRequestersQp) {
  GrantRequest m = sample_request();
  m.segments = {segment(0, 10, kPrivateSlot)};
  m.private_path = true;
  m.private_qp = QpEndpointInfo{0xabcdef, 0x123456, 3, 5, 16, 0};
  auto got = decode_grant_request(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(got->private_path);
  EXPECT_EQ(got->private_qp.qpn, 0xabcdefu);
  EXPECT_EQ(got->private_qp.psn, 0x123456u);
  EXPECT_EQ(got->private_qp.nic_id, 3);
  EXPECT_EQ(got->private_qp.remote_nic, 5);
  EXPECT_EQ(got->private_qp.rd_atomic, 16u);
  EXPECT_EQ(got->segments.at(0).slot, kPrivateSlot);
  expect_truncation_and_trailing_rejected(encode(m), decode_grant_request);
  // The ordinary path has no QP on the wire; a flag other than 0 or 1, or a QPN past 24 bits,
  // is refused.
  EXPECT_FALSE(decode_grant_request(encode(sample_request()))->private_path);
  std::string flag = encode(m);
  flag[flag.size() - 19] = 2;  // the flag precedes the 18 bytes of the QP
  expect_rejected_body(flag, decode_grant_request, "private flag 2");
  m.private_qp.qpn = 0x1000000;
  expect_rejected_body(encode(m), decode_grant_request, "a 25-bit private QPN");
}

TEST(Grant, ThePrivatePathCarriesTheSourcesQpAndIncarnation) {
  Grant m;
  m.parent = 7;
  m.grant = 8;
  m.generation = 8;
  m.nonce = 9;
  m.segments = {SegmentGrant{0x42u, 0x7f0000002000ull}};
  m.private_path = true;
  m.private_qp = QpEndpointInfo{0x77, 0x99, 1, 2, 0, 16};
  m.private_incarnation = 0x1234567890ull;
  auto got = decode_grant(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(got->private_path);
  EXPECT_EQ(got->private_qp.qpn, 0x77u);
  EXPECT_EQ(got->private_qp.dest_rd_atomic, 16u);
  EXPECT_EQ(got->private_incarnation, m.private_incarnation);
  expect_truncation_and_trailing_rejected(encode(m), decode_grant);
  m.private_path = false;
  auto plain = decode_grant(encode(m));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->private_path);
  EXPECT_EQ(plain->private_incarnation, 0u);
}

TEST(Grant, RoundTripsWithTwoSegments) {
  Grant m;
  m.parent = 0x1111;
  m.grant = 42;
  m.generation = 9;
  m.nonce = 0x5a5a5a5aa5a5a5a5ull;
  m.segments = {SegmentGrant{0x12345678u, 0x00007f0000001000ull},
                SegmentGrant{0xffffffffu, 0xffffffffffffffffull}};
  auto got = decode_grant(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->parent, m.parent);
  EXPECT_EQ(got->grant, m.grant);
  EXPECT_EQ(got->generation, m.generation);
  EXPECT_EQ(got->nonce, m.nonce);
  ASSERT_EQ(got->segments.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got->segments[i].rkey, m.segments[i].rkey) << i;
    EXPECT_EQ(got->segments[i].address, m.segments[i].address) << i;
  }
  expect_truncation_and_trailing_rejected(encode(m), decode_grant);
  Grant many = m;
  many.segments.assign(64, SegmentGrant{1, 2});
  EXPECT_TRUE(decode_grant(encode(many)).ok());
  many.segments.push_back(SegmentGrant{1, 2});
  expect_rejected_body(encode(many), decode_grant, "65 segments");
}

TEST(GrantNack, RoundTripsAndNeedsAnError) {
  GrantNack m;
  m.parent = 0xabcdef;
  m.errc = static_cast<std::uint32_t>(Errc::NotFound);
  m.cache_miss = 1;
  m.reason = "QP slot 3 incarnation 7 is not current";
  auto got = decode_grant_nack(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->parent, m.parent);
  EXPECT_EQ(got->errc, m.errc);
  EXPECT_EQ(got->cache_miss, m.cache_miss);
  EXPECT_EQ(got->reason, m.reason);
  expect_truncation_and_trailing_rejected(encode(m), decode_grant_nack);

  GrantNack bad = m;
  bad.errc = 0;
  expect_rejected_body(encode(bad), decode_grant_nack, "errc 0");
  bad.errc = 256;
  expect_rejected_body(encode(bad), decode_grant_nack, "errc 256");
  bad = m;
  bad.cache_miss = 2;
  expect_rejected_body(encode(bad), decode_grant_nack, "cache_miss 2");
}

TEST(GrantAck, RoundTrips) {
  GrantAck m;
  m.parent = 1;
  m.errc = 0;
  m.bytes = 0x123456789ull;
  m.grant = 42;
  m.generation = 9;
  m.reason = "";
  auto got = decode_grant_ack(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->parent, m.parent);
  EXPECT_EQ(got->errc, m.errc);
  EXPECT_EQ(got->bytes, m.bytes);
  EXPECT_EQ(got->grant, m.grant);
  EXPECT_EQ(got->generation, m.generation);
  EXPECT_EQ(got->reason, "");
  expect_truncation_and_trailing_rejected(encode(m), decode_grant_ack);

  m.errc = static_cast<std::uint32_t>(Errc::Protocol);
  m.reason = "receipt binding: CRC32C mismatch";
  got = decode_grant_ack(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->errc, m.errc);
  EXPECT_EQ(got->reason, m.reason);
  expect_truncation_and_trailing_rejected(encode(m), decode_grant_ack);
  m.errc = 256;
  expect_rejected_body(encode(m), decode_grant_ack, "errc 256");
}

TEST(ControlKind, EveryKindHasAName) {
  EXPECT_STREQ(control_name(1), "QpConnect");
  EXPECT_STREQ(control_name(2), "QpAccept");
  EXPECT_STREQ(control_name(3), "QpRetire");
  EXPECT_STREQ(control_name(4), "GrantRequest");
  EXPECT_STREQ(control_name(5), "Grant");
  EXPECT_STREQ(control_name(6), "GrantNack");
  EXPECT_STREQ(control_name(7), "GrantAck");
  EXPECT_STREQ(control_name(8), "FrameCredit");
  EXPECT_STREQ(control_name(9), "NicTable");
  EXPECT_STREQ(control_name(0), "unknown");
  EXPECT_STREQ(control_name(10), "GrantCancel");
  EXPECT_STREQ(control_name(11), "QpLost");
  EXPECT_STREQ(control_name(12), "unknown");
}

TEST(FrameCredit, RoundTripsAndBoundsTheCount) {
  FrameCredit m{0x1122334455667788ull, kMessageSlots / 4};
  auto got = decode_frame_credit(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->qp_incarnation, m.qp_incarnation);
  EXPECT_EQ(got->credits, m.credits);
  expect_truncation_and_trailing_rejected(encode(m), decode_frame_credit);
  // Zero, or more receives than a message QP ever posts, is a forgery.
  m.credits = 0;
  EXPECT_FALSE(decode_frame_credit(encode(m)).ok());
  m.credits = kMessageSlots + 1;
  EXPECT_FALSE(decode_frame_credit(encode(m)).ok());
}

TEST(GrantRequest, TheRendezvousOpsAreWritesToAReceiveOnly) {
  GrantRequest m;
  m.parent = 7;
  m.target = 99;
  m.op = kOpWrite | kOpToReceive;
  m.length = 0;
  auto got = decode_grant_request(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->op, kOpWrite | kOpToReceive);
  m.op = kOpRead | kOpToReceive;  // a READ of a posted receive means nothing
  EXPECT_FALSE(decode_grant_request(encode(m)).ok());
  // An announced message's write (the target names the requester's message).
  m.op = kOpWrite | kOpToReceive | kOpToMessage;
  got = decode_grant_request(encode(m));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->op, kOpWrite | kOpToReceive | kOpToMessage);
  for (std::uint8_t op :
       {std::uint8_t(kOpWrite | kOpToMessage), std::uint8_t(kOpRead | kOpToReceive | kOpToMessage),
        std::uint8_t(kOpRead | kOpToMessage)}) {
    m.op = op;
    EXPECT_FALSE(decode_grant_request(encode(m)).ok()) << "op " << int(op);
  }
}

// ------------------------------------------------------------------------------------------------
// Engine keys

TEST(EngineKey, ThirtyTwoHexDigitsAreSixteenBytes) {
  const EngineKey k = engine_key("0123456789abcdefFEDCBA9876543210");
  const EngineKey want = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                          0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
  EXPECT_EQ(k, want);
}

TEST(EngineKey, NonHexTextIsAllZeros) {
  const EngineKey zeros{};
  EXPECT_EQ(engine_key("not an engine id, not hex at all"), zeros);
  EXPECT_EQ(engine_key("0123456789abcdef0123456789abcdeg"), zeros);  // only the last digit
  EXPECT_EQ(engine_key("g123456789abcdef0123456789abcdef"), zeros);  // only the first
  EXPECT_EQ(engine_key(""), zeros);
  EXPECT_EQ(engine_key("abcd"), zeros);                               // too short
  EXPECT_EQ(engine_key("0123456789abcdef0123456789abcdef0"), zeros);  // too long
}

}  // namespace
}  // namespace orbite::rdma
