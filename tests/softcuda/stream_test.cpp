// Streams, events, the default-stream rules, capture, and faults at execution.
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "fixture.h"

namespace {

class Streams : public Softcuda {
 protected:
  void SetUp() override {
    Softcuda::SetUp();
    CU_OK(cuMemAlloc(&dev_buf_, kBytes));
    CU_OK(cuMemHostAlloc(&pinned_, kBytes, 0));
    CU_OK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING));
  }
  void TearDown() override {
    softcuda::control("release");
    cuCtxSynchronize();
    cuEventDestroy(event_);
    cuStreamDestroy(stream_);
    cuMemFreeHost(pinned_);
    cuMemFree(dev_buf_);
    Softcuda::TearDown();
  }
  static constexpr size_t kBytes = 1 << 16;
  CUdeviceptr dev_buf_ = 0;
  void* pinned_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent event_ = nullptr;
};

TEST_F(Streams, PinnedCopiesRunAfterTheCallReturns) {
  std::memset(pinned_, 'a', kBytes);
  CU_OK(cuMemcpyHtoD(dev_buf_, pinned_, kBytes));
  std::memset(pinned_, 0, kBytes);
  control("hang");  // the next op executed waits for "release"
  CU_OK(cuMemcpyDtoHAsync(pinned_, dev_buf_, kBytes, stream_));
  CU_OK(cuEventRecord(event_, stream_));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventQuery(event_));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(stream_));
  EXPECT_EQ(0, static_cast<char*>(pinned_)[0]);  // nothing moved yet
  control("release");
  CU_OK(cuEventSynchronize(event_));
  EXPECT_EQ('a', static_cast<char*>(pinned_)[kBytes - 1]);
  CU_OK(cuEventQuery(event_));
}

TEST_F(Streams, PageableCopiesFollowTheDriversRules) {
  std::vector<char> pageable(kBytes, 'p');
  control("stall 30");
  // From pageable memory: staged before the call returns, so the buffer may be reused at once.
  CU_OK(cuMemcpyHtoDAsync(dev_buf_, pageable.data(), kBytes, stream_));
  std::memset(pageable.data(), 'q', kBytes);
  // To pageable memory: complete when the call returns.
  std::vector<char> back(kBytes);
  CU_OK(cuMemcpyDtoHAsync(back.data(), dev_buf_, kBytes, stream_));
  EXPECT_EQ('p', back[0]);
  EXPECT_EQ('p', back[kBytes - 1]);
}

// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (what GPUDirect RDMA sets): a synchronous copy from pageable
// memory into the allocation returns only once the bytes landed, not once they were staged.
TEST_F(Streams, SyncMemopsMakesASynchronousPageableCopyLandBeforeItReturns) {
  std::vector<char> pageable(kBytes, 'p');
  control("hang");  // the device write is held: the call returns with it still queued
  CU_OK(cuMemcpyHtoD(dev_buf_, pageable.data(), kBytes));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(CU_STREAM_LEGACY));
  control("release");
  CU_OK(cuCtxSynchronize());
  const unsigned int on = 1;
  CU_OK(cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dev_buf_));
  control("stall 20");
  CU_OK(cuMemcpyHtoD(dev_buf_, pageable.data(), kBytes));
  CU_OK(cuStreamQuery(CU_STREAM_LEGACY));  // nothing left: the write is done
}

TEST_F(Streams, EventsQuerySynchronizeAndCountSynchronizations) {
  CU_OK(cuEventQuery(event_));  // never recorded: complete
  const long long before = stat("event_synchronize_calls");
  control("hang");
  CU_OK(cuMemsetD8Async(dev_buf_, 7, kBytes, stream_));
  CU_OK(cuEventRecord(event_, stream_));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventQuery(event_));
  std::thread releaser([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    softcuda::control("release");
  });
  CU_OK(cuEventSynchronize(event_));
  releaser.join();
  EXPECT_EQ(before + 1, stat("event_synchronize_calls"));
  // An event recorded on another context's stream, or a destroyed one.
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(reinterpret_cast<CUevent>(0x10)));
}

TEST_F(Streams, TheLegacyStreamOrdersBlockingStreamsButNotNonBlockingOnes) {
  CUstream blocking = nullptr;
  CU_OK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  control("hang");
  CU_OK(cuMemsetD8Async(dev_buf_, 1, kBytes, CU_STREAM_LEGACY));  // held
  CU_OK(cuMemsetD8Async(dev_buf_, 2, 16, blocking));              // waits for the legacy stream
  CU_OK(cuMemsetD8Async(dev_buf_, 3, 16, stream_));               // non-blocking: runs now
  CU_OK(cuStreamSynchronize(stream_));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(blocking));
  control("release");
  CU_OK(cuStreamSynchronize(blocking));
  CU_OK(cuStreamDestroy(blocking));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(blocking));
}

