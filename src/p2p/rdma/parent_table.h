// One peer's parents on a lane, this side being the requester (it posts the READ/WRITE): each
// put/get/rendezvous range of at most max_direct_bytes with its segments, grant and state
// (requester.cpp, payload.cpp and dispatch.cpp drive them), and the link's GrantRequest window:
// at most kMaxPendingGrantRequests unanswered, further parents held in order until an answer
// frees a place. Touched by the lane's mutex holder only.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cuda/staging.h"
#include "p2p/rdma/engine.h"
#include "p2p/rdma/rail_health.h"
#include "p2p/rdma/scheduler.h"
#include "p2p/rdma/slicing.h"
#include "p2p/rdma/wire.h"
#include "p2p/registry.h"
#include "p2p/transport.h"
#include "topo/selector.h"

namespace orbite::rdma {

// One payload-carrying run of a parent's slices on one QP: one window, one receipt.
struct Segment {
  std::uint8_t first_slice = 0;
  std::uint8_t slices = 0;
  std::size_t array = 0;   // its rail: the QP array (local context, remote NIC) in the peer
  int nic = 0;             // the local NIC the selector gave its slices
  std::uint32_t lkey = 0;  // the local memory's local-only MR on the array's context
  // Its first payload post: the selection estimate learns the segment's bytes over first post
  // to last payload completion.
  std::optional<std::chrono::steady_clock::time_point> first_post;
  std::uint32_t slot = 0;
  std::uint64_t offset = 0;  // of the segment in the parent
  std::uint64_t length = 0;
  // Requester side.
  std::uint16_t qp_handle = 0;
  std::uint32_t rkey = 0;
  std::uint64_t remote_address = 0;
  std::uint8_t posted = 0;     // slices posted
  std::uint8_t completed = 0;  // slices proven successful
  bool receipt_posted = false;
  bool receipt_done = false;
  // Given back unwritten with a status-1 receipt: the parent's deadline passed after its payload
  // had started but before this segment's first post.
  bool released = false;
  std::int32_t receipt_slot = -1;  // registered slot holding the binding when not inline
};

enum class ParentState : std::uint8_t {
  Admission,   // waiting for the direct-bytes budget
  Connecting,  // waiting for its QP slots
  Requesting,  // GrantRequest sent
  Granted,     // posting payload
  AwaitAck,    // every receipt posted
  Draining,    // failed: waiting until no WR of it can run
  Canceling,   // its deadline passed before its payload: GrantCancel sent, waiting for the ack
};

struct RmaJob {
  p2p::RmaOp op;
  std::size_t parents_left = 0;
  Status first_error;
  // What the GrantRequests and receipts name: the wire op (kOpToReceive for a rendezvous) and
  // the target (a region and its generation, or the peer's receive id and 0).
  std::uint8_t wire_op = kOpRead;
  std::uint64_t target = 0, target_generation = 0;
  // The target is the source's device memory: each parent takes the private grant path (one
  // slice, one segment, a QP of its own connected to the grant's QP; private_grant.cpp).
  bool private_path = false;
  // A send buffer registered for this job only (op.local_buffer); released with the job, after
  // every parent has drained.
  std::shared_ptr<detail::RegionRecord> transient;
  // Or the bounce chunk the send buffer was copied into (transient is then the chunk's cached
  // record): lent until the job ends, so no WR of it can read a chunk lent again.
  std::shared_ptr<cuda::StagingLease> bounce;
};

struct Parent {
  std::uint64_t id = 0;
  std::shared_ptr<RmaJob> job;
  ParentState state = ParentState::Admission;
  bool write = false;
  std::byte* local = nullptr;  // first byte of the parent in the local region
  std::uint64_t remote_offset = 0;
  std::uint64_t length = 0;
  SlicePlan plan;
  std::vector<Segment> segments;
  // The selector's charges for its slices (one NIC each), returned as slices complete; what is
  // left is abandoned when the parent reports.
  topo::DeviceLease lease;
  std::uint64_t grant = 0, grant_generation = 0, grant_nonce = 0;
  Charge direct;  // its requester loan of max_direct_bytes, from admission until it reports
  // The half-open trial of a paused rail pair this parent is (every slice on that pair's NIC),
  // from planning until its verdict or its report: a positive receipt on the pair reopens it, a
  // rail error on it fails the trial.
  RailTrial trial;
  // Its request's priority and deadline (kNoDeadline: none; a rendezvous has none here, since its
  // receiver already matched it): the scheduler's inputs, and the GrantRequest's.
  Priority priority = Priority::High;
  std::chrono::steady_clock::time_point deadline = kNoDeadline;
  // Its scheduler entry while it waits for its grant (parent 0: none parked): out of the
  // scheduler's passes until the Grant, or a cache miss that reconnects, resumes it.
  SchedEntry parked{};
  bool reconnected = false;
  bool private_qp = false;                // its one segment's QP is its own (job->private_path)
  std::uint64_t private_incarnation = 0;  // that QP's (its handle is reused once it is destroyed)
  bool request_waiting = false;           // held by its ParentTable's GrantRequest window
  bool acked = false;
  Status ack_status;
  Status failure;  // first failure; the parent ends once it has drained
  // Its deadline passed after its payload started (release_unstarted): Timeout, reported after
  // its receipts (status 1 for the segments given back) and the source's GrantAck.
  Status released;
  std::size_t wrs_outstanding = 0;
  bool reported = false;  // its job was told (it may still wait for its GrantAck)
  // When it started draining: one destruction window (rdma.destroy_timeout) from here.
  std::optional<std::chrono::steady_clock::time_point> draining_since;
};

class ParentTable {
 public:
  using Map = std::unordered_map<std::uint64_t, Parent>;

