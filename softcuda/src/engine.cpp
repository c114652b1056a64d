// The copy engine: stream work executed in order per stream and concurrently across streams by a
// small pool of threads, with the driver's default-stream rules (the legacy stream waits for
// every blocking stream of its context and they wait for it) and its rules for pageable memory
// (a copy from pageable memory is staged before the call returns; a copy to pageable memory
// completes before it returns). Copies between device memory and pinned host memory are truly
// asynchronous: the bytes move on an engine thread, after the call returned.
#include <thread>

#include <cstring>

#include "internal.h"

namespace softcuda {
namespace {

bool ready(const Op& op) {
  for (const auto& d : op.deps) {
    if (d->state != Op::Done) return false;
  }
  return true;
}

// The first runnable op: the head of a stream whose dependencies are done. Scans from a
// rotating position so that no stream starves.
std::shared_ptr<Op> pick(State& st) {
  static std::size_t rotation = 0;
  const std::size_t n = st.streams.size();
  if (n == 0) return nullptr;
  const std::size_t start = rotation++ % n;
  auto it = st.streams.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(start));
  for (std::size_t i = 0; i < n; ++i, ++it) {
    if (it == st.streams.end()) it = st.streams.begin();
    Stream& s = *it->second;
    if (s.queue.empty()) continue;
    const auto& head = s.queue.front();
    if (head->state == Op::Queued && ready(*head)) return head;
  }
  return nullptr;
}

void finish(State& st, const std::shared_ptr<Op>& op, CUresult r, bool sticky) {
  Stream* s = op->stream;
  op->state = Op::Done;
  op->done_at = Clock::now();
  if (op->kind == Op::Record) {
    op->result = r != CUDA_SUCCESS ? r : s->error_since_record;
    s->error_since_record = CUDA_SUCCESS;
  } else {
    op->result = r;
    if (r != CUDA_SUCCESS) {
      if (s->error_since_record == CUDA_SUCCESS) s->error_since_record = r;
      if (s->error_since_sync == CUDA_SUCCESS) s->error_since_sync = r;
      if (sticky) s->ctx->sticky = r;
    }
  }
  if ((op->kind == Op::Copy || op->kind == Op::Memset) && r == CUDA_SUCCESS) {
    st.copies++;
    st.copy_bytes += op->bytes;
  }
  // Break the chain: a done op keeps nothing alive.
  op->work = nullptr;
  op->deps.clear();
  op->holds.clear();
  s->queue.pop_front();
  st.pending_ops--;
  if (s->destroyed && s->queue.empty()) st.streams.erase(s);
  st.work_epoch.fetch_add(1, std::memory_order_release);
  st.cv.notify_all();
}

void engine_thread() {
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  st.engines_running++;
  st.cv.notify_all();
  for (;;) {
    std::shared_ptr<Op> op = pick(st);
    if (!op) {
      if (st.stopping) return;
      // No spinning here: engine threads that look for work while idle starve the threads
      // that make it on a small machine (measured: a staged put at half the rate).
      st.cv.wait(lock);
      continue;
    }
    op->state = Op::Running;
    ExecFaults& f = st.faults;
    const std::int64_t stall = op->stall_ms;
    const bool hold = op->hold;
    CUresult injected = CUDA_SUCCESS;
    bool sticky = false;
    if ((op->kind == Op::Copy || op->kind == Op::Memset) && f.copy_nth != 0 &&
        ++f.copies_seen == f.copy_nth) {
      injected = f.copy_error;
      sticky = f.copy_sticky;
      f.copy_nth = 0;
    }
    if (op->kind == Op::Record && f.record_nth != 0 && ++f.records_seen == f.record_nth) {
      injected = f.record_error;
      f.record_nth = 0;
    }
    lock.unlock();
    if (stall > 0) std::this_thread::sleep_for(std::chrono::milliseconds(stall));
    if (hold) {
      lock.lock();
      st.faults.held++;
      st.cv.wait(lock, [&] { return st.faults.releases != op->hold_epoch; });
      st.faults.held--;
      lock.unlock();
    }
    CUresult r = injected;
    if (r == CUDA_SUCCESS && op->work) r = op->work();
    // A faulting kernel poisons its context, as on the driver.
    if (r == CUDA_ERROR_ILLEGAL_ADDRESS) sticky = true;
    lock.lock();
    finish(st, op, r, sticky);
  }
}

}  // namespace

void start_engines() {
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  if (!st.engines.empty() || !st.initialized) return;
  for (int i = 0; i < st.config.copy_engines; ++i) {
    st.engines.emplace_back(engine_thread);
    st.engines.back().detach();  // they live as long as the process
  }
  // Fully started before anything relies on them, and before a short-lived process can exit
  // with a thread still being created (which LeakSanitizer's exit-time scan does not survive).
  const int n = static_cast<int>(st.engines.size());
  st.cv.wait(lock, [&] { return st.engines_running == n; });
}

