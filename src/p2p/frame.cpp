#include "p2p/frame.h"

#include <bit>
#include <cstdio>
#include <cstring>

#include "common/wire.h"

namespace orbite::p2p {
namespace {

constexpr std::uint8_t kMagic0 = 'O';
constexpr std::uint8_t kMagic1 = 'F';

// Every frame is encoded and decoded once per message: on a little-endian host a field is one
// move (the byte loops cost a few hundred instructions per header).
void put_u64(std::byte* out, std::uint64_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out, &v, 8);
  } else {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  }
}
std::uint64_t get_u64(const std::byte* in) {
  std::uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, in, 8);
  } else {
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  }
  return v;
}
void put_u32(std::byte* out, std::uint32_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out, &v, 4);
  } else {
    for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  }
}
std::uint32_t get_u32(const std::byte* in) {
  std::uint32_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, in, 4);
  } else {
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(in[i]) << (8 * i);
  }
  return v;
}

// Types whose payload is bulk data; every other type carries a small control payload.
bool carries_bulk(FrameType t) {
  return t == FrameType::Eager || t == FrameType::Data;
}

}  // namespace

void encode_header(const FrameHeader& h, std::byte* out) {
  out[0] = static_cast<std::byte>(kMagic0);
  out[1] = static_cast<std::byte>(kMagic1);
  out[2] = static_cast<std::byte>(kFrameVersion);
  out[3] = static_cast<std::byte>(h.type);
  put_u32(out + 4, h.payload_len);
  put_u64(out + 8, h.id);
  put_u64(out + 16, h.a);
  put_u64(out + 24, h.b);
  put_u64(out + 32, h.c);
  put_u64(out + 40, h.d);
}

Result<FrameHeader> decode_header(const std::byte* in) {
  auto u8 = [&](int i) { return static_cast<std::uint8_t>(in[i]); };
  if (u8(0) != kMagic0 || u8(1) != kMagic1) {
    char magic[16];
    std::snprintf(magic, sizeof(magic), "%02x %02x", u8(0), u8(1));
    return Status::error(Errc::Protocol, std::string("frame magic bytes ") + magic +
                                             " are not an OrbiTE frame's (4f 46)");
  }
  if (u8(2) != kFrameVersion) {
    return Status::error(Errc::Protocol, "frame version " + std::to_string(u8(2)) +
                                             ", this engine speaks " +
                                             std::to_string(kFrameVersion));
  }
  if (u8(3) == 0 || u8(3) > kMaxFrameType) {
    return Status::error(Errc::Protocol, "frame type " + std::to_string(u8(3)) + " is unknown");
  }
  FrameHeader h;
  h.type = static_cast<FrameType>(u8(3));
  h.payload_len = get_u32(in + 4);
  const std::uint32_t bound = carries_bulk(h.type) ? kMaxFramePayload : kMaxControlPayload;
  if (h.payload_len > bound) {
    return Status::error(Errc::Protocol, std::string(frame_type_name(h.type)) +
                                             " frame payload_len " + std::to_string(h.payload_len) +
                                             " exceeds " + std::to_string(bound));
  }
  h.id = get_u64(in + 8);
  h.a = get_u64(in + 16);
  h.b = get_u64(in + 24);
  h.c = get_u64(in + 32);
  h.d = get_u64(in + 40);
  return h;
}

const char* frame_type_name(FrameType t) {
  switch (t) {
    case FrameType::Hello: return "Hello";
    case FrameType::HelloAck: return "HelloAck";
    case FrameType::HelloNack: return "HelloNack";
    case FrameType::Eager: return "Eager";
    case FrameType::Rts: return "Rts";
    case FrameType::Cts: return "Cts";
    case FrameType::Fin: return "Fin";
    case FrameType::Reject: return "Reject";
    case FrameType::Data: return "Data";
    case FrameType::Put: return "Put";
    case FrameType::Get: return "Get";
    case FrameType::Ack: return "Ack";
    case FrameType::Credit: return "Credit";
    case FrameType::Doorbell: return "Doorbell";
    case FrameType::Bye: return "Bye";
    case FrameType::Share: return "Share";
    case FrameType::ShareDone: return "ShareDone";
    case FrameType::TransportControl: return "TransportControl";
    case FrameType::StageOpen: return "StageOpen";
    case FrameType::StageReady: return "StageReady";
    case FrameType::StageClose: return "StageClose";
    case FrameType::StageDone: return "StageDone";
    case FrameType::ExposeRequest: return "ExposeRequest";
    case FrameType::Exposed: return "Exposed";
    case FrameType::RtsRma: return "RtsRma";
    case FrameType::Abandon: return "Abandon";
    case FrameType::Notify: return "Notify";
  }
  return "?";
}

}  // namespace orbite::p2p
