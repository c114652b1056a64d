#include "p2p/cuda_ipc/wire.h"

#include "common/wire.h"

namespace orbite::p2p::ipc {

namespace {

constexpr std::size_t kMaxReason = 1024;

Status bad(const char* what, std::string_view body) {
  return Status::error(Errc::Protocol, std::string("cuda_ipc: malformed ") + what + " (" +
                                           std::to_string(body.size()) + " bytes)");
}

bool valid_errc(std::uint32_t e) {
  return e <= static_cast<std::uint32_t>(Errc::Internal);
}

}  // namespace

const char* kind_name(std::uint64_t kind) {
  switch (kind) {
    case 1: return "IpcAccess";
    case 2: return "IpcGrant";
    case 3: return "IpcUnmap";
    case 4: return "IpcUnmapped";
    default: return "an unknown message";
  }
}

std::string encode(const IpcAccess& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.token);
  w.put(m.region);
  w.put(m.generation);
  w.put(m.offset);
  w.put(m.length);
  w.put(static_cast<std::uint8_t>(m.write ? 1 : 0));
  return out;
}

Result<IpcAccess> decode_access(std::string_view body) {
  wire::Reader r(body);
  IpcAccess m;
  m.token = r.get<std::uint64_t>();
  m.region = r.get<std::uint64_t>();
  m.generation = r.get<std::uint64_t>();
  m.offset = r.get<std::uint64_t>();
  m.length = r.get<std::uint64_t>();
  const auto w = r.get<std::uint8_t>();
  if (!r.done() || w > 1) return bad("IpcAccess", body);
  m.write = w == 1;
  return m;
}

std::string encode(const IpcGrant& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.token);
  w.put(m.errc);
  if (m.errc != 0) {
    w.put_bytes(m.reason.substr(0, kMaxReason));
    return out;
  }
  w.put(m.region);
  for (std::uint8_t b : m.handle.bytes) w.put(b);
  w.put(m.alloc_offset);
  return out;
}

Result<IpcGrant> decode_grant(std::string_view body) {
  wire::Reader r(body);
  IpcGrant m;
  m.token = r.get<std::uint64_t>();
  m.errc = r.get<std::uint32_t>();
  if (m.errc != 0) {
    m.reason = std::string(r.get_bytes(kMaxReason));
  } else {
    m.region = r.get<std::uint64_t>();
    for (std::uint8_t& b : m.handle.bytes) b = r.get<std::uint8_t>();
    m.alloc_offset = r.get<std::uint64_t>();
  }
  if (!r.done() || !valid_errc(m.errc)) return bad("IpcGrant", body);
  return m;
}

std::string encode(const IpcUnmap& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.region);
  return out;
}

Result<IpcUnmap> decode_unmap(std::string_view body) {
  wire::Reader r(body);
  IpcUnmap m;
  m.region = r.get<std::uint64_t>();
  if (!r.done()) return bad("IpcUnmap", body);
  return m;
}

std::string encode(const IpcUnmapped& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.region);
  w.put(m.errc);
  w.put_bytes(m.reason.substr(0, kMaxReason));
  return out;
}

Result<IpcUnmapped> decode_unmapped(std::string_view body) {
  wire::Reader r(body);
  IpcUnmapped m;
  m.region = r.get<std::uint64_t>();
  m.errc = r.get<std::uint32_t>();
  m.reason = std::string(r.get_bytes(kMaxReason));
  if (!r.done() || !valid_errc(m.errc)) return bad("IpcUnmapped", body);
  return m;
}

std::string encode_blob(std::uint64_t pid) {
  std::string out;
  wire::Writer w(out);
  w.put(kIpcWireVersion);
  w.put(pid);
  return out;
}

Result<std::uint64_t> decode_blob(std::string_view blob) {
  wire::Reader r(blob);
  const auto version = r.get<std::uint8_t>();
  const auto pid = r.get<std::uint64_t>();
  if (!r.done()) return bad("connect blob", blob);
  if (version != kIpcWireVersion) {
    return Status::error(Errc::Protocol, "cuda_ipc: the peer speaks version " +
                                             std::to_string(version) + ", this engine " +
                                             std::to_string(kIpcWireVersion));
  }
  return pid;
}

}  // namespace orbite::p2p::ipc
