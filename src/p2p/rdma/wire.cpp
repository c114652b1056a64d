#include "p2p/rdma/wire.h"

#include <limits>
#include <string>

#include "common/wire.h"

namespace orbite::rdma {

namespace {

constexpr std::size_t kMaxName = 64;
constexpr std::size_t kMaxReason = 1024;

Status bad(const char* what, std::string_view body) {
  return Status::error(Errc::Protocol, std::string("RDMA ") + what + " of " +
                                           std::to_string(body.size()) +
                                           " bytes is malformed or has trailing bytes");
}

template <std::size_t N>
void put_raw(wire::Writer& w, const std::array<std::uint8_t, N>& a) {
  for (std::uint8_t b : a) w.put<std::uint8_t>(b);
}
template <std::size_t N>
void get_raw(wire::Reader& r, std::array<std::uint8_t, N>& a) {
  for (auto& b : a) b = r.get<std::uint8_t>();
}

void put_qp(wire::Writer& w, const QpEndpointInfo& q) {
  w.put(q.qpn);
  w.put(q.psn);
  w.put(q.nic_id);
  w.put(q.remote_nic);
  w.put(q.rd_atomic);
  w.put(q.dest_rd_atomic);
}
void get_qp(wire::Reader& r, QpEndpointInfo& q) {
  q.qpn = r.get<std::uint32_t>();
  q.psn = r.get<std::uint32_t>();
  q.nic_id = r.get<std::uint8_t>();
  q.remote_nic = r.get<std::uint8_t>();
  q.rd_atomic = r.get<std::uint32_t>();
  q.dest_rd_atomic = r.get<std::uint32_t>();
  // QPNs are 24 bits, PSNs 24 bits.
  if (q.qpn > 0xffffff || q.psn > 0xffffff || q.nic_id >= kMaxNics || q.remote_nic >= kMaxNics)
    r.fail();
}

// Little-endian helpers over a fixed byte array (the binding is not length-prefixed).
template <class T>
void store(std::uint8_t* at, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) at[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
template <class T>
T load(const std::uint8_t* at) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(at[i]) << (8 * i));
  return v;
}

}  // namespace

