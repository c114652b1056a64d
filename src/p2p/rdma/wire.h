// The RDMA transport's messages: the connect blob of the handshake (RdmaInfo), the control
// messages that travel as TransportControl frames on the control connection (kind = ControlKind),
// and the 141-byte binding that every receipt (SEND_WITH_INV) carries. Layouts are in
// docs/rdma.md; every decoder bounds every field and rejects trailing bytes.
#pragma once

#include <orbite/status.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace orbite::rdma {

using EngineKey = std::array<std::uint8_t, 16>;  // a 128-bit engine ID, raw
// The engine ID's 32 hex digits as raw bytes (all zeros unless the text is exactly 32 hex
// digits).
EngineKey engine_key(std::string_view hex_id);

// One NIC as the peer needs it to build an RC connection to it.
struct NicRecord {
  std::uint8_t nic_id = 0;
  std::string name;
  std::uint8_t active = 0;  // 1: the route is usable now
  std::uint8_t port = 1;
  std::uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  std::uint8_t mtu = 0;         // ibv_mtu
  std::uint16_t lid = 0;
  std::uint8_t gid_index = 0;
  std::array<std::uint8_t, 16> gid{};
  std::uint64_t route_generation = 0;
};

inline constexpr std::size_t kMaxNics = 64;

// The connect blob's version: the control messages' layouts it implies. 2 added the
// GrantRequest's priority and deadline and the GrantCancel; 3 the private grant path (a
// GrantRequest's and a Grant's private QP); 4 the blob's frame payload (rdma.eager_limit); 5 the
// QpLost message (an older peer would fail the link on its unknown kind); 6 the GrantRequest's
// kOpToMessage. An engine refuses any other.
inline constexpr std::uint8_t kRdmaWireVersion = 6;

// The connect blob each side puts in the handshake (one per link).
struct RdmaInfo {
  std::uint8_t version = kRdmaWireVersion;
  EngineKey engine{};
  std::uint64_t rdma_incarnation = 0;
  std::uint64_t link_incarnation = 0;  // the sender's number for this link
  std::uint32_t lanes = 1;
  // The payload bytes of the sender's frame receives (its rdma.eager_limit): frames to it carry
  // at most this much, in [kMinFramePayload, kMaxFramePayload].
  std::uint32_t frame_payload = 0;
  std::vector<NicRecord> nics;
};
std::string encode(const RdmaInfo& info);
Result<RdmaInfo> decode_info(std::string_view blob);

// TransportControl kinds of the RDMA transport (header field b).
enum class ControlKind : std::uint8_t {
  QpConnect = 1,
  QpAccept = 2,
  QpRetire = 3,
  GrantRequest = 4,
  Grant = 5,
  GrantNack = 6,
  GrantAck = 7,
  FrameCredit = 8,
  // The sender's NIC table again (an RdmaInfo of the same engine, incarnations and link), sent to
  // every peer when one of its contexts pauses or resumes: the peer's rail map follows it.
  NicTable = 9,
  // Requester -> source: release a grant whose payload never started (its deadline passed while
  // it waited for the Grant); the source revokes it and answers with a GrantAck.
  GrantCancel = 10,
  // Source -> requester: the source-role end of the requester's QP is gone (its CQ set was
  // replaced after its polls kept failing); the requester drops its end.
  QpLost = 11,
};
const char* control_name(std::uint64_t kind);

struct QpEndpointInfo {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::uint8_t nic_id = 0;      // the sender's context
  std::uint8_t remote_nic = 0;  // the receiver's context it connects to
  std::uint32_t rd_atomic = 0;  // the sender's applied READ depths
  std::uint32_t dest_rd_atomic = 0;
};

// Requester -> source: build the source-role end of slot `slot`.
struct QpConnect {
  std::uint64_t builder = 0;  // the requester's id for this build
  std::uint32_t slot = 0;
  std::uint64_t qp_incarnation = 0;  // the requester's generation of the slot
  QpEndpointInfo qp;
};
// Source -> requester: the source-role end exists (errc 0), or why not.
struct QpAccept {
  std::uint64_t builder = 0;
  std::uint32_t errc = 0;
  std::uint64_t qp_incarnation = 0;  // the source's generation of its end
  QpEndpointInfo qp;
  std::string reason;
};
struct QpRetire {
  std::uint32_t slot = 0;
  std::uint64_t qp_incarnation = 0;  // the source's
};
struct QpLost {
  std::uint32_t slot = 0;
  std::uint64_t qp_incarnation = 0;  // the requester's (as its QpConnect named it)
  // The message slot: how many of the requester's frames the lost end had taken. A frame the
  // requester saw complete beyond that count is lost, and the link fails with it.
  std::uint64_t frames = 0;
};

