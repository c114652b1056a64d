// orbite-cuda-probe SCENARIO: device memory through OrbiTE's transports between real processes,
// on softcuda (or NVIDIA's driver in the GPU gate). Every byte is checked through the driver
// (device memory is never read by the CPU), and each rank prints "rank R: PASS SCENARIO" and
// "rank R: route ok" when the forced transport (P2P_TEST_TRANSPORT) carried the bytes.
//
//   putget      rank 0 puts to and gets from rank 1's region; CUDA_TEST_LOCAL and
//               CUDA_TEST_REMOTE are host, cuda or pinned; single ranges and a batch
//   sendrecv    rank 0 (CUDA_TEST_LOCAL) and rank 1 (CUDA_TEST_REMOTE) exchange messages from 8 B
//               (bounced) to several MiB (the exposed rendezvous), both ways
//   allreduce   float sums in device buffers (in place and not) on every rank
//   readiness   a producer kernel still running when its memory is put: the bytes are the
//               kernel's, and the engine waited once (softcuda's synchronization count)
//   copy_faults copies failing at the requester and at the owner reach the caller; an unproven
//               drain fences the allocation (Unquiesced) and is listed as retained
//   ipc         (nvlink) forged descriptors refused by the owner with nothing written, host
//               memory refused, one mapping for many accesses, closed by the owner's unregister
//   ipc_unquiesced  (nvlink, softcuda) an importer's hung copy keeps the owner's unregister
//               Unquiesced, and once it goes on unregister succeeds
//   nvlink_messages  (nvlink) isend/irecv forced onto nvlink: read device to device over
//               cuda_ipc at every size; a host buffer refused
//   gpudirect   (rdma, cuda_memory direct) putget from device memory through GPU MRs, counted
//               by route (CUDA_TEST_GDR_ROUTE), unstaged; a put and a get into device memory on
//               the private grant path, unstaged, every grant's objects destroyed
//   private_faults  (rdma, cuda_memory direct) rank 1 withholds a receipt or writes past its
//               private grant (CUDA_TEST_RANK1_HOOKS): revoked or refused, objects destroyed
#include <cuda.h>
#include <orbite/bootstrap.h>
#include <orbite/communicator.h>
#include <orbite/cuda.h>
#include <softcuda/control.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "cuda_probe.h"