EngineKey engine_key(std::string_view hex) {
  EngineKey k{};
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() != 2 * k.size()) return k;
  for (std::size_t i = 0; i < k.size(); ++i) {
    const int hi = nib(hex[2 * i]);
    const int lo = nib(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return EngineKey{};
    k[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return k;
}

const char* control_name(std::uint64_t kind) {
  switch (static_cast<ControlKind>(kind)) {
    case ControlKind::QpConnect: return "QpConnect";
    case ControlKind::QpAccept: return "QpAccept";
    case ControlKind::QpRetire: return "QpRetire";
    case ControlKind::GrantRequest: return "GrantRequest";
    case ControlKind::Grant: return "Grant";
    case ControlKind::GrantNack: return "GrantNack";
    case ControlKind::GrantAck: return "GrantAck";
    case ControlKind::FrameCredit: return "FrameCredit";
    case ControlKind::NicTable: return "NicTable";
    case ControlKind::GrantCancel: return "GrantCancel";
    case ControlKind::QpLost: return "QpLost";
  }
  return "unknown";
}

std::string encode(const RdmaInfo& info) {
  std::string out;
  wire::Writer w(out);
  w.put(info.version);
  put_raw(w, info.engine);
  w.put(info.rdma_incarnation);
  w.put(info.link_incarnation);
  w.put(info.lanes);
  w.put(info.frame_payload);
  w.put(static_cast<std::uint8_t>(info.nics.size()));
  for (const NicRecord& n : info.nics) {
    w.put(n.nic_id);
    w.put_bytes(n.name);
    w.put(n.active);
    w.put(n.port);
    w.put(n.link_layer);
    w.put(n.mtu);
    w.put(n.lid);
    w.put(n.gid_index);
    put_raw(w, n.gid);
    w.put(n.route_generation);
  }
  return out;
}

Result<RdmaInfo> decode_info(std::string_view blob) {
  wire::Reader r(blob);
  RdmaInfo info;
  info.version = r.get<std::uint8_t>();
  get_raw(r, info.engine);
  info.rdma_incarnation = r.get<std::uint64_t>();
  info.link_incarnation = r.get<std::uint64_t>();
  info.lanes = r.get<std::uint32_t>();
  info.frame_payload = r.get<std::uint32_t>();
  const auto n = r.get<std::uint8_t>();
  if (r.ok() && info.version != kRdmaWireVersion) {
    return Status::error(Errc::Protocol,
                         "RDMA connect blob of wire version " + std::to_string(info.version) +
                             "; this engine speaks " + std::to_string(kRdmaWireVersion));
  }
  if (n > kMaxNics || info.lanes == 0 || info.lanes > 1024 ||
      info.frame_payload < kMinFramePayload || info.frame_payload > kMaxFramePayload) {
    r.fail();
  }
  for (std::uint8_t i = 0; r.ok() && i < n; ++i) {
    NicRecord nic;
    nic.nic_id = r.get<std::uint8_t>();
    nic.name = std::string(r.get_bytes(kMaxName));
    nic.active = r.get<std::uint8_t>();
    nic.port = r.get<std::uint8_t>();
    nic.link_layer = r.get<std::uint8_t>();
    nic.mtu = r.get<std::uint8_t>();
    nic.lid = r.get<std::uint16_t>();
    nic.gid_index = r.get<std::uint8_t>();
    get_raw(r, nic.gid);
    nic.route_generation = r.get<std::uint64_t>();
    if (nic.nic_id >= kMaxNics || nic.active > 1 || nic.mtu < 1 || nic.mtu > 5) r.fail();
    info.nics.push_back(std::move(nic));
  }
  if (!r.done()) return bad("connect blob", blob);
  return info;
}

std::string encode(const QpConnect& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.builder);
  w.put(m.slot);
  w.put(m.qp_incarnation);
  put_qp(w, m.qp);
  return out;
}
Result<QpConnect> decode_qp_connect(std::string_view body) {
  wire::Reader r(body);
  QpConnect m;
  m.builder = r.get<std::uint64_t>();
  m.slot = r.get<std::uint32_t>();
  m.qp_incarnation = r.get<std::uint64_t>();
  get_qp(r, m.qp);
  if (!r.done() || m.slot >= 1024) return bad("QpConnect", body);
  return m;
}

std::string encode(const QpAccept& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.builder);
  w.put(m.errc);
  w.put(m.qp_incarnation);
  put_qp(w, m.qp);
  w.put_bytes(m.reason);
  return out;
}
Result<QpAccept> decode_qp_accept(std::string_view body) {
  wire::Reader r(body);
  QpAccept m;
  m.builder = r.get<std::uint64_t>();
  m.errc = r.get<std::uint32_t>();
  m.qp_incarnation = r.get<std::uint64_t>();
  get_qp(r, m.qp);
  m.reason = std::string(r.get_bytes(kMaxReason));
  if (!r.done() || m.errc > 255) return bad("QpAccept", body);
  return m;
}

std::string encode(const QpRetire& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.slot);
  w.put(m.qp_incarnation);
  return out;
}
Result<QpRetire> decode_qp_retire(std::string_view body) {
  wire::Reader r(body);
  QpRetire m;
  m.slot = r.get<std::uint32_t>();
  m.qp_incarnation = r.get<std::uint64_t>();
  if (!r.done()) return bad("QpRetire", body);
  return m;
}

std::string encode(const QpLost& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.slot);
  w.put(m.qp_incarnation);
  w.put(m.frames);
  return out;
}
Result<QpLost> decode_qp_lost(std::string_view body) {
  wire::Reader r(body);
  QpLost m;
  m.slot = r.get<std::uint32_t>();
  m.qp_incarnation = r.get<std::uint64_t>();
  m.frames = r.get<std::uint64_t>();
  if (!r.done()) return bad("QpLost", body);
  return m;
}

