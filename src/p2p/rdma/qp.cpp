#include "p2p/rdma/qp.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "common/log.h"
#include "p2p/rdma/mr_cache.h"
#include "p2p/rdma/verbs.h"

namespace orbite::rdma {

std::uint32_t SqLedger::push(WrRecord r) {
  r.seq = next_++;
  if (r.kind == WrKind::Payload && r.tier < kWrTiers) ++payload_[r.tier];
  outstanding_.push_back(r);
  return r.seq;
}

SqLedger::Apply SqLedger::complete(std::uint32_t seq, bool success,
                                   std::vector<std::pair<WrRecord, bool>>& resolved) {
  if (outstanding_.empty()) {
    // Nothing is owed: a completion of something already resolved, or of nothing ever posted.
    return static_cast<std::int32_t>(seq - next_) < 0 ? Apply::Duplicate : Apply::Invalid;
  }
  const std::uint32_t oldest = outstanding_.front().seq;
  if (static_cast<std::int32_t>(seq - oldest) < 0) return Apply::Duplicate;
  if (static_cast<std::int32_t>(seq - next_) >= 0) return Apply::Invalid;
  // RC completes in order: everything before `seq` succeeded.
  while (!outstanding_.empty() && outstanding_.front().seq != seq) {
    resolved.emplace_back(outstanding_.front(), true);
    forget(outstanding_.front());
    outstanding_.pop_front();
  }
  resolved.emplace_back(outstanding_.front(), success);
  forget(outstanding_.front());
  outstanding_.pop_front();
  return Apply::Applied;
}

void SqLedger::unpost_from(std::uint32_t seq) {
  while (!outstanding_.empty() && static_cast<std::int32_t>(outstanding_.back().seq - seq) >= 0) {
    forget(outstanding_.back());
    outstanding_.pop_back();
  }
  next_ = seq;
}

SlotPool::~SlotPool() {
  for (Chunk& c : chunks_) {
    if (c.mr != nullptr && ctx_.api.dereg_mr(c.mr) != 0) {
      ORBITE_LOG(Error, Rdma) << ctx_.name << ": ibv_dereg_mr of registered slots failed; retained";
      (void)c.bytes.release();  // the HCA may still own the pages; the budget stays charged
      continue;
    }
    if (budget_ != nullptr) budget_->release_slab(c.charged);
  }
}

Result<std::uint32_t> SlotPool::take() {
  if (free_.empty()) {
    if (slots_ >= max_slots_) {
      return Status::error(Errc::ResourceExhausted,
                           ctx_.name + ": all " + std::to_string(max_slots_) +
                               " registered slots of " + std::to_string(slot_bytes_) +
                               " bytes of the lane are in use");
    }
    const auto c_index = static_cast<std::uint32_t>(chunks_.size());
    const std::uint32_t count = std::min(kFirstChunkSlots << c_index, max_slots_ - slots_);
    const std::size_t bytes = std::size_t{count} * slot_bytes_;
    if (budget_ != nullptr) {
      ORBITE_RETURN_IF_ERROR(budget_->charge_slab(bytes, ctx_.name + " slot slab"));
    }
    Chunk c;
    c.charged = budget_ != nullptr ? bytes : 0;
    c.bytes = std::make_unique<std::byte[]>(bytes);
    c.mr = ctx_.api.reg_mr(ctx_.pd, c.bytes.get(), bytes, IBV_ACCESS_LOCAL_WRITE);
    if (c.mr == nullptr) {
      const int err = errno;
      if (budget_ != nullptr) budget_->release_slab(bytes);
      return verbs::errno_status(
          Errc::ResourceExhausted,
          ctx_.name + ": ibv_reg_mr of " + std::to_string(bytes) + " bytes of slots", err);
    }
    chunks_.push_back(std::move(c));
    const std::uint32_t first = slots_;
    slots_ += count;
    for (std::uint32_t i = count; i-- > 0;) free_.push_back(first + i);
  }
  const std::uint32_t i = free_.back();
  free_.pop_back();
  return i;
}

CqSet::CqSet(Context& c, std::uint32_t cap, MrCache* budget, std::uint32_t frame_payload)
    : ctx(c),
      capacity(cap),
      receipts(c, kSlotBytes, kMaxReceiptSlots, budget),
      frames(c, kFrameHeaderBytes + frame_payload, kMaxFrameSlots, budget) {}

Status CqSet::init() {
  const IbvApi& api = ctx.api;
  channel = api.create_comp_channel(ctx.ctx);
  if (channel == nullptr) {
    return verbs::errno_status(Errc::ResourceExhausted, ctx.name + ": ibv_create_comp_channel",
                               errno);
  }
  const int cqe = static_cast<int>(std::min(capacity, std::max(ctx.limits.max_cqe, 1u)));
  capacity = static_cast<std::uint32_t>(cqe);
  send_cq = api.create_cq(ctx.ctx, cqe, nullptr, channel, 0);
  if (send_cq == nullptr) {
    return verbs::errno_status(Errc::ResourceExhausted,
                               ctx.name + ": ibv_create_cq of " + std::to_string(cqe) + " entries",
                               errno);
  }
  recv_cq = api.create_cq(ctx.ctx, cqe, nullptr, channel, 0);
  if (recv_cq == nullptr) {
    return verbs::errno_status(Errc::ResourceExhausted,
                               ctx.name + ": ibv_create_cq of " + std::to_string(cqe) + " entries",
                               errno);
  }
  return {};
}

CqSet::~CqSet() {
  const IbvApi& api = ctx.api;
  if (unacked != 0 && send_cq != nullptr) api.ack_cq_events(send_cq, unacked);
  for (ibv_cq* cq : {send_cq, recv_cq}) {
    if (cq != nullptr && api.destroy_cq(cq) != 0) {
      ORBITE_LOG(Error, Rdma) << ctx.name << ": ibv_destroy_cq failed; retained";
    }
  }
  if (channel != nullptr && api.destroy_comp_channel(channel) != 0) {
    ORBITE_LOG(Error, Rdma) << ctx.name << ": ibv_destroy_comp_channel failed; retained";
  }
}

Result<ibv_qp*> create_rc_qp(Context& ctx, CqSet& cqs, const QpCaps& caps, QpRole role,
                             std::uint32_t* max_inline, ibv_pd* pd) {
  if (pd == nullptr) pd = ctx.pd;
  if (cqs.send_reserved + caps.send_depth > cqs.capacity ||
      cqs.recv_reserved + caps.recv_depth > cqs.capacity) {
    return Status::error(Errc::ResourceExhausted,
                         "rdma.max_cqes: the lane's CQs on " + ctx.name + " (" +
                             std::to_string(cqs.capacity) +
                             " entries) cannot hold another QP's completions");
  }
  ibv_qp_init_attr init{};
  init.send_cq = cqs.send_cq;
  init.recv_cq = cqs.recv_cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = std::min(caps.send_depth, std::max(ctx.limits.max_qp_wr, 1u));
  init.cap.max_recv_wr = std::min(caps.recv_depth, std::max(ctx.limits.max_qp_wr, 1u));
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = caps.inline_wanted;
  ibv_qp* qp = ctx.api.create_qp(pd, &init);
  if (qp == nullptr && caps.inline_wanted != 0) {
    // A provider without that much inline space: receipts then go from a registered buffer.
    init.cap.max_inline_data = 0;
    qp = ctx.api.create_qp(pd, &init);
  }
  if (qp == nullptr) {
    return verbs::errno_status(Errc::ResourceExhausted, ctx.name + ": ibv_create_qp", errno);
  }
  *max_inline = init.cap.max_inline_data;
  cqs.send_reserved += caps.send_depth;
  cqs.recv_reserved += caps.recv_depth;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = ctx.route().port;
  a.pkey_index = 0;
  a.qp_access_flags = role == QpRole::Source ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
  if (const int rc = ctx.api.modify_qp(
          qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    cqs.send_reserved -= caps.send_depth;
    cqs.recv_reserved -= caps.recv_depth;
    if (ctx.api.destroy_qp(qp) != 0) {
      ORBITE_LOG(Error, Rdma) << ctx.name << ": ibv_destroy_qp failed; retained";
    }
    return verbs::errno_status(Errc::Unavailable, ctx.name + ": ibv_modify_qp to INIT", rc);
  }
  return qp;
}

RemoteEnd remote_end(const NicRecord& nic, std::uint32_t qpn, std::uint32_t psn) {
  RemoteEnd r;
  r.qpn = qpn;
  r.psn = psn;
  std::memcpy(r.gid.raw, nic.gid.data(), sizeof(r.gid.raw));
  r.lid = nic.lid;
  r.mtu = static_cast<ibv_mtu>(nic.mtu);
  r.link_layer = nic.link_layer;
  return r;
}

std::uint32_t random_psn() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return rng() & 0xffffff;
}

std::uint32_t clamp_rd_depth(std::uint32_t requested, std::uint32_t hca_limit) {
  if (requested == 0) return 0;
  return std::min(requested, std::max(hca_limit, 1u));
}

Status connect_rc_qp(Context& ctx, ibv_qp* qp, const RemoteEnd& remote, std::uint32_t my_psn,
                     std::uint32_t rd_atomic, std::uint32_t dest_rd_atomic) {
  const Route route = ctx.route();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = std::min(route.mtu, remote.mtu);
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = static_cast<std::uint8_t>(dest_rd_atomic);
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = route.port;
  if (remote.link_layer == IBV_LINK_LAYER_INFINIBAND) {
    a.ah_attr.dlid = remote.lid;
  } else {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = remote.gid;
    a.ah_attr.grh.sgid_index = route.gid_index;
    a.ah_attr.grh.hop_limit = 64;
  }
  if (const int rc =
          ctx.api.modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0) {
    return verbs::errno_status(Errc::Unavailable, ctx.name + ": ibv_modify_qp to RTR", rc);
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = my_psn;
  a.max_rd_atomic = static_cast<std::uint8_t>(rd_atomic);
  if (const int rc =
          ctx.api.modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0) {
    return verbs::errno_status(Errc::Unavailable, ctx.name + ": ibv_modify_qp to RTS", rc);
  }
  return {};
}

}  // namespace orbite::rdma
