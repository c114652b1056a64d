// The source's grants: the source-role end of a requester's slot, the bind completions and the
// publication, the receipts checked field by field, cancel and expiry, and the close (READY) or
// revocation. The answer to a GrantRequest is in grant_request.cpp.
#include <algorithm>
#include <csignal>
#include <cstring>
#include <random>

#include "common/log.h"
#include "p2p/rdma/source.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

std::uint64_t random_u64() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

GrantSource::GrantSource(LaneServices& lane, std::shared_ptr<RdmaEngine> engine,
                         p2p::RegionRegistry& regions, std::shared_ptr<MrCache> cache,
                         TestHooks& hooks)
    : lane_(lane),
      engine_(std::move(engine)),
      cfg_(engine_->config().rdma),
      regions_(regions),
      cache_(std::move(cache)),
      hooks_(hooks),
      windows_(*engine_, engine_->contexts().size()) {}

void GrantSource::retry_deferred(PeerRdma& peer) {
  if (!peer.grants.has_deferred()) return;
  const Clock::time_point now = Clock::now();
  qp_memo_.clear();
  // One waiting for receipt slots or SQ room that no grant freed since stays queued, not answered
  // again: with a batch of hundreds deferred, answering each one every pass cost more than the
  // grants themselves (docs/rdma.md, plan item 4). Its deadline is still watched.
  // Likewise one waiting for the grant budgets while this peer's own grants hold them.
  const bool slots_spent = engine_->grants().used() >= engine_->grants().limit();
  const std::uint64_t bytes_used = engine_->granted_bytes().used();
  auto again = peer.grants.take_deferred([&](const GrantRequest& m) {
    if (now >= m.local_deadline) return false;
    if (m.awaits_own) {
      return !peer.grants.empty() &&
             (slots_spent || bytes_used + m.length > engine_->granted_bytes().limit());
    }
    return m.awaits_room && room_still_short(peer, m);
  });
  for (GrantRequest& m : again) {
    if (peer.failed) break;
    m.awaits_room = m.awaits_own = false;
    on_grant_request(peer, m);
  }
}

void GrantSource::connection_failed(PeerRdma& peer, std::uint16_t handle, const Status& why,
                                    bool open_only) {
  std::vector<std::uint64_t> hit;
  peer.grants.through(handle, open_only, hit);
  for (std::uint64_t gid : hit) close_grant(peer, gid, why, true);
}

void GrantSource::close_all(PeerRdma& peer, const Status& why) {
  // Windows deallocated (nothing can use them afterwards), ranges unlocked.
  std::vector<std::uint64_t> grants;
  peer.grants.ids(grants);
  for (std::uint64_t id : grants) close_grant(peer, id, why, false);
}

