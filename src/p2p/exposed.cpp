// The exposed rendezvous: a message whose send buffer is device memory (or whose route carries
// host memory staged) is read by the receiver as a region instead of being pushed. The sender
// registers its buffer for the message (read-only, on the route's transport) and sends an Rts
// that names it; a receiver whose buffer is device memory asks an ordinary Rts's sender to do
// the same (ExposeRequest, Exposed). The receiver then runs a staged get of the whole message
// into its buffer and answers Fin (or Reject); the sender withdraws the region before its send
// completes. Matching and MPI ordering stay the protocol's (protocol.cpp).
#include <cstring>

#include "common/log.h"
#include "common/strings.h"
#include "common/wire.h"
#include "p2p/protocol.h"
#include "p2p/staged.h"

namespace orbite::p2p {

using detail::Inflight;
using detail::OpKind;
using detail::PeerLink;

Backing Protocol::backing_on(TransportId via, MemoryKind kind) const {
  const MemoryDomain* d = domains_[static_cast<std::size_t>(via)].get();
  if (d == nullptr) return kind == MemoryKind::Host ? Backing::Native : Backing::Staged;
  std::string ignored;
  return d->backing(kind, &ignored);
}

bool Protocol::needs_exposure(const Req& req, const PeerEndpoint& ep) const {
  return req.device != nullptr || backing_on(ep.id(), MemoryKind::Host) == Backing::Staged;
}

Result<std::shared_ptr<detail::RegionRecord>> Protocol::expose(Link& link, PeerEndpoint& ep,
                                                               const ReqPtr& req) {
  const MemoryKind kind = req->device ? MemoryKind::Cuda : MemoryKind::Host;
  auto rec = regions_.prepare({}, const_cast<std::byte*>(req->src), req->length, kind,
                              Access{true, false});
  if (req->device) {
    rec->cuda = req->device;
    rec->cuda_offset = req->device_offset;
  } else {
    rec->cuda = cuda::find_pinned(req->src, req->length, &rec->cuda_offset);
  }
  const auto via = static_cast<std::size_t>(ep.id());
  std::string why;
  const MemoryDomain* domain = domains_[via].get();
  Backing b = domain != nullptr ? domain->backing(kind, &why) : backing_on(ep.id(), kind);
  if (b == Backing::Refused || b == Backing::Absent) {
    return Status::error(Errc::Unavailable, std::string(transport_name(ep.id())) +
                                                " cannot carry the send buffer: " + why);
  }
  // Published natively, device memory included: the exposure word's kExposedDevice bit tells
  // the receiver's read what it reaches (RDMA's private grant path for device memory).
  if (b == Backing::Staged) {
    rec->staged |= 1u << via;
  } else if (domain != nullptr) {
    ORBITE_ASSIGN_OR_RETURN(rec->registrations[via], domains_[via]->register_region(*rec));
  }
  // A device buffer to a peer on this host: published on cuda_ipc too, for a device receive.
  constexpr auto ipc = static_cast<std::size_t>(TransportId::CudaIpc);
  if (kind == MemoryKind::Cuda && via != ipc && domains_[ipc] &&
      link.endpoint(TransportId::CudaIpc) != nullptr) {
    ORBITE_ASSIGN_OR_RETURN(rec->registrations[ipc], domains_[ipc]->register_region(*rec));
  }
  regions_.publish(rec);
  return rec;
}

std::uint32_t Protocol::exposure_bits(const detail::RegionRecord& rec,
                                      const MemoryDomain* ipc_domain) {
  constexpr auto ipc = static_cast<std::size_t>(TransportId::CudaIpc);
  std::uint32_t bits = rec.staged;
  if (rec.kind == MemoryKind::Cuda) bits |= kExposedDevice;
  if (ipc_domain != nullptr && rec.registrations[ipc] &&
      ipc_domain->published(rec, rec.registrations[ipc].get())) {
    bits |= 1u << (kExposedNativeShift + ipc);
  }
  return bits;
}

bool Protocol::read_exposed_over_ipc(Link& link, PeerEndpoint& ep, const ReqPtr& recv,
                                     std::uint64_t sender_id, std::uint64_t length,
                                     std::uint64_t region, std::uint64_t generation,
                                     std::uint32_t staged) {
  constexpr auto ipc = static_cast<std::size_t>(TransportId::CudaIpc);
  PeerEndpoint* via = link.endpoint(TransportId::CudaIpc);
  // Unspec (or Nvlink) lets the payload take cuda_ipc beside the messages' transport.
  const Transport wanted = recv->options.transport;
  if (!recv->device || via == nullptr || (staged >> (kExposedNativeShift + ipc) & 1) == 0 ||
      (wanted != Transport::Unspec && wanted != Transport::Nvlink)) {
    return false;
  }
  recv->endpoint = &ep;
  RmaOp op;
  op.write = false;
  op.req = recv;
  op.local_device = recv->device;
  op.local_offset = recv->device_offset;
  op.remote_region = region;
  op.remote_generation = generation;
  op.length = length;
  op.transient = true;
  Req* raw = recv.get();
  Link* at = &link;
  PeerEndpoint* msgs = &ep;
  op.done = [this, raw, at, msgs, sender_id, length](const Status& st) {
    if (st.ok()) bump(counters_.of(TransportId::CudaIpc).bytes_received, length);
    finish_exposed_read(*at, *msgs, *raw, sender_id, st, length);
  };
  auto done = op.done;
  if (Status st = via->start_rma(std::move(op)); !st.ok()) done(st);
  return true;
}

bool Protocol::read_exposed_natively(Link& link, PeerEndpoint& ep, const ReqPtr& recv,
                                     std::uint64_t sender_id, std::uint64_t length,
                                     std::uint64_t region, std::uint64_t generation,
                                     std::uint32_t staged) {
  const auto via = static_cast<std::size_t>(ep.id());
  MemoryDomain* domain = domains_[via].get();
  const MemoryKind kind = recv->device ? MemoryKind::Cuda : MemoryKind::Host;
  // Both ends native on the messages' transport (RDMA under cuda_memory = direct): one read
  // from the sender's buffer into the receive's, no staging on either side.
  if (domain == nullptr || !ep.caps().rma || (staged >> via & 1) != 0 ||
      backing_on(ep.id(), kind) != Backing::Native) {
    return false;
  }
  RmaOp op;
  op.write = false;
  op.req = recv;
  op.remote_region = region;
  op.remote_generation = generation;
  op.length = length;
  op.transient = true;
  op.remote_device = recv->remote_kind == MemoryKind::Cuda;
  std::shared_ptr<detail::RegionRecord> local;
  if (recv->device) {
    // The receive's device memory, registered for this read only (never published: no peer
    // names it) and deregistered once no DMA can reach it, kept by the domain if that fails.
    local = regions_.prepare({}, recv->device->base() + recv->device_offset, length,
                             MemoryKind::Cuda, Access{false, true});
    local->cuda = recv->device;
    local->cuda_offset = recv->device_offset;
    auto registered = domain->register_region(*local);
    if (!registered.ok()) {
      finish_exposed_read(link, ep, *recv, sender_id,
                          registered.status().with_context("registering the receive buffer"), 0);
      return true;
    }
    local->registrations[via] = std::move(*registered);
    op.local_region = local.get();
  } else {
    op.local_buffer = recv->dst;
  }
  recv->endpoint = &ep;
  Req* raw = recv.get();
  Link* at = &link;
  PeerEndpoint* msgs = &ep;
  op.done = [this, raw, at, msgs, sender_id, length, local, via](const Status& st) {
    if (local) {
      if (Status d = domains_[via]->deregister(std::move(local->registrations[via])); !d.ok()) {
        ORBITE_LOG(Warn, Cuda) << "the receive buffer's registration for an exposed read: "
                               << d.message();
      }
    }
    if (st.ok()) bump(counters_.of(static_cast<TransportId>(via)).bytes_received, length);
    finish_exposed_read(*at, *msgs, *raw, sender_id, st, length);
  };
  auto done = op.done;
  if (Status st = ep.start_rma(std::move(op)); !st.ok()) done(st);
  return true;
}

void Protocol::withdraw(const ReqPtr& req) {
  if (!req->exposed) return;
  std::shared_ptr<detail::RegionRecord> rec = std::move(req->exposed);
  req->exposed.reset();
  regions_.remove(rec->id);
  rec->dead.store(true, std::memory_order_seq_cst);
  withdrawn_.push_back(std::move(rec));
  release_withdrawn();
}

// Registrations of withdrawn regions go once no access holds them (their pins).
void Protocol::release_withdrawn() {
  for (auto it = withdrawn_.begin(); it != withdrawn_.end();) {
    detail::RegionRecord& r = **it;
    if (r.pins.load(std::memory_order_seq_cst) > 0) {
      ++it;
      continue;
    }
    for (std::size_t i = 0; i < r.registrations.size(); ++i) {
      if (r.registrations[i] && domains_[i]) {
        domains_[i]->deregister(std::move(r.registrations[i])).ignore();
      }
    }
    it = withdrawn_.erase(it);
  }
}

void Protocol::send_exposed_rts(Link& link, PeerEndpoint& ep, const ReqPtr& req,
                                std::uint64_t comm_tag, std::uint64_t seq) {
  auto exposed = expose(link, ep, req);
  if (!exposed.ok()) {
    link.send_seq--;  // nothing was announced: the sequence number is not used
    return detail::complete_request(*req, exposed.status().with_context("send"));
  }
  req->exposed = *exposed;
  link.inflight[req->id] = Inflight{req};
  bump(counters_.rendezvous);
  std::string payload;
  wire::Writer w(payload);
  w.put<std::uint64_t>((*exposed)->id);
  w.put<std::uint64_t>((*exposed)->generation);
  w.put<std::uint32_t>(
      exposure_bits(**exposed, domains_[static_cast<std::size_t>(TransportId::CudaIpc)].get()));
  w.put<std::uint64_t>(config_.cuda.staging_chunk_bytes);
  send_control(ep, FrameType::Rts, req->id, comm_tag, seq, req->length, 0, std::move(payload));
}

void Protocol::on_expose_request(Link& link, const FrameHeader& h, PeerEndpoint& ep) {
  auto it = link.inflight.find(h.id);
  if (it == link.inflight.end() || it->second.req->kind != OpKind::Send ||
      it->second.req->exposed) {
    return protocol_error(
        link, "ExposeRequest for request " + std::to_string(h.id) + " matches no unexposed send");
  }
  ReqPtr req = it->second.req;
  auto exposed = expose(link, ep, req);
  if (!exposed.ok()) {
    link.inflight.erase(it);
    send_control(ep, FrameType::Reject, h.a, static_cast<std::uint64_t>(exposed.status().code()), 0,
                 0, 0, "the sender could not expose its buffer: " + exposed.status().message());
    return detail::complete_request(*req, exposed.status().with_context("send"));
  }
  req->exposed = *exposed;
  send_control(
      ep, FrameType::Exposed, h.a, (*exposed)->id, (*exposed)->generation,
      exposure_bits(**exposed, domains_[static_cast<std::size_t>(TransportId::CudaIpc)].get()),
      config_.cuda.staging_chunk_bytes);
}

void Protocol::ask_exposure(Link& link, const ReqPtr& recv, const detail::Arrival& a) {
  recv->endpoint = a.endpoint;
  Inflight f{recv, 0, a.length};
  f.remote_offset = a.sender_id;  // whom to answer when the read ends
  link.inflight[recv->id] = std::move(f);
  send_control(*a.endpoint, FrameType::ExposeRequest, a.sender_id, recv->id);
}

void Protocol::on_exposed(Link& link, const FrameHeader& h, PeerEndpoint& ep) {
  auto it = link.inflight.find(h.id);
  if (it == link.inflight.end() || it->second.req->kind != OpKind::Recv ||
      it->second.req->endpoint != &ep) {
    return protocol_error(link, "Exposed for request " + std::to_string(h.id) +
                                    " matches no receive that asked for it");
  }
  ReqPtr recv = it->second.req;
  const std::uint64_t length = it->second.length;
  const std::uint64_t sender = it->second.remote_offset;
  link.inflight.erase(it);
  read_exposed(link, ep, recv, sender, length, h.a, h.b, static_cast<std::uint32_t>(h.c), h.d);
}

void Protocol::finish_exposed_read(Link& link, PeerEndpoint& ep, Req& recv, std::uint64_t sender_id,
                                   const Status& st, std::uint64_t bytes) {
  // The sender learns the outcome only while the link and the endpoint its Rts came on stand.
  if (link.state == PeerLink::State::Established && link.endpoint(ep.id()) == &ep) {
    if (st.ok()) {
      send_control(ep, FrameType::Fin, sender_id, 0, bytes);
    } else {
      send_control(ep, FrameType::Reject, sender_id, static_cast<std::uint64_t>(st.code()), 0, 0, 0,
                   "the receiver's read failed: " + st.message());
    }
  }
  if (st.ok()) recv.bytes_done.store(bytes);
  detail::complete_request(recv, st);
}

void Protocol::read_exposed(Link& link, PeerEndpoint& ep, const ReqPtr& recv,
                            std::uint64_t sender_id, std::uint64_t length, std::uint64_t region,
                            std::uint64_t generation, std::uint32_t staged, std::uint64_t chunk) {
  recv->endpoint = &ep;
  if (length == 0) {
    send_control(ep, FrameType::Fin, sender_id, 0, 0);
    recv->bytes_done.store(0);
    return detail::complete_request(*recv, {});
  }
  if (read_exposed_over_ipc(link, ep, recv, sender_id, length, region, generation, staged)) {
    return;
  }
  if (recv->options.transport == Transport::Nvlink) {
    return finish_exposed_read(
        link, ep, *recv, sender_id,
        Status::error(Errc::Unavailable,
                      "transport nvlink: the sender's buffer is not published on cuda_ipc (host "
                      "memory, or memory the driver does not export) or this receive is not "
                      "device memory"),
        0);
  }
  // Its part on the messages' transport reaches device memory on the private grant path.
  recv->remote_kind = (staged & kExposedDevice) != 0 ? MemoryKind::Cuda : MemoryKind::Host;
  if (read_exposed_natively(link, ep, recv, sender_id, length, region, generation, staged)) {
    return;
  }
  auto op = std::make_shared<StagedOp>();
  op->req = recv;
  op->link = &link;
  op->ep = &ep;
  op->put = false;
  if (recv->device) {
    op->local.device = recv->device;
    op->local.device_offset = recv->device_offset;
    op->local.staged = true;
  } else {
    op->local.host = recv->dst;
    op->local.staged = backing_on(ep.id(), MemoryKind::Host) == Backing::Staged;
  }
  op->remote_staged = (staged >> static_cast<unsigned>(ep.id()) & 1) != 0;
  op->remote_region = region;
  op->remote_generation = generation;
  op->ranges = {TransferRange{0, 0, length}};
  op->chunk = op->remote_staged ? chunk : 0;
  Req* raw = recv.get();
  Link* at = &link;
  PeerEndpoint* via = &ep;
  op->finish = [this, raw, at, via, sender_id](const Status& st, std::uint64_t bytes) {
    finish_exposed_read(*at, *via, *raw, sender_id, st, bytes);
  };
  start_staged(std::move(op));
}

Status Protocol::copy_into_device(const ReqPtr& recv, const std::byte* src, std::uint64_t n) {
  if (n == 0) return {};
  // The bytes go with the job: the frame buffer they came in is reused at once, while the copy
  // may wait behind others on the allocation's stream.
  auto keep = std::make_shared<std::string>(reinterpret_cast<const char*>(src), n);
  auto job = std::make_shared<cuda::CopyJob>();
  job->direction = cuda::CopyJob::Direction::ToDevice;
  job->offset = recv->device_offset;
  job->host = reinterpret_cast<std::byte*>(keep->data());
  job->length = n;
  ORBITE_RETURN_IF_ERROR(recv->device->submit(job));
  // A small message: the lane waits for its copy, within a bound.
  Status st = recv->device->wait(*job, Deadline::after(std::chrono::seconds(60)));
  if (st.code() == Errc::Timeout) {
    recv->device->park(job, keep);
    return Status::error(Errc::Unquiesced,
                         "the copy of a received message into device memory did not finish "
                         "within 60 s; it goes on, and the receive's buffer must stay allocated");
  }
  return st;
}

}  // namespace orbite::p2p