std::string encode(const FrameCredit& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.qp_incarnation);
  w.put(m.credits);
  return out;
}
Result<FrameCredit> decode_frame_credit(std::string_view body) {
  wire::Reader r(body);
  FrameCredit m;
  m.qp_incarnation = r.get<std::uint64_t>();
  m.credits = r.get<std::uint32_t>();
  if (!r.done() || m.credits == 0 || m.credits > kMessageSlots) return bad("FrameCredit", body);
  return m;
}

std::string encode(const GrantRequest& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.parent);
  w.put(m.target);
  w.put(m.target_generation);
  w.put(m.offset);
  w.put(m.length);
  w.put(m.op);
  w.put(m.slices);
  w.put(m.link_incarnation);
  w.put(static_cast<std::uint8_t>(m.segments.size()));
  for (const SegmentRequest& s : m.segments) {
    w.put(s.first_slice);
    w.put(s.slices);
    w.put(s.slot);
    w.put(s.offset);
    w.put(s.length);
    w.put(s.qp_incarnation);
    w.put(s.requester_qpn);
  }
  w.put(m.priority);
  w.put(m.deadline_us);
  w.put(static_cast<std::uint8_t>(m.private_path ? 1 : 0));
  if (m.private_path) put_qp(w, m.private_qp);
  return out;
}
Status check_tiling(const GrantRequest& m) {
  auto refused = [&](const std::string& why) {
    return Status::error(Errc::Protocol, "GrantRequest for [" + std::to_string(m.offset) + ", +" +
                                             std::to_string(m.length) + "): " + why);
  };
  if (m.length > std::numeric_limits<std::uint64_t>::max() - m.offset) {
    return refused("the range wraps around the address space");
  }
  if ((m.length == 0) != m.segments.empty()) {
    return refused("segments do not cover the requested range");
  }
  const std::uint64_t end = m.offset + m.length;
  std::uint64_t at = m.offset;
  std::uint32_t slices = 0;
  for (std::size_t i = 0; i < m.segments.size(); ++i) {
    const SegmentRequest& s = m.segments[i];
    // end - at cannot wrap (at never passes end), so neither can at + s.length below.
    if (s.offset != at || s.length == 0 || s.length > end - at || s.slices == 0 ||
        s.first_slice != slices) {
      return refused("segment " + std::to_string(i) + " [" + std::to_string(s.offset) + ", +" +
                     std::to_string(s.length) + "), slices " + std::to_string(s.first_slice) + "+" +
                     std::to_string(s.slices) + ", does not tile the requested range");
    }
    at += s.length;
    slices += s.slices;
  }
  if (at != end || slices != m.slices) {
    return refused("segments do not cover the requested range");
  }
  return {};
}

Result<GrantRequest> decode_grant_request(std::string_view body) {
  wire::Reader r(body);
  GrantRequest m;
  m.parent = r.get<std::uint64_t>();
  m.target = r.get<std::uint64_t>();
  m.target_generation = r.get<std::uint64_t>();
  m.offset = r.get<std::uint64_t>();
  m.length = r.get<std::uint64_t>();
  m.op = r.get<std::uint8_t>();
  m.slices = r.get<std::uint8_t>();
  m.link_incarnation = r.get<std::uint64_t>();
  const auto n = r.get<std::uint8_t>();
  if (!valid_wire_op(m.op) || n > kMaxSegments || m.slices > 64) {
    r.fail();
  }
  for (std::uint8_t i = 0; r.ok() && i < n; ++i) {
    SegmentRequest s;
    s.first_slice = r.get<std::uint8_t>();
    s.slices = r.get<std::uint8_t>();
    s.slot = r.get<std::uint32_t>();
    s.offset = r.get<std::uint64_t>();
    s.length = r.get<std::uint64_t>();
    s.qp_incarnation = r.get<std::uint64_t>();
    s.requester_qpn = r.get<std::uint32_t>();
    m.segments.push_back(s);
  }
  m.priority = r.get<std::uint8_t>();
  m.deadline_us = r.get<std::uint64_t>();
  const auto private_path = r.get<std::uint8_t>();
  if (m.priority > 2 || private_path > 1) r.fail();
  m.private_path = private_path == 1;
  if (r.ok() && m.private_path) get_qp(r, m.private_qp);
  if (!r.done()) return bad("GrantRequest", body);
  return m;
}

