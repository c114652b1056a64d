// The engine's memory domains (one per transport) and which transports it has: what the proxy
// needs of the transport table to register memory and check a forced transport.
#pragma once

#include <orbite/config.h>

#include <array>
#include <memory>

#include "p2p/transport.h"

namespace orbite::p2p {

using MemoryDomains = std::array<std::unique_ptr<MemoryDomain>, kTransportCount>;

// The engine's memory domains, indexed by TransportId (null: not built, or not published on).
MemoryDomains make_memory_domains(const EngineConfig& config);
// Which transports this engine has at all (the selection table's "built" column).
std::array<bool, kTransportCount> built_transports(const EngineConfig& config);

}  // namespace orbite::p2p
