// Fuzz target: every RDMA wire message a peer can send (p2p/rdma/wire.h): the connect blob (NIC
// table), QP connect/accept/retire, frame credits, grant requests with their tiling check,
// grants, refusals, acks, cancels, and the 141-byte receipt binding. The first byte picks the
// decoder; the rest is the body. An accepted body must re-encode to bytes that decode to the
// same encoding again.
#include <array>
#include <cstring>
#include <string_view>

#include "fuzz_target.h"
#include "p2p/rdma/wire.h"

namespace orbite::fuzz {
namespace {

using namespace orbite::rdma;

enum Kind : std::uint8_t {
  kInfo,
  kQpConnect,
  kQpAccept,
  kQpRetire,
  kFrameCredit,
  kGrantRequest,
  kGrant,
  kGrantNack,
  kGrantAck,
  kGrantCancel,
  kBinding,
  kQpLost,
  kKinds
};

template <typename T, typename Decode>
bool stable(const Result<T>& first, const Decode& decode, const char* what) {
  if (!first.ok()) return false;
  const std::string bytes = encode(*first);
  const Result<T> second = decode(bytes);
  require(second.ok(), what);
  require(encode(*second) == bytes, what);
  return true;
}

std::string with_kind(Kind k, std::string_view body) {
  std::string s(1, static_cast<char>(k));
  s.append(body);
  return s;
}

bool run_one(std::uint8_t kind, std::string_view body) {
  switch (kind % kKinds) {
    case kInfo: return stable(decode_info(body), decode_info, "RdmaInfo");
    case kQpConnect: return stable(decode_qp_connect(body), decode_qp_connect, "QpConnect");
    case kQpAccept: return stable(decode_qp_accept(body), decode_qp_accept, "QpAccept");
    case kQpRetire: return stable(decode_qp_retire(body), decode_qp_retire, "QpRetire");
    case kQpLost: return stable(decode_qp_lost(body), decode_qp_lost, "QpLost");
    case kFrameCredit: return stable(decode_frame_credit(body), decode_frame_credit, "FrameCredit");
    case kGrantRequest: {
      const Result<GrantRequest> m = decode_grant_request(body);
      if (m.ok()) (void)check_tiling(*m);  // a peer's lengths: no sum may wrap or overflow
      return stable(m, decode_grant_request, "GrantRequest");
    }
    case kGrant: return stable(decode_grant(body), decode_grant, "Grant");
    case kGrantNack: return stable(decode_grant_nack(body), decode_grant_nack, "GrantNack");
    case kGrantAck: return stable(decode_grant_ack(body), decode_grant_ack, "GrantAck");
    case kGrantCancel: return stable(decode_grant_cancel(body), decode_grant_cancel, "GrantCancel");
    case kBinding: {
      const auto* p = reinterpret_cast<const std::uint8_t*>(body.data());
      const Result<Binding> b = decode_binding(p, body.size());
      if (!b.ok()) return false;
      const auto again = encode(*b);
      const Result<Binding> b2 = decode_binding(again.data(), again.size());
      require(b2.ok() && binding_mismatch(*b, *b2).empty(), "Binding");
      return true;
    }
    default: return false;
  }
}

}  // namespace

std::vector<std::string> seeds() {
  std::vector<std::string> out;
  RdmaInfo info;
  info.lanes = 2;
  info.frame_payload = 8192;
  NicRecord nic;
  nic.name = "mlx5_0";
  nic.active = 1;
  nic.mtu = 5;  // IBV_MTU_4096
  nic.gid[15] = 1;
  info.nics = {nic, nic};
  info.nics[1].nic_id = 1;
  info.nics[1].name = "mlx5_1";
  out.push_back(with_kind(kInfo, encode(info)));
  QpConnect c;
  c.builder = 7;
  c.slot = 1;
  c.qp.qpn = 0x1234;
  out.push_back(with_kind(kQpConnect, encode(c)));
  QpAccept a;
  a.builder = 7;
  a.errc = 3;
  a.reason = "no room";
  out.push_back(with_kind(kQpAccept, encode(a)));
  out.push_back(with_kind(kQpRetire, encode(QpRetire{2, 9})));
  out.push_back(with_kind(kQpLost, encode(QpLost{1023, 9, 40})));
  out.push_back(with_kind(kFrameCredit, encode(FrameCredit{9, 16})));
  GrantRequest r;
  r.parent = 1;
  r.target = 5;
  r.target_generation = 1;
  r.offset = 4096;
  r.length = 3 * 65536;
  r.op = kOpWrite;
  r.slices = 3;
  SegmentRequest s0;
  s0.slices = 2;
  s0.offset = 4096;
  s0.length = 2 * 65536;
  SegmentRequest s1 = s0;
  s1.first_slice = 2;
  s1.slices = 1;
  s1.offset = 4096 + 2 * 65536;
  s1.length = 65536;
  r.segments = {s0, s1};
  out.push_back(with_kind(kGrantRequest, encode(r)));
  Grant g;
  g.parent = 1;
  g.grant = 2;
  g.segments = {SegmentGrant{0x77, 0x10000}, SegmentGrant{0x78, 0x30000}};
  out.push_back(with_kind(kGrant, encode(g)));
  GrantNack n;
  n.parent = 1;
  n.errc = 8;
  n.reason = "budget";
  out.push_back(with_kind(kGrantNack, encode(n)));
  GrantAck k;
  k.parent = 1;
  k.bytes = 65536;
  out.push_back(with_kind(kGrantAck, encode(k)));
  out.push_back(with_kind(kGrantCancel, encode(GrantCancel{1, 2, 3})));
  Binding b;
  b.op = kOpRead;
  b.slice_count = 1;
  b.length = 65536;
  const auto bytes = encode(b);
  out.push_back(with_kind(
      kBinding, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  return out;
}

}  // namespace orbite::fuzz

bool orbite::fuzz::accepts(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return false;
  return run_one(data[0], std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
}