std::string encode(const Grant& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.parent);
  w.put(m.grant);
  w.put(m.generation);
  w.put(m.nonce);
  w.put(static_cast<std::uint8_t>(m.segments.size()));
  for (const SegmentGrant& s : m.segments) {
    w.put(s.rkey);
    w.put(s.address);
  }
  w.put(static_cast<std::uint8_t>(m.private_path ? 1 : 0));
  if (m.private_path) {
    put_qp(w, m.private_qp);
    w.put(m.private_incarnation);
  }
  return out;
}
Result<Grant> decode_grant(std::string_view body) {
  wire::Reader r(body);
  Grant m;
  m.parent = r.get<std::uint64_t>();
  m.grant = r.get<std::uint64_t>();
  m.generation = r.get<std::uint64_t>();
  m.nonce = r.get<std::uint64_t>();
  const auto n = r.get<std::uint8_t>();
  if (n > kMaxSegments) r.fail();
  for (std::uint8_t i = 0; r.ok() && i < n; ++i) {
    SegmentGrant s;
    s.rkey = r.get<std::uint32_t>();
    s.address = r.get<std::uint64_t>();
    m.segments.push_back(s);
  }
  const auto private_path = r.get<std::uint8_t>();
  if (private_path > 1) r.fail();
  m.private_path = private_path == 1;
  if (r.ok() && m.private_path) {
    get_qp(r, m.private_qp);
    m.private_incarnation = r.get<std::uint64_t>();
  }
  if (!r.done()) return bad("Grant", body);
  return m;
}

std::string encode(const GrantNack& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.parent);
  w.put(m.errc);
  w.put(m.cache_miss);
  w.put_bytes(m.reason);
  return out;
}
Result<GrantNack> decode_grant_nack(std::string_view body) {
  wire::Reader r(body);
  GrantNack m;
  m.parent = r.get<std::uint64_t>();
  m.errc = r.get<std::uint32_t>();
  m.cache_miss = r.get<std::uint8_t>();
  m.reason = std::string(r.get_bytes(kMaxReason));
  if (!r.done() || m.errc == 0 || m.errc > 255 || m.cache_miss > 1) return bad("GrantNack", body);
  return m;
}

std::string encode(const GrantAck& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.parent);
  w.put(m.errc);
  w.put(m.bytes);
  w.put(m.grant);
  w.put(m.generation);
  w.put_bytes(m.reason);
  return out;
}
Result<GrantAck> decode_grant_ack(std::string_view body) {
  wire::Reader r(body);
  GrantAck m;
  m.parent = r.get<std::uint64_t>();
  m.errc = r.get<std::uint32_t>();
  m.bytes = r.get<std::uint64_t>();
  m.grant = r.get<std::uint64_t>();
  m.generation = r.get<std::uint64_t>();
  m.reason = std::string(r.get_bytes(kMaxReason));
  if (!r.done() || m.errc > 255) return bad("GrantAck", body);
  return m;
}

std::string encode(const GrantCancel& m) {
  std::string out;
  wire::Writer w(out);
  w.put(m.parent);
  w.put(m.grant);
  w.put(m.generation);
  return out;
}
Result<GrantCancel> decode_grant_cancel(std::string_view body) {
  wire::Reader r(body);
  GrantCancel m;
  m.parent = r.get<std::uint64_t>();
  m.grant = r.get<std::uint64_t>();
  m.generation = r.get<std::uint64_t>();
  if (!r.done()) return bad("GrantCancel", body);
  return m;
}

std::array<std::uint8_t, kBindingBytes> encode(const Binding& b) {
  std::array<std::uint8_t, kBindingBytes> out{};
  std::uint8_t* p = out.data();
  store<std::uint32_t>(p + 0, kBindingMagic);
  p[4] = b.version;
  p[5] = b.op;
  p[6] = b.first_slice;
  p[7] = b.slice_count;
  std::copy(b.source_engine.begin(), b.source_engine.end(), p + 8);
  std::copy(b.requester_engine.begin(), b.requester_engine.end(), p + 24);
  store(p + 40, b.link_incarnation);
  store(p + 48, b.qp_incarnation);
  store(p + 56, b.grant_id);
  store(p + 64, b.grant_generation);
  store(p + 72, b.grant_nonce);
  store(p + 80, b.request_id);
  store(p + 88, b.target_id);
  store(p + 96, b.target_generation);
  store(p + 104, b.offset);
  store(p + 112, b.length);
  store(p + 120, b.rkey);
  store(p + 124, b.source_qpn);
  store(p + 128, b.requester_qpn);
  store(p + 132, b.payload_wrs);
  p[136] = b.status;
  store(p + 137, crc32c(p, 137));
  return out;
}

