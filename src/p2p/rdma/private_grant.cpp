// The private grant path: how the source grants its device memory (the guide's "GPUDirect RDMA
// ownership"). A GPU MR is never bound to an ordinary memory window, and without keys the
// hardware can revoke (gpu_source_reuse, refused here) each grant gets objects of its own: a PD,
// the exact granted range registered in it with only the op's right, a host buffer for the one
// receipt, and a QP in it connected to the requester's private QP. The requester posts its
// payload and then an ordinary fenced SEND of the binding on that QP pair; the source checks the
// binding, then destroys the QP, the MRs and the PD, in that order, and only then sends the
// GrantAck. Expiry, a cancel and a failed link tear down the same way (close_grant). Both sides
// are here: the requester's own QP per parent, and the source's grant.
#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "p2p/rdma/requester.h"
#include "p2p/rdma/source.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

// ---- the requester: its own QP per parent ----------------------------------------------------

void Requester::connect_private(PeerRdma& peer, Parent& p) {
  // A QP for this grant alone, left in INIT: the source connects the grant's QP to it and
  // names that one in the Grant (on_grant connects this one back).
  Segment& s = p.segments.front();
  const QpArray& arr = peer.arrays[s.array];
  auto made = lane_.new_qp(arr.context, QpRole::Requester, peer, kPrivateSlot);
  if (!made.ok()) return fail_parent(peer, p, made.status().with_context("nothing moved"));
  Qp& q = **made;
  q.psn = random_psn();
  q.rd_atomic = clamp_rd_depth(cfg_.max_rd_atomic, q.ctx->limits.max_qp_init_rd_atom);
  q.dest_rd_atomic = 0;  // nothing reads from this side
  s.qp_handle = q.handle;
  p.private_qp = true;
  p.private_incarnation = q.incarnation;
  request_grant(peer, p);
}

Status Requester::connect_private_grant(PeerRdma& peer, Parent& p, const Grant& m) {
  const Segment& s = p.segments.front();
  Qp* q = own_qp(p);
  const NicRecord* nic = peer.nic(m.private_qp.nic_id);
  if (q == nullptr || q->broken) {
    return Status::error(Errc::ConnectionLost, "the private QP of the grant was retired");
  }
  if (nic == nullptr || m.private_qp.nic_id != peer.arrays[s.array].remote_nic ||
      m.private_qp.remote_nic != q->ctx->nic_id) {
    return Status::error(Errc::Protocol,
                         "the Grant's private QP is on another NIC pair than asked");
  }
  // Never more READs in flight than the grant's QP accepts (and a READ needs one).
  q->rd_atomic = std::min(q->rd_atomic, m.private_qp.dest_rd_atomic);
  if (!p.write && q->rd_atomic == 0) {
    return Status::error(Errc::Protocol, "the Grant's private QP accepts no READ");
  }
  ORBITE_RETURN_IF_ERROR(connect_rc_qp(*q->ctx, q->qp,
                                       remote_end(*nic, m.private_qp.qpn, m.private_qp.psn), q->psn,
                                       q->rd_atomic, q->dest_rd_atomic));
  q->ready = true;
  q->remote_qpn = m.private_qp.qpn;
  q->remote_incarnation = m.private_incarnation;
  return {};
}

Qp* Requester::own_qp(const Parent& p) const {
  if (!p.private_qp || p.segments.empty()) return nullptr;
  Qp* q = lane_.qp(p.segments.front().qp_handle);
  return q != nullptr && q->incarnation == p.private_incarnation ? q : nullptr;
}

// ---- the source: the grant's objects ---------------------------------------------------------

