// RC queue pairs and what the lane knows about every work request it posted on them.
//
// Exact WR identities: wr_id = kind:4 | handle:16 | generation:12 | seq:32. The handle indexes
// the lane's QP table, the generation is that table slot's incarnation, seq a per-QP counter. A
// completion is applied only when its handle is live, its generation current and its seq inside
// the ledger's window, so a completion of a retired QP, or a duplicate, can never repay the debt
// of current work. RC completes a QP's send WRs in order, so a successful signaled completion
// resolves every record up to it, and an error (or flush) resolves the earlier ones as successful
// and its own as failed.
#pragma once

#include <orbite/status.h>

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "p2p/rdma/context.h"
#include "p2p/rdma/wire.h"

namespace orbite::rdma {

enum class WrKind : std::uint8_t { Payload = 1, Receipt = 2, Bind = 3, Recv = 4 };

struct WrId {
  WrKind kind = WrKind::Payload;
  std::uint16_t handle = 0;
  std::uint16_t generation = 0;  // 12 bits
  std::uint32_t seq = 0;
  [[nodiscard]] std::uint64_t pack() const {
    return static_cast<std::uint64_t>(kind) << 60 | static_cast<std::uint64_t>(handle) << 44 |
           static_cast<std::uint64_t>(generation & 0xfff) << 32 | seq;
  }
  static WrId unpack(std::uint64_t v) {
    return WrId{static_cast<WrKind>(v >> 60), static_cast<std::uint16_t>(v >> 44 & 0xffff),
                static_cast<std::uint16_t>(v >> 32 & 0xfff), static_cast<std::uint32_t>(v)};
  }
};

// One posted send WR, until a completion resolves it.
struct WrRecord {
  std::uint32_t seq = 0;
  WrKind kind = WrKind::Payload;
  std::uint64_t owner = 0;  // the parent (requester) or grant (source) id
  std::uint16_t segment = 0;
  std::uint64_t bytes = 0;
  bool read = false;
  bool signaled = false;
};

// The send ledger of one QP. Pure bookkeeping (unit-tested without verbs).
class SqLedger {
 public:
  explicit SqLedger(std::uint32_t depth) : depth_(depth) {}
  enum class Apply : std::uint8_t { Applied, Duplicate, Invalid };
  [[nodiscard]] std::uint32_t room() const {
    return depth_ - static_cast<std::uint32_t>(outstanding_.size());
  }
  [[nodiscard]] std::size_t outstanding() const { return outstanding_.size(); }
  [[nodiscard]] std::uint32_t next_seq() const { return next_; }
  // Records a WR about to be posted; returns its seq.
  std::uint32_t push(WrRecord r);
  // A completion of `seq`: the records it resolves are appended to `resolved` with their
  // outcome (true: succeeded).
  Apply complete(std::uint32_t seq, bool success, std::vector<std::pair<WrRecord, bool>>& resolved);
  // A failed post proved the WRs from `seq` on were never accepted: forget them.
  void unpost_from(std::uint32_t seq);
  // The QP is destroyed: none of its WRs can run any more.
  void clear() { outstanding_.clear(); }
  [[nodiscard]] const std::deque<WrRecord>& records() const { return outstanding_; }

 private:
  std::uint32_t depth_;
  std::uint32_t next_ = 0;
  std::deque<WrRecord> outstanding_;  // seq order
};

class CqSet;

enum class QpRole : std::uint8_t { Requester, Source };

// Lifetime: owned by its lane's QP table; destroyed (ERR, then ibv_destroy_qp) by the lane once
// its ledger is empty or the QP is past saving. Touched by the lane's mutex holder only.
struct Qp {
  ibv_qp* qp = nullptr;
  CqSet* cqs = nullptr;
  Context* ctx = nullptr;
  QpRole role = QpRole::Requester;
  std::uint16_t handle = 0;
  std::uint16_t generation = 0;
  std::uint64_t incarnation = 0;  // this side's generation of the slot (wire)
  std::uint32_t slot = 0;
  std::uint32_t psn = 0;
  std::uint32_t remote_qpn = 0;
  std::uint64_t remote_incarnation = 0;
  std::uint32_t rd_atomic = 0;       // applied initiator READ depth
  std::uint32_t dest_rd_atomic = 0;  // applied responder READ depth
  std::uint32_t max_inline = 0;
  std::uint32_t recv_depth = 0;
  std::uint32_t recv_posted = 0;
  std::uint32_t receipts_reserved = 0;  // receives promised to published grants' segments
  bool ready = false;                   // RTS
  bool broken = false;  // an error completion, a failed post or a transition failure: no posts
  SqLedger sq;
  explicit Qp(std::uint32_t depth) : sq(depth) {}
  [[nodiscard]] WrId id(WrKind kind, std::uint32_t seq) const {
    return WrId{kind, handle, static_cast<std::uint16_t>(generation & 0xfff), seq};
  }
};

struct QpCaps {
  std::uint32_t send_depth = 16;
  std::uint32_t recv_depth = 1;
  std::uint32_t inline_wanted = 160;
};

// One send CQ and one receive CQ per (context, lane), on one completion channel, with a slab of
// registered receive slots. QPs are created only while the CQs can hold a completion for every
// WR they could have outstanding (each possible flush needs a slot), so a CQ never overflows.
class CqSet {
 public:
  static constexpr std::uint32_t kSlotBytes = 256;
  CqSet(Context& ctx, std::uint32_t capacity, std::uint32_t slots);
  ~CqSet();
  CqSet(const CqSet&) = delete;
  CqSet& operator=(const CqSet&) = delete;
  Status init();

  Context& ctx;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;
  std::uint32_t capacity;
  std::uint32_t send_reserved = 0;
  std::uint32_t recv_reserved = 0;
  int armed = 0;         // CQs armed and not yet woken
  unsigned unacked = 0;  // channel events to ack before the CQs are destroyed

  // Receive slots: kSlotBytes each, in one local-only MR.
  std::vector<std::uint8_t> slab;
  ibv_mr* slab_mr = nullptr;
  std::vector<std::uint32_t> free_slots;
  [[nodiscard]] std::uint8_t* slot(std::uint32_t i) { return slab.data() + i * kSlotBytes; }
};

// Creates an RC QP on `cqs` in INIT (source-role QPs allow remote read and write; windows and
// their exact rights still gate every access), charging its depths to the CQs.
Result<ibv_qp*> create_rc_qp(Context& ctx, CqSet& cqs, const QpCaps& caps, QpRole role,
                             std::uint32_t* max_inline);
struct RemoteEnd {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  ibv_gid gid{};
  std::uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  std::uint8_t link_layer = IBV_LINK_LAYER_ETHERNET;
};
// The peer's end of a QP from its NIC record and the QP's number and first PSN.
RemoteEnd remote_end(const NicRecord& nic, std::uint32_t qpn, std::uint32_t psn);
// INIT -> RTR -> RTS towards `remote` with the given READ depths.
Status connect_rc_qp(Context& ctx, ibv_qp* qp, const RemoteEnd& remote, std::uint32_t my_psn,
                     std::uint32_t rd_atomic, std::uint32_t dest_rd_atomic);
// The applied READ depth: zero stays zero; a positive request is capped at the HCA's limit, or
// one when the HCA reports zero.
std::uint32_t clamp_rd_depth(std::uint32_t requested, std::uint32_t hca_limit);

}  // namespace orbite::rdma
