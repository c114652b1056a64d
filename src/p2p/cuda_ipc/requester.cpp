// The requester's half of cuda_ipc: one IpcAccess per range, then the copy on the local
// allocation's stream between its memory and the peer's allocation mapped here. A mapping is
// shared by every registration of that allocation and closed only when the owner asked and no
// copy uses it.
#include <cstring>

#include "common/log.h"
#include "p2p/cuda_ipc/ipc_transport.h"
#include "p2p/peer.h"
#include "p2p/registry.h"
#include "p2p/request.h"

namespace orbite::p2p::ipc {

using detail::PeerLink;

bool CudaIpcLane::MappingLess::operator()(const MappingKey& a, const MappingKey& b) const {
  if (std::get<0>(a) != std::get<0>(b)) return std::less<>()(std::get<0>(a), std::get<0>(b));
  if (std::get<2>(a) != std::get<2>(b)) return std::get<2>(a) < std::get<2>(b);
  return std::get<1>(a).bytes < std::get<1>(b).bytes;
}

Status CudaIpcLane::start(PeerLink& link, RmaOp op) {
  // The local side: a registered device region, or a receive's device buffer.
  const detail::RegionRecord* local = op.local_region;
  std::shared_ptr<cuda::Allocation> alloc =
      local != nullptr && local->kind == MemoryKind::Cuda ? local->cuda : op.local_device;
  if (!alloc || alloc->kind() != cuda::Kind::Device) {
    return Status::error(Errc::Unavailable,
                         "cuda_ipc moves bytes between device memory on both sides");
  }
  if (op.remote_receive != 0) {
    return Status::error(Errc::Unavailable,
                         "cuda_ipc does not write into a peer's receive (the receiver reads)");
  }
  Op o;
  o.link = &link;
  o.local = std::move(alloc);
  o.local_offset = (local != nullptr ? local->cuda_offset : 0) + op.local_offset;
  IpcAccess m;
  m.token = next_token_++;
  m.region = op.remote_region;
  m.generation = op.remote_generation;
  m.offset = op.remote_offset;
  m.length = op.length;
  m.write = op.write;
  o.rma = std::move(op);
  waiting_.emplace(m.token, std::move(o));
  send(link, IpcKind::Access, encode(m));
  return {};
}

Result<CudaIpcLane::Mapping*> CudaIpcLane::mapping_for(PeerLink& link, const IpcGrant& m,
                                                       int ordinal) {
  const MappingKey key{&link, m.handle, ordinal};
  auto it = mappings_.find(key);
  if (it == mappings_.end()) {
    ORBITE_ASSIGN_OR_RETURN(auto map, cuda::PeerMapping::open(m.handle, ordinal));
    it = mappings_.emplace(key, Mapping{}).first;
    it->second.map = std::move(map);
  }
  Mapping& mp = it->second;
  if (std::find(mp.regions.begin(), mp.regions.end(), m.region) == mp.regions.end()) {
    mp.regions.push_back(m.region);
  }
  return &mp;
}

void CudaIpcLane::on_grant(PeerLink& link, const IpcGrant& m) {
  auto it = waiting_.find(m.token);
  if (it == waiting_.end() || it->second.link != &link) {
    handler_.protocol_error(link, "cuda_ipc: IpcGrant for token " + std::to_string(m.token) +
                                      ", which this engine did not ask for");
    return;
  }
  Op op = std::move(it->second);
  waiting_.erase(it);
  if (m.errc != 0) {
    return finish(op, Status::error(static_cast<Errc>(m.errc), "the owner refused: " + m.reason));
  }
  auto mapping = mapping_for(link, m, op.local->ordinal());
  if (!mapping.ok()) return finish(op, mapping.status());
  op.mapping = *mapping;
  op.job = std::make_shared<cuda::CopyJob>();
  op.job->direction =
      op.rma.write ? cuda::CopyJob::Direction::ToPeer : cuda::CopyJob::Direction::FromPeer;
  op.job->offset = op.local_offset;
  op.job->peer = op.mapping->map->address() + m.alloc_offset;
  op.job->length = op.rma.length;
  op.job->batched = true;  // a window of ranges goes onto the stream back to back
  if (Status st = op.local->submit(op.job); !st.ok()) return finish(op, st);
  ++op.mapping->copies;
  copying_.push_back(std::move(op));
}

void CudaIpcLane::finish(Op& op, const Status& st) {
  auto done = std::move(op.rma.done);
  op.rma = RmaOp();
  if (done) done(st);
}

int CudaIpcLane::requester_pass() {
  if (copying_.empty()) return 0;
  int work = 0;
  std::vector<Op> still;
  std::vector<MappingKey> touched;
  for (Op& op : std::exchange(copying_, {})) {
    op.local->advance();
    if (!op.job->finished()) {
      still.push_back(std::move(op));
      continue;
    }
    ++work;
    --op.mapping->copies;
    for (auto& [key, mp] : mappings_) {
      if (&mp == op.mapping) touched.push_back(key);
    }
    // A sender's exposed buffer is let go before the read completes (the receiver's Fin then
    // lets the send complete, and the sender may free it): as if the owner had asked.
    if (op.rma.transient) on_unmap(*op.link, IpcUnmap{op.rma.remote_region});
    // The copy is proven finished by its event: the local range is free, the bytes landed.
    finish(op, op.job->status);
  }
  copying_.insert(copying_.end(), std::make_move_iterator(still.begin()),
                  std::make_move_iterator(still.end()));
  for (const MappingKey& key : touched) settle(key);
  return work;
}

void CudaIpcLane::on_unmap(PeerLink& link, const IpcUnmap& m) {
  bool known = false;
  std::vector<MappingKey> keys;
  for (auto& [key, mp] : mappings_) {
    if (std::get<0>(key) != &link) continue;
    auto r = std::find(mp.regions.begin(), mp.regions.end(), m.region);
    if (r == mp.regions.end()) continue;
    known = true;
    mp.regions.erase(r);
    mp.unmapped.push_back(m.region);
    keys.push_back(key);
  }
  // A region this side never mapped (its grant failed to map): nothing to close.
  if (!known) return send(link, IpcKind::Unmapped, encode(IpcUnmapped{m.region, 0, {}}));
  for (const MappingKey& key : keys) settle(key);
}

void CudaIpcLane::settle(const MappingKey& key) {
  auto it = mappings_.find(key);
  if (it == mappings_.end()) return;
  Mapping& mp = it->second;
  if (mp.copies > 0) return;
  PeerLink* link = const_cast<PeerLink*>(std::get<0>(key));
  const bool link_open = endpoints_.count(link) != 0;
  Status closed;
  if (mp.regions.empty() || !link_open) {
    closed = mp.map->close();
    if (!closed.ok()) {
      ORBITE_LOG(Warn, Cuda) << closed.message();
    }
  } else if (mp.unmapped.empty()) {
    return;
  }
  // Answered only when the mapping is gone or other registrations still hold it (then the one
  // asked about no longer does).
  std::vector<std::uint64_t> answered = std::move(mp.unmapped);
  mp.unmapped.clear();
  const bool gone = mp.regions.empty() || !link_open;
  // (A mapping that failed to close keeps its context in the cuda layer's retained list.)
  if (gone) mappings_.erase(it);
  if (!link_open) return;
  for (std::uint64_t region : answered) {
    IpcUnmapped u{region, 0, {}};
    if (!closed.ok()) {
      u.errc = static_cast<std::uint32_t>(closed.code());
      u.reason = closed.message();
    }
    send(*link, IpcKind::Unmapped, encode(u));
  }
}

void CudaIpcLane::drop_requests(PeerLink& link, const Status& why) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second.link != &link) {
      ++it;
      continue;
    }
    Op op = std::move(it->second);
    it = waiting_.erase(it);
    finish(op, why);
  }
  // Copies already on the device finish on their own: their ops complete in the lane's passes,
  // and only then is the peer's memory unmapped (settle sees the link gone).
  endpoints_.erase(&link);
  std::vector<MappingKey> keys;
  for (auto& [key, mp] : mappings_) {
    if (std::get<0>(key) == &link) keys.push_back(key);
  }
  for (const MappingKey& key : keys) settle(key);
}

bool CudaIpcLane::busy_with(const PeerLink& link) const {
  for (const auto& [token, op] : waiting_) {
    if (op.link == &link) return true;
  }
  for (const Op& op : copying_) {
    if (op.link == &link) return true;
  }
  return false;
}

}  // namespace orbite::p2p::ipc
