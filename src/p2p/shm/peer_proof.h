// Proof of a same-host peer's process, for single copy. A peer's Hello names its pid, but
// process_vm_readv/writev must not trust a claim: a peer naming another process's pid would make
// this engine read or write that process's memory at addresses the peer chooses. The kernel
// vouches instead. Each engine listens on an abstract Unix socket named after its engine id; for
// each link it hands the peer a random nonce inside its shm connect blob (over the control
// connection, so only the process on the other end of that connection learns it). The peer
// proves itself by connecting to that socket and writing the nonce; SO_PEERCRED on the accepted
// connection names the connecting process as the kernel sees it from here, and that pid, not the
// claimed one, is what single copy uses.
//
// Ordering makes the check deterministic: a prover connects and writes before it sends anything
// else on the link (a Unix connection is queued in the listener's backlog, its bytes in its
// buffer, when connect and write return), so by the time a frame of that peer asks this side for
// a single copy, the proof is already waiting and one non-blocking drain finds it.
#pragma once

#include <orbite/status.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/net.h"

namespace orbite::p2p {

inline constexpr std::size_t kProofNonceBytes = 16;

class PeerProofs {
 public:
  // Opens a listener for engine `engine_id`, numbered uniquely in this process. Failing to is not
  // an error for the engine: no peer can prove itself to this lane, so it uses no single copy.
  Status open(std::string_view engine_id);
  [[nodiscard]] bool listening() const { return listener_.valid(); }
  // The listener's number, which the peer needs to find it (sent beside the nonce).
  [[nodiscard]] std::uint32_t index() const { return index_; }

  // A fresh nonce for `key` (one link), replacing any earlier one.
  std::string issue(const void* key);
  // The pid the kernel named for `key`'s prover: 0 while none proved itself. Drains pending
  // connections first while any nonce is outstanding.
  pid_t proven(const void* key);
  void forget(const void* key);
  // `key` is this engine's link to itself: its process is this one, nothing to prove.
  void mark_self(const void* key);
  // Proves this process to the engine `peer_engine_id` with the nonce it issued. Best effort: a
  // peer that cannot be reached (another network namespace, a full backlog) just gets no proof.
  static Status prove(std::string_view peer_engine_id, std::uint32_t index, std::string_view nonce);
  // The abstract socket name of an engine's listener (without the leading NUL).
  static std::string socket_name(std::string_view engine_id, std::uint32_t index);

  // Connections accepted and matched, accepted and refused (wrong size, unknown nonce).
  [[nodiscard]] std::uint64_t accepted() const { return accepted_; }
  [[nodiscard]] std::uint64_t refused() const { return refused_; }

 private:
  struct Entry {
    std::string nonce;
    pid_t pid = 0;  // 0: not proven yet
  };
  void drain();

  net::Fd listener_;
  std::uint32_t index_ = 0;
  // Per link; touched only by the lane's thread (the lane's passes and its handshake calls).
  std::unordered_map<const void*, Entry> entries_;
  std::size_t outstanding_ = 0;  // entries without a proof
  std::uint64_t accepted_ = 0;
  std::uint64_t refused_ = 0;
};

}  // namespace orbite::p2p
