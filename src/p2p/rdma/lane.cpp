// RdmaLane: the lane's CQ sets and QP table, the handshake's RdmaInfo, control dispatch, the
// pass and sleep arming, link loss and shutdown (its completions: completions.cpp).
#include "p2p/rdma/lane.h"

#include <fcntl.h>

#include <csignal>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>

#include "common/log.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

using detail::PeerLink;

namespace {
// How often a pass without an event still scans the waiting work: budgets another lane frees,
// deadlines and shared slots are no event of this lane's.
constexpr std::chrono::microseconds kIdleScanPeriod{20};

// Messages up to this size announce themselves with their write's request (RtsRma): a message
// that waits for its receive holds its registration and budget charges meanwhile, so large ones
// (whose WRITE outweighs a round trip anyway) wait for the Cts instead.
constexpr std::uint64_t kRmaMessageLimit = 1 << 20;

p2p::Capabilities rdma_caps(std::uint32_t frame_payload) {
  p2p::Capabilities c;
  c.id = p2p::TransportId::Rdma;
  c.reach = p2p::kReachSameHost | p2p::kReachRemote;
  c.host_memory = true;
  c.one_sided = true;
  c.frames = true;
  c.rma = true;
  c.eager_limit = frame_payload;
  c.max_frame_payload = frame_payload;
  return c;
}

}  // namespace

// The completion channel of one CQ set: its fd sits in the lane's epoll set, so an armed CQ
// wakes a sleeping worker. Events are acknowledged in batches (and before the CQs go).
class RdmaLane::ChannelWatch final : public p2p::Watcher {
 public:
  explicit ChannelWatch(CqSet& cqs) : cqs_(cqs) {}
  void on_ready(std::uint32_t) override {
    for (;;) {
      ibv_cq* cq = nullptr;
      void* cq_ctx = nullptr;
      if (cqs_.ctx.api.get_cq_event(cqs_.channel, &cq, &cq_ctx) != 0) break;  // EAGAIN
      ++cqs_.unacked;
      cqs_.armed = std::max(cqs_.armed - 1, 0);
      if (cqs_.unacked >= 64) {
        cqs_.ctx.api.ack_cq_events(cq, cqs_.unacked);
        cqs_.unacked = 0;
      }
    }
  }

 private:
  CqSet& cqs_;
};

RdmaEndpoint::RdmaEndpoint(RdmaLane& lane, detail::PeerLink& link, std::uint32_t peer_frames)
    : lane_(lane), link_(link), caps_(lane.caps()) {
  // Frames go into the peer's receives and are staged in this side's slots: the smaller fits both.
  caps_.eager_limit = std::min<std::uint64_t>(caps_.eager_limit, peer_frames);
  caps_.max_frame_payload = caps_.eager_limit;
}

void RdmaEndpoint::send(detail::SendItem item) {
  if (closed_) {
    if (item.pinned != nullptr) item.pinned->unpin();
    return;
  }
  lane_.send_frame(link_, std::move(item));
}

void RdmaEndpoint::close(bool orderly) {
  if (closed_) return;
  closed_ = true;
  lane_.drop_unsent_frames(link_);
  // After the last frame: the peer waits for it before it fails the link (expects_frames).
  if (orderly) lane_.say_bye(link_);
}

bool RdmaEndpoint::busy() const {
  return lane_.frames_pending(link_);
}

void RdmaLane::send_frame(detail::PeerLink& link, detail::SendItem item) {
  messenger_.send(link, peer_of(link), std::move(item));
}

bool RdmaLane::frames_pending(detail::PeerLink& link) {
  auto it = peers_.find(&link);
  if (it == peers_.end() || it->second->failed) return false;
  return it->second->frames.pending();
}

void RdmaLane::drop_unsent_frames(detail::PeerLink& link) {
  PeerRdma* peer = peer_of(link);
  if (peer == nullptr) return;  // failed: fail_peer released them
  peer->frames.drop_unsent();
}

void RdmaLane::say_bye(detail::PeerLink& link) {
  if (PeerRdma* peer = peer_of(link)) messenger_.say_bye(*peer);
}

