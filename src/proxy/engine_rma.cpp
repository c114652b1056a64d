// put, get and notify: the one-sided half of the public API. Each call validates on the
// caller's thread (regions, ranges, rights, the descriptor's transports) and hands the request
// to a lane; notifications() takes what peers delivered to this engine.
#include <orbite/transfer.h>

#include "p2p/descriptor.h"
#include "p2p/ranges.h"
#include "p2p/select.h"
#include "proxy/engine_core.h"

namespace orbite {

using detail::EngineCore;
using detail::OpKind;

namespace {

// The request's peer and remote region: the descriptor's owner, region, kind and transports.
void aim_at(detail::RequestState& s, const RemoteRegion& remote) {
  auto peer = std::make_shared<detail::PeerRef>();
  peer->ep = detail::DescriptorCodec::owner(remote);
  s.peer = std::move(peer);
  s.remote_region = remote.region_id();
  s.remote_generation = remote.generation();
  s.remote_kind = remote.kind();
  s.remote_transports = 0;
  for (const auto& [id, blob] : detail::DescriptorCodec::blobs(remote)) {
    s.remote_transports |= 1u << id;
  }
  s.remote_staged = detail::DescriptorCodec::staged(remote);
  s.remote_chunk = detail::DescriptorCodec::staging_chunk(remote);
}

Result<Request> submit_rma(EngineCore& core, OpKind kind, const MemoryRegion& local,
                           const RemoteRegion& remote, std::span<const TransferRange> ranges,
                           const TransferOptions& options) {
  const char* op = kind == OpKind::Put ? "put" : "get";
  if (core.closed.load(std::memory_order_acquire)) {
    return Status::error(Errc::Cancelled,
                         std::string(op) + ": the engine is closed; no new requests are accepted");
  }
  const auto& rec = EngineCore::record_of(local);
  if (!rec || rec->dead.load()) {
    return Status::error(Errc::InvalidArgument,
                         std::string(op) + ": the local region is not registered");
  }
  auto owner = rec->engine.lock();
  if (owner.get() != static_cast<void*>(&core)) {
    return Status::error(Errc::InvalidArgument,
                         std::string(op) + ": the local region belongs to another engine");
  }
  if (remote.region_id() == 0) {
    return Status::error(Errc::InvalidArgument,
                         std::string(op) + ": the remote region descriptor is empty");
  }
  if (Status st = p2p::check_requested(options.transport, core.built); !st.ok()) {
    return st.with_context(op);
  }
  if (options.notification && options.notification->size() > kMaxNotificationBytes) {
    return Status::error(Errc::InvalidArgument, std::string(op) + ": options.notification is " +
                                                    std::to_string(options.notification->size()) +
                                                    " bytes, more than kMaxNotificationBytes (" +
                                                    std::to_string(kMaxNotificationBytes) + ")");
  }
  // Each transport's part of the descriptor is checked by that transport's domain before use.
  for (const auto& [id, blob] : detail::DescriptorCodec::blobs(remote)) {
    const auto& domain = core.domains[id];
    if (!domain) continue;
    if (Status st = domain->unpack(blob); !st.ok()) {
      return st.with_context(std::string(op) + ": remote region " +
                             std::to_string(remote.region_id()) + " descriptor");
    }
  }
  const bool put = kind == OpKind::Put;
  if (put ? !remote.access().write : !remote.access().read) {
    return Status::error(Errc::InvalidArgument,
                         std::string(op) + ": remote region " + std::to_string(remote.region_id()) +
                             " does not grant " + (put ? "write" : "read") + " access");
  }
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const TransferRange& r = ranges[i];
    const std::string at = std::string(op) + " range " + std::to_string(i) + ": ";
    if (!p2p::range_inside(r.local_offset, r.length, rec->length)) {
      return Status::error(Errc::InvalidArgument,
                           at + "local offset " + std::to_string(r.local_offset) + " length " +
                               std::to_string(r.length) + " exceeds the local region's " +
                               std::to_string(rec->length) + " bytes");
    }
    if (!p2p::range_inside(r.remote_offset, r.length, remote.length())) {
      return Status::error(Errc::InvalidArgument,
                           at + "remote offset " + std::to_string(r.remote_offset) + " length " +
                               std::to_string(r.length) + " exceeds the remote region's " +
                               std::to_string(remote.length()) + " bytes");
    }
  }
  if (!rec->pin_local()) {
    return Status::error(Errc::InvalidArgument,
                         std::string(op) + ": the local region is being unregistered");
  }
  // After the pin (seq_cst on both sides): close_requester either sees this pin or we see it.
  if (core.requester_closed.load(std::memory_order_seq_cst)) {
    rec->unpin_local();
    return Status::error(Errc::Cancelled,
                         std::string(op) +
                             ": the engine closed its requester role (close_requester); no new "
                             "put or get is accepted");
  }
  auto s = detail::make_request_state();
  s->kind = kind;
  s->options = options;
  aim_at(*s, remote);
  s->local = rec;
  s->local_pinned = true;
  s->ranges.assign(ranges.begin(), ranges.end());
  if (core.config.merge_requests) {
    core.ranges_merged.fetch_add(p2p::merge_adjacent(s->ranges), std::memory_order_relaxed);
  }
  return core.submit(std::move(s));
}

}  // namespace

