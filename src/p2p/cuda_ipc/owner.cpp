// The owner's half of cuda_ipc: every access is checked as the protocol checks a put or get
// (rights, generation, bounds) before the handle leaves, after the region's producer finished;
// the first access of a peer to a registration pins it until the peer unmapped it.
#include "common/log.h"
#include "p2p/cuda_ipc/ipc_transport.h"
#include "p2p/peer.h"
#include "p2p/registry.h"

namespace orbite::p2p::ipc {

using detail::PeerLink;

void CudaIpcLane::on_access(PeerLink& link, const IpcAccess& m) {
  const Deadline deadline = Deadline::after(kProducerBound);
  if (!answer_access(link, m, deadline)) deferred_.push_back(Deferred{&link, m, deadline});
}

bool CudaIpcLane::answer_access(PeerLink& link, const IpcAccess& m, Deadline deadline) {
  IpcGrant g;
  g.token = m.token;
  auto refuse = [&](const Status& st) {
    g.errc = static_cast<std::uint32_t>(st.code());
    g.reason = st.message();
    send(link, IpcKind::Grant, encode(g));
    return true;
  };
  auto region =
      regions_.authorize(m.region, m.generation, m.offset, m.length, m.write, TransportId::CudaIpc);
  if (!region.ok()) return refuse(region.status());
  const std::shared_ptr<detail::RegionRecord>& rec = *region;
  const auto* reg = dynamic_cast<const IpcRegistration*>(
      rec->registrations[static_cast<std::size_t>(TransportId::CudaIpc)].get());
  if (rec->kind != MemoryKind::Cuda || !rec->cuda || reg == nullptr || !reg->handle) {
    return refuse(Status::error(
        Errc::InvalidArgument,
        "region " + std::to_string(m.region) + " is not published on cuda_ipc" +
            (reg != nullptr && !reg->why_not.empty() ? " (" + reg->why_not + ")" : std::string())));
  }
  // The producer's work on the region comes first: the peer's copy must not overtake it.
  auto pending = rec->cuda->poll_ready();
  if (!pending.ok()) return refuse(pending.status());
  if (*pending) {
    if (!deadline.expired()) return false;
    return refuse(Status::error(Errc::Timeout, "region " + std::to_string(m.region) +
                                                   ": its producer's recorded work has not "
                                                   "finished"));
  }
  auto& mine = exported_[&link];
  if (mine.count(m.region) == 0) {
    // The mapping pin: unregister waits for the peer to unmap (or for its bound).
    if (!rec->pin()) {
      if (mine.empty()) exported_.erase(&link);
      return refuse(Status::error(Errc::InvalidArgument,
                                  "region " + std::to_string(m.region) + " is being unregistered"));
    }
    mine.emplace(m.region, Exported{rec, false});
  }
  g.region = m.region;
  g.handle = *reg->handle;
  g.alloc_offset = rec->cuda_offset + m.offset;
  send(link, IpcKind::Grant, encode(g));
  return true;
}

void CudaIpcLane::on_unmapped(PeerLink& link, const IpcUnmapped& m) {
  auto it = exported_.find(&link);
  if (it == exported_.end() || it->second.count(m.region) == 0) {
    // A reader of an exposed buffer unmaps on its own, and answers an IpcUnmap that crossed its
    // IpcUnmapped again: nothing is held for it any more.
    return;
  }
  if (m.errc != 0) {
    // The peer could not close its mapping: the registration stays pinned (unregister ends
    // Unquiesced) rather than letting the memory be freed under it.
    ORBITE_LOG(Warn, Cuda) << "peer " << short_id(link.ep.id) << " could not unmap region "
                           << m.region << ": " << m.reason << "; the region stays pinned";
    return;
  }
  it->second.at(m.region).region->unpin();
  it->second.erase(m.region);
  if (it->second.empty()) exported_.erase(it);
}

int CudaIpcLane::owner_pass() {
  int work = 0;
  if (!deferred_.empty()) {
    std::vector<Deferred> again;
    for (Deferred& d : std::exchange(deferred_, {})) {
      if (endpoints_.count(d.link) == 0) continue;  // the peer left meanwhile
      if (answer_access(*d.link, d.access, d.deadline)) {
        ++work;
      } else {
        again.push_back(d);
      }
    }
    deferred_.insert(deferred_.end(), again.begin(), again.end());
  }
  // A registration being unregistered: ask every peer that mapped it to let go.
  // (Sent after the scan: a send that fails the link forgets its entries.)
  std::vector<std::pair<PeerLink*, std::uint64_t>> unmaps;
  for (auto& [link, mine] : exported_) {
    for (auto& [id, e] : mine) {
      if (e.unmap_sent || !e.region->dead.load(std::memory_order_seq_cst)) continue;
      e.unmap_sent = true;
      unmaps.emplace_back(const_cast<PeerLink*>(link), id);
    }
  }
  for (auto& [link, id] : unmaps) {
    if (endpoints_.count(link) != 0) send(*link, IpcKind::Unmap, encode(IpcUnmap{id}));
  }
  return work + static_cast<int>(unmaps.size());
}

void CudaIpcLane::release_exports(PeerLink& link) {
  // The peer is gone (its process, and with it its mappings) or this engine closes.
  std::erase_if(deferred_, [&](const Deferred& d) { return d.link == &link; });
  auto it = exported_.find(&link);
  if (it == exported_.end()) return;
  for (auto& [id, e] : it->second) e.region->unpin();
  exported_.erase(it);
}

}  // namespace orbite::p2p::ipc