namespace orbite::probe {

std::string env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// Rank 1 registers `remote` and hands its descriptor to rank 0.
RemoteRegion share_region(Context& c, MemoryRegion& region) {
  if (c.rank == 1) {
    send_string(c, region.export_descriptor().bytes(), 0, 1);
    return RemoteRegion();
  }
  auto r = RemoteRegion::from_bytes(recv_string(c, 1, 1));
  check_ok(r.status(), "descriptor");
  return *r;
}

bool g_close_retains = false;

long long softcuda_stat(const std::string& name) {
  if (!softcuda::loaded()) return -1;
  const std::string s = softcuda::stats();
  const std::string key = "\"" + name + "\":";
  const auto at = s.find(key);
  return at == std::string::npos ? -1 : std::stoll(s.substr(at + key.size()));
}

long long live_ipc_imports() {
  return softcuda_stat("live_ipc_imports");
}

void putget(Context& c) {
  const std::string local_kind = env("CUDA_TEST_LOCAL", "cuda");
  const std::string remote_kind = env("CUDA_TEST_REMOTE", "cuda");
  const std::uint64_t sizes[] = {1, 4097, kMiB + 3, 2 * kMiB + 4095};
  TransferEngine& e = c.comm.engine();
  Memory mine(c.rank == 0 ? local_kind : remote_kind, kRegion);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register " + (c.rank == 0 ? local_kind : remote_kind));
  if (c.rank == 1) mine.fill(4 * kMiB, 4 * kMiB, 11);  // what rank 0 gets
  barrier(c, "filled");
  RemoteRegion remote = share_region(c, *region);
  if (c.rank == 0) {
    std::uint64_t at = 0;
    for (std::uint64_t n : sizes) {
      const std::string what = " of " + std::to_string(n) + " bytes";
      mine.fill(at, n, 100 + n);
      Request put = accepted(e.put(*region, at, remote, at + 1, n, c.options), "put" + what);
      wait_ok(put, "put" + what);
      Request get = accepted(e.get(*region, 4 * kMiB + at, remote, 4 * kMiB + at, n, c.options),
                             "get" + what);
      wait_ok(get, "get" + what);
      check(get.bytes() == n, "get moved " + std::to_string(get.bytes()) + " bytes");
      Bytes want(n);
      fill_pattern(want.data(), n, 11, at);
      Bytes got = mine.read(4 * kMiB + at, n);
      check(got == want, "get" + what + " brought other bytes");
      at += n + 7;
    }
    // A batch of three ranges, one request, from memory filled with one pattern.
    mine.fill(0, 2 * kMiB, 77);
    std::vector<TransferRange> ranges = {
        {0, 6 * kMiB, 1000}, {8192, 6 * kMiB + 4096, 70000}, {kMiB, 6 * kMiB + 200000, 600001}};
    Request batch = accepted(e.put(*region, remote, ranges, c.options), "batched put");
    wait_ok(batch, "batched put");
    signal_peer(c, 1, 2);
    await_peer(c, 1, 3);
  } else {
    await_peer(c, 0, 2);
    std::uint64_t at = 0;
    for (std::uint64_t n : sizes) {
      mine.expect(at + 1, n, 100 + n, "put of " + std::to_string(n) + " bytes at the owner");
      at += n + 7;
    }
    mine.expect(6 * kMiB, 1000, 77, "batched range 0");
    mine.expect(6 * kMiB + 4096, 70000, 77, "batched range 1", 8192);
    mine.expect(6 * kMiB + 200000, 600001, 77, "batched range 2", kMiB);
    signal_peer(c, 0, 3);
  }
  check_ok(region->unregister(), "unregister");
}

namespace {

void sendrecv(Context& c) {
  const std::string kind =
      c.rank == 0 ? env("CUDA_TEST_LOCAL", "cuda") : env("CUDA_TEST_REMOTE", "cuda");
  const std::uint64_t sizes[] = {8, 60000, 200 * kKiB + 1, 3 * kMiB + 5};
  Memory buf(kind, 4 * kMiB);
  const int peer = 1 - c.rank;
  for (int round = 0; round < 2; ++round) {
    const bool sending = (c.rank == 0) == (round == 0);
    for (std::uint64_t n : sizes) {
      const std::string what =
          "message of " + std::to_string(n) + " bytes, round " + std::to_string(round);
      const std::uint64_t seed = 1000 + n + round;
      if (sending) {
        buf.fill(0, n, seed);
        send(c, buf.data(), n, peer, 5, "send " + what);
      } else {
        const std::uint64_t got = recv(c, buf.data(), 4 * kMiB, peer, 5, "recv " + what);
        check(got == n, "received " + std::to_string(got) + " bytes of a " + what);
        buf.expect(0, n, seed, what);
        // A message read over cuda_ipc let go of the sender's buffer before it completed.
        if (env("CUDA_TEST_EXPECT_ROUTE", "") == std::string("nvlink-recv") && softcuda::loaded()) {
          check(live_ipc_imports() == 0, "the " + what + " left the sender's buffer mapped");
        }
      }
    }
  }
  if (env("CUDA_TEST_EXPECT_UNSTAGED", "") != std::string("1")) return;
  // GPUDirect messages (rdma.cuda_memory = direct): no staging on either side. A device rank's
  // two large sends were read from its own buffer on the private grant path (each torn down),
  // and its two large receives were read into GPU MRs of its buffer.
  const EngineStats s = c.comm.engine().stats();
  const RdmaStats rs = c.comm.engine().rdma_stats();
  check(s.staging_loans == 0,
        "GPUDirect messages borrowed " + std::to_string(s.staging_loans) + " staging chunks");
  // Its two large receives (200 KiB + 1 and 3 MiB + 5) were read over rdma.
  check(s.of(Transport::Rdma).bytes_received >= 200 * kKiB + 3 * kMiB + 6,
        "rdma carried " + std::to_string(s.of(Transport::Rdma).bytes_received) +
            " bytes of this rank's receives");
  if (kind == "cuda") {
    check(rs.private_grants >= 2 && rs.private_teardowns == rs.private_grants,
          std::to_string(rs.private_grants) + " private grants of the device sends, " +
              std::to_string(rs.private_teardowns) + " torn down");
    check(rs.dmabuf_registrations >= 4, std::to_string(rs.dmabuf_registrations) +
                                            " dma-buf registrations for two exposed sends "
                                            "and two receives");
  } else {
    check(rs.private_grants == 0 && rs.dmabuf_registrations == 0,
          "a host-memory rank granted or registered device memory");
  }
  // A host peer announces its 200 KiB + 1 message with its write's request (RtsRma): this
  // device receive declines the write (a refusal the send survives) and reads the message.
  const std::string peer_kind =
      c.rank == 0 ? env("CUDA_TEST_REMOTE", "cuda") : env("CUDA_TEST_LOCAL", "cuda");
  if (kind == "cuda" && peer_kind == "host") {
    check(rs.grant_nacks >= 1, "the host peer's announced write was not declined");
  }
  std::printf("rank %d: messages unstaged\n", c.rank);
}

void allreduce(Context& c) {
  for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{1} << 20}) {
    Memory in("cuda", count * 4), out("cuda", count * 4);
    std::vector<float> host(count);
    for (std::uint64_t i = 0; i < count; ++i) host[i] = static_cast<float>((c.rank + 1) * (i % 97));
    in.write(0, reinterpret_cast<std::byte*>(host.data()), count * 4);
    Request r =
        accepted(c.comm.all_reduce(in.data(), out.data(), count, DataType::Float32, ReduceOp::Sum),
                 "all_reduce");
    wait_ok(r, "all_reduce of " + std::to_string(count));
    Request inplace =
        accepted(c.comm.all_reduce(in.data(), in.data(), count, DataType::Float32, ReduceOp::Sum),
                 "all_reduce in place");
    wait_ok(inplace, "all_reduce in place");
    const float ranks = static_cast<float>(c.size * (c.size + 1) / 2);
    for (Memory* m : {&out, &in}) {
      Bytes b = m->read(0, count * 4);
      const float* f = reinterpret_cast<const float*>(b.data());
      for (std::uint64_t i = 0; i < count; ++i) {
        if (f[i] != ranks * static_cast<float>(i % 97)) {
          fail("all_reduce of " + std::to_string(count) + ": element " + std::to_string(i) +
               " is " + std::to_string(f[i]));
        }
      }
    }
  }
}

