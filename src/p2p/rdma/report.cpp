// The RDMA transport's lines of its lane's state report (docs/hangs.md): per peer, its QPs (role,
// state, WRs outstanding), this side's parents by state with the oldest few, the grants this side
// holds open as the owner, the GrantRequests it deferred, and the frames on the message QP.
#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "common/strings.h"
#include "p2p/peer.h"
#include "p2p/rdma/lane.h"

namespace orbite::rdma {

namespace {

constexpr std::array<const char*, 7> kParentStates = {"waiting for admission",
                                                      "waiting for its QPs",
                                                      "grant requested",
                                                      "posting payload",
                                                      "awaiting the GrantAck",
                                                      "draining",
                                                      "canceling"};

// Parents listed one by one, per peer; the rest are counted by state only.
constexpr std::size_t kParentsListed = 8;

}  // namespace

void RdmaLane::report(std::string& out) const {
  append_format(out, "    rdma: %zu peer(s), %zu usable context(s)\n", peers_.size(),
                static_cast<std::size_t>(std::count_if(
                    cqs_.begin(), cqs_.end(), [](const auto& c) { return c != nullptr; })));
  for (const auto& [link, owned] : peers_) {
    const PeerRdma& peer = *owned;
    append_format(out, "    rdma peer %s%s: %zu QP(s)\n", p2p::short_id(link->ep.id).c_str(),
                  peer.failed ? " (failed)" : "", peer.qps.size());
    for (std::uint16_t h : peer.qps) {
      const Qp* q = qps_.get(h);
      if (q == nullptr) continue;
      append_format(
          out, "      qp %u: %s%s, slot %u, %s, %zu WR(s) outstanding, %u receive(s) posted\n",
          static_cast<unsigned>(h), q->role == QpRole::Requester ? "requester" : "source",
          q->message ? " (messages)" : "", q->slot,
          q->broken ? "broken" : (q->retired_at ? "retired" : (q->ready ? "RTS" : "not ready")),
          q->sq.outstanding(), q->recv_posted);
    }
    std::array<std::size_t, kParentStates.size()> by_state{};
    std::size_t listed = 0;
    for (const auto& [id, p] : peer.parents) {
      const auto s = static_cast<std::size_t>(p.state);
      if (s < by_state.size()) ++by_state[s];
      if (listed++ >= kParentsListed) continue;
      std::size_t posted = 0, done = 0;
      for (const Segment& seg : p.segments) {
        posted += seg.posted;
        done += seg.completed;
      }
      append_format(out,
                    "      parent %" PRIu64 ": %s %" PRIu64
                    " B, %s, %zu segment(s), %zu slice(s) "
                    "posted, %zu completed, %zu WR(s) outstanding%s\n",
                    id, p.write ? "write" : "read", p.length,
                    s < kParentStates.size() ? kParentStates[s] : "?", p.segments.size(), posted,
                    done, p.wrs_outstanding,
                    p.failure.ok() ? "" : (", failed: " + p.failure.message()).c_str());
    }
    if (listed > kParentsListed) {
      out += "      parents by state:";
      for (std::size_t s = 0; s < by_state.size(); ++s) {
        if (by_state[s] > 0) append_format(out, " %zu %s;", by_state[s], kParentStates[s]);
      }
      out += "\n";
    }
    if (!peer.grants.empty() || peer.grants.has_deferred()) {
      append_format(
          out,
          "      as the owner: %zu grant(s) open, %zu GrantRequest(s) deferred (%zu waiting "
          "for a receive to be posted)\n",
          peer.grants.size(), peer.grants.deferred_count(), peer.grants.deferred_for_receives());
    }
    if (peer.frames.pending()) {
      append_format(out, "      message QP: %zu frame(s) waiting to post, %zu posted\n",
                    peer.frames.unposted(), peer.frames.posted_count());
    }
  }
}

}  // namespace orbite::rdma