void GrantSource::grant_private(PeerRdma& peer, const GrantRequest& m, GrantPlan& plan) {
  const detail::RegionRecord& r = *plan.region;
  const MrSet* set = mr_set_of(r);
  if (r.kind != MemoryKind::Cuda || set == nullptr || !set->gpu()) {
    return refuse_grant(
        peer, m, plan,
        Status::error(Errc::InvalidArgument,
                      "region " + std::to_string(m.target) +
                          " is not device memory registered for GPUDirect RDMA here: the private "
                          "grant path grants device memory only"));
  }
  // The budgets, range lock and pin first: a request they refuse costs no PD, MR or QP (a peer
  // cannot make this engine build and destroy objects for grants it would never give).
  std::optional<Reservations> res = reserve(peer, m, plan);
  if (!res) return;  // refused (its GrantNack is sent), or waiting in the deferred queue
  auto priv = std::make_unique<PrivateGrant>();
  if (Status st = build_private(peer, m, plan, *priv); !st.ok()) {
    // What was built goes (not counted: no private grant existed); the reservations go back.
    if (!teardown_private(*priv, false)) retained_private_.push_back(std::move(priv));
    return refuse_grant(peer, m, plan, st);
  }
  add(engine_->counters().private_grants);
  Qp* q = lane_.qp(priv->qp_handle);
  plan.qps = {q};
  plan.contexts = {priv->context};
  const std::uint64_t id = record_grant(peer, m, plan, std::move(*res));
  GrantState& g = *peer.grants.find(id);
  GrantSegment& s = g.segments.front();
  s.rkey = priv->mr->rkey;
  s.bound = true;  // no window to bind: the MR itself is the grant's exact authority
  g.priv = std::move(priv);
  publish_if_bound(peer, g);
}

Status GrantSource::build_private(PeerRdma& peer, const GrantRequest& m, const GrantPlan& plan,
                                  PrivateGrant& priv) {
  const auto& contexts = engine_->contexts();
  std::size_t c = contexts.size();
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    if (contexts[i]->nic_id == m.private_qp.remote_nic && lane_.context_usable(i)) c = i;
  }
  const NicRecord* nic = peer.nic(m.private_qp.nic_id);
  if (c == contexts.size() || nic == nullptr) {
    return Status::error(Errc::Unavailable,
                         "no usable RDMA context with NIC id " +
                             std::to_string(m.private_qp.remote_nic) + " (or the requester's NIC " +
                             std::to_string(m.private_qp.nic_id) + " is unknown)");
  }
  Context& ctx = *contexts[c];
  priv.context = c;
  priv.requester_nic = m.private_qp.nic_id;
  priv.pd = engine_->api().alloc_pd(ctx.ctx);
  if (priv.pd == nullptr) {
    return verbs::errno_status(Errc::ResourceExhausted,
                               ctx.name + ": ibv_alloc_pd of a private grant", errno);
  }
  const detail::RegionRecord& r = *plan.region;
  // Only the op's right: a WRITE grant cannot be read through, a READ grant not written.
  const int access =
      plan.write ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
  priv.mr = mr_set_of(r)->register_private(priv.pd, r.base + m.offset, m.length, access);
  if (priv.mr == nullptr) {
    return verbs::errno_status(Errc::Unavailable,
                               ctx.name + ": registering " + std::to_string(m.length) +
                                   " bytes of region " + std::to_string(m.target) +
                                   " for a private grant",
                               errno);
  }
  priv.receipt = std::make_unique<std::byte[]>(CqSet::kSlotBytes);
  priv.receipt_mr =
      engine_->api().reg_mr(priv.pd, priv.receipt.get(), CqSet::kSlotBytes, IBV_ACCESS_LOCAL_WRITE);
  if (priv.receipt_mr == nullptr) {
    return verbs::errno_status(Errc::ResourceExhausted,
                               ctx.name + ": ibv_reg_mr of a private grant's receipt buffer",
                               errno);
  }
  ORBITE_ASSIGN_OR_RETURN(Qp * q, lane_.new_qp(c, QpRole::Source, peer, kPrivateSlot, priv.pd));
  priv.qp_handle = q->handle;
  priv.qp_incarnation = q->incarnation;
  priv.has_qp = true;
  q->psn = static_cast<std::uint32_t>(random_u64() & 0xffffff);
  q->rd_atomic = 0;
  q->dest_rd_atomic =
      plan.write ? 0 : clamp_rd_depth(cfg_.max_dest_rd_atomic, ctx.limits.max_qp_rd_atom);
  ibv_sge sge{reinterpret_cast<std::uint64_t>(priv.receipt.get()), CqSet::kSlotBytes,
              priv.receipt_mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = q->id(WrKind::Recv, CqSet::kPrivateReceipt).pack();
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = verbs::post_recv(q->qp, &wr, &bad); rc != 0) {
    return verbs::errno_status(Errc::Unavailable, ctx.name + ": ibv_post_recv of a private receipt",
                               rc);
  }
  q->recv_posted = 1;
  ORBITE_RETURN_IF_ERROR(connect_rc_qp(ctx, q->qp,
                                       remote_end(*nic, m.private_qp.qpn, m.private_qp.psn), q->psn,
                                       q->rd_atomic, q->dest_rd_atomic));
  q->ready = true;
  q->remote_qpn = m.private_qp.qpn;
  return {};
}