TEST_F(Streams, StreamWaitEventOrdersAcrossStreams) {
  CUstream other = nullptr;
  CU_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  control("hang");
  CU_OK(cuMemsetD8Async(dev_buf_, 9, kBytes, stream_));
  CU_OK(cuEventRecord(event_, stream_));
  CU_OK(cuStreamWaitEvent(other, event_, 0));
  CU_OK(cuMemcpyDtoHAsync(pinned_, dev_buf_, kBytes, other));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(other));
  control("release");
  CU_OK(cuStreamSynchronize(other));
  EXPECT_EQ(9, static_cast<char*>(pinned_)[kBytes - 1]);
  CU_OK(cuStreamDestroy(other));
}

TEST_F(Streams, HostFunctionsRunInStreamOrder) {
  static std::atomic<int> order{0};
  static int seen_a = -1, seen_b = -1;
  order = 0;
  CU_OK(cuLaunchHostFunc(
      stream_, [](void*) { seen_a = order++; }, nullptr));
  CU_OK(cuMemsetD8Async(dev_buf_, 1, kBytes, stream_));
  CU_OK(cuLaunchHostFunc(
      stream_, [](void*) { seen_b = order++; }, nullptr));
  CU_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(0, seen_a);
  EXPECT_EQ(1, seen_b);
}

TEST_F(Streams, ACapturingStreamIsMarkedAndCannotBeSynchronized) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus status{};
  CU_OK(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, status);
  cuuint64_t id = 0;
  CU_OK(cuStreamGetCaptureInfo(stream_, &status, &id, nullptr, nullptr, nullptr, nullptr));
  EXPECT_NE(0u, id);
  CU_OK(cuMemsetD8Async(dev_buf_, 1, 16, stream_));  // captured, not run
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(stream_));
  CUgraph graph = nullptr;
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  CU_OK(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, status);
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK(cuStreamEndCapture(stream_, &graph));
  CU_OK(cuGraphDestroy(graph));
  // The legacy stream cannot be captured.
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
            cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
}

TEST_F(Streams, ACopyFailingAtExecutionSurfacesAtTheNextSynchronization) {
  control("fail_copy 1 CUDA_ERROR_LAUNCH_FAILED");
  CU_OK(cuMemcpyHtoDAsync(dev_buf_, pinned_, kBytes, stream_));  // accepted
  CU_OK(cuEventRecord(event_, stream_));
  CU_EXPECT(CUDA_ERROR_LAUNCH_FAILED, cuEventSynchronize(event_));
  CU_EXPECT(CUDA_ERROR_LAUNCH_FAILED, cuStreamSynchronize(stream_));
  CU_OK(cuStreamSynchronize(stream_));  // reported once: not sticky
  control("fail_record 1 CUDA_ERROR_UNKNOWN");
  CU_OK(cuEventRecord(event_, stream_));
  CU_EXPECT(CUDA_ERROR_UNKNOWN, cuEventSynchronize(event_));
}

TEST_F(Streams, AStickyFailurePoisonsTheContextUntilReset) {
  control("fail_copy 1 CUDA_ERROR_ILLEGAL_ADDRESS sticky");
  CU_OK(cuMemcpyHtoDAsync(dev_buf_, pinned_, kBytes, stream_));
  CU_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(stream_));
  CUdeviceptr p = 0;
  CU_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemAlloc(&p, 64));
  CU_OK(cuDevicePrimaryCtxReset(dev_));
  // The reset freed this context's memory, streams and events: make the fixture's again.
  CU_OK(cuMemAlloc(&dev_buf_, kBytes));
  CU_OK(cuMemHostAlloc(&pinned_, kBytes, 0));
  CU_OK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  CU_OK(cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING));
}

TEST_F(Streams, PerThreadDefaultStreamsAreTheirThreadsOwn) {
  // Each thread's per-thread stream is separate: a held op on this thread's does not hold
  // another thread's.
  CUstream mine = CU_STREAM_PER_THREAD;
  control("hang");
  CU_OK(cuMemsetD8Async(dev_buf_, 4, 16, mine));
  CUresult other = CUDA_ERROR_UNKNOWN;
  std::thread t([&] {
    cuCtxSetCurrent(ctx_);
    other = cuMemsetD8Async(dev_buf_ + 32, 5, 16, CU_STREAM_PER_THREAD);
    if (other == CUDA_SUCCESS) other = cuStreamSynchronize(CU_STREAM_PER_THREAD);
  });
  t.join();
  EXPECT_EQ(CUDA_SUCCESS, other);
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(mine));
  control("release");
  CU_OK(cuStreamSynchronize(mine));
}

}  // namespace
