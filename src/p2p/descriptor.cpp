#include "p2p/descriptor.h"

#include "common/net.h"
#include "common/wire.h"

namespace orbite {

namespace {
constexpr std::uint32_t kRemoteMagic = 0x4f52524d;  // "ORRM"
constexpr std::size_t kMaxBlob = 4096;
// Version 1 named transports by bits of a mask, indexed by Transport.
constexpr std::uint32_t kV1Tcp = 1u << static_cast<unsigned>(Transport::Tcp);
constexpr std::uint32_t kV1Shm = 1u << static_cast<unsigned>(Transport::Shm);
// Version 3 entry flags; version 4 adds the GPUDirect routes of the entry's registration.
constexpr std::uint8_t kEntryStaged = 1;
constexpr std::uint8_t kEntryGpuDmabuf = 2;
constexpr std::uint8_t kEntryGpuPeermem = 4;
}  // namespace

namespace detail {

std::string DescriptorCodec::encode(const RemoteRegion& r) {
  std::string out;
  wire::Writer w(out);
  w.put<std::uint32_t>(kRemoteMagic);
  w.put<std::uint8_t>(kVersion);
  w.put_bytes(r.owner_id_);
  w.put_bytes(r.owner_address_);
  w.put_bytes(r.owner_host_id_);
  w.put<std::int64_t>(r.owner_pid_);
  w.put<std::uint64_t>(r.region_id_);
  w.put<std::uint64_t>(r.generation_);
  w.put<std::uint64_t>(r.length_);
  w.put<std::uint8_t>(
      static_cast<std::uint8_t>((r.access_.read ? 1 : 0) | (r.access_.write ? 2 : 0)));
  w.put<std::uint8_t>(static_cast<std::uint8_t>(r.kind_));
  w.put<std::uint64_t>(r.staging_chunk_);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(r.transport_blobs_.size()));
  for (const auto& [id, blob] : r.transport_blobs_) {
    w.put<std::uint8_t>(id);
    w.put<std::uint8_t>(
        static_cast<std::uint8_t>(((r.staged_ >> id) & 1 ? kEntryStaged : 0) |
                                  ((r.gpu_dmabuf_ >> id) & 1 ? kEntryGpuDmabuf : 0) |
                                  ((r.gpu_peermem_ >> id) & 1 ? kEntryGpuPeermem : 0)));
    w.put_bytes(blob);
  }
  return out;
}

Result<RemoteRegion> DescriptorCodec::decode(std::string_view bytes) {
  wire::Reader r(bytes);
  RemoteRegion out;
  const auto magic = r.get<std::uint32_t>();
  const auto version = r.get<std::uint8_t>();
  out.owner_id_ = std::string(r.get_bytes(64));
  out.owner_address_ = std::string(r.get_bytes(512));
  out.owner_host_id_ = std::string(r.get_bytes(512));
  out.owner_pid_ = r.get<std::int64_t>();
  out.region_id_ = r.get<std::uint64_t>();
  out.generation_ = r.get<std::uint64_t>();
  out.length_ = r.get<std::uint64_t>();
  const auto rights = r.get<std::uint8_t>();
  out.access_ = Access{(rights & 1) != 0, (rights & 2) != 0};
  std::string problem;
  if (version == 1) {
    const auto mask = r.get<std::uint32_t>();
    if ((mask & kV1Tcp) != 0)
      out.transport_blobs_.emplace_back(std::uint8_t(p2p::TransportId::Tcp), "");
    if ((mask & kV1Shm) != 0)
      out.transport_blobs_.emplace_back(std::uint8_t(p2p::TransportId::Shm), "");
  } else {
    std::uint8_t kind = 0;
    if (version >= 3) {
      kind = r.get<std::uint8_t>();
      if (kind > static_cast<std::uint8_t>(MemoryKind::Cuda)) {
        problem = "memory kind " + std::to_string(kind);
      }
      out.kind_ = static_cast<MemoryKind>(kind);
      out.staging_chunk_ = r.get<std::uint64_t>();
    }
    const auto count = r.get<std::uint8_t>();
    if (count > p2p::kTransportCount) problem = std::to_string(count) + " transport entries";
    for (std::uint8_t i = 0; problem.empty() && i < count && r.ok(); ++i) {
      const auto id = r.get<std::uint8_t>();
      const std::uint8_t flags = version >= 3 ? r.get<std::uint8_t>() : 0;
      const std::uint8_t known =
          version >= 4 ? kEntryStaged | kEntryGpuDmabuf | kEntryGpuPeermem : kEntryStaged;
      if ((flags & ~known) != 0) {
        problem = "entry flags " + std::to_string(flags);
        break;
      }
      std::string blob(r.get_bytes(kMaxBlob));
      if (id >= p2p::kTransportCount) {
        problem = "transport id " + std::to_string(id);
        break;
      }
      for (const auto& [seen, b] : out.transport_blobs_) {
        if (seen == id)
          problem = "transport " + std::string(p2p::transport_name(p2p::TransportId(id))) +
                    " listed twice";
      }
      if ((flags & kEntryStaged) != 0) out.staged_ |= 1u << id;
      if ((flags & kEntryGpuDmabuf) != 0) out.gpu_dmabuf_ |= 1u << id;
      if ((flags & kEntryGpuPeermem) != 0) out.gpu_peermem_ |= 1u << id;
      out.transport_blobs_.emplace_back(id, std::move(blob));
    }
  }
  if (!problem.empty()) {
    // already named
  } else if (!r.done() || magic != kRemoteMagic) {
    problem = "not a region descriptor (or truncated)";
  } else if (version < 1 || version > kVersion) {
    problem = "descriptor version " + std::to_string(version) + " (this engine reads 1 to " +
              std::to_string(kVersion) + ")";
  } else if (out.owner_id_.size() != 32 || out.owner_pid_ <= 0 || out.region_id_ == 0) {
    problem = "owner identity or region id is invalid";
  } else if (!net::parse_host_port(out.owner_address_).ok()) {
    problem = "owner address '" + out.owner_address_ + "' is invalid";
  } else if (rights > 3) {
    problem = "rights " + std::to_string(rights);
  } else if (out.staged_ != 0 && out.staging_chunk_ == 0) {
    problem = "a staged region without a staging chunk";
  }
  if (!problem.empty()) {
    return Status::error(Errc::InvalidArgument, "RemoteRegion::from_bytes: " + problem + " (" +
                                                    std::to_string(bytes.size()) + " bytes)");
  }
  return out;
}

RemoteRegion DescriptorCodec::make(
    const RegionRecord& rec, const Identity& owner,
    std::vector<std::pair<std::uint8_t, std::string>> blobs, std::uint64_t staging_chunk,
    const std::array<std::uint8_t, p2p::kTransportCount>& gpu_direct) {
  RemoteRegion r;
  r.owner_id_ = owner.id;
  r.owner_address_ = owner.address;
  r.owner_host_id_ = owner.host_id;
  r.owner_pid_ = owner.pid;
  r.region_id_ = rec.id;
  r.generation_ = rec.generation;
  r.length_ = rec.length;
  r.access_ = rec.access;
  r.kind_ = rec.kind;
  r.transport_blobs_ = std::move(blobs);
  r.staged_ = rec.staged;
  r.staging_chunk_ = rec.staged != 0 ? staging_chunk : 0;
  for (const auto& [id, blob] : r.transport_blobs_) {
    if (id >= gpu_direct.size()) continue;
    if ((gpu_direct[id] & p2p::MemoryDomain::kGpuDirectDmabuf) != 0) r.gpu_dmabuf_ |= 1u << id;
    if ((gpu_direct[id] & p2p::MemoryDomain::kGpuDirectPeermem) != 0) r.gpu_peermem_ |= 1u << id;
  }
  return r;
}

Endpoint DescriptorCodec::owner(const RemoteRegion& r) {
  return Endpoint{r.owner_id_, r.owner_address_, r.owner_host_id_, r.owner_pid_};
}

}  // namespace detail

