// Progress recovery (docs/reliability.md, "Monitor recovery"): a lane's CQ set whose
// ibv_poll_cq has failed for a second holds completions nobody can read, so the lane builds a new
// set on the same context (the PD, the MRs and the key history stay) and destroys every QP of the
// old one at once. Only a successful ibv_destroy_qp proves that none of a QP's WRs runs again;
// after it, the WRs are handed to the handlers a flush would have reached, so parents fail
// ("effect unknown") with their loans back instead of waiting out rdma.destroy_timeout. The
// peers drop their ends: a requester end is retired with QpRetire, a source end is reported
// with QpLost; a message QP moves as a fenced rail's does when no frame went with the set, and
// the link fails when one may have.
#include "common/log.h"
#include "p2p/rdma/lane.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

void RdmaLane::recover_progress(std::size_t context) {
  CqSet& failing = *cqs_[context];
  const std::uint64_t failures = failing.poll_failures_in_row;
  const std::string name = failing.ctx.name;
  auto replaced = replace_set(context);
  if (!replaced.ok()) {
    // The old set stays and is polled again; the next attempt comes a second later.
    failing.failing_since = Clock::now();
    ORBITE_LOG(Error, Rdma) << name << ": ibv_poll_cq has failed " << failures
                            << " times in a row and a new CQ set could not be made ("
                            << replaced.status().to_string() << "); trying again in a second";
    return;
  }
  std::unique_ptr<CqSet> old = std::move(*replaced);
  add(engine_->counters().progress_recoveries);
  std::vector<std::uint16_t> handles;
  qps_.on_set(*old, handles);
  ORBITE_LOG(Error, Rdma) << name << ": ibv_poll_cq failed " << failures
                          << " times in a row for a second; the lane's CQ set is replaced and its "
                          << handles.size() << " QPs are destroyed (the PD and MRs stay)";
  const Status why =
      Status::error(Errc::ConnectionLost,
                    name +
                        ": the lane's completion queues could not be polled and were replaced "
                        "with their QPs");
  for (std::uint16_t h : handles) lose_qp(h, *old, why);
  if (qps_.retains(*old)) {
    // A QP whose destroy failed still references the CQs: they stay (unpolled) for good.
    engine_->retain(name + ": a replaced CQ set still referenced by a retained QP");
    stale_sets_.push_back(std::move(old));
  }
}

void RdmaLane::lose_qp(std::uint16_t handle, const CqSet& old, const Status& why) {
  Qp* found = qp(handle);
  PeerRdma* peer = qps_.peer(handle);
  // A handle whose QP went meanwhile (a private grant's teardown) may serve a QP on the new set.
  if (found == nullptr || peer == nullptr || found->cqs != &old) return;
  add(engine_->counters().qps_lost);
  if (found->role == QpRole::Source) {
    // Every grant through it is revoked first: a window bound through a QP keeps the QP from
    // being destroyed, and revoking authority before the destroy is the safe order. A private
    // grant's QP goes with its grant.
    source_.connection_failed(*peer, handle, why, false);
    std::erase_if(peer->sources, [&](const auto& e) { return e.second.qp_handle == handle; });
    if (found->slot != kPrivateSlot && !peer->failed) {
      send(*peer, ControlKind::QpLost,
           encode(
               QpLost{found->slot, found->remote_incarnation, found->message ? found->frames : 0}));
    }
    if (qp(handle) != found) return;
  }
  Qp& q = *found;  // stays valid until release(), or owned by the retained list
  const bool destroyed = qps_.kill(handle, lost_records_);
  if (!destroyed) {
    ORBITE_LOG(Error, Rdma) << q.ctx->name << ": a QP of the replaced CQ set could not be "
                            << "destroyed; its work waits for rdma.destroy_timeout";
  }
  // The handlers a flush would have reached, now that none of the WRs can run (a retained QP's
  // may: its parents keep their loans until their drain bound).
  ibv_wc flushed{};
  flushed.status = IBV_WC_WR_FLUSH_ERR;
  for (const WrRecord& rec : lost_records_) {
    if (rec.kind == WrKind::Frame) {
      messenger_.on_sent(*peer, q, rec, false, &flushed);
    } else if (q.role == QpRole::Requester) {
      requester_.on_wr(*peer, q, rec, false, &flushed);
    } else {
      source_.on_wr(*peer, rec, false);
    }
  }
  lost_records_.clear();
  if (q.role == QpRole::Requester) {
    if (q.message) {
      messenger_.lost_qp(*peer, q);
    } else {
      requester_.lost_qp(*peer, q, why);
    }
  }
  if (destroyed) qps_.release(handle);
}

