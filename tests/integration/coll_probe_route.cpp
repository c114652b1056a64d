// orbite-coll-probe's scenarios that check the route of the collectives: through a shared segment
// or over messages (the engine's byte counters), single-host and hierarchical; and one that holds
// the segment until the test kills the rank.
#include <orbite/communicator.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "coll_probe.h"
#include "p2p_probe.h"

namespace orbite::probe {

using namespace std::chrono_literals;

namespace {

// Payload bytes this rank's engine sent, and with `received` also those it received: a
// single-copy rendezvous (shm) is counted by the rank that copies it, the receiver.
std::uint64_t bytes_on_every_transport(Communicator& comm, bool received) {
  const EngineStats s = comm.engine().stats();
  std::uint64_t sum = 0;
  for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Rdma, Transport::Nvlink}) {
    sum += s.of(t).bytes_sent + (received ? s.of(t).bytes_received : 0);
  }
  return sum;
}

}  // namespace

// The route of the collectives that have an shm algorithm: through the communicator's shared
// segment (COLL_PROBE_EXPECT=segment: this rank's engine moves next to nothing while they move
// megabytes) or over messages (=messages: the engine carries them). Counted both ways, since a
// message that went by single-copy rendezvous is counted where it was copied.
void scenario_route(Context& c) {
  Communicator& comm = c.comm;
  const int n = c.size;
  const char* expect = std::getenv("COLL_PROBE_EXPECT");
  check(expect != nullptr, "COLL_PROBE_EXPECT is not set (segment or messages)");
  const bool segment = std::string_view(expect) == "segment";
  // Connections, the failure watch and a message collective settled first.
  run(comm.barrier(), "first barrier");
  std::vector<std::int32_t> one(static_cast<std::size_t>(n), c.rank), all(one.size());
  run(comm.all_to_all(one.data(), all.data(), 1, DataType::Int32), "all_to_all");
  const std::uint64_t before = bytes_on_every_transport(comm, true);
  constexpr std::uint64_t kCount = 1 << 18;  // 1 MiB of int32 per rank and collective
  const auto un = static_cast<std::uint64_t>(n);
  std::vector<std::int32_t> in(kCount * un), out(kCount * un);
  for (std::uint64_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<std::int32_t>(i % 1000) + c.rank;
  const std::int64_t rank_sum = static_cast<std::int64_t>(n) * (n - 1) / 2;
  auto expect_sum = [&](const std::int32_t* got, std::uint64_t count, std::uint64_t first,
                        const std::string& what) {
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::int64_t want = static_cast<std::int64_t>((first + i) % 1000) * n + rank_sum;
      if (got[i] != want) {
        fail(what + ": element " + std::to_string(first + i) + " is " + std::to_string(got[i]) +
             ", expected " + std::to_string(want));
      }
    }
  };
  run(comm.all_reduce(in.data(), out.data(), kCount, DataType::Int32, ReduceOp::Sum), "all_reduce");
  expect_sum(out.data(), kCount, 0, "all_reduce");
  run(comm.reduce(in.data(), out.data(), kCount, DataType::Int32, ReduceOp::Sum, n - 1), "reduce");
  if (c.rank == n - 1) expect_sum(out.data(), kCount, 0, "reduce");
  run(comm.reduce_scatter(in.data(), out.data(), kCount, DataType::Int32, ReduceOp::Sum),
      "reduce_scatter");
  expect_sum(out.data(), kCount, static_cast<std::uint64_t>(c.rank) * kCount, "reduce_scatter");
  std::vector<std::int32_t> block(kCount, c.rank * 7);
  run(comm.all_gather(block.data(), out.data(), kCount, DataType::Int32), "all_gather");
  for (int k = 0; k < n; ++k) {
    check(out[static_cast<std::size_t>(k) * kCount + kCount - 1] == k * 7,
          "all_gather block " + std::to_string(k));
  }
  run(comm.broadcast(block.data(), out.data(), kCount, DataType::Int32, 0), "broadcast");
  check(out[0] == 0 && out[kCount - 1] == 0, "broadcast");
  run(comm.barrier(), "barrier");
  const std::uint64_t moved = bytes_on_every_transport(comm, true) - before;
  if (segment) {
    check(moved < 64 * 1024, "route: the engine moved " + std::to_string(moved) +
                                 " bytes for collectives that should run in the shared segment");
  } else {
    check(moved >= kCount * 4, "route: the engine moved only " + std::to_string(moved) +
                                   " bytes for collectives that should run over messages");
  }
  std::printf("rank %d: route %s ok (%llu bytes moved)\n", c.rank, expect,
              static_cast<unsigned long long>(moved));
}

