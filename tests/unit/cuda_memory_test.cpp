// OrbiTE's CUDA memory layer on softcuda (or a real driver): ownership, aliases, what
// from_raw_parts refuses, copies through staging and their failures, producer readiness, pinned
// host memory, and telling device pointers from host ones. The test itself talks to the driver
// too (cuda.h, the toolkit's stub at link time) to make streams, contexts and producers.
#include <cuda.h>
#include <gtest/gtest.h>
#include <orbite/cuda.h>
#include <orbite/transfer.h>
#include <softcuda/control.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "cuda/allocation.h"
#include "cuda/staging.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;

#define CU_OK(call) ASSERT_EQ(CUDA_SUCCESS, (call)) << #call

class CudaMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cuda::devices().ok()) << cuda::devices().status().to_string();
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&dev_, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx_, dev_));
    CU_OK(cuCtxSetCurrent(ctx_));
  }
  void TearDown() override {
    softcuda::control("release");
    softcuda::control("clear");
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(dev_);
  }
  // Fault injection and statistics are softcuda's: on NVIDIA's driver (the GPU gate) those
  // cases say so and skip.
  static bool on_softcuda() { return softcuda::loaded(); }
  static long long stat(const std::string& key) {
    const std::string s = softcuda::stats();
    const auto at = s.find("\"" + key + "\":");
    return at == std::string::npos ? -1 : std::stoll(s.substr(at + key.size() + 3));
  }
  static std::vector<std::uint8_t> pattern(std::size_t n, int seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + seed);
    return v;
  }
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
};

TEST_F(CudaMemoryTest, DevicesListIdentities) {
  auto list = cuda::devices();
  ASSERT_TRUE(list.ok());
  ASSERT_GE(list->size(), 1u);
  EXPECT_EQ(0, (*list)[0].ordinal);
  EXPECT_FALSE((*list)[0].pci_bus_id.empty());
  EXPECT_EQ(0u, (*list)[0].uuid.rfind("GPU-", 0));
}

TEST_F(CudaMemoryTest, CopiesRoundTripAtUnalignedSizesAndOffsets) {
  auto mem = cuda::CudaMemory::allocate(0, 5 * kMiB + 7);
  ASSERT_TRUE(mem.ok()) << mem.status().to_string();
  for (std::uint64_t size : {std::uint64_t{1}, std::uint64_t{4097}, 3 * kMiB + 13}) {
    const auto in = pattern(size, static_cast<int>(size));
    ASSERT_TRUE(mem->copy_from_host(3, in.data(), size).ok());
    std::vector<std::uint8_t> out(size);
    ASSERT_TRUE(mem->copy_to_host(3, out.data(), size).ok());
    EXPECT_EQ(in, out) << size;
  }
  std::vector<std::uint8_t> big(16);
  auto outside = mem->copy_to_host(5 * kMiB, big.data(), 16);
  EXPECT_EQ(Errc::InvalidArgument, outside.code());
  EXPECT_NE(std::string::npos, outside.message().find("outside the view")) << outside.message();
}

