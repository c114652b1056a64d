// orbite-cuda-probe's scenario of the data-movement collectives on device buffers
// (device_collectives, listed with the others at the top of cuda_probe.cpp): broadcast,
// all_gather (apart and in place), all_to_all, all_to_allv, gather and scatter move device
// memory directly, small messages bounced through host memory and large ones read device to
// device (over cuda_ipc on one host); a host input with a device output still goes through host
// stand-ins.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_probe.h"

namespace orbite::probe {
namespace {

// Blocks bounced through host memory (5, 3000) and a block whose 1 MiB piece is a large device
// message (the ring and chain move pieces of coll.chunk_bytes, 1 MiB by default).
constexpr std::uint64_t kBlocks[] = {5, 3000, kMiB + 3};

void run(Result<Request> started, const std::string& what) {
  Request r = accepted(std::move(started), what);
  wait_ok(r, what);
}

void movement_collectives(Context& c, std::uint64_t b) {
  const int n = c.size;
  const int r = c.rank;
  const auto un = static_cast<std::uint64_t>(n);
  const std::string of = " of " + std::to_string(b) + "-byte blocks";
  // A distinct pattern per (collective, source rank, destination rank, size).
  auto seed = [&](int op, int from, int to) {
    return b * 1000 + static_cast<std::uint64_t>(op * 100 + from * 10 + to);
  };
  {
    // Root 1 sends from one buffer into its own receive buffer too.
    Memory send("cuda", b), recv("cuda", b);
    if (r == 1) send.fill(0, b, seed(1, 1, 0));
    run(c.comm.broadcast(send.data(), recv.data(), b, DataType::Uint8, 1), "broadcast" + of);
    recv.expect(0, b, seed(1, 1, 0), "broadcast" + of);
  }
  {
    Memory mine("cuda", b), all("cuda", b * un), in_place("cuda", b * un);
    mine.fill(0, b, seed(2, r, 0));
    in_place.fill(static_cast<std::uint64_t>(r) * b, b, seed(2, r, 0));
    run(c.comm.all_gather(mine.data(), all.data(), b, DataType::Uint8), "all_gather" + of);
    auto* own = static_cast<std::byte*>(in_place.data()) + static_cast<std::uint64_t>(r) * b;
    run(c.comm.all_gather(own, in_place.data(), b, DataType::Uint8), "all_gather in place" + of);
    for (int p = 0; p < n; ++p) {
      const std::uint64_t at = static_cast<std::uint64_t>(p) * b;
      all.expect(at, b, seed(2, p, 0), "all_gather" + of + ", block " + std::to_string(p));
      in_place.expect(at, b, seed(2, p, 0),
                      "all_gather in place" + of + ", block " + std::to_string(p));
    }
  }
  {
    Memory send("cuda", b * un), recv("cuda", b * un);
    for (int p = 0; p < n; ++p) send.fill(static_cast<std::uint64_t>(p) * b, b, seed(3, r, p));
    run(c.comm.all_to_all(send.data(), recv.data(), b, DataType::Uint8), "all_to_all" + of);
    for (int p = 0; p < n; ++p) {
      recv.expect(static_cast<std::uint64_t>(p) * b, b, seed(3, p, r),
                  "all_to_all" + of + ", block from " + std::to_string(p));
    }
  }
  {
    // all_to_allv: rank p sends (p + 1) * b / n bytes to everyone, packed; received packed by
    // source rank.
    std::vector<std::uint64_t> send_counts(un), send_displs(un), recv_counts(un), recv_displs(un);
    std::uint64_t send_total = 0, recv_total = 0;
    for (int p = 0; p < n; ++p) {
      const auto up = static_cast<std::size_t>(p);
      send_counts[up] = (static_cast<std::uint64_t>(r) + 1) * b / un;
      send_displs[up] = send_total;
      send_total += send_counts[up];
      recv_counts[up] = (static_cast<std::uint64_t>(p) + 1) * b / un;
      recv_displs[up] = recv_total;
      recv_total += recv_counts[up];
    }
    Memory send("cuda", std::max<std::uint64_t>(send_total, 1));
    Memory recv("cuda", std::max<std::uint64_t>(recv_total, 1));
    for (int p = 0; p < n; ++p) {
      const auto up = static_cast<std::size_t>(p);
      if (send_counts[up] > 0) send.fill(send_displs[up], send_counts[up], seed(4, r, p));
    }
    run(c.comm.all_to_allv(send.data(), send_counts, send_displs, recv.data(), recv_counts,
                           recv_displs, DataType::Uint8),
        "all_to_allv" + of);
    for (int p = 0; p < n; ++p) {
      const auto up = static_cast<std::size_t>(p);
      if (recv_counts[up] == 0) continue;
      recv.expect(recv_displs[up], recv_counts[up], seed(4, p, r),
                  "all_to_allv" + of + ", part from " + std::to_string(p));
    }
  }
  {
    Memory mine("cuda", b), all("cuda", b * un);
    mine.fill(0, b, seed(5, r, 0));
    run(c.comm.gather(mine.data(), r == 2 ? all.data() : nullptr, b, DataType::Uint8, 2),
        "gather" + of);
    for (int p = 0; p < n && r == 2; ++p) {
      all.expect(static_cast<std::uint64_t>(p) * b, b, seed(5, p, 0),
                 "gather" + of + ", block " + std::to_string(p));
    }
  }
  {
    Memory all("cuda", b * un), mine("cuda", b);
    for (int p = 0; p < n && r == 0; ++p) {
      all.fill(static_cast<std::uint64_t>(p) * b, b, seed(6, 0, p));
    }
    run(c.comm.scatter(r == 0 ? all.data() : nullptr, mine.data(), b, DataType::Uint8, 0),
        "scatter" + of);
    mine.expect(0, b, seed(6, 0, r), "scatter" + of);
  }
}

}  // namespace

void device_collectives(Context& c) {
  check(c.size == 3, "device_collectives runs on 3 ranks");
  const EngineStats before = c.comm.engine().stats();
  for (std::uint64_t b : kBlocks) movement_collectives(c, b);
  // A host input with a device output: host stand-ins, the result still on the device.
  constexpr std::uint64_t kMixed = 3000;
  Memory mine("host", kMixed), all("cuda", kMixed * 3);
  mine.fill(0, kMixed, 900 + static_cast<std::uint64_t>(c.rank));
  run(c.comm.all_gather(mine.data(), all.data(), kMixed, DataType::Uint8),
      "all_gather of a host input into device memory");
  for (int p = 0; p < 3; ++p) {
    all.expect(static_cast<std::uint64_t>(p) * kMixed, kMixed, 900 + static_cast<std::uint64_t>(p),
               "all_gather of a host input into device memory, block " + std::to_string(p));
  }
  if (c.options.transport != Transport::Unspec) return;
  // The route on one host: each rank received the 1 MiB pieces of both all_gathers (2 x 2 MiB)
  // and all_to_all's two large blocks over cuda_ipc, and shm carried only small messages and
  // control (host stand-ins would have sent all of it over shm, and nothing over cuda_ipc).
  const EngineStats s = c.comm.engine().stats();
  const std::uint64_t ipc =
      s.of(Transport::Nvlink).bytes_received - before.of(Transport::Nvlink).bytes_received;
  const std::uint64_t shm =
      s.of(Transport::Shm).bytes_received - before.of(Transport::Shm).bytes_received;
  check(ipc >= 6 * kMiB, "cuda_ipc carried " + std::to_string(ipc) +
                             " bytes of this rank's collective receives (at least 6 MiB expected)");
  check(shm < kMiB, "shm carried " + std::to_string(shm) + " bytes beside cuda_ipc");
  std::printf("rank %d: device collectives went over nvlink\n", c.rank);
}

}  // namespace orbite::probe
