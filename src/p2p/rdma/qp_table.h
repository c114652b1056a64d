// The lane's QP table: handle -> QP, each handle's generation (a late completion naming a
// destroyed QP finds no QP, never another one), the peer each QP serves, and the QPs retired to
// ERR until every WR they had has completed or flushed (or they outlast rdma.destroy_timeout).
// It owns the QPs' endpoint and CQ charges: a QP's come back when it is destroyed, and stay for
// good when ibv_destroy_qp fails. Touched by the lane's mutex holder only.
#pragma once

#include <orbite/config.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "p2p/rdma/engine.h"
#include "p2p/rdma/qp.h"

namespace orbite::rdma {

struct PeerRdma;  // lane.h: the QP's peer, which outlives it (peers live as long as the lane)

class QpTable {
 public:
  using Clock = std::chrono::steady_clock;
  // Both outlive the table.
  QpTable(RdmaEngine& engine, const RdmaConfig& cfg) : engine_(engine), cfg_(cfg) {}
  QpTable(const QpTable&) = delete;
  QpTable& operator=(const QpTable&) = delete;

  [[nodiscard]] Qp* get(std::uint16_t handle) const {
    return handle < qps_.size() ? qps_[handle].get() : nullptr;
  }
  [[nodiscard]] PeerRdma* peer(std::uint16_t handle) const {
    return handle < peers_.size() ? peers_[handle] : nullptr;
  }
  // A QP on `cqs` for `peer`'s slot, charged to max_endpoints and to the CQs' depth; its
  // receives are not posted yet (post_receives). A message QP is slot kMessageSlot; a private
  // grant's is slot kPrivateSlot in the grant's own `pd` (its source end takes one receive and
  // posts nothing).
  Result<Qp*> create(CqSet& cqs, QpRole role, PeerRdma& peer, std::uint32_t slot,
                     ibv_pd* pd = nullptr);
  // Fills the QP's receive queue from its pool (receipts, or frames for a message QP).
  Status post_receives(Qp& q);
  // To ERR (whatever is outstanding flushes); destroyed by destroy_retired once drained.
  void retire(std::uint16_t handle);
  [[nodiscard]] bool retired(std::uint16_t handle) const;
  [[nodiscard]] bool any_retired() const { return !retired_.empty(); }
  void destroy_retired(Clock::time_point now);
  // Now, whatever is outstanding (a private grant's teardown before its GrantAck): ERR, then
  // ibv_destroy_qp; what it had posted is forgotten (a late completion finds no QP). Unquiesced
  // when the destroy fails (the QP and its charges are kept for good).
  Status destroy_now(std::uint16_t handle);
  // Progress recovery: the QPs on `cqs` (in the table; retained ones are not), for kill().
  void on_set(const CqSet& cqs, std::vector<std::uint16_t>& out) const;
  // Whether a QP whose destroy failed still references `cqs` (the set cannot go then).
  [[nodiscard]] bool retains(const CqSet& cqs) const;
  // ibv_destroy_qp now, whatever is outstanding (its CQs can no longer be polled). On success
  // the QP's send records are moved to `records` and the QP stays in the table, dead (`qp`
  // null; retire() and destroy_now() leave it alone), until release(): its WRs can run no more,
  // so the lane hands them to their handlers as failed first. False when the destroy failed (the
  // QP is retained for good, as destroy_now's are).
  bool kill(std::uint16_t handle, std::vector<WrRecord>& records);
  void release(std::uint16_t handle);
  // Shutdown: retired QPs still not drained are destroyed now (only the destroy proves that
  // none of their WRs runs again).
  void abandon_retired();
  // Message QPs' receiving ends: frames may arrive at any time while there is one.
  [[nodiscard]] std::size_t message_sources() const { return message_sources_; }

 private:
  // A QP about to be destroyed undrained: its outstanding WRs and receives are forgotten (no
  // completion will come), their payload bytes leaving the NIC's transmit meter and backlog.
  void forget_wrs(Qp& q);
  // ibv_destroy_qp and the QP's charges back; false when the destroy failed (kept for good).
  bool destroy(Qp& q);
  // ibv_destroy_qp and the charges back, the QP left in the table dead; false as destroy().
  bool destroy_native(Qp& q);

  RdmaEngine& engine_;
  const RdmaConfig& cfg_;
  std::vector<std::unique_ptr<Qp>> qps_;  // by handle; null: free
  std::vector<std::uint16_t> generations_;
  std::vector<PeerRdma*> peers_;  // the peer each QP serves
  std::vector<std::uint16_t> free_handles_;
  std::vector<std::uint16_t> retired_;  // QPs in ERR, destroyed once drained
  // QPs whose ibv_destroy_qp failed, with their endpoint and CQ charges, kept for good.
  std::vector<std::unique_ptr<Qp>> retained_;
  std::uint64_t next_incarnation_ = 1;
  std::size_t message_sources_ = 0;
};

}  // namespace orbite::rdma
