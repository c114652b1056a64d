// orbite-cuda-probe's scenarios of device memory moved without staging between two processes:
// GPUDirect RDMA (gpudirect) and messages forced onto nvlink (nvlink_messages). Both are listed
// with the others at the top of cuda_probe.cpp.
#include <softcuda/control.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cuda_probe.h"

namespace orbite::probe {
namespace {

// Descriptors of this process open on softcuda's device memory (its allocations' backing and
// dma-bufs exported from them).
int device_memory_fds() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind("/memfd:softcuda:", 0) == 0) ++n;
  }
  return n;
}

}  // namespace

// nvlink_messages: isend/irecv forced onto nvlink between device buffers: every size, small ones
// too, read device to device over cuda_ipc (its counters; nothing staged, nothing left mapped);
// a host buffer is refused at submission.
void nvlink_messages(Context& c) {
  TransferOptions nv;
  nv.transport = Transport::Nvlink;
  const std::uint64_t sizes[] = {8, 60000, 200 * kKiB + 1, 3 * kMiB + 5};
  Memory buf("cuda", 4 * kMiB);
  const int peer = 1 - c.rank;
  std::uint64_t received = 0;
  for (int round = 0; round < 2; ++round) {
    const bool sending = (c.rank == 0) == (round == 0);
    for (std::uint64_t n : sizes) {
      const std::string what =
          "nvlink message of " + std::to_string(n) + " bytes, round " + std::to_string(round);
      const std::uint64_t seed = 2000 + n + round;
      if (sending) {
        buf.fill(0, n, seed);
        Request r = accepted(c.comm.isend(buf.data(), n, peer, 6, nv), "isend " + what);
        wait_ok(r, "isend " + what);
      } else {
        Request r = accepted(c.comm.irecv(buf.data(), 4 * kMiB, peer, 6, nv), "irecv " + what);
        wait_ok(r, "irecv " + what);
        check(r.bytes() == n, "received " + std::to_string(r.bytes()) + " bytes of a " + what);
        buf.expect(0, n, seed, what);
        received += n;
      }
    }
  }
  const EngineStats s = c.comm.engine().stats();
  check(s.of(Transport::Nvlink).bytes_received >= received,
        "cuda_ipc read " + std::to_string(s.of(Transport::Nvlink).bytes_received) + " of " +
            std::to_string(received) + " bytes received");
  check(s.staging_loans == 0, "nvlink messages were staged");
  check(!softcuda::loaded() || live_ipc_imports() == 0, "a message left the sender mapped");
  std::vector<std::byte> host(64);
  Result<Request> refused = c.comm.isend(host.data(), host.size(), peer, 7, nv);
  check(!refused.ok() && refused.status().code() == Errc::Unavailable &&
            refused.status().message().find("host memory") != std::string::npos,
        "a host buffer forced onto nvlink: " +
            (refused.ok() ? std::string("accepted") : refused.status().to_string()));
  barrier(c, "nvlink messages");
}