void GrantSource::on_qp_connect(PeerRdma& peer, const QpConnect& m) {
  QpAccept reply;
  reply.builder = m.builder;
  auto refuse = [&](const Status& st) {
    reply.errc = static_cast<std::uint32_t>(st.code());
    reply.reason = st.message();
    lane_.send(peer, ControlKind::QpAccept, encode(reply));
  };
  const auto& contexts = engine_->contexts();
  std::size_t context = contexts.size();
  for (std::size_t c = 0; c < contexts.size(); ++c) {
    if (contexts[c]->nic_id == m.qp.remote_nic && lane_.context_usable(c)) context = c;
  }
  // The link's width bounds the slots a peer may open here: every one charges the engine-wide
  // endpoint and CQ budgets, which one peer must not spend for everyone.
  if (m.slot >= peer.width && m.slot != kMessageSlot) {
    return refuse(Status::error(Errc::InvalidArgument,
                                "QpConnect slot " + std::to_string(m.slot) +
                                    " is beyond this link's " + std::to_string(peer.width) +
                                    " QP slots (the smaller rdma.num_lanes of the two engines) and "
                                    "is not the message slot " +
                                    std::to_string(kMessageSlot)));
  }
  const NicRecord* nic = peer.nic(m.qp.nic_id);
  if (context == contexts.size() || nic == nullptr) {
    return refuse(Status::error(
        Errc::Unavailable, "no usable RDMA context with NIC id " + std::to_string(m.qp.remote_nic) +
                               " (or the requester's NIC " + std::to_string(m.qp.nic_id) +
                               " is unknown)"));
  }
  const auto key = std::make_tuple(static_cast<std::uint8_t>(m.qp.nic_id),
                                   static_cast<std::uint8_t>(m.qp.remote_nic), m.slot);
  if (auto old = peer.sources.find(key); old != peer.sources.end()) {
    // The requester rebuilt the slot: the old end goes, with whatever was granted through it.
    on_qp_retire(peer, QpRetire{m.slot, old->second.incarnation});
  }
  auto made = lane_.new_qp(context, QpRole::Source, peer, m.slot);
  if (!made.ok()) return refuse(made.status());
  Qp& q = **made;
  q.psn = static_cast<std::uint32_t>(random_u64() & 0xffffff);
  if (q.message) {
    // The peer's frames arrive here: no READ in either direction.
    q.dest_rd_atomic = 0;
    q.rd_atomic = 0;
  } else {
    q.dest_rd_atomic = clamp_rd_depth(cfg_.max_dest_rd_atomic, q.ctx->limits.max_qp_rd_atom);
    q.rd_atomic = clamp_rd_depth(cfg_.max_rd_atomic, q.ctx->limits.max_qp_init_rd_atom);
  }
  Status st = lane_.post_receives(q);
  if (st.ok()) {
    st = connect_rc_qp(*q.ctx, q.qp, remote_end(*nic, m.qp.qpn, m.qp.psn), q.psn, q.rd_atomic,
                       q.dest_rd_atomic);
  }
  if (!st.ok()) {
    lane_.retire_qp(q.handle);
    return refuse(st);
  }
  q.ready = true;
  q.remote_qpn = m.qp.qpn;
  q.remote_incarnation = m.qp_incarnation;
  peer.sources[key] = SourceSlot{q.handle, q.incarnation};
  ORBITE_LOG(Debug, Rdma) << q.ctx->name << ": QP " << q.qp->qp_num << " (slot " << m.slot
                          << ", source) connected to the peer's QP " << m.qp.qpn;
  reply.qp_incarnation = q.incarnation;
  reply.qp = QpEndpointInfo{q.qp->qp_num, q.psn,       m.qp.remote_nic,
                            m.qp.nic_id,  q.rd_atomic, q.dest_rd_atomic};
  lane_.send(peer, ControlKind::QpAccept, encode(reply));
}

void GrantSource::on_qp_retire(PeerRdma& peer, const QpRetire& m) {
  for (auto it = peer.sources.begin(); it != peer.sources.end(); ++it) {
    if (std::get<2>(it->first) != m.slot || it->second.incarnation != m.qp_incarnation) continue;
    const std::uint16_t handle = it->second.qp_handle;
    std::vector<std::uint64_t> hit;
    peer.grants.through(handle, false, hit);
    for (std::uint64_t id : hit) {
      close_grant(peer, id,
                  Status::error(Errc::ConnectionLost,
                                "the requester retired the connection; effect unknown"),
                  true);
    }
    lane_.retire_qp(handle);
    peer.sources.erase(it);
    return;
  }
  // Already gone (both sides may retire a failed pair): nothing to do.
}

void GrantSource::on_grant_cancel(PeerRdma& peer, const GrantCancel& m) {
  GrantState* g = peer.grants.find(m.grant);
  if (g == nullptr || g->generation != m.generation || g->parent != m.parent) {
    return;  // closed already (expired, or its connection failed): its GrantAck went that way
  }
  for (const GrantSegment& s : g->segments) {
    if (s.receipted) {
      return lane_.protocol_error(peer, "GrantCancel for grant " + std::to_string(m.grant) +
                                            " after a receipt of its payload");
    }
  }
  close_grant(peer, m.grant,
              Status::error(Errc::Timeout,
                            "the requester's deadline passed before its payload; the grant was "
                            "released without payload"),
              true);
}