std::string RemoteRegion::bytes() const {
  return detail::DescriptorCodec::encode(*this);
}

Result<RemoteRegion> RemoteRegion::from_bytes(std::string_view bytes) {
  return detail::DescriptorCodec::decode(bytes);
}

Result<RemoteRegion> RemoteRegion::from_bytes(std::span<const std::byte> bytes) {
  return from_bytes(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::vector<Transport> RemoteRegion::staged_transports() const {
  std::vector<Transport> out;
  for (Transport t : transports()) {
    if ((staged_ >> static_cast<unsigned>(*p2p::transport_id_of(t)) & 1) != 0) out.push_back(t);
  }
  return out;
}

std::vector<rdma::GpuDirectRegistration> RemoteRegion::gpu_direct_routes() const {
  std::vector<rdma::GpuDirectRegistration> out;
  if (gpu_dmabuf_ != 0) out.push_back(rdma::GpuDirectRegistration::Dmabuf);
  if (gpu_peermem_ != 0) out.push_back(rdma::GpuDirectRegistration::Peermem);
  return out;
}

std::vector<Transport> RemoteRegion::transports() const {
  std::vector<Transport> out;
  // In the order of Transport, as version 1 reported them.
  for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Rdma, Transport::Nvlink}) {
    const auto id = p2p::transport_id_of(t);
    for (const auto& [got, blob] : transport_blobs_) {
      if (id && got == static_cast<std::uint8_t>(*id)) out.push_back(t);
    }
  }
  return out;
}

}  // namespace orbite
