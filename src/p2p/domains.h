// The engine's memory domains (one per transport) and which transports it has: what the proxy
// needs of the transport table to register memory, check a forced transport, run its monitor and
// answer the engine's reports. Nothing here names a transport: each domain is its transport's
// factory and monitor hook (transport.h), and the table (transports.cpp) makes them.
#pragma once

#include <orbite/config.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "p2p/endpoint.h"
#include "p2p/transport.h"

namespace orbite::p2p {

using MemoryDomains = std::array<std::unique_ptr<MemoryDomain>, kTransportCount>;
// Why a transport has no domain ("" where it has one, or needs none), indexed by TransportId.
using DomainNotes = std::array<std::string, kTransportCount>;

// The engine's memory domains, indexed by TransportId (null: not built, not installed, or not
// published on; `notes` says why where it matters). An error only where the configuration
// requires a transport that cannot install (rdma.enable = on).
Result<MemoryDomains> make_memory_domains(const EngineConfig& config, const detail::Identity& self,
                                          DomainNotes* notes);
// Which transports this engine has at all (the selection table's "built" column).
std::array<bool, kTransportCount> built_transports(const MemoryDomains& domains);
// The domains' reports, with the notes of those not installed.
TransportReport report_of(const MemoryDomains& domains, const DomainNotes& notes);
// The monitor: every domain's fds to wait on, their events drained, and the periodic scan.
std::vector<int> monitor_fds(const MemoryDomains& domains);
void drain_monitor_events(const MemoryDomains& domains);
void monitor_scan(const MemoryDomains& domains);

}  // namespace orbite::p2p