Stream* new_stream(Context* ctx, unsigned flags, int priority) {
  State& st = state();
  auto s = std::make_unique<Stream>();
  s->id = st.next_id++;
  s->ctx = ctx;
  s->flags = flags;
  s->priority = priority;
  Stream* raw = s.get();
  st.streams.emplace(raw, std::move(s));
  return raw;
}

CUresult resolve_stream(CUstream h, bool ptds, Stream** out) {
  State& st = state();
  const bool legacy = h == CU_STREAM_LEGACY || (h == nullptr && !ptds);
  const bool per_thread = h == CU_STREAM_PER_THREAD || (h == nullptr && ptds);
  if (legacy || per_thread) {
    Context* c = nullptr;
    if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
    if (legacy) {
      *out = c->legacy;
      return CUDA_SUCCESS;
    }
    Stream*& mine = c->per_thread[std::this_thread::get_id()];
    if (mine == nullptr) {
      mine = new_stream(c, 0, 0);
      mine->per_thread = true;
    }
    *out = mine;
    return CUDA_SUCCESS;
  }
  auto* s = reinterpret_cast<Stream*>(h);
  auto it = st.streams.find(s);
  if (it == st.streams.end() || s->destroyed || s->legacy || s->per_thread) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!s->ctx->active) return CUDA_ERROR_INVALID_CONTEXT;
  if (s->ctx->sticky != CUDA_SUCCESS) return s->ctx->sticky;
  *out = s;
  return CUDA_SUCCESS;
}

std::shared_ptr<Op> enqueue(Stream* s, std::shared_ptr<Op> op) {
  State& st = state();
  if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    s->captured_ops++;
    return nullptr;
  }
  op->stream = s;
  if (st.faults.hang) {
    op->hold = true;
    op->hold_epoch = st.faults.releases;
    st.faults.hang = false;
  }
  if (st.faults.stall_ms != 0) {
    op->stall_ms = st.faults.stall_ms;
    st.faults.stall_ms = 0;
  }
  auto depend = [&](const std::shared_ptr<Op>& t) {
    if (t && t->state != Op::Done) op->deps.push_back(t);
  };
  if (s->legacy) {
    for (const auto& [ptr, t] : st.streams) {
      if (t->ctx == s->ctx && t->blocking()) depend(t->tail);
    }
  } else if (s->blocking()) {
    depend(s->ctx->legacy->tail);
  }
  s->queue.push_back(op);
  s->tail = op;
  st.pending_ops++;
  st.work_epoch.fetch_add(1, std::memory_order_release);
  st.cv.notify_all();
  return op;
}

constexpr auto kSyncSpin = std::chrono::microseconds(100);

void wait_op(std::unique_lock<std::mutex>& lock, const std::shared_ptr<Op>& op) {
  if (!op) return;
  State& st = state();
  // Look for a while before sleeping, as the driver's default scheduling spins while the
  // process has cores to spare: a short copy's synchronisation then costs no futex wake-up.
  const auto until = Clock::now() + kSyncSpin;
  while (op->state != Op::Done && Clock::now() < until) {
    const std::uint64_t epoch = st.work_epoch.load(std::memory_order_relaxed);
    lock.unlock();
    while (Clock::now() < until && st.work_epoch.load(std::memory_order_acquire) == epoch) {
      std::this_thread::yield();
    }
    lock.lock();
  }
  st.cv.wait(lock, [&] { return op->state == Op::Done; });
}

CUresult sync_stream(std::unique_lock<std::mutex>& lock, Stream* s) {
  State& st = state();
  st.stream_syncs++;
  if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  std::shared_ptr<Op> tail = s->tail;
  wait_op(lock, tail);
  if (st.streams.count(s) == 0) return CUDA_SUCCESS;  // destroyed meanwhile: its work drained
  const CUresult r = s->error_since_sync;
  s->error_since_sync = CUDA_SUCCESS;
  return r;
}

CUresult sync_context(std::unique_lock<std::mutex>& lock, Context* ctx) {
  State& st = state();
  st.ctx_syncs++;
  std::vector<std::pair<Stream*, std::shared_ptr<Op>>> tails;
  for (const auto& [ptr, s] : st.streams) {
    if (s->ctx == ctx && s->tail) tails.emplace_back(ptr, s->tail);
  }
  CUresult first = CUDA_SUCCESS;
  for (auto& [s, tail] : tails) {
    wait_op(lock, tail);
    auto it = st.streams.find(s);
    if (it == st.streams.end()) continue;
    if (first == CUDA_SUCCESS) first = s->error_since_sync;
    s->error_since_sync = CUDA_SUCCESS;
  }
  return ctx->sticky != CUDA_SUCCESS ? ctx->sticky : first;
}