TEST_F(CudaMemoryTest, ConcurrentCallersOnOneAllocation) {
  // The guide's cuda_copy gate: three unaligned sizes, eight callers, four rounds each.
  constexpr std::uint64_t kSizes[] = {4093, 65539, 1048573};
  constexpr int kCallers = 8, kRounds = 4;
  auto mem = cuda::CudaMemory::allocate(0, kCallers * 2 * kMiB);
  ASSERT_TRUE(mem.ok());
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < kRounds; ++round) {
        for (std::uint64_t size : kSizes) {
          const auto in = pattern(size, c * 7 + round);
          std::vector<std::uint8_t> out(size);
          const std::uint64_t at = c * 2 * kMiB + 1;
          if (!mem->copy_from_host(at, in.data(), size).ok() ||
              !mem->copy_to_host(at, out.data(), size).ok() || in != out) {
            bad++;
          }
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(0, bad.load());
}

TEST_F(CudaMemoryTest, AliasesShareOneOwner) {
  auto mem = cuda::CudaMemory::allocate(0, 1 * kMiB);
  ASSERT_TRUE(mem.ok());
  auto view = mem->view(4096, 8192);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(view->same_allocation(*mem));
  auto adopted = cuda::CudaMemory::from_raw_parts(static_cast<char*>(mem->data()) + 100, 200);
  ASSERT_TRUE(adopted.ok()) << adopted.status().to_string();
  EXPECT_TRUE(adopted->same_allocation(*mem));
  EXPECT_EQ(100u, adopted->offset());
  EXPECT_EQ(Errc::InvalidArgument, mem->view(1 * kMiB - 10, 11).status().code());
  // The last view keeps the allocation: writing through an alias after the first is gone.
  cuda::CudaMemory keep = *view;
  *mem = cuda::CudaMemory();
  *adopted = cuda::CudaMemory();
  const auto in = pattern(8192, 3);
  EXPECT_TRUE(keep.copy_from_host(0, in.data(), in.size()).ok());
}

TEST_F(CudaMemoryTest, FromRawPartsRefusesWhatIsNotDeviceMemoryOfOneAllocation) {
  std::vector<char> pageable(4096);
  auto host = cuda::CudaMemory::from_raw_parts(pageable.data(), 4096);
  EXPECT_EQ(Errc::InvalidArgument, host.status().code());
  EXPECT_NE(std::string::npos, host.status().message().find("not CUDA memory"));
  void* pinned = nullptr;
  CU_OK(cuMemHostAlloc(&pinned, 4096, 0));
  auto p = cuda::CudaMemory::from_raw_parts(pinned, 4096);
  EXPECT_NE(std::string::npos, p.status().message().find("pinned host memory"))
      << p.status().message();
  CU_OK(cuMemFreeHost(pinned));
  CUdeviceptr managed = 0;
  CU_OK(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
  auto m = cuda::CudaMemory::from_raw_parts(reinterpret_cast<void*>(managed), 4096);
  EXPECT_NE(std::string::npos, m.status().message().find("managed")) << m.status().message();
  CU_OK(cuMemFree(managed));
  CUdeviceptr d = 0;
  CU_OK(cuMemAlloc(&d, 8192));
  auto past = cuda::CudaMemory::from_raw_parts(reinterpret_cast<void*>(d + 4096), 8192);
  EXPECT_NE(std::string::npos, past.status().message().find("extends past its allocation"))
      << past.status().message();
  // Memory of another context than the device's primary one.
  CUcontext other = nullptr;
  CU_OK(cuCtxCreate(&other, nullptr, 0, dev_));
  CUdeviceptr foreign = 0;
  CU_OK(cuMemAlloc(&foreign, 4096));
  auto f = cuda::CudaMemory::from_raw_parts(reinterpret_cast<void*>(foreign), 4096);
  EXPECT_NE(std::string::npos, f.status().message().find("context other than device 0's primary"))
      << f.status().message();
  CU_OK(cuMemFree(foreign));
  CU_OK(cuCtxDestroy(other));
  CU_OK(cuCtxSetCurrent(ctx_));
  // Adopted memory is never freed by OrbiTE: the owner is released, the memory stays.
  auto owner = std::make_shared<int>(7);
  {
    auto ok = cuda::CudaMemory::from_raw_parts(reinterpret_cast<void*>(d), 8192, owner);
    ASSERT_TRUE(ok.ok()) << ok.status().to_string();
    EXPECT_EQ(2, owner.use_count());
  }
  EXPECT_EQ(1, owner.use_count());
  CU_OK(cuMemFree(d));
}

TEST_F(CudaMemoryTest, ACopyFailingOnTheDeviceIsReportedAndItsStagingReused) {
  if (!on_softcuda()) GTEST_SKIP() << "fault injection needs softcuda";
  auto mem = cuda::CudaMemory::allocate(0, 1 * kMiB);
  ASSERT_TRUE(mem.ok());
  std::vector<char> buf(4096, 'x');
  ASSERT_EQ(0, softcuda::control("fail_copy 1 CUDA_ERROR_LAUNCH_FAILED"));
  auto st = mem->copy_from_host(0, buf.data(), buf.size());
  EXPECT_EQ(Errc::Internal, st.code());
  EXPECT_NE(std::string::npos, st.message().find("CUDA_ERROR_LAUNCH_FAILED")) << st.message();
  // The drain proved the stream idle: the allocation is usable, nothing was retained.
  EXPECT_TRUE(mem->copy_from_host(0, buf.data(), buf.size()).ok());
  EXPECT_TRUE(mem->allocation()->fenced().ok());
}

TEST_F(CudaMemoryTest, AnUnprovenDrainFencesTheAllocationAndRetainsItsStaging) {
  if (!on_softcuda()) GTEST_SKIP() << "fault injection needs softcuda";
  auto mem = cuda::CudaMemory::allocate(0, 1 * kMiB);
  ASSERT_TRUE(mem.ok());
  const std::size_t retained_before = cuda::retained_resources().size();
  std::vector<char> buf(4096, 'y');
  ASSERT_EQ(0, softcuda::control("fail cuMemcpyHtoDAsync 1 CUDA_ERROR_UNKNOWN"));
  ASSERT_EQ(0, softcuda::control("fail cuStreamSynchronize every 1 CUDA_ERROR_UNKNOWN"));
  auto st = mem->copy_from_host(0, buf.data(), buf.size());
  EXPECT_EQ(Errc::Unquiesced, st.code()) << st.message();
  EXPECT_EQ(Errc::Unquiesced, mem->allocation()->fenced().code());
  EXPECT_EQ(Errc::Unquiesced, mem->copy_to_host(0, buf.data(), 16).code());
  EXPECT_GT(cuda::retained_resources().size(), retained_before);
  // Dropping the last view keeps the fenced allocation for good (listed as retained).
  const std::size_t with_staging = cuda::retained_resources().size();
  *mem = cuda::CudaMemory();
  EXPECT_GT(cuda::retained_resources().size(), with_staging);
}

TEST_F(CudaMemoryTest, ATimedOutCopyGoesOnAndLeavesOnlyStagingBehind) {
  if (!on_softcuda()) GTEST_SKIP() << "fault injection needs softcuda";
  auto mem = cuda::CudaMemory::allocate(0, 1 * kMiB);
  ASSERT_TRUE(mem.ok());
  std::vector<char> buf(4096, 'z');
  ASSERT_EQ(0, softcuda::control("hang"));
  auto st = mem->copy_from_host(0, buf.data(), buf.size(), 30ms);
  EXPECT_EQ(Errc::Timeout, st.code()) << st.message();
  ASSERT_EQ(0, softcuda::control("release"));
  std::vector<char> back(4096);
  EXPECT_TRUE(mem->copy_to_host(0, back.data(), back.size()).ok());
  EXPECT_EQ(buf, back);  // the parked copy finished in order before this one
}

// Batched jobs (peer copies) go onto the allocation's stream back to back and finish together;
// any other job runs alone, after them.
TEST_F(CudaMemoryTest, BatchedCopiesShareTheStreamAndOthersRunAlone) {
  if (!on_softcuda()) GTEST_SKIP() << "holding the stream needs softcuda";
  auto dev = cuda::Allocation::allocate_device(0, 1 * kMiB);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  auto host = cuda::Allocation::allocate_pinned(3 * 4096, 0);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  ASSERT_TRUE((*dev)->memset(0, 3 * 4096, 0x5a, Deadline::after(10s)).ok());
  auto job = [&](int i, bool batched) {
    auto j = std::make_shared<cuda::CopyJob>();
    j->direction = cuda::CopyJob::Direction::ToHost;
    j->offset = static_cast<std::uint64_t>(i) * 4096;
    j->host = (*host)->base() + static_cast<std::size_t>(i) * 4096;
    j->length = 4096;
    j->batched = batched;
    return j;
  };
  auto a = job(0, true), b = job(1, true), c = job(2, false);
  ASSERT_EQ(0, softcuda::control("hang"));  // the first copy holds the stream
  ASSERT_TRUE((*dev)->submit(a).ok());
  ASSERT_TRUE((*dev)->submit(b).ok());
  ASSERT_TRUE((*dev)->submit(c).ok());
  (*dev)->advance();
  EXPECT_EQ(a->state.load(), 1) << "the first batched copy is on the stream";
  EXPECT_EQ(b->state.load(), 1) << "a second batched copy joined it";
  EXPECT_EQ(c->state.load(), 0) << "an unbatched copy waits for the stream to be its own";
  ASSERT_EQ(0, softcuda::control("release"));
  ASSERT_TRUE((*dev)->wait(*c, Deadline::after(10s)).ok());
  EXPECT_TRUE(a->finished() && b->finished());
  for (int i = 0; i < 3 * 4096; ++i) {
    ASSERT_EQ(static_cast<unsigned char>((*host)->base()[i]), 0x5a) << "byte " << i;
  }
}

// A producer kernel still running when its stream is handed over.
class Producer {
 public:
  explicit Producer(CUstream stream) : stream_(stream) {
    std::ifstream in(ORBITE_SOURCE_DIR "/tests/gpu/kernels.ptx");
    std::stringstream ss;
    ss << in.rdbuf();
    ptx_ = ss.str();
    ok_ = cuModuleLoadData(&module_, ptx_.c_str()) == CUDA_SUCCESS &&
          cuModuleGetFunction(&fill_, module_, "orbite_delay_fill_u32") == CUDA_SUCCESS;
  }
  ~Producer() {
    if (module_ != nullptr) cuModuleUnload(module_);
  }
  CUresult fill(void* dst, std::uint32_t value, std::uint64_t count, std::uint64_t delay_ns) {
    auto d = reinterpret_cast<CUdeviceptr>(dst);
    void* params[] = {&d, &value, &count, &delay_ns};
    return cuLaunchKernel(fill_, 8, 1, 1, 128, 1, 1, 0, stream_, params, nullptr);
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  CUstream stream_;
  std::string ptx_;
  CUmodule module_ = nullptr;
  CUfunction fill_ = nullptr;
  bool ok_ = false;
};

TEST_F(CudaMemoryTest, ReadinessWaitsForTheProducerOnceAndSharesAcrossAliases) {
  auto mem = cuda::CudaMemory::allocate(0, 64 * 1024);
  ASSERT_TRUE(mem.ok());
  CUstream producer_stream = nullptr;
  CU_OK(cuStreamCreate(&producer_stream, CU_STREAM_NON_BLOCKING));
  Producer producer(producer_stream);
  ASSERT_TRUE(producer.ok());
  CU_OK(producer.fill(mem->data(), 0xabcd1234u, 16384, 50'000'000));  // 50 ms
  auto owner = std::make_shared<int>(1);
  ASSERT_TRUE(mem->record_producer_stream(producer_stream, owner).ok());
  EXPECT_EQ(2, owner.use_count());
  const long long syncs = stat("event_synchronize_calls");
  // A copy through an alias: it waits for the kernel (the bytes are the producer's), once.
  auto alias = cuda::CudaMemory::from_raw_parts(mem->data(), 64 * 1024);
  ASSERT_TRUE(alias.ok());
  std::vector<std::uint32_t> out(16384);
  ASSERT_TRUE(alias->copy_to_host(0, out.data(), 64 * 1024).ok());
  EXPECT_EQ(0xabcd1234u, out.front());
  EXPECT_EQ(0xabcd1234u, out.back());
  if (on_softcuda()) {
    EXPECT_EQ(syncs + 1, stat("event_synchronize_calls"));
  }
  EXPECT_EQ(1, owner.use_count());  // the producer's inputs were released at the wait
  ASSERT_TRUE(mem->copy_to_host(0, out.data(), 16).ok());
  if (on_softcuda()) {
    EXPECT_EQ(syncs + 1, stat("event_synchronize_calls"));  // consumed: waited once only
  }
  CU_OK(cuStreamDestroy(producer_stream));
}

TEST_F(CudaMemoryTest, ReadinessRefusesForeignCapturingAndUnresolvableStreams) {
  auto mem = cuda::CudaMemory::allocate(0, 4096);
  ASSERT_TRUE(mem.ok());
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  auto capturing = mem->record_producer_stream(s);
  EXPECT_EQ(Errc::InvalidArgument, capturing.code());
  EXPECT_NE(std::string::npos, capturing.message().find("capturing")) << capturing.message();
  CUgraph g = nullptr;
  CU_OK(cuStreamEndCapture(s, &g));
  CU_OK(cuGraphDestroy(g));
  CUcontext other = nullptr;
  CU_OK(cuCtxCreate(&other, nullptr, 0, dev_));
  CUstream foreign = nullptr;
  CU_OK(cuStreamCreate(&foreign, CU_STREAM_NON_BLOCKING));
  auto wrong = mem->record_producer_stream(foreign);
  EXPECT_EQ(Errc::InvalidArgument, wrong.code());
  EXPECT_NE(std::string::npos, wrong.message().find("belongs to context")) << wrong.message();
  // The default stream resolves on this thread, whose current context is now the other one.
  auto default_stream = mem->record_producer_stream(nullptr);
  EXPECT_NE(std::string::npos, default_stream.message().find("default stream"))
      << default_stream.message();
  CU_OK(cuStreamDestroy(foreign));
  CU_OK(cuCtxDestroy(other));
  CU_OK(cuCtxSetCurrent(ctx_));
  EXPECT_TRUE(mem->record_producer_stream(nullptr).ok());  // the legacy stream of ctx_
  CU_OK(cuStreamDestroy(s));
}

TEST_F(CudaMemoryTest, AnUnprovenRecordFencesTheAllocation) {
  if (!on_softcuda()) GTEST_SKIP() << "fault injection needs softcuda";
  auto mem = cuda::CudaMemory::allocate(0, 4096);
  ASSERT_TRUE(mem.ok());
  ASSERT_EQ(0, softcuda::control("fail cuEventRecord 1 CUDA_ERROR_UNKNOWN"));
  auto owner = std::make_shared<int>(2);
  auto st = mem->record_producer_stream(nullptr, owner);
  EXPECT_EQ(Errc::Unquiesced, st.code()) << st.message();
  EXPECT_EQ(2, owner.use_count());  // the producer's inputs are kept
  std::vector<char> buf(16);
  EXPECT_EQ(Errc::Unquiesced, mem->copy_to_host(0, buf.data(), 16).code());
}

TEST_F(CudaMemoryTest, PinnedHostMemoryWaitsForItsProducerBeforeItIsFreed) {
  if (!on_softcuda()) GTEST_SKIP() << "fault injection needs softcuda";
  auto pinned = cuda::allocate_pinned_host(64 * 1024);
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  std::memset(pinned->data(), 0, 64 * 1024);
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_EQ(0, softcuda::control("hang"));
  CU_OK(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(pinned->data()), 5, 64 * 1024, s));
  ASSERT_TRUE(pinned->record_producer_stream(s).ok());
  std::atomic<bool> freed{false};
  std::thread dropper([&, p = std::move(*pinned)]() mutable {
    p = cuda::HostMemory();
    freed = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(freed.load());  // the final free waits for the pending generation
  ASSERT_EQ(0, softcuda::control("release"));
  dropper.join();
  EXPECT_TRUE(freed.load());
  CU_OK(cuStreamDestroy(s));
}

TEST_F(CudaMemoryTest, DeviceViewsOfPointers) {
  std::vector<char> host(64);
  auto h = cuda::device_view_of(host.data(), host.size());
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->has_value());
  auto mem = cuda::CudaMemory::allocate(0, 1 * kMiB);
  ASSERT_TRUE(mem.ok());
  auto d = cuda::device_view_of(static_cast<char*>(mem->data()) + 10, 100);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->has_value());
  EXPECT_EQ(mem->allocation(), (*d)->alloc);
  EXPECT_EQ(10u, (*d)->offset);
  auto past = cuda::device_view_of(static_cast<char*>(mem->data()) + 1 * kMiB - 10, 100);
  EXPECT_EQ(Errc::InvalidArgument, past.status().code());
}

// Host registrations are touched by the CPU and the kernel: device memory is refused there, with
// the kind to use named, and nothing is registered.
TEST_F(CudaMemoryTest, DeviceMemoryRegisteredAsHostIsRefused) {
  auto engine = TransferEngine::create(EngineConfig{});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto mem = cuda::CudaMemory::allocate(0, 1 * kMiB);
  ASSERT_TRUE(mem.ok());
  auto as_host = (*engine)->register_memory(static_cast<char*>(mem->data()) + 64, 4096);
  ASSERT_EQ(Errc::InvalidArgument, as_host.status().code());
  EXPECT_NE(as_host.status().message().find("register_memory[0]: kind Host, but data is CUDA "
                                            "device memory: register it as MemoryKind::Cuda"),
            std::string::npos)
      << as_host.status().to_string();
  auto as_cuda = (*engine)->register_memory(*mem);
  ASSERT_TRUE(as_cuda.ok()) << as_cuda.status().to_string();
  EXPECT_EQ(MemoryKind::Cuda, as_cuda->kind());
  std::vector<char> host(4096);
  EXPECT_TRUE((*engine)->register_memory(host.data(), host.size()).ok());
}

TEST_F(CudaMemoryTest, StagingPoolLendsBoundedChunksAndRunsTheSlabHook) {
  int slabs = 0;
  auto pool = cuda::StagingPool::create(3 * 65536, 65536, [&](cuda::StagingSlab& s) {
    slabs++;
    EXPECT_TRUE(s.pinned);
    return Status();
  });
  ASSERT_TRUE(pool.ok());
  std::vector<std::shared_ptr<cuda::StagingLease>> held;
  for (int i = 0; i < 3; ++i) {
    auto lease = (*pool)->try_take();
    ASSERT_TRUE(lease.ok());
    ASSERT_TRUE(*lease);
    held.push_back(*lease);
  }
  auto none = (*pool)->try_take();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);  // the bound
  EXPECT_EQ(1, slabs);
  held.pop_back();
  auto again = (*pool)->try_take();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again);
  EXPECT_EQ(1u, (*pool)->stats().refusals);
}

}  // namespace
}  // namespace orbite