Result<Binding> decode_binding(const std::uint8_t* p, std::size_t length) {
  auto fail = [](const std::string& why) {
    return Status::error(Errc::Protocol, "receipt binding: " + why);
  };
  if (length != kBindingBytes) {
    return fail(std::to_string(length) + " bytes, not " + std::to_string(kBindingBytes));
  }
  if (load<std::uint32_t>(p) != kBindingMagic) return fail("bad magic");
  if (load<std::uint32_t>(p + 137) != crc32c(p, 137)) return fail("CRC32C mismatch");
  Binding b;
  b.version = p[4];
  b.op = p[5];
  b.first_slice = p[6];
  b.slice_count = p[7];
  std::copy(p + 8, p + 24, b.source_engine.begin());
  std::copy(p + 24, p + 40, b.requester_engine.begin());
  b.link_incarnation = load<std::uint64_t>(p + 40);
  b.qp_incarnation = load<std::uint64_t>(p + 48);
  b.grant_id = load<std::uint64_t>(p + 56);
  b.grant_generation = load<std::uint64_t>(p + 64);
  b.grant_nonce = load<std::uint64_t>(p + 72);
  b.request_id = load<std::uint64_t>(p + 80);
  b.target_id = load<std::uint64_t>(p + 88);
  b.target_generation = load<std::uint64_t>(p + 96);
  b.offset = load<std::uint64_t>(p + 104);
  b.length = load<std::uint64_t>(p + 112);
  b.rkey = load<std::uint32_t>(p + 120);
  b.source_qpn = load<std::uint32_t>(p + 124);
  b.requester_qpn = load<std::uint32_t>(p + 128);
  b.payload_wrs = load<std::uint32_t>(p + 132);
  b.status = p[136];
  if (b.version != 1) return fail("version " + std::to_string(b.version));
  if (!valid_wire_op(b.op)) {
    return fail("op " + std::to_string(b.op));
  }
  if (b.first_slice > 63 || b.slice_count < 1 || b.slice_count > 64) {
    return fail("slices " + std::to_string(b.first_slice) + "+" + std::to_string(b.slice_count));
  }
  if (b.status > 1) return fail("status " + std::to_string(b.status));
  return b;
}

std::string binding_mismatch(const Binding& w, const Binding& g) {
#define ORBITE_CMP(f) \
  if (!(w.f == g.f)) return #f;
  ORBITE_CMP(version)
  ORBITE_CMP(op)
  ORBITE_CMP(first_slice)
  ORBITE_CMP(slice_count)
  ORBITE_CMP(source_engine)
  ORBITE_CMP(requester_engine)
  ORBITE_CMP(link_incarnation)
  ORBITE_CMP(qp_incarnation)
  ORBITE_CMP(grant_id)
  ORBITE_CMP(grant_generation)
  ORBITE_CMP(grant_nonce)
  ORBITE_CMP(request_id)
  ORBITE_CMP(target_id)
  ORBITE_CMP(target_generation)
  ORBITE_CMP(offset)
  ORBITE_CMP(length)
  ORBITE_CMP(rkey)
  ORBITE_CMP(source_qpn)
  ORBITE_CMP(requester_qpn)
  ORBITE_CMP(payload_wrs)
  ORBITE_CMP(status)
#undef ORBITE_CMP
  return {};
}

std::uint32_t crc32c(const std::uint8_t* data, std::size_t length) {
  // Bitwise over a table built once: receipts are 137 bytes, so speed does not matter here.
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < length; ++i) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

}  // namespace orbite::rdma