void GrantSource::defer(PeerRdma& peer, const GrantRequest& m, bool awaits_receive,
                        bool awaits_room, bool awaits_own) {
  bool first = false;
  if (!peer.grants.defer(m, &first, awaits_receive, awaits_room, awaits_own)) {
    // A conforming requester never has that many unanswered (see kMaxPendingGrantRequests):
    // the queue, and the passes that retry it, stay bounded.
    return lane_.protocol_error(peer, "more than " + std::to_string(kMaxPendingGrantRequests) +
                                          " GrantRequests of this peer waiting (parent " +
                                          std::to_string(m.parent) + ")");
  }
  // Counted once however often it waits, by its own mark (a pass may also take new requests).
  if (first) add(engine_->counters().grant_requests_deferred);
}

void GrantSource::on_wr(PeerRdma& peer, const WrRecord& r, bool ok) {
  if (r.kind != WrKind::Bind) return;
  GrantState* found = peer.grants.find(r.owner);
  if (found == nullptr) return;
  GrantState& g = *found;
  GrantSegment& s = g.segments[r.segment];
  if (!ok) {
    s.bind_failed = true;
    return close_grant(peer, g.id,
                       Status::error(Errc::Unavailable, "binding a memory window failed"), true);
  }
  s.bound = true;
  publish_if_bound(peer, g);
}

void GrantSource::publish_if_bound(PeerRdma& peer, GrantState& g) {
  if (g.published || !std::all_of(g.segments.begin(), g.segments.end(),
                                  [](const GrantSegment& s) { return s.bound; })) {
    return;
  }
  // Every bind has completed: only now does authority leave this process.
  Grant m;
  m.parent = g.parent;
  m.grant = g.id;
  m.generation = g.generation;
  m.nonce = g.nonce;
  for (const GrantSegment& s : g.segments) {
    m.segments.push_back(
        SegmentGrant{s.rkey, reinterpret_cast<std::uint64_t>(g.region->base + s.offset)});
  }
  if (g.priv != nullptr) {
    // The private grant path: the requester connects its private QP to this one.
    const Qp* q = lane_.qp(g.priv->qp_handle);
    m.private_path = true;
    m.private_incarnation = q->incarnation;
    m.private_qp = QpEndpointInfo{
        q->qp->qp_num,         q->psn,       static_cast<std::uint8_t>(q->ctx->nic_id),
        g.priv->requester_nic, q->rd_atomic, q->dest_rd_atomic};
  }
  g.published = true;
  add(engine_->counters().grants);
  lane_.send(peer, ControlKind::Grant, encode(m));
  if (hooks_.kill_after_grant) {
    // Test hook: dies with the grant published (the frame is flushed at the end of a pass, so
    // give it one).
    kill_pending_ = true;
  }
}

Binding GrantSource::expected_binding(const PeerRdma& peer, const GrantState& g,
                                      const GrantSegment& s, const Qp& q) const {
  Binding b;
  b.op = g.op;
  b.first_slice = s.first_slice;
  b.slice_count = s.slices;
  b.source_engine = engine_->engine_key();
  b.requester_engine = peer.info.engine;
  b.link_incarnation = peer.my_link_incarnation;
  b.qp_incarnation = q.incarnation;
  b.grant_id = g.id;
  b.grant_generation = g.generation;
  b.grant_nonce = g.nonce;
  b.request_id = g.parent;
  b.target_id = g.target;
  b.target_generation = g.target_generation;
  b.offset = s.offset;
  b.length = s.length;
  b.rkey = s.rkey;
  b.source_qpn = q.qp->qp_num;
  b.requester_qpn = q.remote_qpn;
  b.payload_wrs = s.slices;
  b.status = 0;
  return b;
}