// GPUDirect RDMA (rdma.cuda_memory = direct, CUDA_TEST_GDR_ROUTE dmabuf or peermem): rank 0's
// device memory is put to and got from rank 1's host memory through GPU MRs (putget above), with
// no staging; rank 1's put into and get from rank 0's device memory are granted on the private
// grant path (a PD, exact MR and QP per grant, all destroyed before the GrantAck), unstaged.
void gpudirect(Context& c) {
  putget(c);
  TransferEngine& e = c.comm.engine();
  const RdmaStats rs = e.rdma_stats();
  const std::string route = env("CUDA_TEST_GDR_ROUTE", "dmabuf");
  if (c.rank == 0) {
    const std::uint64_t made =
        route == "dmabuf" ? rs.dmabuf_registrations : rs.peermem_registrations;
    const std::uint64_t other =
        route == "dmabuf" ? rs.peermem_registrations : rs.dmabuf_registrations;
    check(made >= 1 && other == 0, "GPU MRs: " + std::to_string(rs.dmabuf_registrations) +
                                       " dmabuf and " + std::to_string(rs.peermem_registrations) +
                                       " peermem registrations, " + route + " expected");
    check(e.stats().staging_loans == 0, "GPUDirect staged device memory");
    std::printf("rank 0: gpudirect %s registrations %llu\n", route.c_str(),
                static_cast<unsigned long long>(made));
  } else {
    check(rs.dmabuf_registrations + rs.peermem_registrations == 0, "GPU MRs on a host-only rank");
  }
  // The other way: rank 0's device region as the target of rank 1's put and get, granted on the
  // private grant path: published natively on rdma, and the owner's staging is not used.
  Memory mine(c.rank == 0 ? "cuda" : "host", kMiB);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register for the private-grant target");
  if (c.rank == 0) {
    mine.fill(200000, 5000, 77);   // what forged descriptors must leave as it is
    mine.fill(300000, 40000, 91);  // what rank 1 gets
    send_string(c, region->export_descriptor().bytes(), 1, 4);
    await_peer(c, 1, 5);
    mine.expect(4096, 70001, 55, "rank 1's put into device memory");
    mine.expect(200000, 5000, 77, "device memory under forged descriptors");
    check(e.stats().staging_loans == 0, "the owner's staging carried a put into device memory");
    const RdmaStats after = e.rdma_stats();
    check(after.private_grants >= 2 && after.private_teardowns == after.private_grants,
          std::to_string(after.private_grants) + " private grants, " +
              std::to_string(after.private_teardowns) + " torn down");
    std::printf("rank 0: private grants %llu, torn down %llu\n",
                static_cast<unsigned long long>(after.private_grants),
                static_cast<unsigned long long>(after.private_teardowns));
  } else {
    auto target = RemoteRegion::from_bytes(recv_string(c, 0, 4));
    check_ok(target.status(), "descriptor of rank 0's device region");
    check(target->kind() == MemoryKind::Cuda, "rank 0's region is not device memory");
    // The descriptor reports the route rank 0 registered it by.
    const std::vector<rdma::GpuDirectRegistration> routes = target->gpu_direct_routes();
    check(routes.size() == 1 &&
              routes.front() == (route == "dmabuf" ? rdma::GpuDirectRegistration::Dmabuf
                                                   : rdma::GpuDirectRegistration::Peermem),
          "rank 0's device region reports " + std::to_string(routes.size()) +
              " GPUDirect routes, not " + route);
    const std::vector<Transport> staged = target->staged_transports();
    check(std::find(staged.begin(), staged.end(), Transport::Rdma) == staged.end(),
          "rank 0's device region is published staged on rdma");
    mine.fill(0, 70001, 55);
    // Forged descriptors of the device region: refused by its owner, nothing written.
    for (const char* field : {"generation", "id"}) {
      const RemoteRegion forged = tampered(*target, field, 0x5eed);
      expect_failure(e.put(*region, 0, forged, 200000, 5000, c.options),
                     {Errc::InvalidArgument, Errc::NotFound, Errc::PermissionDenied},
                     std::string("a put with a forged ") + field);
    }
    Request put =
        accepted(e.put(*region, 0, *target, 4096, 70001, c.options), "put into a GPU region");
    wait_ok(put, "put into a GPU region");
    Request get = accepted(e.get(*region, 500000, *target, 300000, 40000, c.options),
                           "get from a GPU region");
    wait_ok(get, "get from a GPU region");
    mine.expect(500000, 40000, 91, "rank 1's get from device memory");
    check(e.stats().staging_loans == 0, "the requester staged a host put into device memory");
    signal_peer(c, 0, 5);
  }
  check_ok(region->unregister(), "unregister");
  if (c.rank == 0) {
    // A GPU MR whose deregistration fails keeps its dma-buf and its allocation for good, even
    // once the application let go of the memory.
    const long long allocations = softcuda_stat("live_device_allocations");
    const int fds = device_memory_fds();
    {
      Memory kept("cuda", kMiB);
      auto r = kept.register_with(e);
      check_ok(r.status(), "register the memory whose MR will not go");
      const int exported = device_memory_fds() - fds - 1;  // the allocation's own backing: 1
      check(exported == (route == "dmabuf" ? 1 : 0),
            std::to_string(exported) + " dma-buf descriptors for one registration by " + route);
      const std::uint64_t retained = e.rdma_stats().retained;
      softverbs_control("fail_dereg soft_0 1 EBUSY");
      const Status st = r->unregister();
      check(st.code() == Errc::Unquiesced, "unregister with a refused MR: " + st.to_string());
      check(e.rdma_stats().retained == retained + 1, "the refused GPU MR is not counted retained");
    }
    check(softcuda_stat("live_device_allocations") == allocations + 1,
          "the allocation behind a retained GPU MR was freed");
    check(device_memory_fds() == fds + 1 + (route == "dmabuf" ? 1 : 0),
          "the dma-buf of a retained GPU MR was closed");
    g_close_retains = true;  // the engine's close says so too
  }
}

