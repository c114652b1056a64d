// A lane's part of the state report (docs/hangs.md): its links with their state, the receives
// posted and the messages waiting for one, the requests in flight with the transport carrying
// them, and the transports' own lines. Written by the lane's mutex holder: it reads what the
// protocol's passes change.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "common/strings.h"
#include "p2p/peer.h"
#include "p2p/protocol.h"

namespace orbite::p2p {

namespace {

const char* link_state_name(detail::PeerLink::State s) {
  switch (s) {
    case detail::PeerLink::State::Idle: return "idle";
    case detail::PeerLink::State::Connecting: return "connecting";
    case detail::PeerLink::State::AwaitingPeer: return "awaiting the peer's answer";
    case detail::PeerLink::State::Established: return "established";
    case detail::PeerLink::State::Failed: return "failed";
  }
  return "?";
}

const char* op_name(detail::OpKind k) {
  switch (k) {
    case detail::OpKind::Send: return "send";
    case detail::OpKind::Recv: return "receive";
    case detail::OpKind::Put: return "put";
    case detail::OpKind::Get: return "get";
  }
  return "?";
}

// Since the request was submitted; "?" for one that carries no time.
std::string age_of(std::int64_t now_ns, std::int64_t since_ns) {
  return since_ns <= 0 ? std::string("?") : format_seconds(now_ns - since_ns);
}

std::string tag_text(std::int32_t tag) {
  return tag == detail::kAnyTagWire ? std::string("any") : std::to_string(tag);
}

// "comm 0x1a2b tag 7": what matches a message.
std::string match_text(std::uint32_t comm, std::int32_t tag) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "comm 0x%08" PRIx32 " tag %s", comm, tag_text(tag).c_str());
  return buf;
}

std::string rank_text(const detail::RequestState& r) {
  return r.peer_rank >= 0 ? " rank " + std::to_string(r.peer_rank) : std::string();
}

const char* via(const detail::RequestState& r) {
  return r.endpoint != nullptr ? transport_name(r.endpoint->id()) : "no transport yet";
}

}  // namespace

void Protocol::report(std::string& out, std::int64_t now_ns) const {
  std::size_t wildcards = 0;
  for (const auto& w : wildcards_) {
    if (!w.recv->claimed.load(std::memory_order_acquire)) ++wildcards;
  }
  append_format(out, "  %zu peer link(s), %zu receive(s) from any source, %zu staged transfer(s)\n",
                links_.size(), wildcards, staged_ops_.size());
  for (const auto& [id, owned] : links_) {
    const Link& link = *owned;
    std::string routes;
    for (std::size_t t = 0; t < kTransportCount; ++t) {
      if (link.endpoints[t]) {
        routes += routes.empty() ? "" : " ";
        routes += transport_name(static_cast<TransportId>(t));
      }
    }
    append_format(out, "  peer %s (pid %lld, %s)%s: %s%s%s\n", short_id(id).c_str(),
                  static_cast<long long>(link.ep.pid), link.ep.address.c_str(),
                  link.is_self ? " (this engine)" : "", link_state_name(link.state),
                  routes.empty() ? "" : ", endpoints: ", routes.c_str());
    if (link.state == detail::PeerLink::State::Failed && !link.failure.ok()) {
      append_format(out, "    failure: %s\n", link.failure.to_string().c_str());
    }
    if (link.peer_closing) out += "    the peer said Bye\n";
    append_format(out, "    eager credit: %llu B to send, %llu B owed back\n",
                  static_cast<unsigned long long>(link.credit),
                  static_cast<unsigned long long>(link.credit_owed));
    for (const auto& r : link.waiting) {
      append_format(out, "    waits for the connection: %s %s%s, %llu B, for %s\n",
                    op_name(r->kind), match_text(r->comm, r->tag).c_str(), rank_text(*r).c_str(),
                    static_cast<unsigned long long>(r->length),
                    age_of(now_ns, r->submitted_ns).c_str());
    }
    for (const auto& r : link.posted) {
      // A collective's abort watch: never matched unless a rank aborts, so not a stall.
      const bool watch = r->passive.load(std::memory_order_relaxed);
      append_format(out, "    %s: %s from%s %s, %llu B, for %s\n",
                    watch ? "passive receive (a watch that may never be matched)"
                          : "posted receive (no message matched it yet)",
                    match_text(r->comm, r->tag).c_str(), rank_text(*r).c_str(),
                    short_id(id).c_str(), static_cast<unsigned long long>(r->length),
                    age_of(now_ns, r->submitted_ns).c_str());
    }
    for (const auto& a : link.unexpected) {
      append_format(
          out,
          "    unexpected message (no receive posted for it): %s %s from %s, %llu B, seq %llu\n",
          a.type == FrameType::Eager ? "eager" : "rendezvous", match_text(a.comm, a.tag).c_str(),
          short_id(id).c_str(), static_cast<unsigned long long>(a.length),
          static_cast<unsigned long long>(a.seq));
    }
    if (!link.reorder.empty()) {
      append_format(out, "    %zu message(s) ahead of sequence %llu (waiting for earlier ones)\n",
                    link.reorder.size(), static_cast<unsigned long long>(link.recv_seq));
    }
    for (const auto& [wire, f] : link.inflight) {
      if (!f.req) continue;
      const detail::RequestState& r = *f.req;
      append_format(out, "    in flight #%llu: %s%s%s, %llu B, %llu B done%s, over %s, for %s\n",
                    static_cast<unsigned long long>(wire),
                    f.notify ? "notification of a "
                    : f.part ? "part of a "
                             : "",
                    op_name(r.kind),
                    (r.kind == detail::OpKind::Send || r.kind == detail::OpKind::Recv)
                        ? (" " + match_text(r.comm, r.tag) + rank_text(r)).c_str()
                        : "",
                    static_cast<unsigned long long>(f.length ? f.length : r.length),
                    static_cast<unsigned long long>(f.received), f.acked ? ", acknowledged" : "",
                    via(r), age_of(now_ns, r.submitted_ns).c_str());
    }
    if (!link.sessions.empty()) {
      append_format(out, "    %zu put(s) arriving from the peer (this engine owns the region)\n",
                    link.sessions.size());
    }
    if (!link.announced.empty() || link.rma_announced_out > 0) {
      append_format(out, "    RDMA rendezvous: %zu announced by the peer, %zu of this side's\n",
                    link.announced.size(), link.rma_announced_out);
    }
    if (!link.windows.empty() || !link.stage_waits.empty()) {
      append_format(out,
                    "    staging: %zu window(s) the peer opened, %zu chunk(s) waiting for it\n",
                    link.windows.size(), link.stage_waits.size());
    }
  }
  for (const auto& w : wildcards_) {
    const detail::RequestState& r = *w.recv;
    if (r.claimed.load(std::memory_order_acquire)) continue;
    append_format(out, "  posted receive from any source: %s, %llu B, for %s\n",
                  match_text(r.comm, r.tag).c_str(), static_cast<unsigned long long>(r.length),
                  age_of(now_ns, r.submitted_ns).c_str());
  }
  for (std::size_t t = 0; t < kTransportCount; ++t) {
    if (transports_[t]) transports_[t]->report(out);
  }
}

}  // namespace orbite::p2p
