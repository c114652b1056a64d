// The owner's side of remote staging (staged.h): a StageOpen for a region a transport carries
// staged leases a chunk of the pool, copies the region's bytes into it (a get), publishes it as a
// window the requester's host part reaches, and at StageClose withdraws the window, copies it
// into the region (a committed put), answers StageDone and lets everything go. A window whose
// copy still runs when its link fails stays here until the copy finished, pinning its region.
#include <cstring>

#include "common/log.h"
#include "p2p/protocol.h"
#include "p2p/staged.h"

namespace orbite::p2p {

using detail::PeerLink;
using WPhase = StageWindow::Phase;

void Protocol::on_stage_open(Link& link, const FrameHeader& h, PeerEndpoint& ep,
                             std::string_view body) {
  if (body.size() != 1 || (body[0] != 0 && body[0] != 1)) {
    return protocol_error(link, "StageOpen " + std::to_string(h.id) + " with a payload of " +
                                    std::to_string(body.size()) + " bytes");
  }
  if (link.windows.count(h.id) != 0) {
    return protocol_error(link, "StageOpen " + std::to_string(h.id) + " opened twice");
  }
  const bool write = body[0] == 1;
  auto refuse = [&](const Status& st) {
    send_control(ep, FrameType::StageReady, h.id, static_cast<std::uint64_t>(st.code()), 0, 0, 0,
                 st.message());
  };
  if (!staging_) return refuse(Status::error(Errc::Unavailable, "this engine has no staging"));
  if (h.d == 0 || h.d > staging_->chunk_bytes()) {
    return refuse(Status::error(Errc::InvalidArgument, "a staged chunk of " + std::to_string(h.d) +
                                                           " bytes (this engine stages at most " +
                                                           std::to_string(staging_->chunk_bytes()) +
                                                           " at once)"));
  }
  auto region = regions_.authorize_staged(h.a, h.b, h.c, h.d, write);
  if (!region.ok()) return refuse(region.status());
  if (!(*region)->pin()) {
    return refuse(Status::error(Errc::InvalidArgument,
                                "region " + std::to_string(h.a) + " is being unregistered"));
  }
  auto w = std::make_shared<StageWindow>();
  w->id = h.id;
  w->ep = &ep;
  w->region = std::move(*region);
  w->offset = h.c;
  w->length = h.d;
  w->write = write;
  link.windows.emplace(h.id, w);
  open_windows_++;
  advance_window(link, *w);
}

void Protocol::on_stage_close(Link& link, const FrameHeader& h) {
  auto it = link.windows.find(h.id);
  if (it == link.windows.end() || h.a > 1) {
    return protocol_error(
        link, "StageClose for stage " + std::to_string(h.id) + " matches no open window");
  }
  StageWindow& w = *it->second;
  if (w.phase == WPhase::Draining || w.phase == WPhase::CopyIn) {
    // A requester closes once; a second close must not end a window accesses may still hold.
    return protocol_error(link, "StageClose for stage " + std::to_string(h.id) + " closed twice");
  }
  if (w.phase != WPhase::Ready) {
    // Closed before it was ready (the requester gave up): it ends without an answer.
    return end_window(link, w, Status(), false);
  }
  w.commit = h.a == 1 && w.write;
  // No new access reaches the window; the ones under way drain first.
  regions_.remove(w.window->id);
  w.window->dead.store(true, std::memory_order_seq_cst);
  w.phase = WPhase::Draining;
  advance_window(link, w);
}

void Protocol::end_window(Link& link, StageWindow& w, const Status& outcome, bool reply) {
  if (w.window) {
    // No new access reaches it; one under way keeps it (below).
    regions_.remove(w.window->id);
    w.window->dead.store(true, std::memory_order_seq_cst);
  }
  if (reply && link.state == PeerLink::State::Established) {
    send_control(*w.ep, FrameType::StageDone, w.id, static_cast<std::uint64_t>(outcome.code()), 0,
                 0, 0, outcome.ok() ? std::string() : outcome.message());
  }
  w.phase = WPhase::Done;
  if (window_in_use(w)) {
    // A copy or an access still uses its chunk: the window stays (its region pinned, its chunk
    // lent) until they finished.
    draining_windows_.push_back(link.windows[w.id]);
  } else {
    release_window(w);
  }
  open_windows_--;
  link.windows.erase(w.id);
}

bool Protocol::window_in_use(StageWindow& w) {
  if (w.copy) w.region->cuda->advance();
  if (w.copy && !w.copy->finished()) return true;
  return w.window && w.window->pins.load(std::memory_order_seq_cst) > 0;
}

void Protocol::release_window(StageWindow& w) {
  if (w.window) {
    for (std::size_t i = 0; i < w.window->registrations.size(); ++i) {
      if (w.window->registrations[i] && domains_[i]) {
        domains_[i]->deregister(std::move(w.window->registrations[i])).ignore();
      }
    }
    w.window.reset();
  }
  if (w.copy && w.copy->status.code() == Errc::Unquiesced && w.lease) {
    w.lease->retain(w.copy->status.message());
  }
  w.copy.reset();
  w.lease.reset();
  w.region->unpin();
}

void Protocol::advance_window(Link& link, StageWindow& w) {
  for (;;) {
    switch (w.phase) {
      case WPhase::Lease: {
        auto lease = staging_->try_take();
        if (!lease.ok()) {
          send_control(*w.ep, FrameType::StageReady, w.id,
                       static_cast<std::uint64_t>(lease.status().code()), 0, 0, 0,
                       lease.status().message());
          return end_window(link, w, lease.status(), false);
        }
        if (!*lease) return;  // a later pass retries
        w.lease = std::move(*lease);
        w.phase = w.write ? WPhase::Ready : WPhase::CopyOut;
        if (w.write) {
          if (Status st = publish_window(w); !st.ok()) {
            send_control(*w.ep, FrameType::StageReady, w.id, static_cast<std::uint64_t>(st.code()),
                         0, 0, 0, st.message());
            return end_window(link, w, st, false);
          }
          send_control(*w.ep, FrameType::StageReady, w.id, 0, w.window->id, w.window->generation);
          return;  // StageClose moves it on
        }
        break;
      }
      case WPhase::CopyOut: {
        Status st = copy_region(w, cuda::CopyJob::Direction::ToHost);
        if (st.code() == Errc::Timeout) return;  // running: a later pass looks again
        if (st.ok()) st = publish_window(w);
        if (!st.ok()) {
          send_control(*w.ep, FrameType::StageReady, w.id, static_cast<std::uint64_t>(st.code()), 0,
                       0, 0, st.message());
          return end_window(link, w, st, false);
        }
        w.phase = WPhase::Ready;
        send_control(*w.ep, FrameType::StageReady, w.id, 0, w.window->id, w.window->generation);
        return;
      }
      case WPhase::Ready: return;  // the requester's host part reaches the window
      case WPhase::Draining: {
        // Accesses the requester started may still hold the window (a malicious early close).
        if (w.window && w.window->pins.load(std::memory_order_seq_cst) > 0) return;
        // Only a committed put waits for StageDone; a read or a failed put ends here.
        if (!w.commit) return end_window(link, w, Status(), false);
        w.phase = WPhase::CopyIn;
        break;
      }
      case WPhase::CopyIn: {
        Status st = copy_region(w, cuda::CopyJob::Direction::ToDevice);
        if (st.code() == Errc::Timeout) return;
        return end_window(link, w, st, true);
      }
      case WPhase::Done: return end_window(link, w, Status(), false);
    }
  }
}

// The chunk's bytes between the window's lease and the region: a copy on the region's device
// allocation (Timeout while it runs), or a host copy once the region's readiness is consumed.
Status Protocol::copy_region(StageWindow& w, cuda::CopyJob::Direction dir) {
  detail::RegionRecord& r = *w.region;
  if (r.kind == MemoryKind::Host) {
    // Timeout: the producer still runs; a later pass looks again.
    ORBITE_RETURN_IF_ERROR(consume_pinned_readiness(r, Deadline::after(Duration::zero())));
    std::byte* at = r.base + w.offset;
    if (dir == cuda::CopyJob::Direction::ToHost) {
      std::memcpy(w.lease->data(), at, w.length);
    } else {
      std::memcpy(at, w.lease->data(), w.length);
    }
    return {};
  }
  if (!w.copy) {
    w.copy = std::make_shared<cuda::CopyJob>();
    w.copy->direction = dir;
    w.copy->offset = r.cuda_offset + w.offset;
    w.copy->host = w.lease->data();
    w.copy->length = w.length;
    if (Status st = r.cuda->submit(w.copy); !st.ok()) {
      w.copy.reset();
      return st;
    }
  }
  r.cuda->advance();
  if (!w.copy->finished()) return Status::error(Errc::Timeout, "copy running");
  Status st = w.copy->status;
  if (st.code() != Errc::Unquiesced) w.copy.reset();  // end_window retains an unproven one
  return st;
}

Status Protocol::publish_window(StageWindow& w) {
  const auto* slab = static_cast<const detail::RegionRecord*>(w.lease->slab().tag.get());
  std::shared_ptr<const detail::RegionRecord> parent(w.lease->slab().tag, slab);
  w.window =
      regions_.prepare({}, w.lease->data(), w.length, MemoryKind::Host, Access{!w.write, w.write});
  for (const auto& domain : domains_) {
    if (!domain) continue;
    ORBITE_ASSIGN_OR_RETURN(auto reg, domain->register_within(*w.window, parent));
    w.window->registrations[static_cast<std::size_t>(domain->id())] = std::move(reg);
  }
  regions_.publish(w.window);
  return {};
}

int Protocol::progress_windows() {
  int work = 0;
  for (auto& [id, link] : links_) {
    if (link->windows.empty()) continue;
    std::vector<std::shared_ptr<StageWindow>> open;
    for (auto& [wid, w] : link->windows) open.push_back(w);
    for (auto& w : open) {
      const auto phase = w->phase;
      if (phase == WPhase::Ready) continue;
      advance_window(*link, *w);
      if (w->phase != phase) ++work;
    }
  }
  for (auto it = draining_windows_.begin(); it != draining_windows_.end();) {
    StageWindow& w = **it;
    if (window_in_use(w)) {
      ++it;
      continue;
    }
    release_window(w);
    it = draining_windows_.erase(it);
    ++work;
  }
  return work;
}

void Protocol::fail_windows_of(Link& link) {
  std::vector<std::shared_ptr<StageWindow>> open;
  for (auto& [wid, w] : link.windows) open.push_back(w);
  for (auto& w : open) {
    w->commit = false;
    end_window(link, *w, Status(), false);
  }
}

}  // namespace orbite::p2p
