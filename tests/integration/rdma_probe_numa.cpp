// NUMA placement of the RDMA rails (orbite-rdma-probe numa), on a softverbs config whose two NICs
// claim NUMA nodes 0 and 1 (rdma_test.cpp writes it; softverbs serves them through its sysfs
// look-alike). The probe asks the kernel itself where its buffer lives (move_pages, nothing
// moved) so that it does not take the engine's word for it, then checks where the bytes went.
// NUMA_EXPECT (from the test):
//   "prefer": the buffer's own node's NIC (tier 0) carries at least three quarters;
//   "strict": strict_local_numa: the other NIC is never allocated a byte, probe parents included;
//   "preferred": strict with rdma.preferred_numa_node naming the other node: every byte goes to
//                that node's NIC;
//   "masked": strict with a device_mask of only the other node's NIC: the put fails Unavailable
//             before any byte moves (a mask never overrides strict locality).
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rdma_probe.h"

namespace orbite::probe {

namespace {

// The NUMA node of the page holding p, or -1.
int node_of(const void* p) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  void* pages[1] = {reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1))};
  int status[1] = {-1};
  if (::syscall(SYS_move_pages, 0, 1UL, pages, nullptr, status, 0) != 0) return -1;
  return status[0];
}

}  // namespace

void scenario_rdma_numa(RdmaContext& r) {
  const char* raw = std::getenv("NUMA_EXPECT");
  const std::string expect = raw != nullptr ? raw : "prefer";
  // 1 MiB parents (16 slices of 64 KiB): 110 of them include the selector's probe parent (every
  // 100th), which must not reach an excluded NIC either.
  constexpr std::uint64_t kLength = kMiB;
  constexpr int kParents = 110;
  Region mine = make_region(r, kLength, "the region");
  RemoteRegion remote = share_descriptor(r, &mine.region, 1, 1);
  TransferEngine& engine = r.c.comm.engine();
  const RdmaStats stats = engine.rdma_stats();
  check(stats.contexts.size() == 2,
        "the softverbs config gives " + sz(stats.contexts.size()) + " RDMA contexts, not 2");
  const int home = node_of(mine.bytes.data());
  check(home >= 0, "the kernel does not say on which NUMA node the buffer lives");
  int local = -1;
  for (const RdmaContextStats& c : stats.contexts) {
    std::printf("rank %d: %s numa %d\n", r.c.rank, c.name.c_str(), c.numa_node);
    if (c.numa_node == home) local = c.nic_id;
  }
  check(local >= 0, "no NIC of the config sits on the buffer's NUMA node " + sz(home) +
                        " (the test gives them nodes 0 and 1)");
  const int other = 1 - local;
  if (r.c.rank == 0) {
    const std::vector<NicLoad> before = engine.nic_load_stats();
    if (expect == "masked") {
      auto q = engine.put(mine.region, 0, remote, 0, kLength, r.rdma);
      Status st = q.ok() ? q->wait(std::chrono::seconds(30)) : q.status();
      std::printf("rank 0: strict with the other node's NIC alone: %s\n", st.to_string().c_str());
      check(st.code() == Errc::Unavailable &&
                st.message().find("strict_local_numa") != std::string::npos,
            "a mask outside the buffer's node was not refused by strict_local_numa: " +
                st.to_string());
      const std::vector<NicLoad> after = engine.nic_load_stats();
      for (std::size_t i = 0; i < after.size(); ++i) {
        check(after[i].allocated_bytes == before[i].allocated_bytes,
              "the refused put allocated bytes to NIC " + sz(i));
      }
    } else {
      for (int i = 0; i < kParents; ++i) {
        fill_pattern(mine.bytes.data(), kLength, 0x4E0 + static_cast<std::uint64_t>(i));
        Request q = accepted(engine.put(mine.region, 0, remote, 0, kLength, r.rdma), "put");
        wait_ok(q, "put " + sz(static_cast<std::uint64_t>(i)));
      }
      const std::vector<NicLoad> after = engine.nic_load_stats();
      const std::uint64_t on_local = after[local].allocated_bytes - before[local].allocated_bytes;
      const std::uint64_t on_other = after[other].allocated_bytes - before[other].allocated_bytes;
      const std::uint64_t moved = kParents * kLength;
      std::printf("rank 0: buffer on node %d; allocated %" PRIu64 " to the local NIC, %" PRIu64
                  " to the other\n",
                  home, on_local, on_other);
      check(on_local + on_other == moved,
            "the NICs were allocated " + sz(on_local + on_other) + " bytes of " + sz(moved));
      if (expect == "prefer") {
        check(on_local * 4 >= moved * 3, "the buffer's own node's NIC carried only " +
                                             sz(on_local) + " of " + sz(moved) + " bytes");
      } else if (expect == "strict") {
        check(on_other == 0,
              "strict_local_numa: the cross-NUMA NIC was allocated " + sz(on_other) + " bytes");
      } else if (expect == "preferred") {
        check(home == 0,
              "this case names node 1 as preferred and needs the buffer on node 0, "
              "not " +
                  sz(home));
        check(on_local == 0, "preferred_numa_node (strict): the buffer's node's NIC got " +
                                 sz(on_local) + " bytes");
      } else {
        check(false, "unknown NUMA_EXPECT '" + expect + "'");
      }
    }
  }
  barrier(r.c, "done");
  // The bytes of the last put: checked by the owner, so the puts were not only counted.
  if (r.c.rank == 1 && expect != "masked") {
    check_pattern(mine.bytes.data(), kLength, 0x4E0 + kParents - 1, "the last put's bytes");
  }
  barrier(r.c, "checked");
  std::printf("rank %d: numa ok\n", r.c.rank);
}

}  // namespace orbite::probe