// private_faults (rdma, cuda_memory direct; rank 1's ORBITE_RDMA_TEST_HOOKS from
// CUDA_TEST_RANK1_HOOKS): rank 1 misbehaves as the requester of a put into rank 0's device
// memory, which is granted on the private grant path.
//   withhold_receipt: the first put's receipt never comes; rank 0 revokes the grant after
//     rdma.grant_timeout, destroying its QP, MRs and PD, and the put fails Timeout; the next put
//     (a new grant) lands.
//   widen_write: the WRITE reaches one byte past the granted range; the grant's MR is exactly the
//     range, so the NIC refuses it: the put fails, the byte after the range is untouched, and the
//     grant's objects are destroyed all the same.
//   fail_private_connect: connecting rank 1's private QP to the first Grant fails; the grant goes
//     back with a GrantCancel and is torn down, the put fails naming it (nothing moved), and the
//     next put (a new grant) lands.
void private_faults(Context& c) {
  TransferEngine& e = c.comm.engine();
  const std::string hooks = env("CUDA_TEST_RANK1_HOOKS", "");
  constexpr std::uint64_t kAt = 4096, kLength = 65536;
  Memory mine(c.rank == 0 ? "cuda" : "host", kMiB);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register");
  if (c.rank == 0) {
    mine.fill(0, kMiB, 13);
    send_string(c, region->export_descriptor().bytes(), 1, 4);
    await_peer(c, 1, 5);
    // Every grant's private objects are gone (the expired one's too), nothing stays granted.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    RdmaStats s = e.rdma_stats();
    while ((s.grants_active != 0 || s.private_teardowns != s.private_grants) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      s = e.rdma_stats();
    }
    check(s.private_grants >= 1 && s.private_teardowns == s.private_grants && s.grants_active == 0,
          std::to_string(s.private_grants) + " private grants, " +
              std::to_string(s.private_teardowns) + " torn down, " +
              std::to_string(s.grants_active) + " active");
    check(e.stats().staging_loans == 0, "a private grant's put was staged");
    // The byte after the range never changes; the range holds the second put (withhold) or
    // the old bytes or a prefix of the put (widen: what a refused WRITE left is not defined).
    mine.expect(kAt + kLength, kMiB - kAt - kLength, 13, "bytes after the granted range",
                kAt + kLength);
    if (hooks == "withhold_receipt") {
      check(s.grants_expired == 1, std::to_string(s.grants_expired) + " grants expired, not 1");
      mine.expect(kAt, kLength, 29, "the put after the revoked grant", kAt);
    }
    if (hooks == "fail_private_connect") {
      // The cancelled grant was torn down like any other, and the next put was granted anew.
      check(s.private_grants == 2 && s.grants_expired == 0,
            std::to_string(s.private_grants) + " private grants, " +
                std::to_string(s.grants_expired) + " expired");
      mine.expect(kAt, kLength, 29, "the put after the cancelled grant", kAt);
    }
    std::printf("rank 0: private faults %s: %llu grants, %llu torn down\n", hooks.c_str(),
                static_cast<unsigned long long>(s.private_grants),
                static_cast<unsigned long long>(s.private_teardowns));
  } else {
    auto target = RemoteRegion::from_bytes(recv_string(c, 0, 4));
    check_ok(target.status(), "descriptor of rank 0's device region");
    mine.fill(0, kMiB, 29);
    Request first =
        accepted(e.put(*region, kAt, *target, kAt, kLength, c.options), "the misbehaving put");
    const Status st = first.wait(std::chrono::seconds(60));
    std::printf("rank 1: %s: %s\n", hooks.c_str(), st.to_string().c_str());
    if (hooks == "withhold_receipt") {
      check(st.code() == Errc::Timeout &&
                st.message().find("rdma.grant_timeout") != std::string::npos,
            "the put whose receipt was withheld: " + st.to_string());
      Request again =
          accepted(e.put(*region, kAt, *target, kAt, kLength, c.options), "the second put");
      wait_ok(again, "the put after the revoked grant");
    } else if (hooks == "fail_private_connect") {
      check(st.code() == Errc::Unavailable &&
                st.message().find("fail_private_connect") != std::string::npos &&
                st.message().find("nothing moved") != std::string::npos,
            "the put whose private connect failed: " + st.to_string());
      Request again =
          accepted(e.put(*region, kAt, *target, kAt, kLength, c.options), "the second put");
      wait_ok(again, "the put after the cancelled grant");
    } else {
      check(!st.ok(), "a WRITE past the granted range succeeded");
    }
    signal_peer(c, 0, 5);
  }
  check_ok(region->unregister(), "unregister");
}

