// Hierarchical collectives for communicators spanning hosts (all_reduce, reduce, broadcast,
// all_gather, reduce_scatter, barrier): a step among the ranks of each
// host (through the host's shared segment, or over messages where the host has none), a step
// among one leader per host over messages (the algorithm the rule picks for that many ranks),
// and a step inside each host again. Inside a host the data moves through memory; only the
// leaders' step crosses hosts, once per host instead of once per rank.
//
// A collective holds its host's segment for its whole run (taken at its start, in start order,
// like the flat shm algorithms), so that the steps of several outstanding collectives get the
// same step numbers on every rank of the host. A step that fails ends the collective at once.
#include <algorithm>

#include "coll/algorithms.h"
#include "coll/reduce.h"
#include "coll/select.h"
#include "coll/shared_area.h"

namespace orbite::coll {

namespace {

// Where this rank stands: its host's sub-group, the leaders' sub-group (leaders only).
struct Groups {
  std::unique_ptr<Ctx> local;
  std::unique_ptr<Ctx> leaders;  // null on ranks that lead no host
  int host = 0;                  // this rank's host index
};

Groups groups_of(Ctx& c, const Hosts& hosts) {
  Groups g;
  g.host = hosts.host_of[static_cast<std::size_t>(c.rank())];
  g.local = c.subgroup(hosts.of(c.rank()));
  if (g.local->rank() == 0) g.leaders = c.subgroup(hosts.leaders());
  return g;
}

// The messages' algorithm for `kind` among `ranks` ranks (the rule's, no shared segment).
Algo message_algo(Collective kind, std::uint64_t bytes, int ranks) {
  return choose(kind, AlgoChoice{}, bytes, ranks, false);
}

// A reduce of `in` to group rank `root`'s `out`: through the host's segment (`segment`: g is the
// host's group as the segment numbers it, never a reordered one) or with the rule's message
// algorithm for g's size.
Task reduce_step(Ctx& g, const Args& a, const std::byte* in, std::byte* out, int root,
                 bool segment) {
  if (g.size() == 1) {
    copy_bytes(out, in, a.count * size_of(a.type));
    co_return;
  }
  Args r = a;
  r.in = in;
  r.root = root;
  r.out = g.rank() == root ? out : nullptr;
  if (segment) {
    r.holds_turn = true;
    co_await shm_reduce(g, r);
  } else if (message_algo(Collective::Reduce, a.count * size_of(a.type), g.size()) == Algo::Chain) {
    co_await chain_reduce(g, r);
  } else {
    co_await binomial_reduce(g, r);
  }
}

// A broadcast of group rank `root`'s buf to every rank's buf, as reduce_step.
Task broadcast_step(Ctx& g, const Args& a, std::byte* buf, int root, bool segment) {
  if (g.size() == 1) co_return;
  Args b = a;
  b.root = root;
  b.in = g.rank() == root ? buf : nullptr;
  b.out = buf;
  if (segment) {
    b.holds_turn = true;
    co_await shm_broadcast(g, b);
  } else if (message_algo(Collective::Broadcast, a.count * size_of(a.type), g.size()) ==
             Algo::Chain) {
    co_await chain_broadcast(g, b);
  } else {
    co_await binomial_broadcast(g, b);
  }
}

// Among the leaders: all_reduce of buf in place.
Task leaders_all_reduce(Ctx& leaders, const Args& a, std::byte* buf) {
  if (leaders.size() == 1) co_return;
  Args r = a;
  r.in = buf;
  r.out = buf;
  if (message_algo(Collective::AllReduce, a.count * size_of(a.type), leaders.size()) ==
      Algo::Ring) {
    co_await ring_all_reduce(leaders, r);
  } else {
    co_await recursive_doubling_all_reduce(leaders, r);
  }
}

// Inside the host: every rank has arrived.
Task local_barrier(Ctx& local, const Args& a) {
  if (local.size() == 1) co_return;
  if (a.area) {
    Args b = a;
    b.holds_turn = true;
    co_await shm_barrier(local, b);
  } else {
    co_await dissemination_barrier(local);
  }
}

// The leaders' host-major layout of per-rank blocks: host h's member j at index h * width + j
// (width: the largest host's rank count). Calls f(rank, index) for every rank.
template <class F>
void for_each_host_block(const Hosts& hosts, std::uint64_t width, F f) {
  for (std::size_t h = 0; h < hosts.members.size(); ++h) {
    const auto& members = hosts.members[h];
    for (std::size_t j = 0; j < members.size(); ++j) {
      f(static_cast<std::uint64_t>(members[j]), static_cast<std::uint64_t>(h) * width + j);
    }
  }
}

// Avg combines sums in every step and divides once at the end, by the communicator's size (each
// step dividing by its own group's size would weigh hosts unequally).
ReduceOp step_op(ReduceOp op) {
  return op == ReduceOp::Avg ? ReduceOp::Sum : op;
}

}  // namespace

Task hierarchical_all_reduce(Ctx& c, Args a) {
  if (a.area) co_await shm_turn(c, *a.area);
  const ReduceOp op = a.op;
  a.op = step_op(op);
  Groups g = groups_of(c, *a.hosts);
  const bool segment = a.area != nullptr;
  co_await reduce_step(*g.local, a, a.in, a.out, 0, segment);
  if (!c.error().ok()) co_return;
  if (g.leaders) {
    co_await leaders_all_reduce(*g.leaders, a, a.out);
    if (!c.error().ok()) co_return;
    if (op == ReduceOp::Avg) divide(a.type, a.out, a.count, c.size());
  }
  co_await broadcast_step(*g.local, a, a.out, 0, segment);
  if (!c.error().ok()) co_return;
  if (a.area) a.area->release();
}

// The root's host reduces to the root, the others to their leaders; then the leaders reduce to
// the root's host's leader, the root itself standing in for it.
Task hierarchical_reduce(Ctx& c, Args a) {
  if (a.area) co_await shm_turn(c, *a.area);
  const ReduceOp op = a.op;
  a.op = step_op(op);
  const Hosts& hosts = *a.hosts;
  const std::uint64_t bytes = a.count * size_of(a.type);
  const int root_host = hosts.host_of[static_cast<std::size_t>(a.root)];
  const int root_local = hosts.local_rank(a.root);
  Groups g = groups_of(c, hosts);
  const bool in_root_host = g.host == root_host;
  // The ranks that carry their host's partial result to the leaders' step: the root on its
  // host, the leader elsewhere.
  const int carrier = in_root_host ? root_local : 0;
  const bool carries = g.local->rank() == carrier;
  std::byte* partial = carries ? c.scratch(std::max<std::uint64_t>(bytes, 1)) : nullptr;
  co_await reduce_step(*g.local, a, a.in, partial, carrier, a.area != nullptr);
  if (!c.error().ok()) co_return;
  if (carries) {
    // The carriers, the root's host's first: a reduce to their rank 0.
    std::vector<int> carriers{a.root};
    for (std::size_t h = 0; h < hosts.members.size(); ++h) {
      if (static_cast<int>(h) != root_host) carriers.push_back(hosts.members[h].front());
    }
    auto across = c.subgroup(carriers);  // the root is its rank 0
    co_await reduce_step(*across, a, partial, a.out, 0, false);
    if (!c.error().ok()) co_return;
    if (c.rank() == a.root && op == ReduceOp::Avg) divide(a.type, a.out, a.count, c.size());
  }
  if (a.area) a.area->release();
}

// The root's host gets the data from the root, the leaders from the root's host's leader, and
// the other hosts from their leaders.
Task hierarchical_broadcast(Ctx& c, Args a) {
  if (a.area) co_await shm_turn(c, *a.area);
  const Hosts& hosts = *a.hosts;
  const int root_host = hosts.host_of[static_cast<std::size_t>(a.root)];
  const int root_local = hosts.local_rank(a.root);
  Groups g = groups_of(c, hosts);
  const bool in_root_host = g.host == root_host;
  if (c.rank() == a.root) copy_bytes(a.out, a.in, a.count * size_of(a.type));
  const bool segment = a.area != nullptr;
  if (in_root_host) {
    co_await broadcast_step(*g.local, a, a.out, root_local, segment);
    if (!c.error().ok()) co_return;
  }
  if (g.leaders) {
    co_await broadcast_step(*g.leaders, a, a.out, root_host, false);
    if (!c.error().ok()) co_return;
  }
  if (!in_root_host) {
    co_await broadcast_step(*g.local, a, a.out, 0, segment);
    if (!c.error().ok()) co_return;
  }
  if (a.area) a.area->release();
}

// Each host's blocks gathered at its leader (through the segment, or over messages), the
// leaders' all_gather of whole hosts (each host's blocks padded to the largest host's count, so
// that uneven hosts exchange equal pieces), each leader placing every block at its rank, then
// the whole result broadcast inside each host. A rank's own block is read before its output is
// written (in place, it lies inside the output).
Task hierarchical_all_gather(Ctx& c, Args a) {
  if (a.area) co_await shm_turn(c, *a.area);
  const Hosts& hosts = *a.hosts;
  const std::uint64_t block = a.count * size_of(a.type);
  const bool segment = a.area != nullptr;
  Groups g = groups_of(c, hosts);
  const int k = g.local->size();
  std::size_t widest = 0;
  for (const auto& m : hosts.members) widest = std::max(widest, m.size());
  const auto width = static_cast<std::uint64_t>(widest);
  // The host's blocks in local order; on a leader, room for the padding of the leaders' step.
  std::byte* host_blocks = c.scratch(std::max<std::uint64_t>(width * block, 1));
  Args gather = a;
  gather.out = host_blocks;
  if (k == 1) {
    copy_bytes(host_blocks, a.in, block);
  } else if (segment) {
    gather.holds_turn = true;
    co_await shm_all_gather(*g.local, gather);
  } else {
    gather.root = 0;
    co_await linear_gather(*g.local, gather);
  }
  if (!c.error().ok()) co_return;
  if (g.leaders) {
    const auto host_count = static_cast<std::uint64_t>(hosts.members.size());
    std::byte* all_hosts = c.scratch(std::max<std::uint64_t>(host_count * width * block, 1));
    Args across = a;
    across.in = host_blocks;
    across.out = all_hosts;
    across.count = width * a.count;
    if (g.leaders->size() == 1) {
      copy_bytes(all_hosts, host_blocks, width * block);
    } else if (message_algo(Collective::AllGather, width * block * host_count, g.leaders->size()) ==
               Algo::Bruck) {
      co_await bruck_all_gather(*g.leaders, across);
    } else {
      co_await ring_all_gather(*g.leaders, across);
    }
    if (!c.error().ok()) co_return;
    for_each_host_block(hosts, width, [&](std::uint64_t rank, std::uint64_t at) {
      copy_bytes(a.out + rank * block, all_hosts + at * block, block);
    });
  }
  Args whole = a;
  whole.count = a.count * static_cast<std::uint64_t>(c.size());
  co_await broadcast_step(*g.local, whole, a.out, 0, segment);
  if (!c.error().ok()) co_return;
  if (a.area) a.area->release();
}

// The host's inputs reduced at its leader (all n blocks), the leaders' reduce_scatter of whole
// hosts (each host's blocks, in its members' order, padded with zeros to the largest host's
// count), then each host's result broadcast inside it and every rank keeping its own block.
// The input is read in full before the output is written (in place, it lies inside the input).
Task hierarchical_reduce_scatter(Ctx& c, Args a) {
  if (a.area) co_await shm_turn(c, *a.area);
  const ReduceOp op = a.op;
  a.op = step_op(op);
  const Hosts& hosts = *a.hosts;
  const std::uint64_t block = a.count * size_of(a.type);
  const auto n = static_cast<std::uint64_t>(c.size());
  const bool segment = a.area != nullptr;
  Groups g = groups_of(c, hosts);
  std::size_t widest = 0;
  for (const auto& m : hosts.members) widest = std::max(widest, m.size());
  const auto width = static_cast<std::uint64_t>(widest);
  // The host's sums of every block (on its leader), then this host's blocks of the result.
  std::byte* sums = g.leaders ? c.scratch(std::max<std::uint64_t>(n * block, 1)) : nullptr;
  std::byte* mine = c.scratch(std::max<std::uint64_t>(width * block, 1));
  Args whole = a;
  whole.count = a.count * n;
  co_await reduce_step(*g.local, whole, a.in, sums, 0, segment);
  if (!c.error().ok()) co_return;
  if (g.leaders) {
    const auto host_count = static_cast<std::uint64_t>(hosts.members.size());
    std::byte* by_host = c.scratch(std::max<std::uint64_t>(host_count * width * block, 1));
    std::fill_n(by_host, host_count * width * block, std::byte{0});
    for_each_host_block(hosts, width, [&](std::uint64_t rank, std::uint64_t at) {
      copy_bytes(by_host + at * block, sums + rank * block, block);
    });
    if (g.leaders->size() == 1) {
      copy_bytes(mine, by_host, width * block);
    } else {
      Args across = a;
      across.in = by_host;
      across.out = mine;
      across.count = width * a.count;
      co_await ring_reduce_scatter(*g.leaders, across);
      if (!c.error().ok()) co_return;
    }
  }
  Args host_part = a;
  host_part.count = width * a.count;
  co_await broadcast_step(*g.local, host_part, mine, 0, segment);
  if (!c.error().ok()) co_return;
  const auto local = static_cast<std::uint64_t>(g.local->rank());
  copy_bytes(a.out, mine + local * block, block);
  if (op == ReduceOp::Avg) divide(a.type, a.out, a.count, c.size());
  if (a.area) a.area->release();
}

Task hierarchical_barrier(Ctx& c, Args a) {
  if (a.area) co_await shm_turn(c, *a.area);
  Groups g = groups_of(c, *a.hosts);
  // Every rank of the host arrived; the leaders meet; the host leaves once its leader did.
  co_await local_barrier(*g.local, a);
  if (!c.error().ok()) co_return;
  if (g.leaders && g.leaders->size() > 1) {
    co_await dissemination_barrier(*g.leaders);
    if (!c.error().ok()) co_return;
  }
  co_await local_barrier(*g.local, a);
  if (!c.error().ok()) co_return;
  if (a.area) a.area->release();
}

}  // namespace orbite::coll