std::string kernels_ptx() {
  std::ifstream in(ORBITE_SOURCE_DIR "/tests/gpu/kernels.ptx");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Pinned host memory handed to isend: its producer (a delayed kernel into device memory, then a
// copy into the pinned buffer on the same stream) has finished before a byte of it is sent.
void pinned_send_readiness(Context& c) {
  constexpr std::uint64_t kBytes = 256 * 1024 * 4;
  constexpr int kTag = 77;
  std::vector<std::uint32_t> got(kBytes / 4, 0);
  if (c.rank == 1) {
    Request r = accepted(c.comm.irecv(got.data(), kBytes, 0, kTag, c.options), "irecv pinned");
    wait_ok(r, "receive of the pinned producer's buffer");
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != 0xfeedf00du) {
        fail("pinned word " + std::to_string(i) + " is " + std::to_string(got[i]) +
             ": the send did not wait for the producer");
      }
    }
    return;
  }
  auto pinned = cuda::allocate_pinned_host(kBytes);
  check_ok(pinned.status(), "allocate_pinned_host");
  std::memset(pinned->data(), 5, kBytes);  // stale bytes the producer overwrites
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  check(cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
            cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS &&
            cuCtxSetCurrent(ctx) == CUDA_SUCCESS,
        "primary context");
  const std::string ptx = kernels_ptx();
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr scratch = 0;
  check(cuModuleLoadData(&mod, ptx.c_str()) == CUDA_SUCCESS &&
            cuModuleGetFunction(&fn, mod, "orbite_delay_fill_u32") == CUDA_SUCCESS &&
            cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
            cuMemAlloc(&scratch, kBytes) == CUDA_SUCCESS,
        "producer");
  std::uint32_t value = 0xfeedf00du;
  std::uint64_t words = kBytes / 4, delay = 200'000'000;  // 200 ms: the send is posted first
  void* params[] = {&scratch, &value, &words, &delay};
  check(cuLaunchKernel(fn, 64, 1, 1, 256, 1, 1, 0, stream, params, nullptr) == CUDA_SUCCESS &&
            cuMemcpyDtoHAsync(pinned->data(), scratch, kBytes, stream) == CUDA_SUCCESS,
        "launch and copy into pinned memory");
  check_ok(pinned->record_producer_stream(stream), "record_producer_stream (pinned)");
  Request s = accepted(c.comm.isend(pinned->data(), kBytes, 1, kTag, c.options), "isend pinned");
  wait_ok(s, "send of the pinned producer's buffer");
  cuMemFree(scratch);
  cuStreamDestroy(stream);
  cuModuleUnload(mod);
  cuDevicePrimaryCtxRelease(dev);
}