// The route of the hierarchical collectives (all_reduce, reduce, broadcast, all_gather, barrier) on
// COLL_PROBE_HOSTS=k hosts (rank r on host r % k, so ranks 0..k-1 lead their hosts): a rank that
// leads no host moves its bytes through its host's segment only (its engine sends next to nothing),
// a leader sends its host's share to the other leaders. all_reduce, reduce and broadcast to and
// from a rank that leads no host.
void scenario_hierarchical_route(Context& c) {
  Communicator& comm = c.comm;
  const int n = c.size;
  const char* hosts_env = std::getenv("COLL_PROBE_HOSTS");
  check(hosts_env != nullptr, "COLL_PROBE_HOSTS is not set");
  const int hosts = std::atoi(hosts_env);
  check(hosts >= 2 && n > hosts, "hierarchical_route needs more ranks than hosts, and 2 hosts");
  const bool leader = c.rank < hosts;
  run(comm.barrier(), "first barrier");
  std::vector<std::int32_t> one(static_cast<std::size_t>(n), c.rank), all(one.size());
  run(comm.all_to_all(one.data(), all.data(), 1, DataType::Int32), "all_to_all");
  const std::uint64_t before = bytes_on_every_transport(comm, false);
  constexpr std::uint64_t kCount = 1 << 18;  // 1 MiB of int32
  std::vector<std::int32_t> in(kCount), out(kCount, -1);
  for (std::uint64_t i = 0; i < kCount; ++i) in[i] = static_cast<std::int32_t>(i % 1000) + c.rank;
  const std::int64_t rank_sum = static_cast<std::int64_t>(n) * (n - 1) / 2;
  auto expect_sum = [&](const std::string& what) {
    for (std::uint64_t i = 0; i < kCount; ++i) {
      const std::int64_t want = static_cast<std::int64_t>(i % 1000) * n + rank_sum;
      if (out[i] != want) {
        fail(what + ": element " + std::to_string(i) + " is " + std::to_string(out[i]) +
             ", expected " + std::to_string(want));
      }
    }
  };
  run(comm.all_reduce(in.data(), out.data(), kCount, DataType::Int32, ReduceOp::Sum), "all_reduce");
  expect_sum("all_reduce");
  const int root = n - 1;  // leads no host
  std::fill(out.begin(), out.end(), -1);
  run(comm.reduce(in.data(), out.data(), kCount, DataType::Int32, ReduceOp::Sum, root), "reduce");
  if (c.rank == root) expect_sum("reduce");
  std::vector<std::int32_t> block(kCount, c.rank == root ? 4242 : c.rank);
  run(comm.broadcast(block.data(), out.data(), kCount, DataType::Int32, root), "broadcast");
  check(out[0] == 4242 && out[kCount - 1] == 4242, "broadcast from rank " + std::to_string(root));
  // all_gather of 1 MiB in all (the rule's window for it): every block at its rank.
  const std::uint64_t per = kCount / static_cast<std::uint64_t>(n);
  std::vector<std::int32_t> mine(per, c.rank + 100);
  std::fill(out.begin(), out.end(), -1);
  run(comm.all_gather(mine.data(), out.data(), per, DataType::Int32), "all_gather");
  for (int r = 0; r < n; ++r) {
    const std::uint64_t at = static_cast<std::uint64_t>(r) * per;
    check(out[at] == r + 100 && out[at + per - 1] == r + 100,
          "all_gather: the block of rank " + std::to_string(r));
  }
  // reduce_scatter of 1 MiB of input: rank r keeps the sum of everyone's block r.
  std::vector<std::int32_t> result(per, -1);
  run(comm.reduce_scatter(in.data(), result.data(), per, DataType::Int32, ReduceOp::Sum),
      "reduce_scatter");
  for (const std::uint64_t i : {std::uint64_t{0}, per - 1}) {
    const std::uint64_t at = static_cast<std::uint64_t>(c.rank) * per + i;
    const std::int64_t want = static_cast<std::int64_t>(at % 1000) * n + rank_sum;
    check(result[i] == want, "reduce_scatter: element " + std::to_string(i) + " is " +
                                 std::to_string(result[i]) + ", expected " + std::to_string(want));
  }
  run(comm.barrier(), "barrier");
  const std::uint64_t moved = bytes_on_every_transport(comm, false) - before;
  if (leader) {
    check(moved >= kCount * 4, "route: leader " + std::to_string(c.rank) + " sent only " +
                                   std::to_string(moved) + " bytes");
  } else {
    check(moved < 64 * 1024, "route: rank " + std::to_string(c.rank) +
                                 ", which leads no host, sent " + std::to_string(moved) + " bytes");
  }
  std::printf("rank %d: route hierarchical ok (%s, %llu bytes sent)\n", c.rank,
              leader ? "leader" : "in its host", static_cast<unsigned long long>(moved));
}

// Holds the communicator's segment in use until the test kills the rank (coll_test's
// CollSegment): collectives through it in a loop, bounded.
void scenario_segment_held(Context& c) {
  Communicator& comm = c.comm;
  run(comm.barrier(), "barrier");
  std::printf("rank %d: holding the segment\n", c.rank);
  std::fflush(stdout);
  std::vector<std::int64_t> v(64, c.rank);
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    run(comm.all_reduce(v.data(), v.data(), v.size(), DataType::Int64, ReduceOp::Max),
        "all_reduce");
  }
  fail("not killed within 60 s");
}

}  // namespace orbite::probe
