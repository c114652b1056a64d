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

#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "p2p/rdma/context.h"
#include "p2p/rdma/wire.h"

namespace orbite::rdma {

enum class WrKind : std::uint8_t { Payload = 1, Receipt = 2, Bind = 3, Recv = 4, Frame = 5 };

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
// The scheduler's tiers (High, Medium, Low) as the ledger counts payload WRs by them.
inline constexpr std::size_t kWrTiers = 3;

struct WrRecord {
  std::uint32_t seq = 0;
  WrKind kind = WrKind::Payload;
  std::uint64_t owner = 0;  // the parent (requester) or grant (source) id; a frame's staging slot
  std::uint16_t segment = 0;
  std::uint64_t bytes = 0;
  bool read = false;
  bool signaled = false;
  std::uint8_t tier = 0;  // a payload WR: the scheduler tier it was posted for
  std::int16_t nic = -1;  // a payload WR: the selector's NIC it was charged to
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
  void clear() {
    outstanding_.clear();
    payload_.fill(0);
  }
  [[nodiscard]] const std::deque<WrRecord>& records() const { return outstanding_; }
  // A payload WR of a tier above `tier` (a smaller number) is outstanding: RC serves the QP in
  // order, so work of `tier` posted now would delay that payload's receipt.
  [[nodiscard]] bool payload_above(std::size_t tier) const {
    for (std::size_t t = 0; t < tier && t < kWrTiers; ++t) {
      if (payload_[t] != 0) return true;
    }
    return false;
  }

