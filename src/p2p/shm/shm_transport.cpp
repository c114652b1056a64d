#include "p2p/shm/shm_transport.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"
#include "p2p/peer.h"
#include "p2p/shm/connect_blob.h"
#include "p2p/shm/vm_copy.h"

namespace orbite::p2p {

using detail::PeerLink;

namespace {
constexpr int kRingBudget = 64;

std::atomic<std::uint64_t> g_ring_counter{0};

// The accepter's ring is named after the initiator's, so the initiator can remove that name when
// no answer ever comes (the accepter died between creating its ring and answering).
std::string answer_ring_name(std::string_view offered) {
  return std::string(offered) + "-a";
}

std::string encode_blob(const ShmRing& ring, std::uint32_t proof_index, std::string_view nonce) {
  return encode_shm_blob(
      ShmConnectBlob{ring.name(), ring.capacity(), proof_index, std::string(nonce)});
}

bool push(ShmRing& ring, const detail::SendItem& item) {
  iovec iov[2];
  int n = 0;
  if (!item.owned.empty()) iov[n++] = {const_cast<char*>(item.owned.data()), item.owned.size()};
  if (item.data_len != 0) iov[n++] = {const_cast<std::byte*>(item.data), item.data_len};
  return ring.try_push(item.header, std::span<const iovec>(iov, n));
}

}  // namespace

ShmEndpoint::ShmEndpoint(ShmLane& lane, PeerLink& link, std::unique_ptr<ShmRing> rx,
                         std::unique_ptr<ShmRing> tx, std::string peer_gone)
    : lane_(lane),
      link_(link),
      rx_(std::move(rx)),
      tx_(std::move(tx)),
      peer_gone_(std::move(peer_gone)) {
  if (peer_gone_.empty()) tx_ring_ = tx_ ? tx_.get() : rx_.get();
  if (tx_) tx_->set_strict_wakeup(lane.config().progress_mode == ProgressMode::EventDriven);
}

ShmEndpoint::~ShmEndpoint() {
  close(false);
}

const Capabilities& ShmEndpoint::caps() const {
  return lane_.caps();
}

void ShmEndpoint::close(bool) {
  if (closed_) return;
  closed_ = true;
  lane_.detach(this);
  for (auto& item : out_) {
    if (item.pinned != nullptr) item.pinned->unpin();
  }
  out_.clear();
}

void ShmEndpoint::send(detail::SendItem item) {
  if (closed_) {
    if (item.pinned != nullptr) item.pinned->unpin();
    return;
  }
  if (out_.empty() && tx_ring_ != nullptr && push(*tx_ring_, item)) {
    lane_.handler().frame_written(*this, item);
    doorbell();
    return;
  }
  out_.push_back(std::move(item));
}

bool ShmEndpoint::send_now(const FrameHeader& h, std::span<const iovec> payload) {
  if (closed_ || tx_ring_ == nullptr || !out_.empty() || !tx_ring_->try_push(h, payload)) {
    return false;
  }
  doorbell();
  return true;
}

// Single copy reaches the process the kernel named when the peer proved itself (peer_proof.h),
// never the pid its Hello claims.
Result<pid_t> ShmEndpoint::proven_peer() const {
  const pid_t pid = lane_.proven_pid(link_);
  if (pid == 0) {
    return Status::error(Errc::Unavailable,
                         "peer " + short_id(link_.ep.id) + " (claiming pid " +
                             std::to_string(link_.ep.pid) +
                             ") has not proven its process: no single copy with it");
  }
  return pid;
}

Status ShmEndpoint::read_peer(std::byte* local, std::uint64_t remote, std::uint64_t len) {
  ORBITE_ASSIGN_OR_RETURN(pid_t pid, proven_peer());
  return vm_read(pid, local, remote, len);
}

Status ShmEndpoint::write_peer(const std::byte* local, std::uint64_t remote, std::uint64_t len) {
  ORBITE_ASSIGN_OR_RETURN(pid_t pid, proven_peer());
  return vm_write(pid, local, remote, len);
}

bool ShmEndpoint::one_sided_usable() const {
  return lane_.config().shm.single_copy && vm_copy_usable() && lane_.proven_pid(link_) != 0;
}

void ShmEndpoint::doorbell() {
  if (link_.is_self || tx_ == nullptr || !tx_->take_doorbell_request()) return;
  FrameHeader h;
  h.type = FrameType::Doorbell;
  lane_.control().send_control(link_, h);
}

int ShmEndpoint::flush() {
  int work = 0;
  if (tx_ring_ == nullptr) return 0;
  while (!out_.empty() && !closed_) {
    if (!push(*tx_ring_, out_.front())) break;
    detail::SendItem done = std::move(out_.front());
    out_.pop_front();
    lane_.handler().frame_written(*this, done);
    ++work;
  }
  if (work > 0) doorbell();
  return work;
}

int ShmEndpoint::poll() {
  FrameHandler& up = lane_.handler();
  int work = 0;
  while (work < kRingBudget && !closed_ && link_.up()) {
    ShmRing& ring = *rx_;
    const std::byte* p = ring.peek();
    if (p == nullptr) {
      if (!ring.corrupt().empty()) up.protocol_error(link_, ring.corrupt());
      break;
    }
    auto h = decode_header(p);
    if (!h.ok()) {
      up.protocol_error(link_, h.status().message());
      break;
    }
    if (kFrameHeaderBytes + h->payload_len > ring.current_frame_room()) {
      up.protocol_error(link_, "ring frame payload exceeds its record");
      break;
    }
    auto sink = up.begin_frame(link_, *h, *this);
    if (!sink.ok()) {
      up.protocol_error(link_, sink.status().message());
      break;
    }
    if (closed_ || !link_.up()) break;
    const std::byte* payload = p + kFrameHeaderBytes;
    std::string body;
    if (sink->kind == detail::Sink::Direct && h->payload_len > 0) {
      std::memcpy(sink->dst, payload, h->payload_len);
    } else if (sink->kind == detail::Sink::Buffer && h->payload_len > 0) {
      body = up.take_buffer();
      body.assign(reinterpret_cast<const char*>(payload), h->payload_len);
    }
    // Retire the record before handling it: handlers may push into the self link's ring.
    ring.pop();
    up.end_frame(link_, *h, *this, *sink, std::move(body));
    up.give_buffer(std::move(body));
    ++work;
  }
  return work;
}

int ShmEndpoint::progress() {
  int work = 0;
  if (!out_.empty()) work += flush();
  work += poll();
  // Receive only: what the peer wrote before it left is delivered first, then a frame that can
  // never leave fails the link rather than waiting for the peer's goodbye on the control socket.
  if (tx_ring_ == nullptr && !out_.empty() && !closed_ && link_.up() && rx_->empty()) {
    lane_.handler().endpoint_failed(link_, Status::error(Errc::ConnectionLost, peer_gone_));
    return work + 1;
  }
  return work;
}

bool ShmEndpoint::prepare_sleep() {
  return link_.is_self || rx_->prepare_sleep();
}

void ShmEndpoint::end_sleep() {
  if (!link_.is_self) rx_->cancel_sleep();
}

ShmLane::ShmLane(const EngineConfig& config, const detail::Identity& self, FrameHandler& handler,
                 ControlSender& control)
    : config_(config), self_(self), handler_(handler), control_(control) {
  if (config.shm.enable && config.shm.single_copy) {
    if (Status st = proofs_.open(self.id); !st.ok()) {
      ORBITE_LOG(Warn, Shm) << "no peer can prove its process to this engine (" << st.message()
                            << "): no single copy; shared memory uses two copies";
    }
  }
  caps_.id = TransportId::Shm;
  caps_.reach = kReachSelf | kReachSameHost;
  caps_.one_sided = true;
  caps_.eager_limit = config.shm.eager_limit;
  // A ring frame's payload is bounded by the smaller of the two rings' records.
  caps_.max_frame_payload = config.shm.ring_bytes / 4;
}

ShmLane::~ShmLane() {
  shutdown(Status());
}

Result<ShmRing> ShmLane::create_ring(const PeerLink& link) {
  const std::string name = "/orbite-" + std::to_string(self_.pid) + "-" + short_id(self_.id) + "-" +
                           short_id(link.ep.id) + "-" + std::to_string(g_ring_counter++);
  return ShmRing::create(name, config_.shm.ring_bytes);
}

void ShmLane::attach(PeerLink& link, std::unique_ptr<ShmRing> rx, std::unique_ptr<ShmRing> tx,
                     std::string peer_gone) {
  auto ep = std::make_unique<ShmEndpoint>(*this, link, std::move(rx), std::move(tx),
                                          std::move(peer_gone));
  active_.push_back(ep.get());
  link.endpoints[static_cast<std::size_t>(TransportId::Shm)] = std::move(ep);
}

std::optional<std::string> ShmLane::offer(PeerLink& link) {
  if (link.is_self || !link.same_host || !config_.shm.enable) return std::nullopt;
  auto ring = create_ring(link);
  if (!ring.ok()) {
    ORBITE_LOG(Warn, Shm) << "no shared-memory ring for peer " << short_id(link.ep.id) << ": "
                          << ring.status().message() << "; using TCP";
    return std::nullopt;
  }
  auto owned = std::make_unique<ShmRing>(std::move(*ring));
  std::string blob = encode_blob(*owned, proofs_.index(), proofs_.issue(&link));
  offered_[&link] = std::move(owned);
  return blob;
}

Result<std::string> ShmLane::accept(PeerLink& link, std::string_view blob) {
  if (!link.same_host || !config_.shm.enable) {
    return Status::error(Errc::Unavailable, link.same_host ? "shared memory is disabled here"
                                                           : "the peer is on another host");
  }
  Status failed;
  auto peer = decode_shm_blob(blob);
  if (!peer.ok()) return peer.status();
  // Our own handshake with this peer crossed theirs and lost (channel.cpp, adopt): its ring
  // will never be completed, so its name goes now rather than when the lane shuts down (a
  // process that ends without shutting down would leave it in /dev/shm).
  if (auto lost = offered_.find(&link); lost != offered_.end()) {
    drop_offer(lost);
  }
  const std::string own_name = answer_ring_name(peer->name);
  if (own_name.size() > kMaxRingName) {
    failed = Status::error(Errc::InvalidArgument,
                           "the peer's ring name is too long to name an answer after it");
  }
  Result<ShmRing> own =
      failed.ok() ? ShmRing::create(own_name, config_.shm.ring_bytes) : Result<ShmRing>(failed);
  if (!own.ok()) failed = own.status();
  Result<ShmRing> theirs =
      failed.ok() ? ShmRing::open(peer->name, peer->bytes) : Result<ShmRing>(failed);
  // Mapped on both sides now: the initiator's name can go, here as well as in its complete(),
  // so that it goes even if the initiator dies before it completes.
  if (theirs.ok()) unlink_peer_ring(peer->name);
  if (!theirs.ok()) {
    ORBITE_LOG(Warn, Shm) << "shared memory with peer " << short_id(link.ep.id) << " failed ("
                          << theirs.status().message() << "); using TCP";
    return theirs.status();
  }
  auto rx = std::make_unique<ShmRing>(std::move(*own));
  std::string mine = encode_blob(*rx, proofs_.index(), proofs_.issue(&link));
  prove_to(link, peer->proof_index, peer->nonce);
  attach(link, std::move(rx), std::make_unique<ShmRing>(std::move(*theirs)));
  return mine;
}

void ShmLane::decline(PeerLink&, std::string_view blob) {
  // A refused offer's ring is never mapped here; its name goes all the same, because a sender
  // killed after its Hello could not remove it (the name is the sender's own: decode checked it
  // is an /orbite- ring, and the sender's counter never names a ring twice).
  if (auto peer = decode_shm_blob(blob); peer.ok()) unlink_peer_ring(peer->name);
}

Status ShmLane::complete(PeerLink& link, std::optional<std::string_view> blob) {
  auto it = offered_.find(&link);
  if (it == offered_.end()) return {};
  std::unique_ptr<ShmRing> own = std::move(it->second);
  offered_.erase(it);
  own->unlink_name();
  if (!blob) {  // the peer declined shared memory: TCP only
    proofs_.forget(&link);
    return {};
  }
  ORBITE_ASSIGN_OR_RETURN(ShmConnectBlob peer, decode_shm_blob(*blob));
  if (peer.name != answer_ring_name(own->name())) {
    return Status::error(Errc::Protocol, "the peer answered with ring " + quote(peer.name) +
                                             ", not the one named after ours (" +
                                             quote(answer_ring_name(own->name())) + ")");
  }
  auto theirs = ShmRing::open(peer.name, peer.bytes);
  // Both sides have mapped both rings now (or never will): the names can go.
  unlink_peer_ring(peer.name);
  if (!theirs.ok() && theirs.status().code() == Errc::NotFound) {
    // The peer answered, then closed this link and its ring (the owner unlinks it) before its
    // answer reached us; what it sent is in our ring, so the link drains it before failing.
    attach(link, std::move(own), nullptr,
           "peer " + short_id(link.ep.id) + " closed its shared-memory ring " + peer.name +
               " before this side's handshake with it completed: nothing can be sent to it");
    return {};
  }
  if (!theirs.ok()) return theirs.status();
  // Before any frame of ours can ask the peer for a single copy (peer_proof.h: ordering).
  prove_to(link, peer.proof_index, peer.nonce);
  attach(link, std::move(own), std::make_unique<ShmRing>(std::move(*theirs)));
  return {};
}

void ShmLane::prove_to(const PeerLink& link, std::uint32_t index, std::string_view nonce) {
  if (!config_.shm.single_copy) return;
  if (Status st = PeerProofs::prove(link.ep.id, index, nonce); !st.ok()) {
    ORBITE_LOG(Debug, Shm) << "no proof of this process to peer " << short_id(link.ep.id) << " ("
                           << st.message() << "): it will not use single copy with us";
  }
}

pid_t ShmLane::proven_pid(const PeerLink& link) {
  return proofs_.proven(&link);
}

Status ShmLane::open_self(PeerLink& link) {
  // A rank talking to itself: one ring that it both writes and reads.
  ORBITE_ASSIGN_OR_RETURN(ShmRing ring,
                          ShmRing::create("/orbite-" + std::to_string(self_.pid) + "-self-" +
                                              std::to_string(g_ring_counter++),
                                          config_.shm.ring_bytes));
  ring.unlink_name();
  proofs_.mark_self(&link);
  attach(link, std::make_unique<ShmRing>(std::move(ring)), nullptr);
  return {};
}

Status ShmLane::adopt_connection(PeerLink&, int fd, std::uint32_t) {
  net::Fd refused(fd);
  return Status::error(Errc::Unavailable, "the shm transport opens no connections");
}

Status ShmLane::on_control(PeerLink&, std::uint64_t kind, std::string_view) {
  return Status::error(Errc::Protocol,
                       "shm control message " + std::to_string(kind) + ": shm defines none");
}

int ShmLane::progress() {
  int work = 0;
  // By index: a protocol error closes an endpoint, which leaves this list mid-loop.
  for (std::size_t i = 0; i < active_.size(); ++i) work += active_[i]->progress();
  return work;
}

bool ShmLane::prepare_sleep() {
  for (std::size_t i = 0; i < active_.size(); ++i) {
    if (!active_[i]->prepare_sleep()) {
      for (std::size_t j = 0; j < i; ++j) active_[j]->end_sleep();
      return false;
    }
  }
  return true;
}

void ShmLane::end_sleep() {
  for (ShmEndpoint* ep : active_) ep->end_sleep();
}

bool ShmLane::busy() const {
  for (const ShmEndpoint* ep : active_) {
    if (ep->busy()) return true;
  }
  return false;
}

void ShmLane::unlink_peer_ring(const std::string& name) {
  if (::shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
    ORBITE_LOG(Debug, Shm) << "shm_unlink(" << name << "): " << std::strerror(errno);
  }
}

void ShmLane::drop_offer(decltype(offered_)::iterator it) {
  // An answer may have created its ring before the link failed (and its creator died): the
  // name is known, so it goes with ours.
  unlink_peer_ring(answer_ring_name(it->second->name()));
  it->second->unlink_name();
  offered_.erase(it);
}

void ShmLane::forget(PeerLink& link) {
  if (auto it = offered_.find(&link); it != offered_.end()) drop_offer(it);
  proofs_.forget(&link);
}

void ShmLane::shutdown(const Status&) {
  while (!offered_.empty()) drop_offer(offered_.begin());
}

}  // namespace orbite::p2p
