// The region descriptor codec: what MemoryRegion::export_descriptor() hands a peer and
// RemoteRegion::from_bytes() reads back. It carries the owner's identity, the region's id,
// generation, length and rights, and one packed blob per transport the region is published on
// (each transport's MemoryDomain packs and checks its own). Layout in docs/protocol.md.
#pragma once

#include <orbite/transfer.h>

#include <string>
#include <string_view>
#include <vector>

#include "p2p/endpoint.h"
#include "p2p/registry.h"
#include "p2p/transport.h"

namespace orbite::detail {

struct DescriptorCodec {
  static constexpr std::uint8_t kVersion = 4;
  static std::string encode(const RemoteRegion& r);
  // Version 4 (an entry's flags may name the GPUDirect routes of its registration); version 3
  // (entry flags: staged only), version 2 (host memory, nothing staged) and version 1 (no blobs
  // either; its transport mask becomes empty tcp/shm entries).
  static Result<RemoteRegion> decode(std::string_view bytes);
  // `gpu_direct[i]`: the GPUDirect route bits of transport i's registration
  // (MemoryDomain::gpu_direct_routes).
  static RemoteRegion make(const RegionRecord& rec, const Identity& owner,
                           std::vector<std::pair<std::uint8_t, std::string>> blobs,
                           std::uint64_t staging_chunk = 0,
                           const std::array<std::uint8_t, p2p::kTransportCount>& gpu_direct = {});
  static Endpoint owner(const RemoteRegion& r);
  static const std::vector<std::pair<std::uint8_t, std::string>>& blobs(const RemoteRegion& r) {
    return r.transport_blobs_;
  }
  // Bit i: TransportId i carries the region staged at its owner.
  static std::uint32_t staged(const RemoteRegion& r) { return r.staged_; }
  static std::uint64_t staging_chunk(const RemoteRegion& r) { return r.staging_chunk_; }
};

}  // namespace orbite::detail
