// The RDMA transport's entry in the transport table (p2p/transports.cpp): its memory domain,
// which makes its lanes and is the monitor's hook (RdmaDomain, engine.h).
#pragma once

#include <orbite/config.h>

#include <memory>
#include <string>

#include "p2p/endpoint.h"
#include "p2p/transport.h"

namespace orbite::rdma {

// The engine's RDMA domain when rdma.enable lets it install and it does; null with `note` saying
// why not otherwise. An error where rdma.enable = on and RDMA cannot install, or where the
// configuration conflicts (another verbs library already loaded).
Result<std::unique_ptr<p2p::MemoryDomain>> install_domain(const EngineConfig& config,
                                                          const detail::Identity& self,
                                                          std::string* note);

}  // namespace orbite::rdma