CUresult submit_copy(std::unique_lock<std::mutex>& lock, Stream* s, const Span& dst,
                     const Span& src, std::uint64_t len, bool sync_call) {
  if (len == 0) return CUDA_SUCCESS;
  if (dst.alloc && dst.alloc->kind == MemKind::HostRegistered &&
      (dst.alloc->flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0) {
    return CUDA_ERROR_INVALID_VALUE;  // a read-only registration is never written
  }
  const bool src_pageable = !src.device && !src.pinned;
  const bool dst_pageable = !dst.device && !dst.pinned;
  const bool host_to_host = !src.device && !dst.device;
  const bool device_to_device = src.device && dst.device;
  const bool needs_host_sync = sync_call ? !device_to_device : (host_to_host || dst_pageable);
  if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE && (needs_host_sync || src_pageable)) {
    s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;  // such a copy cannot be captured
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  auto op = std::make_shared<Op>();
  op->kind = Op::Copy;
  op->bytes = len;
  if (dst.alloc) op->holds.push_back(dst.alloc);
  if (src.alloc) op->holds.push_back(src.alloc);
  std::byte* d = dst.cpu;
  if (src_pageable && dst.device) {
    // The driver stages pageable bytes before it returns; the DMA follows later. Its rules say
    // the stream's earlier work is waited for first.
    wait_op(lock, s->tail);
    auto snapshot = std::make_shared<std::vector<std::byte>>(len);
    lock.unlock();
    std::memcpy(snapshot->data(), src.cpu, len);
    lock.lock();
    op->work = [d, snapshot, len] {
      std::memcpy(d, snapshot->data(), len);
      return CUDA_SUCCESS;
    };
    std::shared_ptr<Op> staged = enqueue(s, op);
    // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the destination: a synchronous call returns only once
    // the DMA landed (what GPUDirect RDMA users set so that a NIC reads the new bytes).
    if (!sync_call || !dst.alloc || !dst.alloc->sync_memops) return CUDA_SUCCESS;
    wait_op(lock, staged);
    return staged ? staged->result : CUDA_SUCCESS;
  }
  const std::byte* from = src.cpu;
  op->work = [d, from, len] {
    std::memmove(d, from, len);
    return CUDA_SUCCESS;
  };
  std::shared_ptr<Op> queued = enqueue(s, op);
  if (!needs_host_sync) return CUDA_SUCCESS;
  wait_op(lock, queued);
  return queued ? queued->result : CUDA_SUCCESS;
}

CUresult submit_memset(std::unique_lock<std::mutex>& lock, Stream* s, const Span& dst,
                       std::uint32_t value, unsigned width, std::uint64_t count, bool sync_call) {
  if (count == 0) return CUDA_SUCCESS;
  if (!dst.device && !dst.pinned) return CUDA_ERROR_INVALID_VALUE;
  auto op = std::make_shared<Op>();
  op->kind = Op::Memset;
  op->bytes = count * width;
  if (dst.alloc) op->holds.push_back(dst.alloc);
  std::byte* d = dst.cpu;
  op->work = [d, value, width, count] {
    if (width == 1) {
      std::memset(d, static_cast<int>(value & 0xff), count);
    } else {
      for (std::uint64_t i = 0; i < count; ++i) std::memcpy(d + i * width, &value, width);
    }
    return CUDA_SUCCESS;
  };
  std::shared_ptr<Op> queued = enqueue(s, op);
  // Asynchronous with respect to the host except into pinned host memory.
  if (sync_call && !dst.device) {
    wait_op(lock, queued);
    return queued ? queued->result : CUDA_SUCCESS;
  }
  return CUDA_SUCCESS;
}

Event* find_event(CUevent e) {
  auto* ev = reinterpret_cast<Event*>(e);
  return state().events.count(ev) != 0 ? ev : nullptr;
}

void destroy_context_resources(std::unique_lock<std::mutex>& lock, Context* ctx) {
  State& st = state();
  sync_context(lock, ctx);
  for (auto it = st.allocations.begin(); it != st.allocations.end();) {
    Allocation& a = *it->second;
    if (a.ctx != ctx) {
      ++it;
      continue;
    }
    if (a.kind == MemKind::Device || a.kind == MemKind::Managed) {
      Device* d = device_of(a.device);
      if (d != nullptr) {
        d->used_bytes -= a.size;
        if (a.kind == MemKind::Device) arena_give(*d, a.base, a.mapped_size);
      }
      st.live_bytes -= a.size;
    }
    it = st.allocations.erase(it);
  }
  for (auto it = st.events.begin(); it != st.events.end();) {
    it = it->second->ctx == ctx ? st.events.erase(it) : std::next(it);
  }
  for (auto it = st.streams.begin(); it != st.streams.end();) {
    Stream& s = *it->second;
    if (s.ctx == ctx && !s.legacy) {
      it = st.streams.erase(it);  // drained by the sync above
    } else {
      ++it;
    }
  }
  ctx->per_thread.clear();
  ctx->legacy->tail = nullptr;
}

}  // namespace softcuda
