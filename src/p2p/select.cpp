#include "p2p/select.h"

#include <string>

namespace orbite::p2p {

const std::array<RouteRow, 5>& route_table() {
  static const std::array<RouteRow, 5> table = {{
      {"self", TransportId::Shm, kReachSelf},
      // Device memory on both ends goes peer to peer before shm stages it (NCCL's P2P before
      // SHM); host memory is Absent on cuda_ipc and falls through to shm.
      {"cuda_ipc", TransportId::CudaIpc, kReachSameHost},
      {"shm", TransportId::Shm, kReachSameHost},
      {"rdma", TransportId::Rdma, kReachSameHost | kReachRemote},
      {"tcp", TransportId::Tcp, kReachSameHost | kReachRemote},
  }};
  return table;
}

namespace {

std::uint8_t peer_reach(const RouteQuery& q) {
  if (q.is_self) return kReachSelf;
  return q.same_host ? kReachSameHost : kReachRemote;
}

// Why `row` cannot carry the request; empty when it can.
std::string refusal(const RouteRow& row, const RouteQuery& q) {
  const auto i = static_cast<std::size_t>(row.id);
  if (!q.built[i])
    return "this engine has no " + std::string(transport_name(row.id)) + " transport";
  if ((row.reach & peer_reach(q)) == 0) {
    if (q.is_self) return "it does not reach this engine itself";
    return q.same_host ? "the peer is on this host" : "the peer is on another host";
  }
  const Capabilities* caps = q.open[i];
  if (caps == nullptr) {
    return row.id == TransportId::Shm
               ? "shared memory with the peer is disabled or failed"
               : "no " + std::string(transport_name(row.id)) + " endpoint to the peer";
  }
  if (!caps->frames && !(q.rma && caps->rma)) {
    return std::string("it carries put/get only (send/recv over ") + transport_name(row.id) +
           " is not built yet)";
  }
  const bool native = q.memory == MemoryKind::Cuda ? caps->cuda_memory : caps->host_memory;
  if (!native && (q.carries[i] & (1u << static_cast<unsigned>(q.memory))) == 0) {
    return std::string("it does not carry ") + (q.memory == MemoryKind::Cuda ? "CUDA" : "host") +
           " memory, natively or staged";
  }
  if (q.rma && (q.target_transports & (1u << i)) == 0) {
    return "the remote region is not published on " + std::string(transport_name(row.id));
  }
  return {};
}

std::string peer_name(const RouteQuery& q) {
  std::string out(q.peer_id.substr(0, 8));
  if (!q.peer_address.empty()) out += " at " + std::string(q.peer_address);
  return out;
}

}  // namespace

Result<TransportId> select_route(const RouteQuery& q) {
  const auto wanted = transport_id_of(q.requested);
  const auto& table = route_table();
  // The loopback answers every host-transport request to this engine itself, whatever transport
  // it names: reaching oneself needs none.
  if (q.is_self && (!wanted || *wanted == TransportId::Shm || *wanted == TransportId::Tcp ||
                    (*wanted == TransportId::Rdma && !q.rma))) {
    std::string no = refusal(table[0], q);
    if (no.empty()) return table[0].id;
    return Status::error(Errc::Unavailable, "no loopback to this engine: " + no);
  }
  std::string why;
  for (std::size_t r = 1; r < table.size(); ++r) {
    const RouteRow& row = table[r];
    if (wanted && *wanted != row.id) continue;
    std::string no = refusal(row, q);
    if (no.empty()) return row.id;
    if (wanted) {
      return Status::error(Errc::Unavailable, "transport " + std::string(to_string(q.requested)) +
                                                  " cannot reach peer " + peer_name(q) + ": " + no);
    }
    why += (why.empty() ? "" : "; ") + std::string(row.name) + ": " + no;
  }
  return Status::error(Errc::Unavailable, "no transport reaches peer " + peer_name(q) +
                                              (why.empty() ? "" : " (" + why + ")"));
}

Status check_requested(Transport requested, const std::array<bool, kTransportCount>& built) {
  const auto id = transport_id_of(requested);
  if (!id || built[static_cast<std::size_t>(*id)]) return {};
  return Status::error(Errc::Unavailable, "transport " + std::string(to_string(requested)) +
                                              " is not available in this engine (no " +
                                              transport_name(*id) + " transport in its table)");
}

}  // namespace orbite::p2p