bool RdmaLane::expects_frames(const detail::PeerLink& link) const {
  const auto it = peers_.find(const_cast<detail::PeerLink*>(&link));
  if (it == peers_.end() || it->second->failed || it->second->bye_received) return false;
  // The peer's message QP ends here: its frames arrive there, the Bye after the last one.
  for (const auto& [key, end] : it->second->sources) {
    const Qp* q = qp(end.qp_handle);
    if (std::get<2>(key) == kMessageSlot && q != nullptr && q->incarnation == end.incarnation &&
        !q->broken) {
      return true;
    }
  }
  return false;
}

Status RdmaEndpoint::read_peer(std::byte*, std::uint64_t, std::uint64_t) {
  return Status::error(Errc::Unavailable, "RDMA moves put/get through grants (start_rma)");
}
Status RdmaEndpoint::write_peer(const std::byte*, std::uint64_t, std::uint64_t) {
  return Status::error(Errc::Unavailable, "RDMA moves put/get through grants (start_rma)");
}
Status RdmaEndpoint::start_rma(p2p::RmaOp op) {
  return lane_.start_rma(link_, std::move(op));
}

Status RdmaLane::start_rma(detail::PeerLink& link, p2p::RmaOp op) {
  PeerRdma* peer = peer_of(link);
  if (peer == nullptr) {
    return Status::error(Errc::Unavailable,
                         "no RDMA endpoint to peer " + p2p::short_id(link.ep.id));
  }
  stirred_ = true;
  return requester_.start_rma(*peer, std::move(op));
}

RdmaLane::RdmaLane(std::shared_ptr<RdmaEngine> engine, std::shared_ptr<MrCache> cache,
                   const detail::Identity& self, p2p::RegionRegistry& regions, p2p::Poller& poller,
                   p2p::FrameHandler& handler, p2p::ControlSender& control)
    : engine_(std::move(engine)),
      cache_(std::move(cache)),
      self_(self),
      regions_(regions),
      poller_(poller),
      handler_(handler),
      control_(control),
      caps_(rdma_caps(static_cast<std::uint32_t>(engine_->config().rdma.eager_limit))),
      cfg_(engine_->config().rdma),
      qps_(*engine_, cfg_),
      hooks_(TestHooks::from_env()),
      source_(*this, engine_, regions_, cache_, hooks_),
      requester_(*this, engine_, cache_, hooks_) {
  wcs_.resize(kPollBatch);
  caps_.rma_message_limit = hooks_.rts_cts ? 0 : std::min(cfg_.max_direct_bytes, kRmaMessageLimit);
  if (hooks_.any()) {
    ORBITE_LOG(Warn, Rdma) << "ORBITE_RDMA_TEST_HOOKS is set: test misbehaviour on";
  }
}

TestHooks TestHooks::from_env() {
  TestHooks h;
  const char* env = std::getenv("ORBITE_RDMA_TEST_HOOKS");
  if (env == nullptr) return h;
  const std::string list = std::string(",") + env + ",";
  auto has = [&](const char* name) {
    return list.find(std::string(",") + name + ",") != std::string::npos;
  };
  h.widen_write = has("widen_write");
  h.replay_key = has("replay_key");
  h.other_qp = has("other_qp");
  h.kill_after_payload = has("kill_after_payload");
  h.kill_before_receipt = has("kill_before_receipt");
  h.kill_on_grant_request = has("kill_on_grant_request");
  h.kill_after_grant = has("kill_after_grant");
  h.retire_source_once = has("retire_source_once");
  h.forge_nic_table = has("forge_nic_table");
  h.forge_rendezvous = has("forge_rendezvous");
  h.forge_connect_slot = has("forge_connect_slot");
  h.withhold_receipt = has("withhold_receipt");
  h.flood_grant_requests = has("flood_grant_requests");
  h.hold_granted = has("hold_granted");
  h.defer_deadlined = has("defer_deadlined");
  h.hold_later_segments = has("hold_later_segments");
  h.flip_private_path = has("flip_private_path");
  h.fail_private_connect = has("fail_private_connect");
  h.rts_cts = has("rts_cts");
  return h;
}

