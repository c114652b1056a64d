// The stream, event and capture entry points (the copies are in copy_api.cpp). Each
// per-thread-default-stream variant (_ptds, _ptsz) is the same call with stream 0 meaning the
// calling thread's default stream.
#include <algorithm>
#include <thread>

#include "internal.h"

using namespace softcuda;

namespace {

CUresult stream_create(CUstream* ph, unsigned flags, int priority) {
  if (ph == nullptr || (flags & ~unsigned(CU_STREAM_NON_BLOCKING)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> g(state().mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  // Priorities clamp to the range cuCtxGetStreamPriorityRange reports, as on the driver.
  priority = std::max(-5, std::min(0, priority));
  *ph = reinterpret_cast<CUstream>(new_stream(c, flags, priority));
  return CUDA_SUCCESS;
}

}  // namespace

SC_API CUresult cuStreamCreate(CUstream* ph, unsigned int flags) {
  SC_ENTER("cuStreamCreate");
  return stream_create(ph, flags, 0);
}

SC_API CUresult cuStreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) {
  SC_ENTER("cuStreamCreateWithPriority");
  return stream_create(ph, flags, priority);
}

SC_API CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  SC_ENTER("cuCtxGetStreamPriorityRange");
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return CUDA_SUCCESS;
}

SC_API CUresult cuStreamDestroy_v2(CUstream h) {
  SC_ENTER("cuStreamDestroy");
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Stream* s = nullptr;
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CUresult rc = resolve_stream(h, false, &s); rc != CUDA_SUCCESS) return rc;
  // The handle is gone now; work already queued still runs, then the stream is freed.
  s->destroyed = true;
  if (s->queue.empty()) st.streams.erase(s);
  return CUDA_SUCCESS;
}
SC_API CUresult cuStreamDestroy(CUstream h) {
  return cuStreamDestroy_v2(h);
}

