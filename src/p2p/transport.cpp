#include "p2p/transport.h"

#include "p2p/registry.h"

namespace orbite::p2p {

const char* transport_name(TransportId id) {
  switch (id) {
    case TransportId::Shm: return "shm";
    case TransportId::CudaIpc: return "cuda_ipc";
    case TransportId::Rdma: return "rdma";
    case TransportId::Tcp: return "tcp";
  }
  return "?";
}

Transport public_transport(TransportId id) {
  switch (id) {
    case TransportId::Shm: return Transport::Shm;
    case TransportId::CudaIpc: return Transport::Nvlink;
    case TransportId::Rdma: return Transport::Rdma;
    case TransportId::Tcp: return Transport::Tcp;
  }
  return Transport::Unspec;
}

std::optional<TransportId> transport_id_of(Transport t) {
  switch (t) {
    case Transport::Unspec: return std::nullopt;
    case Transport::Shm: return TransportId::Shm;
    case Transport::Nvlink: return TransportId::CudaIpc;
    case Transport::Rdma: return TransportId::Rdma;
    case Transport::Tcp: return TransportId::Tcp;
  }
  return std::nullopt;
}

Result<std::unique_ptr<DomainRegistration>> KeylessDomain::register_region(
    const detail::RegionRecord& region) {
  if (region.kind != MemoryKind::Host) {
    return Status::error(Errc::Unavailable, std::string(transport_name(id_)) +
                                                " registers host memory only; CUDA memory is "
                                                "staged through the engine's pool");
  }
  return std::unique_ptr<DomainRegistration>();
}

bool MemoryDomain::published(const detail::RegionRecord& region, const DomainRegistration*) const {
  std::string ignored;
  return backing(region.kind, &ignored) != Backing::Absent;
}

Status KeylessDomain::unpack(std::string_view blob) const {
  if (blob.empty()) return {};
  return Status::error(Errc::InvalidArgument, std::string("descriptor carries ") +
                                                  std::to_string(blob.size()) + " bytes for " +
                                                  transport_name(id_) + ", which needs none");
}

}  // namespace orbite::p2p
