// Cost of the staging pool per chunk (issue 23): what a staged transfer pays for each chunk on
// top of moving its bytes.
//   - PoolLoan: try_take and return of one chunk from a warm pool (the bookkeeping alone).
//   - PoolLoanContended: the same from two threads sharing one pool.
//   - ChunkToHost / ChunkToDevice: one chunk's device copy as the pipeline does it (lease,
//     submit on the allocation's stream, wait for its event, return), beside
//   - HostMemcpy: a plain memcpy of the same bytes, the reference the copy is read against.
// The device cases need a CUDA driver: softcuda here (LD_LIBRARY_PATH=build/softcuda), whose
// copy engine is a CPU thread, so its figures are softcuda's, not a GPU's.
//
//   ninja -C build staging_bench &&
//     LD_LIBRARY_PATH=build/softcuda ./build/perf_tests/staging_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda/allocation.h"
#include "cuda/staging.h"

namespace orbite::cuda {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

std::shared_ptr<StagingPool> make_pool(std::uint64_t chunk) {
  auto pool = StagingPool::create(64 * kMiB, chunk);
  if (!pool.ok()) return nullptr;
  return *pool;
}

void PoolLoan(benchmark::State& state) {
  auto pool = make_pool(static_cast<std::uint64_t>(state.range(0)));
  if (!pool) return state.SkipWithError("StagingPool::create failed");
  for (auto _ : state) {
    auto lease = pool->try_take();
    if (!lease.ok() || !*lease) return state.SkipWithError("try_take failed");
    benchmark::DoNotOptimize((*lease)->data());
  }
  state.counters["pinned"] = pool->stats().pinned ? 1 : 0;
}
BENCHMARK(PoolLoan)->Arg(64 * 1024)->Arg(512 * 1024)->Arg(2 * 1024 * 1024);

// Two threads take and return chunks of one pool: the pool's lock under contention.
std::shared_ptr<StagingPool> g_shared_pool;
void PoolLoanContended(benchmark::State& state) {
  if (state.thread_index() == 0) g_shared_pool = make_pool(512 * 1024);
  for (auto _ : state) {
    auto lease = g_shared_pool->try_take();
    if (!lease.ok() || !*lease) return state.SkipWithError("try_take failed");
    benchmark::DoNotOptimize((*lease)->data());
  }
  if (state.thread_index() == 0) g_shared_pool.reset();
}
BENCHMARK(PoolLoanContended)->Threads(2);

void HostMemcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<std::byte> from(bytes, std::byte{1});
  std::vector<std::byte> to(bytes);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}
BENCHMARK(HostMemcpy)->Arg(64 * 1024)->Arg(512 * 1024)->Arg(2 * 1024 * 1024);

void chunk_copy(benchmark::State& state, CopyJob::Direction direction) {
  const auto chunk = static_cast<std::uint64_t>(state.range(0));
  auto device = Allocation::allocate_device(0, 4 * chunk);
  if (!device.ok()) {
    return state.SkipWithError(("no CUDA device: " + device.status().to_string()).c_str());
  }
  auto pool = make_pool(chunk);
  if (!pool) return state.SkipWithError("StagingPool::create failed");
  std::uint64_t k = 0;
  for (auto _ : state) {
    auto lease = pool->try_take();
    if (!lease.ok() || !*lease) return state.SkipWithError("try_take failed");
    auto job = std::make_shared<CopyJob>();
    job->direction = direction;
    job->offset = (k++ % 4) * chunk;
    job->host = (*lease)->data();
    job->length = chunk;
    Status s = (*device)->submit(job);
    if (s.ok()) s = (*device)->wait(*job, Deadline::after(std::chrono::seconds(10)));
    if (!s.ok()) return state.SkipWithError(s.to_string().c_str());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(chunk));
  state.counters["pinned"] = pool->stats().pinned ? 1 : 0;
}

void ChunkToHost(benchmark::State& state) {
  chunk_copy(state, CopyJob::Direction::ToHost);
}
void ChunkToDevice(benchmark::State& state) {
  chunk_copy(state, CopyJob::Direction::ToDevice);
}
BENCHMARK(ChunkToHost)->Arg(64 * 1024)->Arg(512 * 1024)->Arg(2 * 1024 * 1024)->UseRealTime();
BENCHMARK(ChunkToDevice)->Arg(64 * 1024)->Arg(512 * 1024)->Arg(2 * 1024 * 1024)->UseRealTime();

}  // namespace
}  // namespace orbite::cuda
