#include "comm/peer_record.h"

#include "common/net.h"
#include "common/wire.h"

namespace orbite::comm {
namespace {
constexpr size_t kMaxField = 1024;
constexpr std::uint8_t kVersion = 2;
}  // namespace

std::string encode_peer_record(const PeerInfo& p) {
  std::string out;
  wire::Writer w(out);
  w.put<std::uint8_t>(kVersion);
  w.put<std::int32_t>(p.rank);
  w.put<std::int64_t>(p.pid);
  w.put_bytes(p.hostname);
  w.put_bytes(p.host_id);
  w.put_bytes(p.control_address);
  w.put_bytes(p.engine_id);
  return out;
}

Result<PeerInfo> decode_peer_record(std::string_view bytes, int expected_rank) {
  wire::Reader r(bytes);
  PeerInfo p;
  auto version = r.get<std::uint8_t>();
  p.rank = r.get<std::int32_t>();
  p.pid = r.get<std::int64_t>();
  p.hostname = std::string(r.get_bytes(kMaxField));
  p.host_id = std::string(r.get_bytes(kMaxField));
  p.control_address = std::string(r.get_bytes(kMaxField));
  p.engine_id = std::string(r.get_bytes(kMaxField));
  std::string problem;
  if (!r.done()) {
    problem = "truncated or oversized fields";
  } else if (version != kVersion) {
    problem =
        "record version " + std::to_string(version) + ", expected " + std::to_string(kVersion);
  } else if (p.rank != expected_rank) {
    problem = "it claims rank " + std::to_string(p.rank);
  } else if (p.host_id.empty()) {
    problem = "empty host id";
  } else if (!net::parse_host_port(p.control_address).ok()) {
    problem = "bad control address";
  } else if (p.engine_id.size() != 32) {
    problem = "bad engine id";
  }
  if (!problem.empty()) {
    return Status::error(Errc::Protocol, "the address record of rank " +
                                             std::to_string(expected_rank) +
                                             " in the store is malformed (" + problem + ", " +
                                             std::to_string(bytes.size()) + " bytes)");
  }
  return p;
}

}  // namespace orbite::comm
