// The engine's memory domains (one per transport) and which transports it has: what the proxy
// needs of the transport table to register memory and check a forced transport.
#pragma once

#include <orbite/config.h>

#include <array>
#include <memory>
#include <string>

#include "p2p/endpoint.h"
#include "p2p/transport.h"

namespace orbite::p2p {

using MemoryDomains = std::array<std::unique_ptr<MemoryDomain>, kTransportCount>;

// The engine's memory domains, indexed by TransportId (null: not built, or not published on).
// RDMA's is there when rdma.enable lets it install and it did; `rdma_note` says why not
// otherwise. An error only where rdma.enable = on and RDMA cannot install.
Result<MemoryDomains> make_memory_domains(const EngineConfig& config, const detail::Identity& self,
                                          std::string* rdma_note);
// Which transports this engine has at all (the selection table's "built" column).
std::array<bool, kTransportCount> built_transports(const MemoryDomains& domains);
// The RDMA transport's counters (installed = false and `note` as why_not without it).
RdmaStats rdma_stats_of(const MemoryDomains& domains, const std::string& note);
// The monitor's scan: RDMA contexts pause and resume with their ports.
void scan_rdma_ports(const MemoryDomains& domains);
// The RDMA devices' async event fds (readable when a port or device event is pending), for the
// monitor to wait on; empty without RDMA.
std::vector<int> rdma_event_fds(const MemoryDomains& domains);
// Reads and acknowledges every pending device event without blocking; a port event pauses or
// resumes its context at once instead of at the next scan.
void drain_rdma_events(const MemoryDomains& domains);
// The RDMA selection's view of each NIC (empty without RDMA).
std::vector<NicLoad> nic_load_of(const MemoryDomains& domains);

}  // namespace orbite::p2p
