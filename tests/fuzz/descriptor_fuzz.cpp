// Fuzz target: the region descriptor a peer hands over (RemoteRegion::from_bytes, every version
// it reads, 1 to 4). An accepted descriptor must serialize (bytes(), always version 4) to bytes
// that are accepted again and serialize identically, and its transport views must be readable.
#include <orbite/transfer.h>

#include <string_view>

#include "common/wire.h"
#include "fuzz_target.h"

namespace orbite::fuzz {
namespace {

// A version-4 descriptor as MemoryRegion::export_descriptor() writes it (p2p/descriptor.cpp):
// magic, version, owner id, address, host, pid, region, generation, length, rights, kind,
// staging chunk, then (transport id, flags, blob) entries.
std::string descriptor(std::uint8_t kind, std::uint64_t chunk,
                       const std::vector<std::tuple<std::uint8_t, std::uint8_t, std::string>>& e) {
  std::string out;
  wire::Writer w(out);
  w.put<std::uint32_t>(0x4f52524d);
  w.put<std::uint8_t>(4);
  w.put_bytes(std::string("0123456789abcdef0123456789abcdef"));
  w.put_bytes(std::string("127.0.0.1:41000"));
  w.put_bytes(std::string("host-0"));
  w.put<std::int64_t>(4242);
  w.put<std::uint64_t>(7);
  w.put<std::uint64_t>(1);
  w.put<std::uint64_t>(1 << 20);
  w.put<std::uint8_t>(3);
  w.put<std::uint8_t>(kind);
  w.put<std::uint64_t>(chunk);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(e.size()));
  for (const auto& [id, flags, blob] : e) {
    w.put<std::uint8_t>(id);
    w.put<std::uint8_t>(flags);
    w.put_bytes(blob);
  }
  return out;
}

}  // namespace

std::vector<std::string> seeds() {
  return {
      descriptor(0, 0, {{0, 0, ""}, {1, 0, std::string(20, 's')}}),
      descriptor(1, 1 << 20, {{0, 1, ""}, {2, 3, std::string(12, 'r')}}),
      descriptor(1, 0, {{2, 6, std::string(12, 'r')}}),
  };
}

bool accepts(const std::uint8_t* data, std::size_t size) {
  const auto r =
      RemoteRegion::from_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!r.ok()) return false;
  (void)r->transports();
  (void)r->staged_transports();
  (void)r->gpu_direct_routes();
  const std::string bytes = r->bytes();
  const auto again = RemoteRegion::from_bytes(bytes);
  require(again.ok(), "bytes() of an accepted descriptor is refused");
  require(again->bytes() == bytes, "the descriptor does not round-trip");
  return true;
}

}  // namespace orbite::fuzz
