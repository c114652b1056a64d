#include "p2p/control/handshake.h"

#include "common/wire.h"
#include "p2p/frame.h"

namespace orbite::p2p {

namespace {
constexpr std::uint32_t kHandshakeMagic = 0x4f484e44;  // "OHND"
constexpr std::size_t kMaxHandshakeField = 512;
constexpr std::uint8_t kNoJoin = 0xff;
}  // namespace

const ConnectBlob* Handshake::find(TransportId id) const {
  for (const ConnectBlob& b : transports) {
    if (b.id == id) return &b;
  }
  return nullptr;
}

std::string encode_handshake(const Handshake& h) {
  std::string out;
  wire::Writer w(out);
  w.put<std::uint32_t>(kHandshakeMagic);
  w.put_bytes(h.engine_id);
  w.put_bytes(h.host_id);
  w.put<std::int64_t>(h.pid);
  w.put<std::uint64_t>(h.eager_credit);
  w.put<std::uint8_t>(h.join ? static_cast<std::uint8_t>(*h.join) : kNoJoin);
  w.put<std::uint32_t>(h.join_index);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(h.transports.size()));
  for (const ConnectBlob& b : h.transports) {
    w.put<std::uint8_t>(static_cast<std::uint8_t>(b.id));
    w.put_bytes(b.blob);
  }
  return out;
}

Result<Handshake> decode_handshake(std::string_view bytes) {
  wire::Reader r(bytes);
  Handshake h;
  const auto magic = r.get<std::uint32_t>();
  h.engine_id = std::string(r.get_bytes(kMaxHandshakeField));
  h.host_id = std::string(r.get_bytes(kMaxHandshakeField));
  h.pid = r.get<std::int64_t>();
  h.eager_credit = r.get<std::uint64_t>();
  const auto join = r.get<std::uint8_t>();
  h.join_index = r.get<std::uint32_t>();
  const auto count = r.get<std::uint8_t>();
  std::string problem;
  if (count > kTransportCount) problem = "lists " + std::to_string(count) + " transports";
  for (std::uint8_t i = 0; problem.empty() && i < count && r.ok(); ++i) {
    const auto id = r.get<std::uint8_t>();
    std::string blob(r.get_bytes(kMaxConnectBlob));
    if (id >= kTransportCount) {
      problem = "names transport " + std::to_string(id);
    } else if (h.find(static_cast<TransportId>(id)) != nullptr) {
      problem =
          "names transport " + std::string(transport_name(static_cast<TransportId>(id))) + " twice";
    } else {
      h.transports.push_back(ConnectBlob{static_cast<TransportId>(id), std::move(blob)});
    }
  }
  if (problem.empty() && (!r.done() || magic != kHandshakeMagic)) {
    problem = "of " + std::to_string(bytes.size()) + " bytes is malformed";
  } else if (problem.empty() && (h.engine_id.size() != 32 || h.pid <= 0)) {
    problem = "names engine '" + h.engine_id + "' pid " + std::to_string(h.pid) +
              ": not a valid identity";
  } else if (problem.empty() && h.eager_credit == 0) {
    problem = "grants zero eager credit";
  } else if (problem.empty() && join != kNoJoin && join >= kTransportCount) {
    problem = "joins transport " + std::to_string(join);
  }
  if (!problem.empty()) return Status::error(Errc::Protocol, "handshake " + problem);
  if (join != kNoJoin) h.join = static_cast<TransportId>(join);
  return h;
}

}  // namespace orbite::p2p