// The frames of send/recv travel as SENDs on one QP per direction and peer, slot kMessageSlot
// (never a grant's). Its receiving end keeps kMessageSlots receives posted, each of a frame
// header and its RdmaInfo::frame_payload bytes; the sender starts with that many credits and gets
// them back in FrameCredit messages.
inline constexpr std::uint32_t kMessageSlot = 1023;
// The slot a private grant's one segment names (device memory of the source: a QP pair of its own
// per grant, see PrivateQp below); never a slot of the requester's QP arrays.
inline constexpr std::uint32_t kPrivateSlot = 1022;
inline constexpr std::uint32_t kMessageSlots = 32;
inline constexpr std::uint32_t kMinFramePayload = 4096;        // a control frame fits
inline constexpr std::uint32_t kMaxFramePayload = 256 * 1024;  // rdma.eager_limit's bound
inline constexpr std::uint32_t kFrameHeaderBytes = 48;
struct FrameCredit {
  std::uint64_t qp_incarnation = 0;  // the requester's QP (as its QpConnect named it)
  std::uint32_t credits = 0;
};

inline constexpr std::uint8_t kOpRead = 1;
inline constexpr std::uint8_t kOpWrite = 2;
// With kOpWrite: the target is a posted receive of the source (send/recv rendezvous), not a
// registered region; target_id is the receive's request id and target_generation 0.
inline constexpr std::uint8_t kOpToReceive = 0x80;
// With kOpWrite | kOpToReceive: target_id is the requester's wire id of a message it announced
// as RtsRma, and the source writes into whatever receive matched it (or waits for the match).
inline constexpr std::uint8_t kOpToMessage = 0x40;
inline constexpr bool valid_wire_op(std::uint8_t op) {
  return op == kOpRead || op == kOpWrite || op == (kOpWrite | kOpToReceive) ||
         op == (kOpWrite | kOpToReceive | kOpToMessage);
}
inline constexpr std::size_t kMaxSegments = 64;
// At most this many of one requester's GrantRequests go unanswered (no Grant or GrantNack yet)
// on a link: its lane holds further parents back, so the source's queue of deferred requests
// from one peer stays within it, and a peer that exceeds it breaks the protocol.
inline constexpr std::size_t kMaxPendingGrantRequests = 256;

struct SegmentRequest {
  std::uint8_t first_slice = 0;
  std::uint8_t slices = 0;
  std::uint32_t slot = 0;
  std::uint64_t offset = 0;  // in the target region
  std::uint64_t length = 0;
  std::uint64_t qp_incarnation = 0;  // the source's generation of the slot's QP
  std::uint32_t requester_qpn = 0;
};
struct GrantRequest {
  std::uint64_t parent = 0;
  std::uint64_t target = 0;
  std::uint64_t target_generation = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint8_t op = 0;
  std::uint8_t slices = 0;
  std::uint64_t link_incarnation = 0;  // the source's number for this link, echoed
  std::vector<SegmentRequest> segments;
  // The requester's tier (Priority: 0 High, 1 Medium, 2 Low): the source runs its deferred
  // requests in tier order. And its deadline as time left when sent, in microseconds (0: none):
  // the source answers Timeout, granting nothing, to one still waiting when it passes.
  std::uint8_t priority = 0;
  std::uint64_t deadline_us = 0;
  // The private grant path (device memory at the source): the requester's QP for this grant
  // alone, in INIT, which the source connects its own private QP to. Its one segment names
  // kPrivateSlot and this QP's number.
  bool private_path = false;
  QpEndpointInfo private_qp;
  // Not on the wire: deadline_us in the receiver's steady clock, set when the request arrived.
  std::chrono::steady_clock::time_point local_deadline =
      std::chrono::steady_clock::time_point::max();
  bool deferred = false;  // not on the wire: it waited at the source before
  // Not on the wire: when it arrived here (a kOpToMessage request waits at most
  // kAnnouncementBound for its message's announcement).
  std::chrono::steady_clock::time_point arrived{};
  // Not on the wire: it waits for the receive its message will match (kOpToMessage), which
  // may never be posted, so it keeps no engine busy.
  bool awaits_receive = false;
  // Not on the wire: it waits for receipt slots or SQ room on its connections (retry_deferred
  // looks at exactly that before answering it again).
  bool awaits_room = false;
  // Not on the wire: it waits for the grant budgets, which this peer's own grants hold.
  bool awaits_own = false;
};
struct GrantCancel {
  std::uint64_t parent = 0;
  std::uint64_t grant = 0;
  std::uint64_t generation = 0;
};
struct SegmentGrant {
  std::uint32_t rkey = 0;
  std::uint64_t address = 0;
};
struct Grant {
  std::uint64_t parent = 0;
  std::uint64_t grant = 0;
  std::uint64_t generation = 0;
  std::uint64_t nonce = 0;
  std::vector<SegmentGrant> segments;
  // The private grant path: the source's QP (in the grant's own PD, connected to the requester's
  // private QP) and its incarnation, which the receipt's binding names.
  bool private_path = false;
  QpEndpointInfo private_qp;
  std::uint64_t private_incarnation = 0;
};
struct GrantNack {
  std::uint64_t parent = 0;
  std::uint32_t errc = 0;
  std::uint8_t cache_miss = 0;
  std::string reason;
};
struct GrantAck {
  std::uint64_t parent = 0;
  std::uint32_t errc = 0;
  std::uint64_t bytes = 0;
  std::uint64_t grant = 0;
  std::uint64_t generation = 0;
  std::string reason;
};