RdmaLane::~RdmaLane() {
  shutdown(Status::error(Errc::Cancelled, "the engine closed"));
}

Status RdmaLane::init() {
  sent_nic_epoch_ = engine_->nic_epoch();  // the handshakes carry the tables from here on
  const auto& contexts = engine_->contexts();
  cqs_.resize(contexts.size());
  watches_.resize(contexts.size());
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    if (!contexts[i]->usable()) continue;
    ORBITE_ASSIGN_OR_RETURN(cqs_[i], make_set(i));
  }
  return {};
}

Result<std::unique_ptr<CqSet>> RdmaLane::make_set(std::size_t context) {
  auto set = std::make_unique<CqSet>(*engine_->contexts()[context], cfg_.max_cqes, cache_.get(),
                                     static_cast<std::uint32_t>(caps_.max_frame_payload));
  ORBITE_RETURN_IF_ERROR(set->init());
  const int fd = set->channel->fd;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return verbs::errno_status(Errc::Internal, "fcntl(O_NONBLOCK) on a completion channel", errno);
  }
  auto watch = std::make_unique<ChannelWatch>(*set);
  ORBITE_RETURN_IF_ERROR(poller_.add(fd, EPOLLIN, watch.get()));
  watches_[context] = std::move(watch);
  return set;
}

Result<std::unique_ptr<CqSet>> RdmaLane::replace_set(std::size_t context) {
  std::unique_ptr<CqSet> old = std::move(cqs_[context]);
  std::unique_ptr<ChannelWatch> old_watch = std::move(watches_[context]);
  auto fresh = make_set(context);
  if (!fresh.ok()) {
    cqs_[context] = std::move(old);
    watches_[context] = std::move(old_watch);
    return fresh.status();
  }
  poller_.remove(old->channel->fd);
  cqs_[context] = std::move(*fresh);
  return old;
}

// ---- handshake --------------------------------------------------------------------------

RdmaInfo RdmaLane::my_info(std::uint64_t link_incarnation) const {
  RdmaInfo info;
  info.engine = engine_->engine_key();
  info.rdma_incarnation = engine_->incarnation();
  info.link_incarnation = link_incarnation;
  info.lanes = engine_->config().num_lanes;
  info.frame_payload = static_cast<std::uint32_t>(caps_.max_frame_payload);
  info.nics = engine_->nic_records();
  return info;
}

std::optional<std::string> RdmaLane::offer(PeerLink& link) {
  if (link.is_self) return std::nullopt;
  const RdmaInfo info = my_info(engine_->next_link_incarnation());
  offered_[&link] = info.link_incarnation;
  return encode(info);
}

void RdmaLane::send_nic_tables() {
  const std::uint64_t epoch = engine_->nic_epoch();
  if (epoch == sent_nic_epoch_) return;
  sent_nic_epoch_ = epoch;
  fence_sweep_ = true;  // a context here paused or resumed
  for (auto& [link, peer] : peers_) {
    if (peer->failed) continue;
    RdmaInfo info = my_info(peer->my_link_incarnation);
    if (hooks_.forge_nic_table && !info.nics.empty()) info.nics.front().name += "_forged";
    send(*peer, ControlKind::NicTable, encode(info));
    add(engine_->counters().nic_tables_sent);
  }
}

