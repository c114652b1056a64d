// The shm transport: one shared-memory ring per direction per same-host peer (each side creates
// the ring it reads and names it in its connect blob; both names are unlinked once both sides
// mapped them), a loopback ring for this engine itself, and single copy: one-sided access to the
// peer's memory with process_vm_readv/writev, in the process the kernel named when the peer
// proved itself (peer_proof.h), never the pid it claims. Rings cannot wake a sleeper: a consumer
// about to sleep raises a flag, and the producer that sees it sends a Doorbell on the control
// channel.
#pragma once

#include <orbite/config.h>

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "p2p/peer.h"
#include "p2p/shm/peer_proof.h"
#include "p2p/shm/shm_ring.h"
#include "p2p/transport.h"

namespace orbite::p2p {

class ShmLane;

class ShmEndpoint final : public PeerEndpoint {
 public:
  // rx: the ring we read; tx: the ring we write (null for self: rx both ways). With
  // `peer_gone` set, tx is null because the peer closed this link before our handshake completed
  // (its ring's name was gone): the endpoint only drains what the peer wrote before it left, and
  // a frame to send fails the link with ConnectionLost and `peer_gone` once rx is empty.
  ShmEndpoint(ShmLane& lane, detail::PeerLink& link, std::unique_ptr<ShmRing> rx,
              std::unique_ptr<ShmRing> tx, std::string peer_gone = {});
  ~ShmEndpoint() override;
  [[nodiscard]] const Capabilities& caps() const override;
  void send(detail::SendItem item) override;
  bool send_now(const FrameHeader& h, std::span<const iovec> payload) override;
  [[nodiscard]] std::size_t paths() const override { return 1; }
  Status read_peer(std::byte* local, std::uint64_t remote, std::uint64_t len) override;
  Status write_peer(const std::byte* local, std::uint64_t remote, std::uint64_t len) override;
  [[nodiscard]] bool one_sided_usable() const override;
  Status start_rma(RmaOp) override {
    return Status::error(Errc::Unavailable, "this transport has no one-sided protocol of its own");
  }
  [[nodiscard]] bool busy() const override { return !out_.empty(); }
  void close(bool orderly) override;

  // The lane's pass: queued frames into the ring, then arrived frames up.
  int progress();
  bool prepare_sleep();
  void end_sleep();

 private:
  int flush();
  int poll();
  void doorbell();
  [[nodiscard]] Result<pid_t> proven_peer() const;

  ShmLane& lane_;
  detail::PeerLink& link_;
  std::unique_ptr<ShmRing> rx_;
  std::unique_ptr<ShmRing> tx_;
  ShmRing* tx_ring_ = nullptr;        // tx_, rx_ for self, null when the peer is gone
  std::string peer_gone_;             // why tx_ring_ is null (receive only)
  std::deque<detail::SendItem> out_;  // frames waiting for ring space
  bool closed_ = false;
};

class ShmLane final : public LaneTransport {
 public:
  ShmLane(const EngineConfig& config, const detail::Identity& self, FrameHandler& handler,
          ControlSender& control);
  ~ShmLane() override;
  [[nodiscard]] const Capabilities& caps() const override { return caps_; }
  std::optional<std::string> offer(detail::PeerLink& link) override;
  Result<std::string> accept(detail::PeerLink& link, std::string_view blob) override;
  void decline(detail::PeerLink& link, std::string_view blob) override;
  Status complete(detail::PeerLink& link, std::optional<std::string_view> blob) override;
  Status open_self(detail::PeerLink& link) override;
  Status adopt_connection(detail::PeerLink&, int fd, std::uint32_t) override;
  Status on_control(detail::PeerLink&, std::uint64_t kind, std::string_view) override;
  int progress() override;
  bool prepare_sleep() override;
  void end_sleep() override;
  [[nodiscard]] bool busy() const override;
  void forget(detail::PeerLink& link) override;
  void shutdown(const Status& why) override;

  void detach(ShmEndpoint* ep) { std::erase(active_, ep); }
  FrameHandler& handler() { return handler_; }
  ControlSender& control() { return control_; }
  const EngineConfig& config() const { return config_; }
  // The peer's process as the kernel named it when it proved itself; 0 until it has.
  pid_t proven_pid(const detail::PeerLink& link);
  // Connections and refusals on the proof socket (tests and diagnostics).
  const PeerProofs& proofs() const { return proofs_; }

 private:
  Result<ShmRing> create_ring(const detail::PeerLink& link);
  void attach(detail::PeerLink& link, std::unique_ptr<ShmRing> rx, std::unique_ptr<ShmRing> tx,
              std::string peer_gone = {});
  void prove_to(const detail::PeerLink& link, std::uint32_t index, std::string_view nonce);
  // Removes a peer's ring name (no error when it is gone already).
  static void unlink_peer_ring(const std::string& name);

  const EngineConfig& config_;
  const detail::Identity& self_;
  FrameHandler& handler_;
  ControlSender& control_;
  Capabilities caps_;
  // Endpoints in the lane's passes; each removes itself when closed.
  std::vector<ShmEndpoint*> active_;
  // Rings this side created for a Hello, until the peer's answer arrives.
  std::unordered_map<const detail::PeerLink*, std::unique_ptr<ShmRing>> offered_;
  // Removes an offer that will never be completed, with the name its answer would have had.
  void drop_offer(decltype(offered_)::iterator it);
  // The proof socket and each link's nonce and proven pid (keyed by the link).
  PeerProofs proofs_;
};

}  // namespace orbite::p2p
