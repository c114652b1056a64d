// Receives from any source (MPI_ANY_SOURCE) and probes, on one lane.
//
// Matching order as MPI's: a message goes to the earliest posted receive it matches, whether
// that names its sender or any source. Both kinds are numbered as the lane posts them
// (post_order_); the first matching receive of the message's link is compared with the first
// matching receive from any source, and the earlier one takes the message. A receive from any
// source is posted on every lane (the engine hands the others a ticket), because its message may
// come from a peer of any lane; whichever lane matches it first claims it, and the others drop
// their entry when they next meet it.
#include <algorithm>

#include "p2p/protocol.h"

namespace orbite::p2p {

namespace {

bool wants_message(const detail::RequestState& recv, const detail::PeerLink& link,
                   std::uint32_t comm, std::int32_t tag) {
  return recv.comm == comm && detail::tag_matches(recv.tag, tag) &&
         recv.ranks->count(link.ep.id) != 0;
}

// The one place a lane takes a receive from any source for itself: true for exactly one caller.
bool take_for_this_lane(detail::RequestState& recv) {
  bool expected = false;
  return recv.claimed.compare_exchange_strong(expected, true, std::memory_order_acq_rel);
}

}  // namespace

bool Protocol::claim(Link& link, Req& recv, std::int32_t tag) {
  if (!take_for_this_lane(recv)) return false;
  recv.id = next_wire_id_++;
  recv.lane_link = &link;
  recv.counters = &counters_;
  recv.source = recv.ranks->at(link.ep.id);
  recv.matched_tag = tag;
  return true;
}

void Protocol::post_any_source(const ReqPtr& recv) {
  if (recv->claimed.load(std::memory_order_acquire)) return;  // matched on another lane
  // A message that arrived before the receive: no posted receive wanted it (one posted later
  // would have taken it), so the first one of any link is the receive's.
  for (auto& [id, link] : links_) {
    auto& queue = link->unexpected;
    auto it = std::find_if(queue.begin(), queue.end(), [&](const detail::Arrival& a) {
      return wants_message(*recv, *link, a.comm, a.tag);
    });
    if (it == queue.end()) continue;
    if (!claim(*link, *recv, it->tag)) return;
    detail::Arrival a = std::move(*it);
    queue.erase(it);
    if (a.type != FrameType::Eager) --link->unexpected_rts;
    return deliver_matched(*link, recv, a);
  }
  wildcards_.push_back({recv, ++post_order_});
}

Protocol::ReqPtr Protocol::take_any_source(Link& link, std::uint32_t comm, std::int32_t tag,
                                           std::uint64_t before) {
  for (auto w = wildcards_.begin(); w != wildcards_.end();) {
    if (w->order > before) return nullptr;
    Req& recv = *w->recv;
    if (recv.claimed.load(std::memory_order_acquire)) {
      w = wildcards_.erase(w);
      continue;
    }
    if (!wants_message(recv, link, comm, tag)) {
      ++w;
      continue;
    }
    if (!claim(link, recv, tag)) {
      w = wildcards_.erase(w);
      continue;
    }
    ReqPtr taken = std::move(w->recv);
    wildcards_.erase(w);
    return taken;
  }
  return nullptr;
}

void Protocol::fail_any_source(const Status& why) {
  for (AnySource& w : wildcards_) {
    if (!take_for_this_lane(*w.recv)) continue;  // another lane matched or failed it
    w.recv->counters = &counters_;
    detail::complete_request(*w.recv, why);
  }
  wildcards_.clear();
}

std::optional<ProbeHit> Protocol::probe(std::uint32_t comm, const std::string* peer_id,
                                        std::int32_t tag, const PeerRanks& members) const {
  auto look = [&](const Link& link) -> std::optional<ProbeHit> {
    for (const detail::Arrival& a : link.unexpected) {
      if (a.comm == comm && detail::tag_matches(tag, a.tag)) {
        return ProbeHit{link.ep.id, a.tag, a.length};
      }
    }
    return std::nullopt;
  };
  if (peer_id != nullptr) {
    const auto it = links_.find(*peer_id);
    if (it == links_.end()) return std::nullopt;
    return look(*it->second);
  }
  for (const auto& [id, link] : links_) {
    if (members.count(id) == 0) continue;
    if (auto hit = look(*link)) return hit;
  }
  return std::nullopt;
}

}  // namespace orbite::p2p