void readiness(Context& c) {
  constexpr std::uint64_t kWords = 256 * 1024;
  TransferEngine& e = c.comm.engine();
  Memory mine(c.rank == 0 ? "cuda" : "host", kWords * 4);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register");
  RemoteRegion remote = share_region(c, *region);
  if (c.rank == 0) {
    mine.fill(0, kWords * 4, 5);  // stale bytes the producer overwrites
    CUcontext ctx = nullptr;
    CUdevice dev = 0;
    check(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
              cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS &&
              cuCtxSetCurrent(ctx) == CUDA_SUCCESS,
          "primary context");
    const std::string ptx = kernels_ptx();
    CUmodule mod = nullptr;
    CUfunction fn = nullptr;
    CUstream stream = nullptr;
    check(cuModuleLoadData(&mod, ptx.c_str()) == CUDA_SUCCESS &&
              cuModuleGetFunction(&fn, mod, "orbite_delay_fill_u32") == CUDA_SUCCESS &&
              cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS,
          "producer kernel");
    auto dst = reinterpret_cast<CUdeviceptr>(mine.data());
    std::uint32_t value = 0x5eed5eedu;
    std::uint64_t words = kWords, delay = 200'000'000;  // 200 ms: the put is issued long before
    void* params[] = {&dst, &value, &words, &delay};
    check(cuLaunchKernel(fn, 64, 1, 1, 256, 1, 1, 0, stream, params, nullptr) == CUDA_SUCCESS,
          "launch");
    check_ok(mine.device().record_producer_stream(stream), "record_producer_stream");
    const std::string before = softcuda::stats();
    Request put = accepted(e.put(*region, 0, remote, 0, kWords * 4, c.options), "put");
    wait_ok(put, "put of the producer's memory");
    if (softcuda::loaded()) {
      auto syncs = [](const std::string& s) {
        const auto at = s.find("\"event_synchronize_calls\":");
        return std::stoll(s.substr(at + 26));
      };
      check(syncs(softcuda::stats()) == syncs(before) + 1,
            "the engine synchronized the readiness event " +
                std::to_string(syncs(softcuda::stats()) - syncs(before)) + " times, not once");
    }
    cuStreamDestroy(stream);
    cuModuleUnload(mod);
    signal_peer(c, 1, 2);
  } else {
    await_peer(c, 0, 2);
    Bytes b = mine.read(0, kWords * 4);
    const auto* w = reinterpret_cast<const std::uint32_t*>(b.data());
    for (std::uint64_t i = 0; i < kWords; ++i) {
      if (w[i] != 0x5eed5eedu) {
        fail("word " + std::to_string(i) + " is " + std::to_string(w[i]) +
             ": the put did not wait for the producer");
      }
    }
  }
  barrier(c, "checked");
  check_ok(region->unregister(), "unregister");
  pinned_send_readiness(c);
}

