// Fuzz target: what reaches an engine on its control connections before and after the
// handshake: the 48-byte frame header (magic, version, type, payload bound), the Hello/HelloAck
// handshake body, the connect blobs it carries for shm (ring name, capacity, proof) and
// cuda_ipc (version, pid), and the cuda_ipc transport's control bodies. The first byte picks
// the decoder. An accepted input must re-encode stably.
#include <array>
#include <cstring>
#include <string_view>

#include "fuzz_target.h"
#include "p2p/control/handshake.h"
#include "p2p/cuda_ipc/wire.h"
#include "p2p/frame.h"
#include "p2p/shm/connect_blob.h"

namespace orbite::fuzz {
namespace {

enum Kind : std::uint8_t {
  kHeader,
  kHandshake,
  kAccess,
  kGrant,
  kUnmap,
  kUnmapped,
  kShmBlob,
  kIpcBlob,
  kKinds
};

std::array<std::byte, p2p::kFrameHeaderBytes> header_bytes(const p2p::FrameHeader& h) {
  std::array<std::byte, p2p::kFrameHeaderBytes> out{};
  p2p::encode_header(h, out.data());
  return out;
}

template <typename T, typename Decode>
bool stable_ipc(const Result<T>& first, const Decode& decode, const char* what) {
  if (!first.ok()) return false;
  const std::string bytes = p2p::ipc::encode(*first);
  const Result<T> second = decode(bytes);
  require(second.ok(), what);
  require(p2p::ipc::encode(*second) == bytes, what);
  return true;
}

bool run_one(std::uint8_t kind, std::string_view body) {
  namespace ipc = p2p::ipc;
  switch (kind % kKinds) {
    case kHeader: {
      if (body.size() < p2p::kFrameHeaderBytes) return false;
      const auto h = p2p::decode_header(reinterpret_cast<const std::byte*>(body.data()));
      if (!h.ok()) return false;
      const auto bytes = header_bytes(*h);
      const auto again = p2p::decode_header(bytes.data());
      require(again.ok() && header_bytes(*again) == bytes, "FrameHeader");
      return true;
    }
    case kHandshake: {
      const auto h = p2p::decode_handshake(body);
      if (!h.ok()) return false;
      const std::string bytes = p2p::encode_handshake(*h);
      const auto again = p2p::decode_handshake(bytes);
      require(again.ok() && p2p::encode_handshake(*again) == bytes, "Handshake");
      return true;
    }
    case kAccess: return stable_ipc(ipc::decode_access(body), ipc::decode_access, "IpcAccess");
    case kGrant: return stable_ipc(ipc::decode_grant(body), ipc::decode_grant, "IpcGrant");
    case kUnmap: return stable_ipc(ipc::decode_unmap(body), ipc::decode_unmap, "IpcUnmap");
    case kUnmapped:
      return stable_ipc(ipc::decode_unmapped(body), ipc::decode_unmapped, "IpcUnmapped");
    case kShmBlob: {
      const auto b = p2p::decode_shm_blob(body);
      if (!b.ok()) return false;
      require(b->name.size() <= p2p::kMaxRingName && b->name.starts_with("/orbite-"),
              "ShmConnectBlob name");
      require(b->bytes >= 4096 && (b->bytes & (b->bytes - 1)) == 0, "ShmConnectBlob capacity");
      const std::string bytes = p2p::encode_shm_blob(*b);
      require(bytes == body, "ShmConnectBlob re-encoding");
      return true;
    }
    case kIpcBlob: {
      const auto pid = ipc::decode_blob(body);
      if (!pid.ok()) return false;
      require(ipc::encode_blob(*pid) == body, "cuda_ipc connect blob re-encoding");
      return true;
    }
    default: return false;
  }
}

std::string with_kind(Kind k, std::string_view body) {
  std::string s(1, static_cast<char>(k));
  s.append(body);
  return s;
}

}  // namespace

std::vector<std::string> seeds() {
  namespace ipc = p2p::ipc;
  std::vector<std::string> out;
  p2p::FrameHeader h;
  h.type = p2p::FrameType::Rts;
  h.payload_len = 28;
  h.id = 7;
  h.a = 1;
  const auto hb = header_bytes(h);
  out.push_back(
      with_kind(kHeader, std::string_view(reinterpret_cast<const char*>(hb.data()), hb.size())));
  p2p::Handshake hs;
  hs.engine_id = "0123456789abcdef0123456789abcdef";
  hs.host_id = "host-a";
  hs.pid = 4242;
  hs.eager_credit = 4 << 20;
  hs.transports = {p2p::ConnectBlob{p2p::TransportId::Tcp, ""},
                   p2p::ConnectBlob{p2p::TransportId::Shm, std::string(24, 'x')}};
  out.push_back(with_kind(kHandshake, p2p::encode_handshake(hs)));
  ipc::IpcAccess a;
  a.token = 1;
  a.region = 2;
  a.length = 4096;
  out.push_back(with_kind(kAccess, ipc::encode(a)));
  ipc::IpcGrant g;
  g.token = 1;
  g.region = 2;
  g.reason = "";
  out.push_back(with_kind(kGrant, ipc::encode(g)));
  ipc::IpcUnmap u;
  u.region = 2;
  out.push_back(with_kind(kUnmap, ipc::encode(u)));
  ipc::IpcUnmapped d;
  d.region = 2;
  d.errc = 1;
  d.reason = "busy";
  out.push_back(with_kind(kUnmapped, ipc::encode(d)));
  out.push_back(with_kind(kShmBlob, p2p::encode_shm_blob(p2p::ShmConnectBlob{
                                        "/orbite-4242-1-a", 1 << 20, 3, std::string(16, 'n')})));
  out.push_back(with_kind(kIpcBlob, ipc::encode_blob(4242)));
  return out;
}

}  // namespace orbite::fuzz

bool orbite::fuzz::accepts(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return false;
  return run_one(data[0], std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
}