bool GrantSource::teardown_private(PrivateGrant& priv, bool counted) {
  // The QP first: once it is gone nothing can arrive through it; then the MRs, then the PD. A
  // step that fails keeps what it and the later steps would have destroyed.
  if (priv.has_qp) {
    // (Already destroyed with its peer's link when the handle serves another QP now.)
    const Qp* q = lane_.qp(priv.qp_handle);
    if (q != nullptr && q->incarnation == priv.qp_incarnation) {
      if (Status st = lane_.destroy_qp_now(priv.qp_handle); !st.ok()) return false;
    }
    priv.has_qp = false;
  }
  bool ok = true;
  for (ibv_mr** mr : {&priv.mr, &priv.receipt_mr}) {
    if (*mr == nullptr) continue;
    if (const int rc = engine_->api().dereg_mr(*mr); rc != 0) {
      engine_->retain("ibv_dereg_mr of a private grant's MR failed: " +
                      std::string(std::strerror(rc)));
      ok = false;
      continue;
    }
    add(engine_->counters().mr_deregistrations);
    *mr = nullptr;
  }
  if (!ok) return false;
  priv.receipt.reset();
  if (priv.pd != nullptr) {
    if (const int rc = engine_->api().dealloc_pd(priv.pd); rc != 0) {
      engine_->retain("ibv_dealloc_pd of a private grant's PD failed: " +
                      std::string(std::strerror(rc)));
      return false;
    }
    priv.pd = nullptr;
  }
  if (counted) add(engine_->counters().private_teardowns);
  return true;
}

void GrantSource::on_private_receipt(PeerRdma& peer, Qp& q, const ibv_wc& wc) {
  std::vector<std::uint64_t> hit;
  peer.grants.through(q.handle, true, hit);
  if (wc.status != IBV_WC_SUCCESS) {
    // Flushed or failed: the private connection is gone, and so is its grant.
    for (std::uint64_t id : hit) {
      close_grant(
          peer, id,
          Status::error(Errc::ConnectionLost, "the private connection of the grant failed (" +
                                                  std::string(verbs::wc_status_name(wc.status)) +
                                                  "); effect unknown"),
          true);
    }
    return;
  }
  auto mismatch = [&](const std::string& why) {
    add(engine_->counters().receipt_mismatches);
    lane_.protocol_error(
        peer, "a private receipt on QP " + std::to_string(q.qp->qp_num) + " was refused: " + why);
  };
  if (hit.size() != 1) return mismatch("no open grant uses this QP");
  GrantState& g = *peer.grants.find(hit.front());
  GrantSegment& s = g.segments.front();
  if (g.priv == nullptr || !g.published)
    return mismatch("the grant is not a published private one");
  // An ordinary SEND: no key to invalidate (the MR goes with the teardown).
  if (wc.opcode != IBV_WC_RECV || (wc.wc_flags & IBV_WC_WITH_INV) != 0 ||
      wc.byte_len != kBindingBytes || wc.qp_num != q.qp->qp_num) {
    return mismatch("not a SEND of " + std::to_string(kBindingBytes) + " bytes on this QP (" +
                    verbs::wc_opcode_name(wc.opcode) + ", " + std::to_string(wc.byte_len) +
                    " bytes)");
  }
  auto decoded =
      decode_binding(reinterpret_cast<const std::uint8_t*>(g.priv->receipt.get()), wc.byte_len);
  if (!decoded.ok()) return mismatch(decoded.status().message());
  Binding expected = expected_binding(peer, g, s, q);
  if (decoded->status == 1) {
    expected.status = 1;
    expected.payload_wrs = 0;
  }
  if (const std::string field = binding_mismatch(expected, *decoded); !field.empty()) {
    return mismatch("field " + field + " differs from the grant");
  }
  s.receipted = true;
  s.released = decoded->status == 1;
  if (s.released) add(engine_->counters().segments_released);
  if (q.receipts_reserved > 0) --q.receipts_reserved;
  add(engine_->counters().receipts);
  close_grant(peer, g.id,
              s.released
                  ? Status::error(Errc::Cancelled, "the requester released the grant's " +
                                                       std::to_string(g.length) +
                                                       " bytes unwritten (a status-1 receipt)")
                  : Status{},
              true);
}

}  // namespace orbite::rdma
