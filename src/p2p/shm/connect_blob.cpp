#include "p2p/shm/connect_blob.h"

#include "common/wire.h"
#include "p2p/shm/peer_proof.h"

namespace orbite::p2p {

std::string encode_shm_blob(const ShmConnectBlob& blob) {
  std::string out;
  wire::Writer w(out);
  w.put<std::uint64_t>(blob.bytes);
  w.put_bytes(blob.name);
  w.put<std::uint32_t>(blob.proof_index);
  w.put_bytes(blob.nonce);
  return out;
}

Result<ShmConnectBlob> decode_shm_blob(std::string_view blob) {
  wire::Reader r(blob);
  ShmConnectBlob out;
  out.bytes = r.get<std::uint64_t>();
  out.name = std::string(r.get_bytes(kMaxRingName));
  out.proof_index = r.get<std::uint32_t>();
  out.nonce = std::string(r.get_bytes(kProofNonceBytes));
  if (!r.done() || !out.name.starts_with("/orbite-") || out.bytes < 4096 ||
      (out.bytes & (out.bytes - 1)) != 0 || out.nonce.size() != kProofNonceBytes) {
    return Status::error(Errc::Protocol, "shm connect blob of " + std::to_string(blob.size()) +
                                             " bytes is invalid (ring '" + out.name + "', " +
                                             std::to_string(out.bytes) + " bytes)");
  }
  return out;
}

}  // namespace orbite::p2p