void GrantSource::on_receipt(PeerRdma& peer, Qp& q, CqSet& cqs, std::uint32_t slot,
                             const ibv_wc& wc) {
  auto mismatch = [&](const std::string& why) {
    add(engine_->counters().receipt_mismatches);
    lane_.protocol_error(
        peer, "a receipt on QP " + std::to_string(q.qp->qp_num) + " was refused: " + why);
  };
  if (wc.opcode != IBV_WC_RECV || (wc.wc_flags & IBV_WC_WITH_INV) == 0 ||
      wc.byte_len != kBindingBytes) {
    return mismatch("not a SEND_WITH_INV of " + std::to_string(kBindingBytes) + " bytes (" +
                    verbs::wc_opcode_name(wc.opcode) + ", " + std::to_string(wc.byte_len) +
                    " bytes)");
  }
  auto decoded =
      decode_binding(reinterpret_cast<const std::uint8_t*>(cqs.receipts.at(slot)), wc.byte_len);
  if (!decoded.ok()) return mismatch(decoded.status().message());
  const Binding& b = *decoded;
  GrantState* found = peer.grants.find(b.grant_id);
  if (found == nullptr || !found->published) {
    return mismatch("grant " + std::to_string(b.grant_id) + " is not published");
  }
  GrantState& g = *found;
  GrantSegment* seg = nullptr;
  for (GrantSegment& s : g.segments) {
    if (s.first_slice == b.first_slice && !s.receipted) seg = &s;
  }
  if (seg == nullptr)
    return mismatch("no open segment starts at slice " + std::to_string(b.first_slice));
  if (seg->qp_handle != q.handle) return mismatch("it arrived on another QP than the segment's");
  if (wc.invalidated_rkey != seg->rkey) return mismatch("it invalidated another key");
  if (wc.qp_num != q.qp->qp_num) return mismatch("the completion names another QP");
  // Status 1: the requester gives the segment back unwritten (it posted no payload WR on it).
  Binding expected = expected_binding(peer, g, *seg, q);
  if (b.status == 1) {
    expected.status = 1;
    expected.payload_wrs = 0;
  }
  if (const std::string field = binding_mismatch(expected, b); !field.empty()) {
    return mismatch("field " + field + " differs from the grant");
  }
  // The hardware invalidated the window: it is free for the next grant (with a new key).
  seg->receipted = true;
  seg->released = b.status == 1;
  if (seg->released) add(engine_->counters().segments_released);
  if (q.receipts_reserved > 0) --q.receipts_reserved;
  windows_.give_back(seg->context, seg->mw);
  seg->mw = nullptr;
  add(engine_->counters().windows_invalidated);
  add(engine_->counters().receipts);
  if (Status st = lane_.post_receives(q); !st.ok()) {
    ORBITE_LOG(Warn, Rdma) << "reposting receipt slots failed: " << st.message();
  }
  if (!std::all_of(g.segments.begin(), g.segments.end(),
                   [](const GrantSegment& s) { return s.receipted; })) {
    return;
  }
  std::uint64_t unwritten = 0;
  for (const GrantSegment& s : g.segments) unwritten += s.released ? s.length : 0;
  close_grant(peer, g.id,
              unwritten == 0 ? Status{}
                             : Status::error(Errc::Cancelled,
                                             "the requester released " + std::to_string(unwritten) +
                                                 " of the grant's " + std::to_string(g.length) +
                                                 " bytes unwritten (status-1 receipts)"),
              true);
}

bool GrantSource::expiry_due(Clock::time_point now) {
  // A timer, not a scan per pass: the grants are looked at only once the oldest one is due (and
  // expire() sets the next time from those still open).
  if (now < next_grant_expiry_) return false;
  next_grant_expiry_ = Clock::time_point::max();
  return true;
}

void GrantSource::expire(PeerRdma& peer, Clock::time_point now) {
  if (peer.failed || peer.grants.empty()) return;
  peer.grants.due(now, cfg_.grant_timeout, expired_, next_grant_expiry_);
  for (std::uint64_t id : expired_) {
    add(engine_->counters().grants_expired);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.grant_timeout);
    close_grant(peer, id,
                Status::error(Errc::Timeout, "grant " + std::to_string(id) +
                                                 " revoked: its receipts did not arrive within "
                                                 "rdma.grant_timeout (" +
                                                 std::to_string(ms.count()) + " ms)"),
                true);
  }
}