namespace {

CUresult cuStreamSynchronize_impl(CUstream h, bool ptds) {
  std::unique_lock<std::mutex> lock(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  return sync_stream(lock, s);
}

CUresult cuStreamQuery_impl(CUstream h, bool ptds) {
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (!s->queue.empty()) return CUDA_ERROR_NOT_READY;
  return s->error_since_sync;
}

CUresult cuStreamWaitEvent_impl(CUstream h, CUevent e, unsigned flags, bool ptds) {
  if (flags != 0 && flags != CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  Event* ev = find_event(e);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto op = std::make_shared<Op>();
  op->kind = Op::Wait;
  if (ev->last_record && ev->last_record->state != Op::Done) op->deps.push_back(ev->last_record);
  enqueue(s, op);
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx_impl(CUstream h, CUcontext* pctx, bool ptds) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  *pctx = reinterpret_cast<CUcontext>(s->ctx);
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx_v2_impl(CUstream h, CUcontext* pctx, CUgreenCtx* green, bool ptds) {
  if (green != nullptr) *green = nullptr;
  return cuStreamGetCtx_impl(h, pctx, ptds);
}

CUresult cuStreamGetFlags_impl(CUstream h, unsigned* flags, bool ptds) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  *flags = s->flags;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetPriority_impl(CUstream h, int* priority, bool ptds) {
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  *priority = s->priority;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetId_impl(CUstream h, unsigned long long* id, bool ptds) {
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  *id = s->id;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice_impl(CUstream h, CUdevice* dev, bool ptds) {
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  *dev = s->ctx->device->ordinal;
  return CUDA_SUCCESS;
}

// Capture: the stream is marked and what it is given is counted, not run. Enough to prove that a
// caller rejects a capturing stream; graphs are not emulated beyond their creation.
CUresult cuStreamBeginCapture_v2_impl(CUstream h, CUstreamCaptureMode mode, bool ptds) {
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  if (s->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
  s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  s->capture_id = st.next_id++;
  s->captured_ops = 0;
  return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture_impl(CUstream h, bool ptds) {
  return cuStreamBeginCapture_v2_impl(h, CU_STREAM_CAPTURE_MODE_GLOBAL, ptds);
}

CUresult cuStreamEndCapture_impl(CUstream h, CUgraph* graph, bool ptds) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
  const bool invalidated = s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (invalidated) {
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  auto gr = std::make_unique<Graph>();
  gr->ops = s->captured_ops;
  *graph = reinterpret_cast<CUgraph>(gr.get());
  st.graphs.emplace(gr.get(), std::move(gr));
  return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing_impl(CUstream h, CUstreamCaptureStatus* status, bool ptds) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  *status = s->capture;
  return CUDA_SUCCESS;
}

CUresult capture_info(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                      const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* ndeps,
                      bool ptds) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  *status = s->capture;
  if (id != nullptr) *id = s->capture != CU_STREAM_CAPTURE_STATUS_NONE ? s->capture_id : 0;
  if (graph != nullptr) *graph = nullptr;
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (ndeps != nullptr) *ndeps = 0;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_impl(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id,
                                     bool ptds) {
  return capture_info(h, status, id, nullptr, nullptr, nullptr, nullptr, ptds);
}
CUresult cuStreamGetCaptureInfo_v2_impl(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id,
                                        CUgraph* graph, const CUgraphNode** deps, size_t* n,
                                        bool ptds) {
  return capture_info(h, status, id, graph, deps, nullptr, n, ptds);
}
CUresult cuStreamGetCaptureInfo_v3_impl(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id,
                                        CUgraph* graph, const CUgraphNode** deps,
                                        const CUgraphEdgeData** edges, size_t* n, bool ptds) {
  return capture_info(h, status, id, graph, deps, edges, n, ptds);
}

CUresult cuLaunchHostFunc_impl(CUstream h, CUhostFn fn, void* data, bool ptds) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  auto op = std::make_shared<Op>();
  op->kind = Op::HostFunc;
  op->work = [fn, data] {
    fn(data);
    return CUDA_SUCCESS;
  };
  enqueue(s, op);
  return CUDA_SUCCESS;
}

CUresult cuStreamAddCallback_impl(CUstream h, CUstreamCallback cb, void* data, unsigned flags,
                                  bool ptds) {
  if (cb == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  auto op = std::make_shared<Op>();
  op->kind = Op::HostFunc;
  Stream* target = s;
  op->work = [cb, data, h, target] {
    CUresult status = CUDA_SUCCESS;
    {
      std::lock_guard<std::mutex> g2(state().mu);
      status = target->error_since_record;
    }
    cb(h, status, data);
    return CUDA_SUCCESS;
  };
  enqueue(s, op);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Events

CUresult cuEventRecord_impl(CUevent e, CUstream h, bool ptds) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Event* ev = find_event(e);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(h, ptds, &s); rc != CUDA_SUCCESS) return rc;
  if (s->ctx != ev->ctx) return CUDA_ERROR_INVALID_HANDLE;  // stream and event of one context
  if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    s->captured_ops++;
    ev->captured = true;
    return CUDA_SUCCESS;
  }
  auto op = std::make_shared<Op>();
  op->kind = Op::Record;
  ev->last_record = enqueue(s, op);
  ev->generation++;
  ev->captured = false;
  return CUDA_SUCCESS;
}

CUresult cuEventRecordWithFlags_impl(CUevent e, CUstream h, unsigned flags, bool ptds) {
  if (flags != CU_EVENT_RECORD_DEFAULT && flags != CU_EVENT_RECORD_EXTERNAL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return cuEventRecord_impl(e, h, ptds);
}

}  // namespace

SC_API CUresult cuStreamSynchronize(CUstream h) {
  SC_ENTER("cuStreamSynchronize");
  return cuStreamSynchronize_impl(h, false);
}
SC_API CUresult cuStreamSynchronize_ptsz(CUstream h) {
  SC_ENTER("cuStreamSynchronize_ptsz");
  return cuStreamSynchronize_impl(h, true);
}
SC_API CUresult cuStreamQuery(CUstream h) {
  SC_ENTER("cuStreamQuery");
  return cuStreamQuery_impl(h, false);
}
SC_API CUresult cuStreamQuery_ptsz(CUstream h) {
  SC_ENTER("cuStreamQuery_ptsz");
  return cuStreamQuery_impl(h, true);
}
SC_API CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) {
  SC_ENTER("cuStreamWaitEvent");
  return cuStreamWaitEvent_impl(h, e, flags, false);
}
SC_API CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags) {
  SC_ENTER("cuStreamWaitEvent_ptsz");
  return cuStreamWaitEvent_impl(h, e, flags, true);
}
SC_API CUresult cuStreamGetCtx(CUstream h, CUcontext* pctx) {
  SC_ENTER("cuStreamGetCtx");
  return cuStreamGetCtx_impl(h, pctx, false);
}
SC_API CUresult cuStreamGetCtx_ptsz(CUstream h, CUcontext* pctx) {
  SC_ENTER("cuStreamGetCtx_ptsz");
  return cuStreamGetCtx_impl(h, pctx, true);
}
SC_API CUresult cuStreamGetCtx_v2(CUstream h, CUcontext* pctx, CUgreenCtx* green) {
  SC_ENTER("cuStreamGetCtx_v2");
  return cuStreamGetCtx_v2_impl(h, pctx, green, false);
}
SC_API CUresult cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext* pctx, CUgreenCtx* green) {
  SC_ENTER("cuStreamGetCtx_v2_ptsz");
  return cuStreamGetCtx_v2_impl(h, pctx, green, true);
}
SC_API CUresult cuStreamGetFlags(CUstream h, unsigned int* flags) {
  SC_ENTER("cuStreamGetFlags");
  return cuStreamGetFlags_impl(h, flags, false);
}
SC_API CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int* flags) {
  SC_ENTER("cuStreamGetFlags_ptsz");
  return cuStreamGetFlags_impl(h, flags, true);
}
SC_API CUresult cuStreamGetPriority(CUstream h, int* p) {
  SC_ENTER("cuStreamGetPriority");
  return cuStreamGetPriority_impl(h, p, false);
}
SC_API CUresult cuStreamGetPriority_ptsz(CUstream h, int* p) {
  SC_ENTER("cuStreamGetPriority_ptsz");
  return cuStreamGetPriority_impl(h, p, true);
}
SC_API CUresult cuStreamGetId(CUstream h, unsigned long long* id) {
  SC_ENTER("cuStreamGetId");
  return cuStreamGetId_impl(h, id, false);
}
SC_API CUresult cuStreamGetId_ptsz(CUstream h, unsigned long long* id) {
  SC_ENTER("cuStreamGetId_ptsz");
  return cuStreamGetId_impl(h, id, true);
}
SC_API CUresult cuStreamGetDevice(CUstream h, CUdevice* dev) {
  SC_ENTER("cuStreamGetDevice");
  return cuStreamGetDevice_impl(h, dev, false);
}
SC_API CUresult cuStreamGetDevice_ptsz(CUstream h, CUdevice* dev) {
  SC_ENTER("cuStreamGetDevice_ptsz");
  return cuStreamGetDevice_impl(h, dev, true);
}
SC_API CUresult cuStreamBeginCapture(CUstream h) {
  SC_ENTER("cuStreamBeginCapture");
  return cuStreamBeginCapture_impl(h, false);
}
SC_API CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  SC_ENTER("cuStreamBeginCapture_ptsz");
  return cuStreamBeginCapture_impl(h, true);
}
SC_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  SC_ENTER("cuStreamBeginCapture_v2");
  return cuStreamBeginCapture_v2_impl(h, mode, false);
}
SC_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  SC_ENTER("cuStreamBeginCapture_v2_ptsz");
  return cuStreamBeginCapture_v2_impl(h, mode, true);
}
SC_API CUresult cuStreamEndCapture(CUstream h, CUgraph* graph) {
  SC_ENTER("cuStreamEndCapture");
  return cuStreamEndCapture_impl(h, graph, false);
}
SC_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph* graph) {
  SC_ENTER("cuStreamEndCapture_ptsz");
  return cuStreamEndCapture_impl(h, graph, true);
}
SC_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* status) {
  SC_ENTER("cuStreamIsCapturing");
  return cuStreamIsCapturing_impl(h, status, false);
}
SC_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus* status) {
  SC_ENTER("cuStreamIsCapturing_ptsz");
  return cuStreamIsCapturing_impl(h, status, true);
}
SC_API CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id) {
  SC_ENTER("cuStreamGetCaptureInfo");
  return cuStreamGetCaptureInfo_impl(h, status, id, false);
}
SC_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus* status,
                                            cuuint64_t* id) {
  SC_ENTER("cuStreamGetCaptureInfo_ptsz");
  return cuStreamGetCaptureInfo_impl(h, status, id, true);
}
SC_API CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id,
                                          CUgraph* graph, const CUgraphNode** deps, size_t* n) {
  SC_ENTER("cuStreamGetCaptureInfo_v2");
  return cuStreamGetCaptureInfo_v2_impl(h, status, id, graph, deps, n, false);
}
SC_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus* status,
                                               cuuint64_t* id, CUgraph* graph,
                                               const CUgraphNode** deps, size_t* n) {
  SC_ENTER("cuStreamGetCaptureInfo_v2_ptsz");
  return cuStreamGetCaptureInfo_v2_impl(h, status, id, graph, deps, n, true);
}
SC_API CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id,
                                          CUgraph* graph, const CUgraphNode** deps,
                                          const CUgraphEdgeData** edges, size_t* n) {
  SC_ENTER("cuStreamGetCaptureInfo_v3");
  return cuStreamGetCaptureInfo_v3_impl(h, status, id, graph, deps, edges, n, false);
}
SC_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus* status,
                                               cuuint64_t* id, CUgraph* graph,
                                               const CUgraphNode** deps,
                                               const CUgraphEdgeData** edges, size_t* n) {
  SC_ENTER("cuStreamGetCaptureInfo_v3_ptsz");
  return cuStreamGetCaptureInfo_v3_impl(h, status, id, graph, deps, edges, n, true);
}
SC_API CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void* data) {
  SC_ENTER("cuLaunchHostFunc");
  return cuLaunchHostFunc_impl(h, fn, data, false);
}
SC_API CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void* data) {
  SC_ENTER("cuLaunchHostFunc_ptsz");
  return cuLaunchHostFunc_impl(h, fn, data, true);
}
SC_API CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void* data,
                                    unsigned int flags) {
  SC_ENTER("cuStreamAddCallback");
  return cuStreamAddCallback_impl(h, cb, data, flags, false);
}
SC_API CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void* data,
                                         unsigned int flags) {
  SC_ENTER("cuStreamAddCallback_ptsz");
  return cuStreamAddCallback_impl(h, cb, data, flags, true);
}