void copy_faults(Context& c) {
  TransferEngine& e = c.comm.engine();
  Memory mine("cuda", 2 * kMiB);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register");
  RemoteRegion remote = share_region(c, *region);
  if (c.rank == 0) {
    mine.fill(0, 2 * kMiB, 3);
    // 1. The owner's copy into its device memory fails: the put fails, naming it.
    signal_peer(c, 1, 10);
    await_peer(c, 1, 11);
    expect_failure(e.put(*region, 0, remote, 0, 64 * kKiB, c.options), {Errc::Internal},
                   "put whose owner copy fails");
    // 2. This rank's own copy fails (drained: the allocation stays usable).
    check(softcuda::control("fail_copy 1 CUDA_ERROR_LAUNCH_FAILED") == 0, "arm fail_copy");
    expect_failure(e.put(*region, 0, remote, 0, 64 * kKiB, c.options), {Errc::Internal},
                   "put whose local copy fails");
    Request ok = accepted(e.put(*region, 0, remote, 0, 2 * kMiB, c.options), "put after faults");
    wait_ok(ok, "put after the faults");
    // 3. A copy whose drain fails too: Unquiesced, the allocation fenced and retained.
    check(softcuda::control("fail cuStreamSynchronize every 1 CUDA_ERROR_UNKNOWN") == 0, "arm");
    check(softcuda::control("fail_copy 1 CUDA_ERROR_LAUNCH_FAILED") == 0, "arm fail_copy");
    expect_failure(e.put(*region, 0, remote, 0, 64 * kKiB, c.options), {Errc::Unquiesced},
                   "put whose copy cannot be drained");
    softcuda::control("clear");
    expect_failure(e.put(*region, 0, remote, 0, 64 * kKiB, c.options), {Errc::Unquiesced},
                   "put from a fenced allocation");
    check(!cuda::retained_resources().empty(), "nothing listed as retained");
    signal_peer(c, 1, 12);
  } else {
    await_peer(c, 0, 10);
    check(softcuda::control("fail_copy 1 CUDA_ERROR_LAUNCH_FAILED") == 0, "arm fail_copy");
    signal_peer(c, 0, 11);
    await_peer(c, 0, 12);
    mine.expect(0, 2 * kMiB, 3, "the put after the faults");
  }
  barrier(c, "faults done");
  if (c.rank == 1) check_ok(region->unregister(), "unregister");
}