void GrantSource::close_grant(PeerRdma& peer, std::uint64_t id, const Status& outcome,
                              bool send_ack) {
  std::optional<GrantState> taken = peer.grants.take(id);
  if (!taken) return;
  GrantState g = std::move(*taken);
  bool retained = false;  // a window that could not be revoked
  bool private_retained = false;
  Status result_of_grant = outcome;
  for (GrantSegment& s : g.segments) {
    Qp* q = lane_.qp(s.qp_handle);
    if (!s.receipted && q != nullptr && q->incarnation == s.qp_incarnation &&
        q->receipts_reserved > 0) {
      --q->receipts_reserved;
    }
    if (s.mw == nullptr) continue;
    // A window that may still be bound is deallocated: afterwards nothing can use its key.
    if (windows_.revoke(s.context, s.mw)) {
      add(engine_->counters().windows_revoked);
    } else {
      retained = true;
    }
    s.mw = nullptr;
  }
  if (g.priv != nullptr) {
    // The private grant path: its QP, MRs and PD go before the GrantAck.
    if (teardown_private(*g.priv)) {
      g.priv.reset();
    } else {
      private_retained = true;
      result_of_grant =
          Status::error(Errc::Unquiesced,
                        "a private grant's QP, MR or PD could not be destroyed; the device "
                        "range stays locked (" +
                            outcome.message() + ")");
    }
  }
  const bool published = g.published;
  const bool to_receive = g.to_receive;
  const std::uint64_t receive_id = g.receive_id;
  const std::uint64_t parent = g.parent;
  const std::uint64_t length = g.length;
  const std::uint64_t generation = g.generation;
  engine_->counters().grants_active.fetch_sub(1);
  if (g.bounce != nullptr && outcome.ok() && !retained) {
    // READY: every receipt is verified and the windows are gone, so the chunk holds the message.
    std::memcpy(g.bounce_to, g.bounce->data(), length);
  }
  if (retained || private_retained) {
    // A window (or a private grant's object) that refused to go keeps its range lock, region pin
    // and charges for good (teardown_private counted its own).
    if (retained) {
      engine_->retain("a memory window of grant " + std::to_string(id) + " could not be revoked");
    }
    g.pin.keep();
    g.lock.keep();
    if (g.bounce != nullptr) g.bounce->retain("a window over it could not be revoked");
    g.slot.keep();
    g.bytes.keep();
    retained_grants_.push_back(std::move(g));
  } else {
    // READY: the exact range is free for the next CPU or DMA access.
    g.lock.reset();
    g.pin.reset();
    g.bounce.reset();
    g.slot.reset();
    g.bytes.reset();
  }
  if (to_receive) {
    // READY: every receipt is verified, so the bytes are in the receive (or it fails).
    Status result = outcome;
    if (retained) {
      result = Status::error(Errc::Unquiesced,
                             "a window over the receive buffer could not be revoked; the "
                             "buffer may still be written (" +
                                 outcome.message() + ")");
    }
    lane_.handler().rendezvous_done(*peer.link, receive_id, result.ok() ? length : 0, result);
    // The grant's own MR goes with its record (now, unless the grant is retained).
    g.region.reset();
  }
  if (!send_ack || peer.failed) return;
  if (published) {
    const Status& o = result_of_grant;
    lane_.send(peer, ControlKind::GrantAck,
               encode(GrantAck{parent, static_cast<std::uint32_t>(o.code()), o.ok() ? length : 0,
                               id, generation, o.message()}));
  } else {
    add(engine_->counters().grant_nacks);
    const Status& o = result_of_grant;
    lane_.send(
        peer, ControlKind::GrantNack,
        encode(GrantNack{parent, static_cast<std::uint32_t>(o.ok() ? Errc::Unavailable : o.code()),
                         0, o.message() + " (nothing moved)"}));
  }
}

}  // namespace orbite::rdma