std::string encode(const QpConnect& m);
std::string encode(const QpAccept& m);
std::string encode(const QpRetire& m);
std::string encode(const GrantRequest& m);
std::string encode(const Grant& m);
std::string encode(const GrantNack& m);
std::string encode(const GrantAck& m);
std::string encode(const FrameCredit& m);
std::string encode(const GrantCancel& m);
Result<GrantCancel> decode_grant_cancel(std::string_view body);
Result<QpConnect> decode_qp_connect(std::string_view body);
Result<QpAccept> decode_qp_accept(std::string_view body);
Result<QpRetire> decode_qp_retire(std::string_view body);
std::string encode(const QpLost& m);
Result<QpLost> decode_qp_lost(std::string_view body);
Result<GrantRequest> decode_grant_request(std::string_view body);
// The segments tile [offset, offset + length) exactly, in order, each inside it, with the slices
// counted once; no sum can wrap (a peer's lengths are not trusted). Protocol naming the segment.
Status check_tiling(const GrantRequest& m);
Result<Grant> decode_grant(std::string_view body);
Result<GrantNack> decode_grant_nack(std::string_view body);
Result<GrantAck> decode_grant_ack(std::string_view body);
Result<FrameCredit> decode_frame_credit(std::string_view body);

// The body of a receipt: exactly 141 bytes, little-endian, CRC32C over bytes [0, 137).
inline constexpr std::size_t kBindingBytes = 141;
inline constexpr std::uint32_t kBindingMagic = 0x444E424F;  // "OBND"
struct Binding {
  std::uint8_t version = 1;
  std::uint8_t op = 0;
  std::uint8_t first_slice = 0;
  std::uint8_t slice_count = 0;
  EngineKey source_engine{};
  EngineKey requester_engine{};
  std::uint64_t link_incarnation = 0;
  std::uint64_t qp_incarnation = 0;
  std::uint64_t grant_id = 0;
  std::uint64_t grant_generation = 0;
  std::uint64_t grant_nonce = 0;
  std::uint64_t request_id = 0;
  std::uint64_t target_id = 0;
  std::uint64_t target_generation = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint32_t rkey = 0;
  std::uint32_t source_qpn = 0;
  std::uint32_t requester_qpn = 0;
  std::uint32_t payload_wrs = 0;
  std::uint8_t status = 0;  // 0 payload complete; 1 released without payload
  bool operator==(const Binding&) const = default;
};
std::array<std::uint8_t, kBindingBytes> encode(const Binding& b);
// Magic, version, field ranges and the CRC; the caller compares the fields with its grant.
Result<Binding> decode_binding(const std::uint8_t* bytes, std::size_t length);
// The first field of `got` that differs from `want`, or empty when they are equal.
std::string binding_mismatch(const Binding& want, const Binding& got);

// CRC32C (Castagnoli), as iSCSI and RDMA's own ICRC families use.
std::uint32_t crc32c(const std::uint8_t* data, std::size_t length);

}  // namespace orbite::rdma