void RdmaLane::on_nic_table(PeerRdma& peer, const RdmaInfo& m) {
  // The same engine, incarnation, link and lanes, and the same NICs (IDs and names): a table
  // changes their state and routes, never who they are or how many.
  bool same = m.engine == peer.info.engine && m.rdma_incarnation == peer.info.rdma_incarnation &&
              m.link_incarnation == peer.info.link_incarnation && m.lanes == peer.info.lanes &&
              m.frame_payload == peer.info.frame_payload && m.nics.size() == peer.info.nics.size();
  for (std::size_t i = 0; same && i < m.nics.size(); ++i) {
    same = m.nics[i].nic_id == peer.info.nics[i].nic_id &&
           m.nics[i].name == peer.info.nics[i].name &&
           m.nics[i].route_generation >= peer.info.nics[i].route_generation;
  }
  if (!same) {
    return protocol_error(peer,
                          "a NicTable that is not the peer's table of this link (another "
                          "engine, incarnation, link or NIC set, or an older route)");
  }
  add(engine_->counters().nic_tables_received);
  for (std::size_t i = 0; i < m.nics.size(); ++i) {
    const NicRecord& was = peer.info.nics[i];
    if (was.active != m.nics[i].active) {
      ORBITE_LOG(Info, Rdma) << "peer " << p2p::short_id(peer.link->ep.id) << ": its "
                             << m.nics[i].name << (m.nics[i].active ? " resumed" : " paused")
                             << "; later parents map their rails to its active NICs";
    }
  }
  peer.info.nics = m.nics;
  fence_sweep_ = true;  // a NIC there may have paused
}

Result<PeerRdma*> RdmaLane::make_peer(PeerLink& link, std::string_view blob, std::uint64_t mine) {
  ORBITE_ASSIGN_OR_RETURN(RdmaInfo info, decode_info(blob));
  if (info.engine != engine_key(link.ep.id)) {
    return Status::error(Errc::Protocol, "the RDMA connect blob names another engine");
  }
  auto peer = std::make_unique<PeerRdma>();
  peer->link = &link;
  peer->info = std::move(info);
  peer->my_link_incarnation = mine;
  peer->width = std::max<std::uint32_t>(
      1, std::min<std::uint32_t>(engine_->config().num_lanes, peer->info.lanes));
  PeerRdma* raw = peer.get();
  peers_[&link] = std::move(peer);
  link.endpoints[static_cast<std::size_t>(p2p::TransportId::Rdma)] =
      std::make_unique<RdmaEndpoint>(*this, link, raw->info.frame_payload);
  return raw;
}

Result<std::string> RdmaLane::accept(PeerLink& link, std::string_view blob) {
  const RdmaInfo mine = my_info(engine_->next_link_incarnation());
  ORBITE_RETURN_IF_ERROR(make_peer(link, blob, mine.link_incarnation).status());
  return encode(mine);
}

Status RdmaLane::complete(PeerLink& link, std::optional<std::string_view> blob) {
  auto it = offered_.find(&link);
  if (it == offered_.end()) return {};
  const std::uint64_t mine = it->second;
  offered_.erase(it);
  if (!blob) return {};  // the peer has no RDMA: the link goes on without it
  return make_peer(link, *blob, mine).status();
}

Status RdmaLane::open_self(PeerLink&) {
  return Status::error(Errc::Unavailable, "RDMA does not serve this engine itself");
}

Status RdmaLane::adopt_connection(PeerLink&, int fd, std::uint32_t) {
  ::close(fd);
  return Status::error(Errc::Protocol, "RDMA opens no connections of its own");
}

PeerRdma* RdmaLane::peer_of(PeerLink& link) {
  auto it = peers_.find(&link);
  return it == peers_.end() || it->second->failed ? nullptr : it->second.get();
}

void RdmaLane::send(PeerRdma& peer, ControlKind kind, std::string body) {
  p2p::FrameHeader h;
  h.type = p2p::FrameType::TransportControl;
  h.a = static_cast<std::uint64_t>(p2p::TransportId::Rdma);
  h.b = static_cast<std::uint64_t>(kind);
  control_.send_control(*peer.link, h, std::move(body));
}

