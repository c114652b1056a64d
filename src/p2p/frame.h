// The control channel's frame: a fixed 48-byte little-endian header, then payload_len bytes.
// The same frames travel on TCP streams and through shared-memory rings. A receiver checks the
// magic, version, type and every length before it uses a field; a frame that fails is a protocol
// error that closes that peer's connection.
#pragma once

#include <orbite/status.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace orbite::p2p {

// Version 2: the handshake carries a list of {transport id, connect blob} (and joins), and tcp
// data travels on streams of its own. Version 3: staging (StageOpen ... Exposed) and the exposed
// rendezvous (an Rts with a payload). Version 4: the exposure word's kExposedDevice bit. Version
// 5: the shm connect blob's proof nonce (p2p/shm/peer_proof.h). Version 6: RtsRma and Abandon
// (a rendezvous whose write's request travels beside its announcement). Version 7: Notify. A
// peer of another version fails the handshake.
inline constexpr std::uint8_t kFrameVersion = 7;
inline constexpr std::size_t kFrameHeaderBytes = 48;
// The largest payload one frame may carry: bulk data is chunked into frames of at most this size.
inline constexpr std::uint32_t kMaxFramePayload = 16u << 20;
// Text payloads (errors, handshakes) are much smaller.
inline constexpr std::uint32_t kMaxControlPayload = 4096;
// Rendezvous announcements (Rts) a receiver keeps unmatched per peer; one more is a protocol error
// that fails the link (eager messages are bounded by credit instead). 64 Ki entries of about
// 150 bytes: a peer cannot grow a receiver's queue without bound.
inline constexpr std::size_t kMaxUnexpectedRts = std::size_t{1} << 16;

enum class FrameType : std::uint8_t {
  Hello = 1,       // payload: Handshake; opens a connection (or adds a stream to one)
  HelloAck = 2,    // payload: Handshake; the acceptor keeps this connection
  HelloNack = 3,   // the acceptor keeps the connection it opened itself; close this one
  Eager = 4,       // id: sender request; a: comm<<32|tag; b: seq; c: length; payload: message
  Rts = 5,         // id: sender request; a: comm<<32|tag; b: seq; c: length; d: sender address;
                   // payload: none, or (exposed) the sender's region: u64 id, u64 generation,
                   // u32 transports that carry it staged, u64 its staging chunk
  Cts = 6,         // id: sender request; a: receiver request; b: length; send [c, c+d) as
                   // Data (d = 0: from c to the end)
  Fin = 7,         // id: sender request; b: bytes the receiver copied from the sender's memory
  Reject = 8,      // id: sender request; a: Errc; payload: reason (truncation at the receiver)
  Data = 9,        // id: target request; a: target kind; b: offset; payload: bytes
  Put = 10,        // id: requester request; a: region; b: generation; c: offset; d: length;
                   // payload: the requester's 8-byte address for single copy, or none
  Get = 11,        // same fields as Put; payload: 8-byte requester address for single copy
  Ack = 12,        // id: requester request; a: Errc; b: bytes; payload: reason
  Credit = 13,     // a: eager bytes returned to the sender
  Doorbell = 14,   // wakes a sleeping worker; no fields
  Bye = 15,        // the sender is closing its engine: the coming end of stream is orderly
  Share = 16,      // id: sender request; a: receiver request; b: split; c: length; payload: the
                   // receiver's 8-byte address: the sender copies [split, length) itself
  ShareDone = 17,  // id: receiver request; a: Errc; b: bytes the sender copied
  // On the control connection, for one transport: a: transport id; b: that transport's message
  // kind; payload: its body (tcp: "open your data streams"; later RDMA's grants).
  TransportControl = 18,
  // Remote staging of one chunk of a region the transport carries staged (docs/protocol.md):
  StageOpen = 19,   // id: stage id; a: region; b: generation; c: offset; d: length;
                    // payload: 1 byte, 1 for a write (put) and 0 for a read (get)
  StageReady = 20,  // id: stage id; a: Errc (0: ready); b: window region; c: its generation;
                    // payload: reason
  StageClose = 21,  // id: stage id; a: 1 to commit the window's bytes to the region, else 0
  StageDone = 22,   // id: stage id; a: Errc; payload: reason
  // The exposed rendezvous: the receiver reads the sender's buffer as a region.
  ExposeRequest = 23,  // id: sender request; a: receiver request
  Exposed = 24,        // id: receiver request; a: region; b: generation; c: staged transports;
                       // d: the sender's staging chunk
  // A rendezvous over a transport that runs it itself (RDMA): the sender's request for the
  // write into the matched receive (its GrantRequest, naming this id) goes out beside the
  // announcement, so the receiver sends no Cts. Fields as Rts, with d = 0 and no payload.
  RtsRma = 25,
  // id: the sender request of an RtsRma; a: Errc; payload: reason. Its write failed or never
  // started: the matched receive fails with the reason, and no request for it will come.
  Abandon = 26,
  // id: requester request; payload: a notification (at most kMaxNotificationBytes) for the
  // engine's application, sent once the request's put or get ended (or alone: notify()). The
  // receiver answers with an Ack (a: Errc, b: 0).
  Notify = 27,
};
inline constexpr std::uint8_t kMaxFrameType = 27;
// The payload of an exposed Rts: region, generation, staged transports, the sender's chunk.
inline constexpr std::uint32_t kExposedRtsBytes = 28;
// In an exposure's "staged transports" word (the Rts payload, Exposed's c): bits 0-15, the
// transports that carry the region staged; bit kExposedNativeShift + i, transport i publishes it
// natively besides the one the messages travel on (cuda_ipc for a device buffer on one host).
inline constexpr unsigned kExposedNativeShift = 16;
// And bit 31: the exposed buffer is device memory. A read of it on a transport that publishes it
// natively must say so (RDMA grants device memory on the private grant path only).
inline constexpr std::uint32_t kExposedDevice = 1u << 31;

// Where a Data frame's bytes land on the receiver.
enum class DataTarget : std::uint64_t { Recv = 1, PutSession = 2, GetReply = 3 };

struct FrameHeader {
  FrameType type = FrameType::Doorbell;
  std::uint32_t payload_len = 0;
  std::uint64_t id = 0;
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  std::uint64_t c = 0;
  std::uint64_t d = 0;
};

void encode_header(const FrameHeader& h, std::byte* out);
// Checks magic, version, type and the payload bound of the type.
Result<FrameHeader> decode_header(const std::byte* in);
const char* frame_type_name(FrameType t);

inline std::uint64_t pack_comm_tag(std::uint32_t comm, std::int32_t tag) {
  return (static_cast<std::uint64_t>(comm) << 32) | static_cast<std::uint32_t>(tag);
}

// An Errc a peer sent; anything out of range reads as Internal.
Errc errc_from_wire(std::uint64_t v);

// An 8-byte little-endian address, as single-copy frames carry it.
inline std::string addr_bytes(std::uint64_t addr) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((addr >> (8 * i)) & 0xff);
  return out;
}
inline std::uint64_t addr_from(std::string_view body) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8 && i < body.size(); ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(body[i])) << (8 * i);
  }
  return v;
}

}  // namespace orbite::p2p