// ipc (cuda_ipc only): rank 0 reaches rank 1's device region. Forged descriptors (a stale
// generation, a length beyond the region) are refused by the owner with nothing written; host
// memory is not carried, the refusal saying why; a put maps the owner's allocation once, and the
// owner's unregister closes that mapping before it returns; the stale descriptor is refused.
void ipc(Context& c) {
  TransferEngine& e = c.comm.engine();
  Memory mine("cuda", kRegion);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register");
  if (c.rank == 1) mine.fill(0, kRegion, 5);
  barrier(c, "filled");
  RemoteRegion remote = share_region(c, *region);
  if (c.rank == 0) {
    mine.fill(0, kMiB, 9);
    expect_failure(e.put(*region, 0, tampered(remote, "generation", remote.generation() + 1), 0,
                         kMiB, c.options),
                   {Errc::InvalidArgument}, "put with a forged generation");
    expect_failure(
        e.put(*region, 0, tampered(remote, "length", 2 * kRegion), kRegion, kMiB, c.options),
        {Errc::InvalidArgument}, "put beyond the owner's region");
    expect_failure(
        e.get(*region, 0, tampered(remote, "region", remote.region_id() + 100), 0, kMiB, c.options),
        {Errc::InvalidArgument, Errc::Unavailable}, "get from a forged region id");
    std::vector<std::byte> host(kMiB);
    auto host_region = e.register_memory(host.data(), host.size());
    check_ok(host_region.status(), "register host memory");
    auto refused = e.put(*host_region, 0, remote, 0, 4096, c.options);
    Status st = refused.ok() ? refused->wait(std::chrono::seconds(60)) : refused.status();
    check(st.code() == Errc::Unavailable &&
              st.message().find("does not carry host memory") != std::string::npos,
          "host memory over cuda_ipc: " + st.to_string());
    check_ok(host_region->unregister(), "unregister host memory");
    check(live_ipc_imports() <= 0, "a refused access mapped the owner's memory");
    signal_peer(c, 1, 2);
    await_peer(c, 1, 3);  // the owner saw nothing written
    Request put = accepted(e.put(*region, 0, remote, 0, kMiB, c.options), "put");
    wait_ok(put, "put");
    Request get = accepted(e.get(*region, kMiB, remote, kMiB, kMiB, c.options), "get");
    wait_ok(get, "get");
    mine.expect(kMiB, kMiB, 5, "get", kMiB);
    if (softcuda::loaded()) {
      check(live_ipc_imports() == 1,
            "mapped " + std::to_string(live_ipc_imports()) + " times, not once, for two accesses");
    }
    signal_peer(c, 1, 4);
    await_peer(c, 1, 5);  // the owner unregistered
    if (softcuda::loaded()) {
      check(live_ipc_imports() == 0,
            "the owner's unregister left " + std::to_string(live_ipc_imports()) + " mappings open");
    }
    expect_failure(e.put(*region, 0, remote, 0, kMiB, c.options), {Errc::InvalidArgument},
                   "put to an unregistered region");
    signal_peer(c, 1, 6);
  } else {
    await_peer(c, 0, 2);
    mine.expect(0, kRegion, 5, "the owner's region after the forged accesses");
    signal_peer(c, 0, 3);
    await_peer(c, 0, 4);
    mine.expect(0, kMiB, 9, "the put");
    check_ok(region->unregister(std::chrono::seconds(30)), "unregister while a peer maps it");
    signal_peer(c, 0, 5);
    await_peer(c, 0, 6);
  }
  if (c.rank == 0) check_ok(region->unregister(), "unregister");
}

// ipc_unquiesced (cuda_ipc, softcuda only): an importer whose copy hangs keeps the owner's
// unregister Unquiesced within its bound, the registration kept; once the copy goes on, the
// importer lets go of the mapping and unregister succeeds.
void ipc_unquiesced(Context& c) {
  TransferEngine& e = c.comm.engine();
  Memory mine("cuda", kMiB);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register");
  barrier(c, "registered");
  RemoteRegion remote = share_region(c, *region);
  if (c.rank == 0) {
    check(softcuda::control("hang") == 0, "arm softcuda's hang");
    Request put = accepted(e.put(*region, 0, remote, 0, 4096, c.options), "put");
    // The grant came back and the copy is on the stream, held (softcuda's "held"), before the
    // owner unregisters: the mapping pin is then taken.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto held = [] {
      const std::string st = softcuda::stats();
      const auto at = st.find("\"held\":");
      return at == std::string::npos ? 0LL : std::stoll(st.substr(at + 7));
    };
    while (held() < 1 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    check(held() >= 1, "the put's copy never reached the stream");
    signal_peer(c, 1, 2);
    await_peer(c, 1, 3);  // the owner's unregister ran out
    check(softcuda::control("release") == 0, "release softcuda's hang");
    wait_ok(put, "the put once its copy went on");
    signal_peer(c, 1, 4);
    await_peer(c, 1, 5);
    check_ok(region->unregister(), "unregister");
  } else {
    await_peer(c, 0, 2);
    const Status st = region->unregister(std::chrono::milliseconds(500));
    check(st.code() == Errc::Unquiesced && st.message().find("mapping") != std::string::npos,
          "unregister while the importer's copy hangs: " + st.to_string());
    signal_peer(c, 0, 3);
    await_peer(c, 0, 4);
    check_ok(region->unregister(std::chrono::seconds(30)), "unregister once the copy went on");
    signal_peer(c, 0, 5);
  }
}