Status RdmaLane::on_control(PeerLink& link, std::uint64_t kind, std::string_view body) {
  stirred_ = true;
  PeerRdma* peer = peer_of(link);
  if (peer == nullptr) {
    return Status::error(Errc::Protocol, std::string("RDMA ") + control_name(kind) +
                                             " from a peer without an RDMA endpoint");
  }
  // Decodes the body in full, then hands the message to its handler.
  auto handle = [&](auto decoded, auto on) -> Status {
    if (!decoded.ok()) return decoded.status();
    on(*peer, *decoded);
    return {};
  };
  // The part a message is for: the owner's go to the grant source, the requester's to the
  // requester, credits to the frame messenger, NIC tables stay on the lane.
  auto to = [](auto& part, auto fn) {
    return [&part, fn](PeerRdma& p, const auto& m) { (part.*fn)(p, m); };
  };
  switch (static_cast<ControlKind>(kind)) {
    case ControlKind::QpConnect:
      return handle(decode_qp_connect(body), to(source_, &GrantSource::on_qp_connect));
    case ControlKind::QpAccept:
      return handle(decode_qp_accept(body), [this](PeerRdma& p, const QpAccept& m) {
        // The message QP's answer goes to the messenger, a payload slot's to the requester.
        if (p.frames.qp.state == QpSlot::State::Building && p.frames.qp.builder == m.builder) {
          return messenger_.on_accept(p, m);
        }
        requester_.on_qp_accept(p, m);
      });
    case ControlKind::QpRetire:
      return handle(decode_qp_retire(body), to(source_, &GrantSource::on_qp_retire));
    case ControlKind::GrantRequest: {
      auto m = decode_grant_request(body);
      if (!m.ok()) return m.status();
      m->arrived = Clock::now();
      if (m->deadline_us != 0) {  // time left when sent, here in this host's clock (bounded)
        m->local_deadline = Clock::now() + std::chrono::microseconds(
                                               std::min<std::uint64_t>(m->deadline_us, 1ULL << 40));
      }
      source_.on_grant_request(*peer, *m);
      return {};
    }
    case ControlKind::GrantCancel:
      return handle(decode_grant_cancel(body), to(source_, &GrantSource::on_grant_cancel));
    case ControlKind::Grant:
      return handle(decode_grant(body), to(requester_, &Requester::on_grant));
    case ControlKind::GrantNack:
      return handle(decode_grant_nack(body), to(requester_, &Requester::on_grant_nack));
    case ControlKind::GrantAck:
      return handle(decode_grant_ack(body), to(requester_, &Requester::on_grant_ack));
    case ControlKind::FrameCredit:
      return handle(decode_frame_credit(body), to(messenger_, &FrameMessenger::on_credit));
    case ControlKind::NicTable:
      return handle(decode_info(body), to(*this, &RdmaLane::on_nic_table));
    case ControlKind::QpLost:
      return handle(decode_qp_lost(body), [this](PeerRdma& p, const QpLost& m) {
        if (m.slot == kMessageSlot) return messenger_.on_qp_lost(p, m);
        requester_.on_qp_lost(p, m);
      });
  }
  return Status::error(Errc::Protocol, "RDMA control kind " + std::to_string(kind) + " unknown");
}

void RdmaLane::protocol_error(PeerRdma& peer, const std::string& what) {
  // The protocol fails the whole link, and through forget() every grant and parent of it.
  handler_.protocol_error(*peer.link, "RDMA: " + what);
}

Result<Qp*> RdmaLane::new_qp(std::size_t context, QpRole role, PeerRdma& peer, std::uint32_t slot,
                             ibv_pd* pd) {
  CqSet* cqs = context < cqs_.size() ? cqs_[context].get() : nullptr;
  if (cqs == nullptr) {
    return Status::error(Errc::Unavailable,
                         "RDMA context " + std::to_string(context) + " is not usable on this lane");
  }
  ORBITE_ASSIGN_OR_RETURN(Qp * q, qps_.create(*cqs, role, peer, slot, pd));
  // Handles of destroyed QPs leave the list (a private grant makes a QP per grant, and a freed
  // handle may serve another peer next).
  std::erase_if(peer.qps, [&](std::uint16_t h) { return h == q->handle || qps_.peer(h) != &peer; });
  peer.qps.push_back(q->handle);
  return q;
}

