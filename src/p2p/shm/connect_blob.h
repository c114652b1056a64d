// The shm transport's connect blob, which a peer sends in its Hello: the ring its sender reads,
// then the number of the sender's proof socket and the nonce with which the receiver proves its
// process there (peer_proof.h). Decoded in full and checked before any ring is opened.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace orbite::p2p {

inline constexpr std::size_t kMaxRingName = 255;

struct ShmConnectBlob {
  std::string name;         // of the ring, "/orbite-..."
  std::uint64_t bytes = 0;  // its capacity: a power of two, at least 4 KiB
  std::uint32_t proof_index = 0;
  std::string nonce;  // kProofNonceBytes
};

std::string encode_shm_blob(const ShmConnectBlob& blob);
// Protocol naming the blob's size, ring name and capacity when anything is out of shape.
Result<ShmConnectBlob> decode_shm_blob(std::string_view blob);

}  // namespace orbite::p2p
