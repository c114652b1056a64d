// The requester's scheduler pass (scheduler.h): every parent of the lane, whatever its peer,
// High, then Medium, then Low, FIFO within a tier (or arbitrated by DeadlineMlu per NIC). A
// parent is admitted to the direct-bytes budget in that order (the first refusal closes
// admission for the pass, so Low never takes what High waits for) and posts its payload in that
// order; a parent whose QP is full waits without holding back another's. A deadline that passes
// before any payload moved drops the parent with Timeout: before its grant, nothing was created
// for it; after, the grant goes back with a GrantCancel.
#include <algorithm>
#include <limits>
#include <span>

#include "common/log.h"
#include "p2p/rdma/requester.h"

namespace orbite::rdma {

namespace {

// The smallest posting window per NIC: below it the pass-to-pass gaps would starve the link.
constexpr std::uint64_t kMinPostWindow = 256ULL << 10;
static_assert(kTiers == kWrTiers, "the QP ledger counts payload by the scheduler's tiers");

bool any_posted(const Parent& p) {
  for (const Segment& s : p.segments) {
    if (s.posted > 0) return true;
  }
  return false;
}

}  // namespace

void Requester::dispatch() {
  dispatch_due_ = false;
  if (sched_.empty()) return;
  slot_wait_ = false;
  const Clock::time_point now = Clock::now();
  sched_.promote(now);
  admission_open_ = true;
  transmit_read_ = false;
  post_room_bounded_ = cfg_.post_queue_target > Duration::zero();
  if (cfg_.deadline_bw_arbitration) {
    read_transmit();
    nic_rates_.resize(transmit_.size());
    for (std::size_t i = 0; i < transmit_.size(); ++i) {
      nic_rates_[i] = NicRate{transmit_[i].healthy ? transmit_[i].Bps : 0.0, transmit_[i].posted};
    }
  }
  sched_.dispatch(
      now, nic_rates_, [this](const SchedEntry& e) { return describe(e); },
      [this, now](SchedEntry& e) { return visit(e, now); });
  // Payload waiting for its shared slot: no completion will wake the lane when the slot turns,
  // so it does not sleep (a slot lasts milliseconds).
  if (slot_wait_) dispatch_due_ = true;
}

void Requester::read_transmit() {
  // Once per pass, and only in a pass that needs it (a post, a prediction, arbitration): a pass
  // whose parents all wait for grants takes no selector lock.
  if (transmit_read_) return;
  transmit_read_ = true;
  // The selector's NICs only: it never names another, and the entries beyond keep their
  // defaults (no rate, unhealthy). A pass per completion made the whole table a cost.
  const std::size_t nics = std::min(engine_->selector().nic_count(), transmit_.size());
  engine_->selector().transmit(std::span(transmit_).first(nics));
  if (!post_room_bounded_) return;
  const double target = std::chrono::duration<double>(cfg_.post_queue_target).count();
  const auto& outstanding = engine_->counters().nic_tier_outstanding;
  for (std::size_t i = 0; i < nics; ++i) {
    const auto window = std::max<std::uint64_t>(
        kMinPostWindow, static_cast<std::uint64_t>(transmit_[i].Bps * target));
    std::uint64_t ahead = 0;
    for (std::size_t t = 0; t < kTiers; ++t) {
      ahead += static_cast<std::uint64_t>(
          std::max<std::int64_t>(0, outstanding[i][t].load(std::memory_order_relaxed)));
      post_room_[i][t] = window > ahead ? window - ahead : 0;
    }
    // The window keeps a tier's backlog short for the tiers above it: High has none above it, so
    // only its QPs' depth bounds it (default-priority traffic streams unthrottled).
    post_room_[i][0] = std::numeric_limits<std::uint64_t>::max();
  }
}

Scheduler::Verdict Requester::visit(SchedEntry& e, Clock::time_point now) {
  using V = Scheduler::Verdict;
  PeerRdma& peer = *e.peer;
  Parent* found = peer.parents.find(e.parent);
  if (found == nullptr) return V::Remove;
  Parent& p = *found;
  const std::uint64_t id = p.id;
  switch (p.state) {
    case ParentState::Admission: return admit(peer, p, e, now);
    case ParentState::Connecting:
      // Its GrantRequest is not sent yet (QPs building, or held by kMaxPendingGrantRequests).
      if (now >= p.deadline) {
        drop(peer, p, e, "its connection");
        return V::Remove;
      }
      if (p.request_waiting && p.deadline == kNoDeadline) {
        // Held by the window with no deadline to watch: nothing for a pass to do until its
        // request leaves, so it waits out of the passes (a batch holds hundreds here) and is
        // resumed by its Grant, as a Requesting parent is.
        p.parked = e;
        return V::Remove;
      }
      return V::Keep;
    case ParentState::Requesting:
      // The Grant (or a refusal) decides: parked out of the passes until then (on_grant).
      p.parked = e;
      return V::Remove;
    case ParentState::Granted: break;
    default: return V::Remove;  // done posting, failed or canceling: nothing left to order
  }
  const bool started = any_posted(p);
  if (!started && now >= p.deadline) {
    cancel_grant(peer, p, e);
    return V::Remove;
  }
  if (started && now >= p.deadline && p.released.ok()) release_unstarted(p);
  if (hooks_.hold_granted && !started && p.deadline != kNoDeadline) return V::Keep;
  if (slots_ != nullptr && !slots_->admits(e.tier)) {
    // Not this tier's shared slot: only payload waits (its receipts, if due, wait with it).
    sched_.counters()[e.tier].slot_waits.fetch_add(1, std::memory_order_relaxed);
    slot_wait_ = true;
    return V::Keep;
  }
  posting_tier_ = e.tier;
  if (post_room_bounded_) read_transmit();
  post_payload(peer, p);
  Parent* again = peer.parents.find(id);
  if (again == nullptr) return V::Remove;
  if (!started && any_posted(*again)) {
    sched_.counters()[e.tier].posted.fetch_add(1, std::memory_order_relaxed);
  }
  // Receipts that found the SQ full are retried from here too, so it stays while Granted.
  return again->state == ParentState::Granted ? V::Keep : V::Remove;
}

Scheduler::Verdict Requester::admit(PeerRdma& peer, Parent& p, const SchedEntry& e,
                                    Clock::time_point now) {
  using V = Scheduler::Verdict;
  if (now >= p.deadline) {
    drop(peer, p, e, "admission");
    return V::Remove;
  }
  if (!admission_open_) return V::Keep;
  if (predicted_late(peer, p, now)) {
    drop(peer, p, e, "admission (rdma.deadline_admission_mlu predicts it late)");
    return V::Remove;
  }
  // The requester's loan waits rather than failing: it returns when parents end.
  if (p.length > 0 && !engine_->direct_bytes().try_take(p.length)) {
    admission_open_ = false;
    return V::Keep;
  }
  p.direct = Charge(engine_->direct_bytes(), p.length);
  const std::uint64_t id = p.id;
  connect_parent(peer, p);
  return peer.parents.contains(id) ? V::Keep : V::Remove;
}

bool Requester::predicted_late(const PeerRdma& peer, const Parent& p, Clock::time_point now) {
  if (!(cfg_.deadline_admission_mlu > 0.0) || p.deadline == kNoDeadline) return false;
  read_transmit();
  // The healthy NICs this parent may use, by their current transmit estimates. One without a
  // rate or a sample leaves the parent eligible: the prediction would mean nothing.
  const std::uint64_t mask = lane_.compatible_nics(peer);
  double Bps = 0.0;
  for (std::size_t i = 0; i < transmit_.size(); ++i) {
    if (((mask >> i) & 1U) == 0 || !transmit_[i].healthy) continue;
    if (!transmit_[i].known || !(transmit_[i].Bps > 0.0)) return false;
    Bps += transmit_[i].Bps;
  }
  if (!(Bps > 0.0)) return false;
  const double mlu = deadline_mlu(engine_->direct_bytes().used(), p.length, p.deadline, now, Bps);
  return mlu >= cfg_.deadline_admission_mlu;
}

ArbCandidate Requester::describe(const SchedEntry& e) const {
  ArbCandidate c;
  const Parent* found = e.peer->parents.find(e.parent);
  if (found == nullptr || found->state != ParentState::Granted) return c;
  const Parent& p = *found;
  c.deadline = p.deadline;
  for (const Segment& s : p.segments) {
    if (s.posted == s.slices) continue;
    if (c.nic < 0) c.nic = s.nic;
    for (std::size_t k = s.first_slice + s.posted; k < std::size_t{s.first_slice} + s.slices; ++k) {
      c.bytes += p.plan.lengths[k];
    }
  }
  return c;
}

void Requester::drop(PeerRdma& peer, Parent& p, const SchedEntry& e, const char* waited_for) {
  sched_.counters()[e.tier].dropped.fetch_add(1, std::memory_order_relaxed);
  ORBITE_LOG(Debug, Rdma) << "parent " << p.id << " dropped: its deadline passed in " << waited_for;
  fail_parent(peer, p,
              Status::error(Errc::Timeout, std::string("the request's deadline passed while it "
                                                       "waited for ") +
                                               waited_for + "; nothing moved"));
}

void Requester::cancel_grant(PeerRdma& peer, Parent& p, const SchedEntry& e) {
  sched_.counters()[e.tier].dropped.fetch_add(1, std::memory_order_relaxed);
  p.failure = Status::error(Errc::Timeout,
                            "the request's deadline passed while it waited for its grant; nothing "
                            "moved (the grant was given back)");
  p.state = ParentState::Canceling;
  lane_.send(peer, ControlKind::GrantCancel,
             encode(GrantCancel{p.id, p.grant, p.grant_generation}));
}

void Requester::release_unstarted(Parent& p) {
  std::uint64_t posted_bytes = 0;
  std::size_t released = 0;
  for (Segment& s : p.segments) {
    if (s.posted == 0 && !s.receipt_posted && !s.released) {
      s.released = true;  // post_payload() sends its status-1 receipt instead of its payload
      ++released;
    } else if (!s.released) {
      posted_bytes += s.length;
    }
  }
  if (released == 0) return;  // every segment started: they finish, and the request succeeds
  // What the parent reports once its receipts are done and the source acknowledged (its failure
  // is set only then: a failed parent reports as soon as its WRs drained).
  p.released = Status::error(
      Errc::Timeout, "the request's deadline passed while its payload was being posted: " +
                         std::to_string(posted_bytes) + " of " + std::to_string(p.length) +
                         " bytes were in segments posted before it, the rest (" +
                         std::to_string(released) + (released == 1 ? " segment" : " segments") +
                         ") was released unwritten");
  ORBITE_LOG(Debug, Rdma) << "parent " << p.id << ": " << p.released.message();
}

}  // namespace orbite::rdma