SC_API CUresult cuGraphDestroy(CUgraph graph) {
  SC_ENTER("cuGraphDestroy");
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  if (st.graphs.erase(reinterpret_cast<Graph*>(graph)) == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

SC_API CUresult cuEventCreate(CUevent* pe, unsigned int flags) {
  SC_ENTER("cuEventCreate");
  if (pe == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((flags &
       ~unsigned(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((flags & CU_EVENT_INTERPROCESS) != 0 && (flags & CU_EVENT_DISABLE_TIMING) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  Context* c = nullptr;
  if (CUresult rc = need_ctx(&c); rc != CUDA_SUCCESS) return rc;
  auto ev = std::make_unique<Event>();
  ev->id = st.next_id++;
  ev->ctx = c;
  ev->flags = flags;
  *pe = reinterpret_cast<CUevent>(ev.get());
  st.events.emplace(ev.get(), std::move(ev));
  return CUDA_SUCCESS;
}

SC_API CUresult cuEventDestroy_v2(CUevent e) {
  SC_ENTER("cuEventDestroy");
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  // Work that records it still runs; the record op does not reach the event.
  if (st.events.erase(reinterpret_cast<Event*>(e)) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}
SC_API CUresult cuEventDestroy(CUevent e) {
  return cuEventDestroy_v2(e);
}

SC_API CUresult cuEventRecord(CUevent e, CUstream h) {
  SC_ENTER("cuEventRecord");
  return cuEventRecord_impl(e, h, false);
}
SC_API CUresult cuEventRecord_ptsz(CUevent e, CUstream h) {
  SC_ENTER("cuEventRecord_ptsz");
  return cuEventRecord_impl(e, h, true);
}
SC_API CUresult cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int flags) {
  SC_ENTER("cuEventRecordWithFlags");
  return cuEventRecordWithFlags_impl(e, h, flags, false);
}
SC_API CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream h, unsigned int flags) {
  SC_ENTER("cuEventRecordWithFlags_ptsz");
  return cuEventRecordWithFlags_impl(e, h, flags, true);
}

SC_API CUresult cuEventQuery(CUevent e) {
  SC_ENTER("cuEventQuery");
  std::lock_guard<std::mutex> g(state().mu);
  Event* ev = find_event(e);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->captured) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!ev->last_record) return CUDA_SUCCESS;  // never recorded: complete
  if (ev->last_record->state != Op::Done) return CUDA_ERROR_NOT_READY;
  return ev->last_record->result;
}

SC_API CUresult cuEventSynchronize(CUevent e) {
  SC_ENTER("cuEventSynchronize");
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  Event* ev = find_event(e);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->captured) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  ev->syncs++;
  st.event_syncs++;
  std::shared_ptr<Op> op = ev->last_record;
  if (!op) return CUDA_SUCCESS;
  wait_op(lock, op);
  return op->result;
}

SC_API CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  SC_ENTER("cuEventElapsedTime");
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(state().mu);
  Event* a = find_event(start);
  Event* b = find_event(end);
  if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->last_record || !b->last_record) return CUDA_ERROR_INVALID_HANDLE;
  if (a->last_record->state != Op::Done || b->last_record->state != Op::Done) {
    return CUDA_ERROR_NOT_READY;
  }
  *ms = std::chrono::duration<float, std::milli>(b->last_record->done_at - a->last_record->done_at)
            .count();
  return CUDA_SUCCESS;
}
SC_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return cuEventElapsedTime_v2(ms, start, end);
}