// misstated_path (rdma, cuda_memory direct; rank 1's hooks: flip_private_path): rank 1's
// GrantRequests claim the other grant path than rank 0's regions ask for. A put into rank 0's
// device memory asking for an ordinary grant is refused Unavailable; one into its host memory
// asking for the private path is refused InvalidArgument. Neither writes a byte, and no private
// grant is built.
void misstated_path(Context& c) {
  TransferEngine& e = c.comm.engine();
  constexpr std::uint64_t kAt = 4096, kLength = 65536;
  Memory device(c.rank == 0 ? "cuda" : "host", kMiB), host("host", kMiB);
  auto device_region = device.register_with(e);
  auto host_region = host.register_with(e);
  check_ok(device_region.status(), "register the device memory");
  check_ok(host_region.status(), "register the host memory");
  if (c.rank == 0) {
    device.fill(0, kMiB, 13);
    host.fill(0, kMiB, 14);
    send_string(c, device_region->export_descriptor().bytes(), 1, 4);
    send_string(c, host_region->export_descriptor().bytes(), 1, 5);
    await_peer(c, 1, 6);
    device.expect(0, kMiB, 13, "device memory under a misstated ordinary grant");
    host.expect(0, kMiB, 14, "host memory under a misstated private grant");
    const RdmaStats s = e.rdma_stats();
    check(s.private_grants == 0 && s.grants_active == 0,
          std::to_string(s.private_grants) + " private grants built, " +
              std::to_string(s.grants_active) + " grants active");
    std::printf("rank 0: misstated paths refused\n");
  } else {
    auto to_device = RemoteRegion::from_bytes(recv_string(c, 0, 4));
    auto to_host = RemoteRegion::from_bytes(recv_string(c, 0, 5));
    check_ok(to_device.status(), "descriptor of rank 0's device region");
    check_ok(to_host.status(), "descriptor of rank 0's host region");
    device.fill(0, kMiB, 29);
    Request ordinary = accepted(e.put(*device_region, kAt, *to_device, kAt, kLength, c.options),
                                "a put into device memory asking for an ordinary grant");
    Status st = ordinary.wait(std::chrono::seconds(60));
    check(st.code() == Errc::Unavailable &&
              st.message().find("granted on the private grant path only") != std::string::npos,
          "a put into device memory asking for an ordinary grant: " + st.to_string());
    Request priv = accepted(e.put(*device_region, kAt, *to_host, kAt, kLength, c.options),
                            "a put into host memory asking for the private path");
    st = priv.wait(std::chrono::seconds(60));
    check(st.code() == Errc::InvalidArgument &&
              st.message().find("grants device memory only") != std::string::npos,
          "a put into host memory asking for the private path: " + st.to_string());
    signal_peer(c, 0, 6);
  }
  check_ok(device_region->unregister(), "unregister the device memory");
  check_ok(host_region->unregister(), "unregister the host memory");
}

