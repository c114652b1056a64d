// The cuda_ipc transport's domain, endpoint and lane: the handshake, the control messages'
// dispatch and the lane's pass. The owner's half is in owner.cpp, the requester's in
// requester.cpp.
#include <orbite/config.h>

#include "common/log.h"
#include "common/strings.h"
#include "p2p/cuda_ipc/ipc_transport.h"
#include "p2p/peer.h"
#include "p2p/registry.h"

namespace orbite::p2p::ipc {

using detail::PeerLink;

// --- the domain ---

Backing CudaIpcDomain::backing(MemoryKind kind, std::string* why) const {
  if (kind == MemoryKind::Cuda) return Backing::Native;
  // No driver call here: host memory is every engine's, CUDA or not.
  *why = "cuda_ipc carries device memory only (shm carries host memory on this host)";
  return Backing::Absent;
}

Result<std::unique_ptr<DomainRegistration>> CudaIpcDomain::register_region(
    const detail::RegionRecord& region) {
  if (region.kind != MemoryKind::Cuda || !region.cuda) {
    return Status::error(Errc::Internal, "cuda_ipc registers device memory only");
  }
  auto out = std::make_unique<IpcRegistration>();
  auto handle = region.cuda->export_ipc();
  if (handle.ok()) {
    out->handle = *handle;
  } else {
    // Not an error: the region is published on the transports that can carry it.
    out->why_not = handle.status().message();
    ORBITE_LOG(Debug, Cuda) << "region " << region.id
                            << " is not published on cuda_ipc: " << out->why_not;
  }
  return std::unique_ptr<DomainRegistration>(std::move(out));
}

std::string CudaIpcDomain::pack(const detail::RegionRecord&, const DomainRegistration*) const {
  return std::string(1, static_cast<char>(kIpcWireVersion));
}

Status CudaIpcDomain::unpack(std::string_view blob) const {
  if (blob.size() == 1 && static_cast<std::uint8_t>(blob[0]) == kIpcWireVersion) return {};
  return Status::error(Errc::InvalidArgument, "the cuda_ipc part (" + std::to_string(blob.size()) +
                                                  " bytes) is not version " +
                                                  std::to_string(kIpcWireVersion) + "'s");
}

bool CudaIpcDomain::published(const detail::RegionRecord& region,
                              const DomainRegistration* registration) const {
  const auto* r = dynamic_cast<const IpcRegistration*>(registration);
  return region.kind == MemoryKind::Cuda && r != nullptr && r->handle.has_value();
}

Result<std::unique_ptr<LaneTransport>> CudaIpcDomain::make_lane(const LaneParts& parts) const {
  return std::unique_ptr<LaneTransport>(std::make_unique<CudaIpcLane>(parts));
}

// --- the endpoint ---

const Capabilities& CudaIpcEndpoint::caps() const {
  return lane_.caps();
}

void CudaIpcEndpoint::send(detail::SendItem) {
  lane_.handler().protocol_error(link_, "a frame was routed to cuda_ipc, which carries none");
}

Status CudaIpcEndpoint::read_peer(std::byte*, std::uint64_t, std::uint64_t) {
  return Status::error(Errc::Unavailable, "cuda_ipc has no access by host address");
}

Status CudaIpcEndpoint::write_peer(const std::byte*, std::uint64_t, std::uint64_t) {
  return Status::error(Errc::Unavailable, "cuda_ipc has no access by host address");
}

Status CudaIpcEndpoint::start_rma(RmaOp op) {
  return lane_.start(link_, std::move(op));
}

bool CudaIpcEndpoint::busy() const {
  return lane_.busy_with(link_);
}

// --- the lane ---

CudaIpcLane::CudaIpcLane(const LaneParts& parts)
    : config_(parts.config),
      self_(parts.self),
      handler_(parts.handler),
      control_(parts.control),
      regions_(parts.regions) {
  caps_.id = TransportId::CudaIpc;
  caps_.reach = kReachSameHost;
  caps_.host_memory = false;
  caps_.cuda_memory = true;
  caps_.frames = false;
  caps_.rma = true;
}

CudaIpcLane::~CudaIpcLane() {
  shutdown(Status::error(Errc::Cancelled, "the engine is closing"));
}

std::optional<std::string> CudaIpcLane::offer(PeerLink& link) {
  if (link.is_self || !link.same_host) return std::nullopt;
  return encode_blob(static_cast<std::uint64_t>(self_.pid));
}

Result<std::string> CudaIpcLane::accept(PeerLink& link, std::string_view blob) {
  if (!link.same_host) return Status::error(Errc::Unavailable, "the peer is on another host");
  ORBITE_RETURN_IF_ERROR(decode_blob(blob).status());
  endpoints_[&link] = nullptr;  // the link owns the endpoint; this map only marks it open
  link.endpoints[static_cast<std::size_t>(TransportId::CudaIpc)] =
      std::make_unique<CudaIpcEndpoint>(*this, link);
  return encode_blob(static_cast<std::uint64_t>(self_.pid));
}

Status CudaIpcLane::complete(PeerLink& link, std::optional<std::string_view> blob) {
  if (!blob) return {};  // declined: the link goes on without cuda_ipc
  ORBITE_RETURN_IF_ERROR(decode_blob(*blob).status());
  endpoints_[&link] = nullptr;
  link.endpoints[static_cast<std::size_t>(TransportId::CudaIpc)] =
      std::make_unique<CudaIpcEndpoint>(*this, link);
  return {};
}

Status CudaIpcLane::open_self(PeerLink&) {
  return Status::error(Errc::Unavailable,
                       "cuda_ipc does not reach this engine itself (a process cannot open a "
                       "handle it exported)");
}

Status CudaIpcLane::adopt_connection(PeerLink&, int fd, std::uint32_t) {
  if (fd >= 0) ::close(fd);
  return Status::error(Errc::Protocol, "cuda_ipc opens no connections of its own");
}

Status CudaIpcLane::on_control(PeerLink& link, std::uint64_t kind, std::string_view body) {
  if (endpoints_.count(&link) == 0) {
    return Status::error(Errc::Protocol, std::string("cuda_ipc ") + kind_name(kind) +
                                             " from a peer without a cuda_ipc endpoint");
  }
  switch (static_cast<IpcKind>(kind)) {
    case IpcKind::Access: {
      ORBITE_ASSIGN_OR_RETURN(IpcAccess m, decode_access(body));
      on_access(link, m);
      return {};
    }
    case IpcKind::Grant: {
      ORBITE_ASSIGN_OR_RETURN(IpcGrant m, decode_grant(body));
      on_grant(link, m);
      return {};
    }
    case IpcKind::Unmap: {
      ORBITE_ASSIGN_OR_RETURN(IpcUnmap m, decode_unmap(body));
      on_unmap(link, m);
      return {};
    }
    case IpcKind::Unmapped: {
      ORBITE_ASSIGN_OR_RETURN(IpcUnmapped m, decode_unmapped(body));
      on_unmapped(link, m);
      return {};
    }
  }
  return Status::error(Errc::Protocol,
                       "cuda_ipc: unknown control message kind " + std::to_string(kind));
}

void CudaIpcLane::send(PeerLink& link, IpcKind kind, std::string body) {
  FrameHeader h;
  h.type = FrameType::TransportControl;
  h.a = static_cast<std::uint64_t>(TransportId::CudaIpc);
  h.b = static_cast<std::uint64_t>(kind);
  control_.send_control(link, h, std::move(body));
}

int CudaIpcLane::progress() {
  return owner_pass() + requester_pass();
}

bool CudaIpcLane::busy() const {
  return !deferred_.empty() || !copying_.empty();
}

int CudaIpcLane::next_timer_ms() const {
  // No timer: a registration a peer mapped is unregistered by a thread that drives the lanes'
  // passes itself (MemoryRegion::unregister polls them until its pins go), so the owner's pass
  // sends IpcUnmap without a periodic wake-up of an idle lane.
  return -1;
}

void CudaIpcLane::forget(PeerLink& link) {
  release_exports(link);
  drop_requests(
      link, link.failure.ok()
                ? Status::error(Errc::ConnectionLost, "the peer " + short_id(link.ep.id) + " left")
                : link.failure);
  endpoints_.erase(&link);
}

void CudaIpcLane::shutdown(const Status& why) {
  std::vector<PeerLink*> links;
  for (auto& [link, ep] : endpoints_) links.push_back(const_cast<PeerLink*>(link));
  for (PeerLink* link : links) {
    release_exports(*link);
    drop_requests(*link, why.ok() ? Status::error(Errc::Cancelled, "the engine is closing") : why);
  }
  endpoints_.clear();
  deferred_.clear();
  // Copies on the device finish before their mappings close; one that does not within the
  // bound keeps its mapping (and the job its memory) for the rest of the process.
  const Deadline bound = Deadline::after(std::chrono::seconds(5));
  for (Op& op : std::exchange(copying_, {})) {
    Status st = op.local->wait(*op.job, bound);
    if (st.code() == Errc::Timeout) {
      op.local->park(op.job, nullptr);
      for (auto& [key, mp] : mappings_) {
        if (&mp == op.mapping) (void)mp.map.release();
      }
    } else {
      --op.mapping->copies;
    }
    finish(op, st);
  }
  mappings_.clear();
}

}  // namespace orbite::p2p::ipc