  [[nodiscard]] Parent* find(std::uint64_t id) {
    auto it = parents_.find(id);
    return it == parents_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] bool contains(std::uint64_t id) const { return parents_.count(id) != 0; }
  Parent& insert(Parent p) {
    const std::uint64_t id = p.id;
    return parents_.emplace(id, std::move(p)).first->second;
  }
  void erase(std::uint64_t id) { parents_.erase(id); }
  Map::iterator erase(Map::iterator it) { return parents_.erase(it); }
  void clear() {
    parents_.clear();
    draining_.clear();
  }
  // `p` failed and drains from `now` (or from when it first did): listed for expire_drains(),
  // which then looks at these parents only, not at every parent every pass.
  void start_draining(Parent& p, std::chrono::steady_clock::time_point now) {
    if (p.draining_since) return;
    p.draining_since = now;
    draining_.push_back(p.id);
  }
  // The listed ids (of parents that may have ended since), moved out; keep_draining() puts back
  // those still draining.
  void take_draining(std::vector<std::uint64_t>& out) {
    out.clear();
    out.swap(draining_);
  }
  void keep_draining(std::uint64_t id) { draining_.push_back(id); }
  [[nodiscard]] bool empty() const { return parents_.empty(); }
  Map::iterator begin() { return parents_.begin(); }
  Map::iterator end() { return parents_.end(); }
  [[nodiscard]] Map::const_iterator begin() const { return parents_.begin(); }
  [[nodiscard]] Map::const_iterator end() const { return parents_.end(); }
  void ids(std::vector<std::uint64_t>& out) const {
    out.clear();
    for (const auto& [id, p] : parents_) out.push_back(id);
  }
  // Whether a parent has a segment on QP `handle` (the idle-QP reaper leaves it alone).
  [[nodiscard]] bool uses_qp(std::uint16_t handle) const {
    for (const auto& [id, p] : parents_) {
      for (const Segment& s : p.segments) {
        if (s.qp_handle == handle) return true;
      }
    }
    return false;
  }

  // The GrantRequest window (the source's deferred queue is bounded by it).
  [[nodiscard]] bool window_full() const { return requests_out_ >= kMaxPendingGrantRequests; }
  void requested() { ++requests_out_; }
  void answered() {  // a Grant or GrantNack came back
    if (requests_out_ > 0) --requests_out_;
  }
  // `p`'s QPs are ready but the window is full: it waits, in order.
  void hold(Parent& p) {
    if (!p.request_waiting) held_.push_back(p.id);
    p.request_waiting = true;
  }
  // The next held parent that still waits for the window (ids of parents that ended, or failed
  // or moved on while held, are skipped); null when none, or while the window is full.
  Parent* next_held() {
    while (!held_.empty() && !window_full()) {
      Parent* p = find(held_.front());
      held_.pop_front();
      if (p != nullptr && p->request_waiting && p->state == ParentState::Connecting) return p;
    }
    return nullptr;
  }
  void reset_window() {
    requests_out_ = 0;
    held_.clear();
  }

 private:
  Map parents_;
  std::size_t requests_out_ = 0;         // GrantRequests sent, not yet answered
  std::deque<std::uint64_t> held_;       // parents whose request waits for the window (FIFO)
  std::vector<std::uint64_t> draining_;  // parents with draining_since set, not yet reported
};

}  // namespace orbite::rdma