// private_budget (rdma, cuda_memory direct; rank 0's rdma.max_direct_bytes 8 KiB through
// CUDA_TEST_RANK0_ENV): a private GrantRequest the source's budget refuses builds nothing (no
// PD, MR or QP: the reservations come first), and one within the budget is granted.
void private_budget(Context& c) {
  TransferEngine& e = c.comm.engine();
  constexpr std::uint64_t kAt = 4096, kOver = 65536, kUnder = 2048;
  Memory mine(c.rank == 0 ? "cuda" : "host", kMiB);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register");
  if (c.rank == 0) {
    mine.fill(0, kMiB, 13);
    const RdmaStats before = e.rdma_stats();
    send_string(c, region->export_descriptor().bytes(), 1, 4);
    await_peer(c, 1, 5);
    const RdmaStats refused = e.rdma_stats();
    check(refused.budget_exhausted > before.budget_exhausted, "the budget refused nothing");
    check(refused.private_grants == 0 &&
              refused.dmabuf_registrations == before.dmabuf_registrations &&
              refused.mr_registrations == before.mr_registrations,
          "a refused private GrantRequest built " +
              std::to_string(refused.dmabuf_registrations - before.dmabuf_registrations) +
              " GPU MRs and " + std::to_string(refused.mr_registrations - before.mr_registrations) +
              " MRs");
    mine.expect(kAt, kOver, 13, "device memory under a refused put", kAt);
    signal_peer(c, 1, 6);
    await_peer(c, 1, 7);
    const RdmaStats granted = e.rdma_stats();
    check(granted.private_grants == 1 && granted.private_teardowns == 1,
          std::to_string(granted.private_grants) + " private grants within the budget");
    mine.expect(kAt, kUnder, 29, "the put within the budget", kAt);
    std::printf("rank 0: private budget refused before building\n");
  } else {
    auto target = RemoteRegion::from_bytes(recv_string(c, 0, 4));
    check_ok(target.status(), "descriptor of rank 0's device region");
    mine.fill(0, kMiB, 29);
    Request over = accepted(e.put(*region, kAt, *target, kAt, kOver, c.options),
                            "a put past the owner's budget");
    const Status st = over.wait(std::chrono::seconds(60));
    check(st.code() == Errc::ResourceExhausted,
          "a put past the owner's rdma.max_direct_bytes: " + st.to_string());
    signal_peer(c, 0, 5);
    await_peer(c, 0, 6);
    Request under = accepted(e.put(*region, kAt, *target, kAt, kUnder, c.options),
                             "a put within the owner's budget");
    wait_ok(under, "a put within the owner's budget");
    signal_peer(c, 0, 7);
  }
  check_ok(region->unregister(), "unregister");
}

// private_retained (rdma, cuda_memory direct, softverbs' one device soft_0): the source's
// ibv_dereg_mr of a private grant's MR fails (armed on rank 0). The grant is retained for good:
// its MR counted retained, its range locked (a later put into it is refused as busy, another
// range still granted), and the requester's put fails Unquiesced naming it. The region can no
// longer be unregistered within its bound, and the engine's close reports what it retains.
void private_retained(Context& c) {
  TransferEngine& e = c.comm.engine();
  constexpr std::uint64_t kAt = 4096, kLength = 65536, kOther = 512 * 1024;
  Memory mine(c.rank == 0 ? "cuda" : "host", kMiB);
  auto region = mine.register_with(e);
  check_ok(region.status(), "register");
  if (c.rank == 0) {
    mine.fill(0, kMiB, 13);
    const RdmaStats before = e.rdma_stats();
    softverbs_control("fail_dereg soft_0 1 EBUSY");
    send_string(c, region->export_descriptor().bytes(), 1, 4);
    await_peer(c, 1, 5);
    const RdmaStats s = e.rdma_stats();
    check(s.private_grants == 2 && s.private_teardowns == 1 && s.retained == before.retained + 1,
          std::to_string(s.private_grants) + " private grants, " +
              std::to_string(s.private_teardowns) + " torn down, " +
              std::to_string(s.retained - before.retained) + " objects retained");
    mine.expect(kOther, kLength, 29, "the put into another range", kOther);
    const Status st = region->unregister(std::chrono::milliseconds(300));
    check(st.code() == Errc::Unquiesced,
          "unregister of a region a retained private grant pins: " + st.to_string());
    // The application keeps such a region (its destructor would wait for the pin again); the
    // registration keeps the device allocation.
    static MemoryRegion* kept = new MemoryRegion(std::move(*region));
    (void)kept;
    g_close_retains = true;
    std::printf("rank 0: private grant retained\n");
  } else {
    auto target = RemoteRegion::from_bytes(recv_string(c, 0, 4));
    check_ok(target.status(), "descriptor of rank 0's device region");
    mine.fill(0, kMiB, 29);
    Request first =
        accepted(e.put(*region, kAt, *target, kAt, kLength, c.options), "the first put");
    Status st = first.wait(std::chrono::seconds(60));
    check(st.code() == Errc::Unquiesced && st.message().find("stays locked") != std::string::npos,
          "a put whose private MR could not be deregistered: " + st.to_string());
    Request again =
        accepted(e.put(*region, kAt, *target, kAt, kLength, c.options), "a put into the range");
    st = again.wait(std::chrono::seconds(60));
    check(st.code() == Errc::Unavailable && st.message().find("range busy") != std::string::npos,
          "a put into the retained grant's range: " + st.to_string());
    Request other = accepted(e.put(*region, kOther, *target, kOther, kLength, c.options),
                             "a put into another range");
    wait_ok(other, "a put into another range");
    signal_peer(c, 0, 5);
    check_ok(region->unregister(), "unregister");
  }
}

}  // namespace orbite::probe