void check_route(Context& c) {
  const EngineStats s = c.comm.engine().stats();
  if (env("CUDA_TEST_EXPECT_ROUTE", "") == "segment") {
    // The collectives went through the communicator's shared segment: no transport carried
    // their bytes (a few small messages of the scenario's own do remain).
    std::uint64_t sent = 0;
    for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Rdma, Transport::Nvlink}) {
      sent += s.of(t).bytes_sent;
    }
    check(sent < 64 * kKiB, "route: the engine sent " + std::to_string(sent) +
                                " bytes of collectives meant for the shared segment");
    std::printf("rank %d: route segment ok\n", c.rank);
    return;
  }
  if (c.options.transport == Transport::Unspec) {
    // Which transport the selection took for device memory on both ends (rank 0 moved them).
    // nvlink: rank 0's puts and gets; nvlink-recv: every rank's large receives (the receiver
    // reads the sender's buffer), beside shm's messages.
    const std::string want = env("CUDA_TEST_EXPECT_ROUTE", "");
    check(want == "nvlink" || want == "nvlink-recv",
          "CUDA_TEST_EXPECT_ROUTE=nvlink or nvlink-recv with an unspecified transport");
    if (want == "nvlink" && c.rank == 0) {
      check(s.of(Transport::Nvlink).bytes_sent > 0 && s.of(Transport::Nvlink).bytes_received > 0,
            "unspec: cuda_ipc carried no put or no get");
      check(s.staging_loans == 0, "unspec: device memory was staged");
    }
    if (want == "nvlink-recv") {
      check(s.of(Transport::Nvlink).bytes_received >= 3 * kMiB,
            "unspec: cuda_ipc carried " + std::to_string(s.of(Transport::Nvlink).bytes_received) +
                " bytes of this rank's receives");
    }
    std::printf("rank %d: unspec went over nvlink\n", c.rank);
    return;
  }
  const Transport t = c.options.transport;
  std::uint64_t others = 0;
  for (Transport o : {Transport::Tcp, Transport::Shm, Transport::Rdma}) {
    // cuda_ipc carries put/get only: the collectives and descriptors go over shm, small.
    if (o == Transport::Shm && t == Transport::Nvlink) {
      check(s.of(o).bytes_sent + s.of(o).bytes_received < 64 * kKiB,
            "route: shm carried " + std::to_string(s.of(o).bytes_sent + s.of(o).bytes_received) +
                " bytes beside cuda_ipc");
      continue;
    }
    if (o != t) others += s.of(o).frames_sent + s.of(o).frames_received;
  }
  if (t == Transport::Nvlink) check(s.staging_loans == 0, "route: cuda_ipc staged");
  // cuda_ipc's bytes are the requester's copies: the owner's engine never sees them.
  check(s.of(t).bytes_sent + s.of(t).bytes_received > 0 || (t == Transport::Nvlink && c.rank != 0),
        "route: " + std::string(to_string(t)) + " carried no byte");
  check(others == 0, "route: " + std::to_string(others) + " frames on other transports");
  std::printf("rank %d: route ok\n", c.rank);
  std::printf("rank %d: staging loans %llu\n", c.rank,
              static_cast<unsigned long long>(s.staging_loans));
}

}  // namespace
}  // namespace orbite::probe

