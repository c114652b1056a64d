// Wire format of the TCP store. Every frame is a 16-byte header followed by `payload_len` bytes:
//
//   u32 magic 'ORBS' | u8 version | u8 op | u16 flags (0) | u32 request_id | u32 payload_len
//
// all little-endian. Replies echo the request id with op | 0x80 and start their payload with a
// u8 status (an Errc value); an error reply carries a message, a success reply the op's result.
// The first request on a connection must be Hello with the shared token. Every length is checked
// against the limits below before anything is allocated or read.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orbite::store_protocol {

inline constexpr std::uint32_t kMagic = 0x5342524f;  // "ORBS" in little-endian order
inline constexpr std::uint8_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxKeysPerRequest = 65536;
// Room for keys and framing on top of the configured value limit.
inline constexpr size_t kFrameOverhead = 64 * 1024;
// The largest payload a connection may announce before its hello succeeded: a hello (the token,
// a length-prefixed string of at most kMaxKeyBytes). Anything larger is refused at its header,
// so that an unauthenticated peer cannot make the server allocate a value-sized buffer.
inline constexpr size_t kMaxHelloPayload = 4 + kMaxKeyBytes;

enum class Op : std::uint8_t {
  Hello = 1,
  Set = 2,
  Get = 3,
  Wait = 4,
  Check = 5,
  Add = 6,
  CompareSet = 7,
  Erase = 8,
};
inline constexpr std::uint8_t kReplyBit = 0x80;

struct Header {
  std::uint8_t version = kVersion;
  std::uint8_t op = 0;
  std::uint16_t flags = 0;
  std::uint32_t request_id = 0;
  std::uint32_t payload_len = 0;
};

void encode_header(std::string& out, const Header& h);
// Validates magic, version, flags and the payload length against `max_payload`. The error says
// which field was wrong and its value.
Result<Header> decode_header(std::string_view bytes, size_t max_payload);

bool is_request_op(std::uint8_t op);
std::string_view op_name(std::uint8_t op);

// A decoded request. Which fields are meaningful depends on the op.
struct Request {
  Op op = Op::Hello;
  std::string key;
  std::string value;              // Set: value; CompareSet: expected; Hello: token
  std::string desired;            // CompareSet
  std::vector<std::string> keys;  // Wait, Check
  std::int64_t delta = 0;         // Add
  std::uint64_t timeout_ms = 0;   // Get, Wait
};

std::string encode_request(std::uint32_t request_id, const Request& req);
// Same, replacing the contents of `out` (whose capacity is reused across requests).
void encode_request_into(std::string& out, std::uint32_t request_id, const Request& req);
Result<Request> decode_request(std::uint8_t op, std::string_view payload);

// Reply payloads.
std::string encode_error_reply(std::uint32_t request_id, std::uint8_t op, Errc code,
                               std::string_view message);
std::string encode_ok_reply(std::uint32_t request_id, std::uint8_t op, std::string_view result);

}  // namespace orbite::store_protocol