void Requester::lost_qp(PeerRdma& peer, Qp& q, const Status& why) {
  for (QpArray& arr : peer.arrays) {
    for (QpSlot& slot : arr.slots) {
      if (slot.state != QpSlot::State::Ready || slot.qp_handle != q.handle) continue;
      // The source retires its end (and revokes what was granted through it); a slot still
      // building learns of the loss from its QpAccept (on_qp_accept checks the incarnation).
      slot.state = QpSlot::State::Empty;
      if (!peer.failed) {
        lane_.send(peer, ControlKind::QpRetire, encode(QpRetire{q.slot, q.remote_incarnation}));
      }
    }
  }
  // Parents that name the QP fail (with their WRs handed back they can end), and forget its
  // handle, which another QP may take next.
  std::vector<std::uint64_t> ids;
  peer.parents.ids(ids);
  for (std::uint64_t id : ids) {
    Parent* p = peer.parents.find(id);
    if (p == nullptr || p->private_qp) continue;  // a private QP is checked by incarnation
    bool named = false;
    for (Segment& s : p->segments) {
      if (s.qp_handle != q.handle) continue;
      named = true;
      s.qp_handle = kNoQpHandle;
    }
    if (named) fail_parent(peer, *p, why);
  }
}

void Requester::on_qp_lost(PeerRdma& peer, const QpLost& m) {
  for (QpArray& arr : peer.arrays) {
    for (QpSlot& slot : arr.slots) {
      if (slot.state != QpSlot::State::Ready || slot.incarnation != m.qp_incarnation) continue;
      // The source's end is gone: this end goes to ERR, and what it had posted flushes (its
      // parents fail, effect unknown). The next parent builds the slot again.
      slot.state = QpSlot::State::Empty;
      lane_.retire_qp(slot.qp_handle);
      return;
    }
  }
  // Already gone (this side retired it too): nothing to do.
}

void FrameMessenger::lost_qp(PeerRdma& peer, Qp& q) {
  if (peer.frames.qp.state != QpSlot::State::Ready || peer.frames.qp.qp_handle != q.handle) {
    return;  // building: on_accept finds the QP gone and builds again
  }
  // Frames in flight went with it and failed the link (their handlers ran); with none, the QP
  // moves as a fenced rail's does: the peer's end is retired, the next frame builds a new one.
  if (!peer.failed) {
    lane_.send(peer, ControlKind::QpRetire, encode(QpRetire{q.slot, q.remote_incarnation}));
  }
  peer.frames.qp = QpSlot{};
  add(lane_.engine().counters().message_qp_moves);
}

void FrameMessenger::on_qp_lost(PeerRdma& peer, const QpLost& m) {
  Qp* q =
      peer.frames.qp.state == QpSlot::State::Ready ? lane_.qp(peer.frames.qp.qp_handle) : nullptr;
  if (q == nullptr || q->incarnation != m.qp_incarnation) return;  // moved already
  // The peer's receiving end took m.frames of this QP's frames; one completed here beyond that,
  // or one still in flight, may be lost, and frames are not replayed: the link fails.
  if (peer.frames.in_flight() || q->frames != m.frames) {
    return failed(peer, Status::error(Errc::ConnectionLost,
                                      "the peer's receiving end of the RDMA message QP was lost "
                                      "with its CQs after " +
                                          std::to_string(m.frames) + " of " +
                                          std::to_string(q->frames) + " frames"));
  }
  lane_.retire_qp(q->handle);
  peer.frames.qp = QpSlot{};
  add(lane_.engine().counters().message_qp_moves);
  pump(peer);
}

}  // namespace orbite::rdma