int RdmaLane::progress() {
  if (source_.kill_pending()) ::raise(SIGKILL);  // test hook kill_after_grant: the Grant left
  send_nic_tables();                             // a context paused or resumed since the last pass
  // Every WR belongs to a parent, a grant, a frame or a retired QP, and frames arrive only where
  // a message QP's receiving end exists: with none of them, no completion can come, and the
  // lane's passes (shm's hot path among them) skip the CQs.
  // One clock read for the pass's timers (in a VM each read is a measurable share of a pass).
  const auto now = Clock::now();
  reap_idle_qps(now);
  retire_fenced_qps(now);
  if (!busy() && qps_.message_sources() == 0) return 0;
  int work = poll_cqs();
  bool scan =
      work > 0 || std::exchange(stirred_, false) || requester_.dispatch_due() || now >= next_scan_;
  for (auto& [link, peer] : peers_) {
    if (!scan && peer->grants.awaits_receives()) scan = true;
  }
  if (scan) next_scan_ = now + kIdleScanPeriod;
  for (auto& [link, peer] : peers_) {
    requester_.expire_drains(*peer);
    if (peer->failed) continue;
    messenger_.pump(*peer);
    if (scan) source_.retry_deferred(*peer);
    requester_.send_waiting_requests(*peer);
  }
  if (source_.expiry_due(now)) {
    for (auto& [link, peer] : peers_) source_.expire(*peer, now);
  }
  if (scan) requester_.dispatch();
  if (qps_.any_retired()) qps_.destroy_retired(Clock::now());
  return work;
}

bool RdmaLane::prepare_sleep() {
  if (requester_.dispatch_due())
    return false;  // a parent to admit or a payload to post: one more pass
  if (!busy() && qps_.message_sources() == 0) return true;  // nothing can complete (see progress)
  // Arm every CQ, then look once more: a completion that arrived before the arming would
  // otherwise wait for the next one.
  for (auto& set : cqs_) {
    if (!set) continue;
    if (verbs::req_notify_cq(set->send_cq, 0) != 0 || verbs::req_notify_cq(set->recv_cq, 0) != 0) {
      return false;
    }
    set->armed = 2;
  }
  return poll_cqs() == 0;
}

void RdmaLane::end_sleep() {}

bool RdmaLane::busy() const {
  for (const auto& [link, peer] : peers_) {
    if (!peer->parents.empty() || !peer->grants.empty() || peer->frames.pending() ||
        peer->grants.has_deferred_work()) {
      return true;
    }
  }
  return qps_.any_retired();
}

void RdmaLane::fail_peer(PeerRdma& peer, const Status& why) {
  if (peer.failed) return;
  peer.failed = true;
  // Frames not yet sent, or not proven delivered: the link's requests fail with it.
  peer.frames.fail();
  peer.grants.clear_deferred();  // their receives fail with the link
  source_.close_all(peer, why);
  // Every QP of the peer goes to ERR: what was posted flushes, and parents end once drained.
  for (std::uint16_t h : peer.qps) {
    if (qp(h) != nullptr && qps_.peer(h) == &peer) retire_qp(h);
  }
  requester_.link_failed(peer, why);
  // A later connection to the peer starts with fresh pairs.
  engine_->rail_health().forget_epoch(peer.my_link_incarnation);
}

void RdmaLane::forget(PeerLink& link) {
  offered_.erase(&link);
  if (PeerRdma* peer = peer_of(link)) {
    fail_peer(*peer, link.failure.ok() ? Status::error(Errc::ConnectionLost, "the link failed")
                                       : link.failure);
  }
}

void RdmaLane::shutdown(const Status& why) {
  for (auto& [link, peer] : peers_) fail_peer(*peer, why);
  // Drain what was flushed, then destroy: a QP that is destroyed runs no WR any more.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (qps_.any_retired() && Clock::now() < deadline) {
    poll_cqs();
    qps_.destroy_retired(Clock::now());
  }
  // Not drained in time: destroying the QP is what proves none of its WRs runs again.
  qps_.abandon_retired();
  // Parents still waiting: their QPs are gone now, so no DMA can touch their buffers.
  for (auto& [link, peer] : peers_) requester_.shutdown(*peer);
  source_.close();
  for (auto& set : cqs_) {
    if (set) poller_.remove(set->channel->fd);
  }
  watches_.clear();
  cqs_.clear();
}

}  // namespace orbite::rdma
