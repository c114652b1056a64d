// The requester's staging pipeline (see staged.h): chunks of a put or get, each leased from the
// pool, copied to or from the local device memory on the allocation's stream, carried by a host
// part, and, when the owner stages too, opened and closed as a window at the owner. Every step
// that waits (a lease, a copy, the peer) leaves the chunk where it is; progress passes, frames
// and the host part's completion move it on. Nothing blocks the lane.
#include <cstring>

#include "common/log.h"
#include "common/strings.h"
#include "p2p/protocol.h"
#include "p2p/staged.h"

namespace orbite::p2p {

using detail::PeerLink;
using Phase = StagedChunk::Phase;

namespace {

Status lost(const PeerLink& link) {
  return Status::error(Errc::ConnectionLost, "peer " + short_id(link.ep.id) + ": " +
                                                 (link.failure.ok() ? std::string("the link failed")
                                                                    : link.failure.message()));
}

}  // namespace

void Protocol::issue_staged_put_get(Link& link, const ReqPtr& req, PeerEndpoint& ep,
                                    bool local_staged, bool remote_staged) {
  auto op = std::make_shared<StagedOp>();
  op->req = req;
  op->link = &link;
  op->ep = &ep;
  op->put = req->kind == detail::OpKind::Put;
  detail::RegionRecord& local = *req->local;
  if (local.kind == MemoryKind::Cuda) {
    op->local.device = local.cuda;
    op->local.device_offset = local.cuda_offset;
  }
  if (local.kind == MemoryKind::Host || !local_staged) {
    // The transport reaches the local region itself (device memory through its own
    // registration, e.g. RDMA's GPU MRs): only the remote end is staged.
    op->local.host = local.base;
    op->local.region = &local;
  }
  op->local.staged = local_staged;
  op->remote_staged = remote_staged;
  op->remote_region = req->remote_region;
  op->remote_generation = req->remote_generation;
  op->ranges = req->ranges;
  op->chunk = remote_staged && req->remote_chunk != 0 ? req->remote_chunk : 0;
  Req* raw = req.get();
  op->finish = [this, raw, notified = req->options.notification ? req : nullptr](
                   const Status& st, std::uint64_t bytes) {
    raw->bytes_done.store(bytes);
    if (notified) return finish_put_get(notified, st);
    detail::complete_request(*raw, st);
  };
  start_staged(std::move(op));
}

void Protocol::start_staged(std::shared_ptr<StagedOp> op) {
  if (!staging_) {
    op->finish(Status::error(Errc::Unavailable, "this engine has no staging pool"), 0);
    return;
  }
  const std::uint64_t mine = staging_->chunk_bytes();
  op->chunk = op->chunk == 0 ? mine : std::min(op->chunk, mine);
  staged_ops_.push_back(op);
  advance_staged(*op);
}

// Makes chunks up to the depth, moves every chunk as far as it goes, and finishes the op once
// the last one ended. Re-entrant calls (a host part that completes at once) only mark the op.
void Protocol::advance_staged(StagedOp& op) {
  if (op.finished) return;
  if (advancing_ != nullptr) {
    again_ = true;
    return;
  }
  advancing_ = &op;
  do {
    again_ = false;
    const std::uint64_t chunk = op.chunk;
    while (op.first_error.ok() && op.chunks.size() < config_.cuda.staging_depth &&
           op.next_range < op.ranges.size()) {
      const TransferRange& r = op.ranges[op.next_range];
      auto c = std::make_shared<StagedChunk>();
      c->op = &op;
      c->local_at = r.local_offset + op.next_in_range;
      c->remote_at = r.remote_offset + op.next_in_range;
      c->length = std::min(chunk, r.length - op.next_in_range);
      op.next_in_range += c->length;
      if (op.next_in_range >= r.length) {
        op.next_range++;
        op.next_in_range = 0;
      }
      op.chunks.push_back(std::move(c));
    }
    // Chunks advance in order; one that finished leaves the list.
    for (std::size_t i = 0; i < op.chunks.size();) {
      std::shared_ptr<StagedChunk> c = op.chunks[i];
      advance_chunk(op, *c);
      if (c->phase == Phase::Done) {
        op.chunks.erase(op.chunks.begin() + static_cast<std::ptrdiff_t>(i));
        again_ = true;  // room for another chunk
      } else {
        ++i;
      }
    }
  } while (again_);
  advancing_ = nullptr;
  if (op.chunks.empty() && (op.next_range >= op.ranges.size() || !op.first_error.ok())) {
    op.finished = true;
    auto finish = std::move(op.finish);
    finish(op.first_error, op.bytes);
  }
}

void Protocol::chunk_failed(StagedOp& op, StagedChunk& c, const Status& why) {
  if (op.first_error.ok()) op.first_error = why;
  c.error = why;
  // A device copy of the chunk still runs: the chunk (and so the request) ends only when it
  // finished, since a copy out writes into the caller's memory, which the failed request hands
  // back. A later pass looks again.
  if (c.copy && !c.copy->finished()) {
    op.local.device->advance();
    if (!c.copy->finished()) {
      c.draining = true;
      return;
    }
  }
  c.draining = false;
  // The owner still holds a window for it: tell it, without committing anything.
  if (c.opened && op.link->state == PeerLink::State::Established) {
    send_control(*op.ep, FrameType::StageClose, c.stage_id, 0);
  }
  c.opened = false;
  if (c.stage_id != 0) op.link->stage_waits.erase(c.stage_id);
  // An unproven copy keeps its chunk for good.
  if (c.copy && c.copy->status.code() == Errc::Unquiesced && c.lease) {
    c.lease->retain(c.copy->status.message());
  }
  c.copy.reset();
  c.lease.reset();
  c.waiting = false;
  c.phase = Phase::Done;
}

Result<bool> Protocol::chunk_device_copy(StagedOp& op, StagedChunk& c,
                                         cuda::CopyJob::Direction dir) {
  if (!c.copy) {
    auto job = std::make_shared<cuda::CopyJob>();
    job->direction = dir;
    job->offset = op.local.device_offset + c.local_at;
    job->host = c.lease->data();
    job->length = c.length;
    ORBITE_RETURN_IF_ERROR(op.local.device->submit(job));
    c.copy = std::move(job);
  }
  op.local.device->advance();
  if (!c.copy->finished()) return false;
  // A failed copy stays with the chunk: chunk_failed retains its lease when it is unproven.
  if (!c.copy->status.ok()) return c.copy->status;
  c.copy.reset();
  return true;
}

void Protocol::advance_chunk(StagedOp& op, StagedChunk& c) {
  if (c.draining) return chunk_failed(op, c, c.error);
  for (;;) {
    if (c.phase == Phase::Done || c.waiting) return;
    if (!op.first_error.ok() && c.phase != Phase::Close) {
      // Another chunk failed: end this one at its next step.
      return chunk_failed(op, c, op.first_error);
    }
    switch (c.phase) {
      case Phase::Lease: {
        if (op.local.staged) {
          auto lease = staging_->try_take();
          if (!lease.ok()) return chunk_failed(op, c, lease.status());
          if (!*lease) return;  // the pool is lent out: a later pass retries
          c.lease = std::move(*lease);
        }
        c.phase = op.put ? Phase::CopyIn : Phase::Open;
        break;
      }
      case Phase::CopyIn: {
        if (!op.local.staged) {
          c.phase = Phase::Open;
          break;
        }
        if (!op.local.device) {  // staged host memory
          std::memcpy(c.lease->data(), op.local.host + c.local_at, c.length);
          c.phase = Phase::Open;
          break;
        }
        auto copied = chunk_device_copy(op, c, cuda::CopyJob::Direction::ToHost);
        if (!copied.ok()) return chunk_failed(op, c, copied.status());
        if (!*copied) return;
        c.phase = Phase::Open;
        break;
      }
      case Phase::Open: {
        if (!op.remote_staged) {
          c.window = op.remote_region;
          c.window_generation = op.remote_generation;
          c.phase = Phase::Transfer;
          break;
        }
        if (op.link->state != PeerLink::State::Established)
          return chunk_failed(op, c, lost(*op.link));
        c.stage_id = next_wire_id_++;
        op.link->stage_waits[c.stage_id] = op.chunks[chunk_index(op, c)];
        c.waiting = true;
        c.opened = true;
        send_control(*op.ep, FrameType::StageOpen, c.stage_id, op.remote_region,
                     op.remote_generation, c.remote_at, c.length,
                     std::string(1, op.put ? '\1' : '\0'));
        return;  // StageReady moves it on
      }
      case Phase::Transfer: {
        if (op.link->state != PeerLink::State::Established)
          return chunk_failed(op, c, lost(*op.link));
        HostPart part;
        part.put = op.put;
        part.req = op.req;
        part.remote_region = c.window;
        part.remote_generation = c.window_generation;
        part.remote_offset = op.remote_staged ? 0 : c.remote_at;
        part.remote_device = !op.remote_staged && op.req->remote_kind == MemoryKind::Cuda;
        part.length = c.length;
        if (c.lease) {
          const cuda::StagingSlab& slab = c.lease->slab();
          part.local = c.lease->data();
          part.local_region = static_cast<const detail::RegionRecord*>(slab.tag.get());
          part.local_offset = c.lease->slab_offset();
        } else {
          part.local = op.local.host + c.local_at;
          part.local_region = op.local.region;
          part.local_offset = op.local.region_offset + c.local_at;
        }
        std::weak_ptr<StagedChunk> weak = op.chunks[chunk_index(op, c)];
        StagedOp* raw = &op;
        part.done = [this, weak, raw](const Status& st) {
          auto chunk = weak.lock();
          if (!chunk || chunk->phase != Phase::Transfer) return;
          chunk->waiting = false;
          if (!st.ok()) {
            chunk_failed(*raw, *chunk, st);
          } else {
            chunk->phase = raw->remote_staged ? Phase::Close : Phase::CopyOut;
          }
          advance_staged(*raw);
        };
        c.waiting = true;
        issue_host_part(*op.link, *op.ep, std::move(part));
        return;
      }
      case Phase::Close: {
        if (!c.opened) {  // answered StageDone (put) or closed without waiting (get)
          c.phase = op.put ? Phase::Done : Phase::CopyOut;
          if (c.phase == Phase::Done) {
            op.bytes += c.length;
            c.lease.reset();
          }
          break;
        }
        if (op.link->state != PeerLink::State::Established)
          return chunk_failed(op, c, lost(*op.link));
        send_control(*op.ep, FrameType::StageClose, c.stage_id, op.put ? 1 : 0);
        if (op.put) {
          c.waiting = true;  // the owner copies the window into its memory first: StageDone
          return;
        }
        op.link->stage_waits.erase(c.stage_id);
        c.opened = false;
        c.phase = Phase::CopyOut;
        break;
      }
      case Phase::CopyOut: {
        if (op.put || !op.local.staged) {
          op.bytes += c.length;
          c.lease.reset();
          c.phase = Phase::Done;
          break;
        }
        if (!op.local.device) {
          std::memcpy(op.local.host + c.local_at, c.lease->data(), c.length);
          op.bytes += c.length;
          c.lease.reset();
          c.phase = Phase::Done;
          break;
        }
        auto copied = chunk_device_copy(op, c, cuda::CopyJob::Direction::ToDevice);
        if (!copied.ok()) return chunk_failed(op, c, copied.status());
        if (!*copied) return;
        op.bytes += c.length;
        c.lease.reset();
        c.phase = Phase::Done;
        break;
      }
      case Phase::Done: return;
    }
  }
}

std::size_t Protocol::chunk_index(const StagedOp& op, const StagedChunk& c) {
  for (std::size_t i = 0; i < op.chunks.size(); ++i) {
    if (op.chunks[i].get() == &c) return i;
  }
  return 0;  // unreachable: a chunk advances only while its op holds it
}

int Protocol::progress_staged() {
  int work = 0;
  // Each op may finish (and be dropped) while it advances: iterate over a snapshot.
  std::vector<std::shared_ptr<StagedOp>> ops = staged_ops_;
  for (auto& op : ops) {
    if (op->finished) continue;
    const std::uint64_t before = op->bytes;
    const std::size_t chunks = op->chunks.size();
    advance_staged(*op);
    if (op->bytes != before || op->chunks.size() != chunks || op->finished) ++work;
  }
  std::erase_if(staged_ops_, [](const std::shared_ptr<StagedOp>& op) { return op->finished; });
  work += progress_windows();
  return work;
}

void Protocol::on_stage_reply(Link& link, const FrameHeader& h, std::string_view body) {
  auto it = link.stage_waits.find(h.id);
  auto chunk = it != link.stage_waits.end() ? it->second.lock() : nullptr;
  const bool ready = h.type == FrameType::StageReady;
  if (!chunk || !chunk->waiting || chunk->phase != (ready ? Phase::Open : Phase::Close)) {
    return protocol_error(link, std::string(frame_type_name(h.type)) + " for stage " +
                                    std::to_string(h.id) + " matches no chunk waiting for it");
  }
  StagedOp& op = *chunk->op;
  chunk->waiting = false;
  // A refused open, and any StageDone, leave the owner holding nothing for the chunk.
  if (h.a != 0 || !ready) {
    chunk->opened = false;
    link.stage_waits.erase(h.id);
  }
  if (h.a != 0) {
    const Status refused = Status::error(errc_from_wire(h.a),
                                         "peer " + short_id(link.ep.id) + ": " + quote(body, 300));
    chunk_failed(op, *chunk, refused);
  } else if (ready) {
    chunk->window = h.b;
    chunk->window_generation = h.c;
    chunk->phase = Phase::Transfer;
  } else {
    op.bytes += chunk->length;
    chunk->lease.reset();
    chunk->phase = Phase::Done;
  }
  advance_staged(op);
}

void Protocol::fail_staged_of(Link& link, const Status& why) {
  link.stage_waits.clear();
  for (auto& op : std::vector<std::shared_ptr<StagedOp>>(staged_ops_)) {
    if (op->link != &link || op->finished) continue;
    for (auto& c : op->chunks) {
      // A chunk waiting for the peer hears nothing more; one in a host part is failed by the
      // transport (its done), one in a local copy ends when the copy does.
      if (c->waiting && c->phase != Phase::Transfer) {
        c->opened = false;
        chunk_failed(*op, *c, why);
      }
    }
    if (op->first_error.ok()) op->first_error = why;
    advance_staged(*op);
  }
}

}  // namespace orbite::p2p