Result<Request> TransferEngine::put(const MemoryRegion& local, std::uint64_t local_offset,
                                    const RemoteRegion& remote, std::uint64_t remote_offset,
                                    std::uint64_t length, const TransferOptions& options) {
  TransferRange r{local_offset, remote_offset, length};
  return submit_rma(*core_, OpKind::Put, local, remote, std::span(&r, 1), options);
}

Result<Request> TransferEngine::get(const MemoryRegion& local, std::uint64_t local_offset,
                                    const RemoteRegion& remote, std::uint64_t remote_offset,
                                    std::uint64_t length, const TransferOptions& options) {
  TransferRange r{local_offset, remote_offset, length};
  return submit_rma(*core_, OpKind::Get, local, remote, std::span(&r, 1), options);
}

Result<Request> TransferEngine::put(const MemoryRegion& local, const RemoteRegion& remote,
                                    std::span<const TransferRange> ranges,
                                    const TransferOptions& options) {
  return submit_rma(*core_, OpKind::Put, local, remote, ranges, options);
}

Result<Request> TransferEngine::get(const MemoryRegion& local, const RemoteRegion& remote,
                                    std::span<const TransferRange> ranges,
                                    const TransferOptions& options) {
  return submit_rma(*core_, OpKind::Get, local, remote, ranges, options);
}

Result<Request> TransferEngine::notify(const RemoteRegion& remote, std::string message,
                                       const TransferOptions& options) {
  EngineCore& core = *core_;
  if (core.closed.load(std::memory_order_acquire)) {
    return Status::error(Errc::Cancelled,
                         "notify: the engine is closed; no new requests are accepted");
  }
  if (remote.region_id() == 0) {
    return Status::error(Errc::InvalidArgument, "notify: the remote region descriptor is empty");
  }
  if (options.notification) {
    return Status::error(Errc::InvalidArgument,
                         "notify: options.notification is set; the message is notify()'s "
                         "argument");
  }
  if (message.size() > kMaxNotificationBytes) {
    return Status::error(Errc::InvalidArgument, "notify: the message is " +
                                                    std::to_string(message.size()) +
                                                    " bytes, more than kMaxNotificationBytes (" +
                                                    std::to_string(kMaxNotificationBytes) + ")");
  }
  if (Status st = p2p::check_requested(options.transport, core.built); !st.ok()) {
    return st.with_context("notify");
  }
  // A put of no ranges that carries the message: it takes the route a put to `remote` takes.
  auto s = detail::make_request_state();
  s->kind = OpKind::Put;
  s->options = options;
  s->options.notification = std::move(message);
  aim_at(*s, remote);
  return core.submit(std::move(s));
}

std::vector<Notification> TransferEngine::notifications(Duration wait) {
  return core_->notifications.take(wait);
}

}  // namespace orbite