int main(int argc, char** argv) {
  using namespace orbite::probe;
  const std::map<std::string, std::function<void(Context&)>> scenarios = {
      {"putget", putget},
      {"sendrecv", sendrecv},
      {"allreduce", allreduce},
      {"readiness", readiness},
      {"copy_faults", copy_faults},
      {"ipc", ipc},
      {"ipc_unquiesced", ipc_unquiesced},
      {"gpudirect", gpudirect},
      {"nvlink_messages", nvlink_messages},
      {"private_faults", private_faults},
      {"device_collectives", device_collectives},
      {"misstated_path", misstated_path},
      {"private_budget", private_budget},
      {"private_retained", private_retained}};
  if (argc != 2 || scenarios.count(argv[1]) == 0) {
    std::fprintf(stderr,
                 "usage: orbite-cuda-probe "
                 "putget|sendrecv|allreduce|readiness|copy_faults|ipc|ipc_unquiesced|gpudirect|"
                 "nvlink_messages|private_faults|device_collectives|misstated_path|private_budget|"
                 "private_retained\n");
    return 2;
  }
  const std::string name = argv[1];
  if (const char* r = std::getenv("ORBITE_RANK")) {
    set_rank_for_messages(std::atoi(r));
    // Rank 1's RDMA test hooks (private_faults), set before its engine reads them.
    const char* hooks = std::getenv("CUDA_TEST_RANK1_HOOKS");
    if (std::atoi(r) == 1 && hooks != nullptr) ::setenv("ORBITE_RDMA_TEST_HOOKS", hooks, 1);
    // Rank 0's own rdma.max_direct_bytes (private_budget).
    const char* budget = std::getenv("CUDA_TEST_RANK0_MAX_DIRECT_BYTES");
    if (std::atoi(r) == 0 && budget != nullptr) ::setenv("ORBITE_RDMA_MAX_DIRECT_BYTES", budget, 1);
  }
  orbite::TransferOptions options;
  const std::string t = env("P2P_TEST_TRANSPORT", "tcp");
  options.transport = t == "rdma"     ? orbite::Transport::Rdma
                      : t == "shm"    ? orbite::Transport::Shm
                      : t == "nvlink" ? orbite::Transport::Nvlink
                      : t == "unspec" ? orbite::Transport::Unspec
                                      : orbite::Transport::Tcp;
  auto boot = orbite::Bootstrap::from_env();
  check_ok(boot.status(), "bootstrap");
  set_rank_for_messages(boot->rank());
  auto config = orbite::EngineConfig::load();
  check_ok(config.status(), "config");
  // The collectives' messages take the transport under test too.
  // (cuda_ipc carries no messages: theirs go over shm beside it.)
  config->coll.transport =
      options.transport == orbite::Transport::Nvlink ? orbite::Transport::Shm : options.transport;
  auto comm = orbite::Communicator::create(*boot, *config);
  check_ok(comm.status(), "communicator");
  Context c{*comm, options, comm->rank(), comm->size()};
  scenarios.at(name)(c);
  if (name != "copy_faults" && name != "private_faults" && name != "misstated_path" &&
      name != "private_budget" && name != "private_retained") {
    check_route(c);
  }
  barrier(c, "before close");
  const orbite::Status closed = c.comm.engine().close(std::chrono::seconds(30));
  if (g_close_retains) {
    check(closed.code() == orbite::Errc::Unquiesced &&
              closed.message().find("retained") != std::string::npos,
          "engine close with a retained GPU MR: " + closed.to_string());
  } else {
    check_ok(closed, "engine close");
  }
  std::printf("rank %d: PASS %s\n", c.rank, name.c_str());
  std::fflush(stdout);
  return 0;
}