 private:
  void forget(const WrRecord& r) {
    if (r.kind == WrKind::Payload && r.tier < kWrTiers && payload_[r.tier] > 0) --payload_[r.tier];
  }
  std::uint32_t depth_;
  std::uint32_t next_ = 0;
  std::deque<WrRecord> outstanding_;               // seq order
  std::array<std::uint32_t, kWrTiers> payload_{};  // outstanding payload WRs per tier
};

class CqSet;
class MrCache;

// Registered buffers of one size for the frames of the message QPs (receives, and staging of
// sends too large to go inline) or for receipts, grown as peers arrive in chunks of one MR each
// whose sizes double (64, 128, 256, ... slots), so that the MR count grows with the logarithm
// of the slots. Each chunk is a slab charged to the MR cache's budgets. Lifetime: owned by its
// CqSet, on the CqSet's context; the budget (the lane's MrCache) outlives it.
class SlotPool {
 public:
  static constexpr std::uint32_t kFirstChunkSlots = 64;
  SlotPool(Context& ctx, std::uint32_t slot_bytes, std::uint32_t max_slots, MrCache* budget)
      : ctx_(ctx), slot_bytes_(slot_bytes), max_slots_(max_slots), budget_(budget) {}
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;
  // A free slot, registering a new chunk when none is left (ResourceExhausted past max_slots or
  // when the MR cache's budgets cannot take the chunk).
  Result<std::uint32_t> take();
  void give(std::uint32_t i) { free_.push_back(i); }
  [[nodiscard]] bool contains(std::uint32_t i) const { return i < slots_; }
  [[nodiscard]] std::byte* at(std::uint32_t i) {
    const std::uint32_t c = chunk_of(i);
    return chunks_[c].bytes.get() + std::size_t{i - first_of(c)} * slot_bytes_;
  }
  [[nodiscard]] std::uint32_t lkey(std::uint32_t i) const { return chunks_[chunk_of(i)].mr->lkey; }
  [[nodiscard]] std::uint32_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Chunk {
    std::unique_ptr<std::byte[]> bytes;
    ibv_mr* mr = nullptr;
    std::uint64_t charged = 0;  // bytes charged to the budget
  };
  // Chunk c holds slots [64 (2^c - 1), 64 (2^(c+1) - 1)) (the last one may be cut at max_slots).
  static std::uint32_t first_of(std::uint32_t c) { return kFirstChunkSlots * ((1u << c) - 1); }
  static std::uint32_t chunk_of(std::uint32_t i) {
    return static_cast<std::uint32_t>(std::bit_width(i / kFirstChunkSlots + 1)) - 1;
  }
  Context& ctx_;
  std::uint32_t slot_bytes_;
  std::uint32_t max_slots_;
  MrCache* budget_;  // null: uncharged (unit tests)
  std::uint32_t slots_ = 0;
  std::vector<Chunk> chunks_;
  std::vector<std::uint32_t> free_;
};

enum class QpRole : std::uint8_t { Requester, Source };

// A handle no QP ever gets (the table stops below it): what a parent names once its QP is lost.
inline constexpr std::uint16_t kNoQpHandle = 0xffff;

// Lifetime: owned by its lane's QP table; destroyed (ERR, then ibv_destroy_qp) by the lane once
// its ledger is empty or the QP is past saving. A QP killed with its CQ set (QpTable::kill) stays
// in the table with `qp` null until the lane has handed its WRs to their handlers. Touched by the
// lane's mutex holder only.
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
  // The peer's frames arrive here (source role) or this side's leave (requester role): slot
  // kMessageSlot, receives from the CQ set's frame pool.
  bool message = false;
  std::uint32_t credits = 0;  // requester role: frames the peer's receives can still take
  std::uint32_t owed = 0;     // source role: consumed receives not yet credited back
  bool ready = false;         // RTS
  // A message QP: the frames whose SEND completed (requester role) or that arrived (source role).
  // When a lost set takes the receiving end, the two counts say whether a frame went with it.
  std::uint64_t frames = 0;
  bool broken = false;  // an error completion, a failed post or a transition failure: no posts
  // Its last post (or its creation): a requester's payload QP idle for rdma.idle_qp_timeout is
  // reaped. When it was retired: a QP that does not drain within rdma.destroy_timeout is
  // destroyed anyway.
  std::chrono::steady_clock::time_point last_used{};
  std::optional<std::chrono::steady_clock::time_point> retired_at;
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

// One send CQ and one receive CQ per (context, lane), on one completion channel, with pools of
// registered slots (receipts; frames). QPs are created only while the CQs can hold a completion for
// every WR they could have outstanding (each possible flush needs a slot), so a CQ never overflows.
class CqSet {
 public:
  static constexpr std::uint32_t kSlotBytes = 256;
  static constexpr std::uint32_t kMaxReceiptSlots = 16384;
  // The slot pools' chunks are charged to `budget` (the MR cache), which must outlive the set.
  // frame_payload: rdma.eager_limit, the payload bytes of each frame slot.
  CqSet(Context& ctx, std::uint32_t capacity, MrCache* budget, std::uint32_t frame_payload);
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
  // ibv_poll_cq failures (either CQ) since the last poll that worked, and when the next log line
  // about them may be written: one a second while they last, however fast the lane polls.
  std::uint64_t poll_failures_in_row = 0;
  std::chrono::steady_clock::time_point next_poll_log{};
  // The run's first failure: a run that lasts a second gets the set replaced (progress recovery).
  std::chrono::steady_clock::time_point failing_since{};

  // Receipt slots: kSlotBytes each (receives of grant QPs, and receipts not sent inline).
  SlotPool receipts;

  // Frame slots: a frame header and up to rdma.eager_limit bytes each. A receive's wr_id carries
  // kFrameSlotBit with the index.
  static constexpr std::uint32_t kFrameSlotBit = 1u << 31;
  // The one receive of a private grant's source QP (its buffer is the grant's, in its own PD).
  static constexpr std::uint32_t kPrivateReceipt = 1u << 30;
  static constexpr std::uint32_t kMaxFrameSlots = 4096;  // 128 peers' receives
  SlotPool frames;
};

// Creates an RC QP on `cqs` in INIT (source-role QPs allow remote read and write; windows and
// their exact rights still gate every access), charging its depths to the CQs. In the context's
// PD, or in `pd` (a private grant's own).
Result<ibv_qp*> create_rc_qp(Context& ctx, CqSet& cqs, const QpCaps& caps, QpRole role,
                             std::uint32_t* max_inline, ibv_pd* pd = nullptr);
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
// A random first PSN (24 bits).
std::uint32_t random_psn();
// The applied READ depth: zero stays zero; a positive request is capped at the HCA's limit, or
// one when the HCA reports zero.
std::uint32_t clamp_rd_depth(std::uint32_t requested, std::uint32_t hca_limit);

}  // namespace orbite::rdma
