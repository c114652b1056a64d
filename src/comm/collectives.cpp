// The Communicator's collectives: argument checks (everything a rank can check alone, before
// anything is sent), the algorithm choice, and the hand-off to the collective executor.
#include <limits>
#include <string>

#include "coll/algorithms.h"
#include "coll/shared_area.h"
#include "comm/communicator_impl.h"

namespace orbite {

namespace {

using coll::Algo;
using coll::Args;
using coll::Collective;
using coll::Ctx;
using coll::Task;

Status invalid(std::string_view op, const std::string& what) {
  return Status::error(Errc::InvalidArgument, std::string(op) + ": " + what);
}

Status check_type(std::string_view op, DataType type) {
  if (static_cast<int>(type) >= kDataTypeCount) {
    return invalid(op, "data type " + std::to_string(static_cast<int>(type)) + " is not supported");
  }
  return {};
}

Status check_op(std::string_view op, ReduceOp r) {
  if (static_cast<int>(r) >= kReduceOpCount) {
    return invalid(op, "reduction op " + std::to_string(static_cast<int>(r)) + " is not supported");
  }
  return {};
}

Status check_root(std::string_view op, int root, int size) {
  if (root < 0 || root >= size) {
    return invalid(op,
                   "root " + std::to_string(root) + " is outside 0.." + std::to_string(size - 1));
  }
  return {};
}

// count * blocks elements of type, in bytes, or an error when that overflows the address space.
Result<std::uint64_t> bytes_of(std::string_view op, std::uint64_t count, DataType type,
                               std::uint64_t blocks = 1) {
  const std::uint64_t es = size_of(type);
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max() / 4;
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, es, &bytes) || __builtin_mul_overflow(bytes, blocks, &bytes) ||
      bytes > kMax) {
    return invalid(op, "count " + std::to_string(count) + " of " + std::string(to_string(type)) +
                           (blocks > 1 ? " times " + std::to_string(blocks) + " ranks" : "") +
                           " overflows the address space");
  }
  return bytes;
}

Status check_buffer(std::string_view op, std::string_view name, const void* p,
                    std::uint64_t bytes) {
  if (p == nullptr && bytes > 0) {
    return invalid(
        op, std::string(name) + " buffer is null with " + std::to_string(bytes) + " bytes to move");
  }
  return {};
}

// Two ranges may be the same (in place, where `same_ok`) or apart, never partly overlapping.
Status check_overlap(std::string_view op, const void* a, std::uint64_t a_bytes, const void* b,
                     std::uint64_t b_bytes, const void* in_place_at, std::string_view rule) {
  if (a == nullptr || b == nullptr || a_bytes == 0 || b_bytes == 0) return {};
  const auto a0 = reinterpret_cast<std::uintptr_t>(a);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b);
  const bool overlap = a0 < b0 + b_bytes && b0 < a0 + a_bytes;
  if (!overlap) return {};
  if (in_place_at != nullptr && a == in_place_at) return {};
  return invalid(
      op, "send and receive buffers overlap without being in place (" + std::string(rule) + ")");
}

}  // namespace

Result<Request> Communicator::Impl::launch(const coll::Launch& l, Args args) {
  using Algorithm = Task (*)(Ctx&, Args);
  const int n = static_cast<int>(peers.size());
  args.chunk_bytes = config.coll.chunk_bytes;
  args.depth = static_cast<int>(config.coll.pipeline_depth);
  Algorithm run = nullptr;
  const bool shm_forced = algos.forced[static_cast<std::size_t>(l.kind)] == Algo::Shm;
  const bool single_host = hosts->members.size() == 1;
  if (shm_forced && !(area && single_host) && n > 1) {
    return Status::error(
        Errc::Unavailable,
        std::string(coll::to_string(l.kind)) +
            ": coll.algo asks for shm, and this communicator has no shared segment (it needs "
            "every rank on one host, shm.enable and coll.transport unspec or shm; " +
            (wants_segment() ? "a rank could not attach the segment, see the log"
                             : "one of these "
                               "does not hold") +
            ")");
  }
  // Device buffers: moved directly (device buffers that only move keep the message algorithms,
  // cuda_ipc reads them device to device), or host stand-ins rewritten into args.
  ORBITE_ASSIGN_OR_RETURN(
      coll::DeviceBuffers device,
      coll::prepare_device_buffers(l.kind, args, l.in_bytes, l.out_bytes, !shm_forced));
  // The segments' steps copy through host memory: device buffers that move directly keep the
  // message algorithms.
  const bool shared = area != nullptr && single_host && !device.direct;
  const bool nested = hosts->nested() && !device.direct;
  Algo algo = coll::choose(l.kind, algos, l.bytes, n, shared, nested, shared && area->crowded());
  // shm asked for on one rank (no segment; nothing to share), hierarchical on device buffers
  // that move directly: the rule's algorithm.
  if ((algo == Algo::Shm && !shared) || (algo == Algo::Hierarchical && device.direct)) {
    algo = coll::choose(l.kind, {}, l.bytes, n, false, nested);
  }
  if (algo == Algo::Shm) args.area = area;
  if (algo == Algo::Hierarchical) {
    args.area = area;  // this host's segment, or null
    args.hosts = hosts;
  }
  switch (l.kind) {
    case Collective::AllReduce:
      run = algo == Algo::Shm            ? &coll::shm_all_reduce
            : algo == Algo::Hierarchical ? &coll::hierarchical_all_reduce
            : algo == Algo::Ring         ? &coll::ring_all_reduce
                                         : &coll::recursive_doubling_all_reduce;
      break;
    case Collective::Reduce:
      run = algo == Algo::Shm            ? &coll::shm_reduce
            : algo == Algo::Hierarchical ? &coll::hierarchical_reduce
            : algo == Algo::Chain        ? &coll::chain_reduce
                                         : &coll::binomial_reduce;
      break;
    case Collective::Broadcast:
      run = algo == Algo::Shm            ? &coll::shm_broadcast
            : algo == Algo::Hierarchical ? &coll::hierarchical_broadcast
            : algo == Algo::Chain        ? &coll::chain_broadcast
                                         : &coll::binomial_broadcast;
      break;
    case Collective::AllGather:
      run = algo == Algo::Shm            ? &coll::shm_all_gather
            : algo == Algo::Hierarchical ? &coll::hierarchical_all_gather
            : algo == Algo::Bruck        ? &coll::bruck_all_gather
                                         : &coll::ring_all_gather;
      break;
    case Collective::ReduceScatter:
      run = algo == Algo::Shm            ? &coll::shm_reduce_scatter
            : algo == Algo::Hierarchical ? &coll::hierarchical_reduce_scatter
                                         : &coll::ring_reduce_scatter;
      break;
    case Collective::AllToAll: run = &coll::pairwise_all_to_all; break;
    case Collective::Gather: run = &coll::linear_gather; break;
    case Collective::Scatter: run = &coll::linear_scatter; break;
    case Collective::Barrier:
      run = algo == Algo::Shm ? &coll::shm_barrier
            : algo == Algo::Hierarchical
                ? &coll::hierarchical_barrier
                : [](Ctx& c, Args) { return coll::dissemination_barrier(c); };
      break;
  }
  // Bruck's rotation goes through host scratch; the ring moves device blocks in place.
  if (device.direct && run == &coll::bruck_all_gather) run = &coll::ring_all_gather;
  // One rank, or nothing to move: no messages (the collective still takes its place in the
  // sequence every rank follows). all_to_allv always runs: one rank may move nothing while
  // others do.
  const bool vector_exchange = l.kind == Collective::AllToAll && !args.send_counts.empty();
  if ((n == 1 || l.bytes == 0) && l.kind != Collective::Barrier && !vector_exchange) {
    run = &coll::local_copy;
    args.local_bytes = l.result_bytes;
  }
  // A local copy, or a tiny step through the segment, may finish on this thread (no op, no
  // coroutine, no request of its own).
  coll::Executor::InlineStart first = nullptr;
  if (run == &coll::local_copy) {
    first = &coll::local_copy_inline;
  } else if (algo == Algo::Shm) {
    first = l.kind == Collective::AllReduce   ? &coll::shm_all_reduce_inline
            : l.kind == Collective::Reduce    ? &coll::shm_reduce_inline
            : l.kind == Collective::Broadcast ? &coll::shm_broadcast_inline
            : l.kind == Collective::Barrier   ? &coll::shm_barrier_inline
                                              : nullptr;
  }
  return executor->start(coll::to_string(l.kind), run, std::move(args), l.result_bytes,
                         std::move(device), first);
}

Result<Request> Communicator::all_reduce(const void* send, void* recv, std::uint64_t count,
                                         DataType type, ReduceOp op) {
  constexpr std::string_view kOp = "all_reduce";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  ORBITE_RETURN_IF_ERROR(check_op(kOp, op));
  ORBITE_ASSIGN_OR_RETURN(std::uint64_t bytes, bytes_of(kOp, count, type));
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "send", send, bytes));
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "receive", recv, bytes));
  ORBITE_RETURN_IF_ERROR(check_overlap(kOp, send, bytes, recv, bytes, recv, "send == recv"));
  Args a;
  a.in = static_cast<const std::byte*>(send);
  a.out = static_cast<std::byte*>(recv);
  a.count = count;
  a.type = type;
  a.op = op;
  return impl_->launch({Collective::AllReduce, bytes, bytes, bytes, bytes}, std::move(a));
}

Result<Request> Communicator::reduce(const void* send, void* recv, std::uint64_t count,
                                     DataType type, ReduceOp op, int root) {
  constexpr std::string_view kOp = "reduce";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  ORBITE_RETURN_IF_ERROR(check_op(kOp, op));
  ORBITE_RETURN_IF_ERROR(check_root(kOp, root, size()));
  ORBITE_ASSIGN_OR_RETURN(std::uint64_t bytes, bytes_of(kOp, count, type));
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "send", send, bytes));
  const bool is_root = rank() == root;
  if (is_root) {
    ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "the root's receive", recv, bytes));
    ORBITE_RETURN_IF_ERROR(check_overlap(kOp, send, bytes, recv, bytes, recv, "send == recv"));
  }
  Args a;
  a.in = static_cast<const std::byte*>(send);
  a.out = is_root ? static_cast<std::byte*>(recv) : nullptr;
  a.count = count;
  a.type = type;
  a.op = op;
  a.root = root;
  return impl_->launch({Collective::Reduce, bytes, is_root ? bytes : 0, bytes, is_root ? bytes : 0},
                       std::move(a));
}

Result<Request> Communicator::broadcast(const void* send, void* recv, std::uint64_t count,
                                        DataType type, int root) {
  constexpr std::string_view kOp = "broadcast";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  ORBITE_RETURN_IF_ERROR(check_root(kOp, root, size()));
  ORBITE_ASSIGN_OR_RETURN(std::uint64_t bytes, bytes_of(kOp, count, type));
  const bool is_root = rank() == root;
  if (is_root) {
    ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "the root's send", send, bytes));
    ORBITE_RETURN_IF_ERROR(check_overlap(kOp, send, bytes, recv, bytes, recv, "send == recv"));
  } else {
    ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "receive", recv, bytes));
  }
  Args a;
  a.in = is_root ? static_cast<const std::byte*>(send) : nullptr;
  a.out = static_cast<std::byte*>(recv);
  a.count = count;
  a.type = type;
  a.root = root;
  return impl_->launch({Collective::Broadcast, bytes, bytes, is_root ? bytes : 0, bytes},
                       std::move(a));
}

Result<Request> Communicator::all_gather(const void* send, void* recv, std::uint64_t send_count,
                                         DataType type) {
  constexpr std::string_view kOp = "all_gather";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  const auto n = static_cast<std::uint64_t>(size());
  ORBITE_ASSIGN_OR_RETURN(std::uint64_t total, bytes_of(kOp, send_count, type, n));
  const std::uint64_t block = total / n;
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "send", send, block));
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "receive", recv, total));
  const void* in_place = recv == nullptr ? nullptr
                                         : static_cast<const std::byte*>(recv) +
                                               static_cast<std::uint64_t>(rank()) * block;
  ORBITE_RETURN_IF_ERROR(
      check_overlap(kOp, send, block, recv, total, in_place, "send == recv + rank * send_count"));
  Args a;
  a.in = static_cast<const std::byte*>(send);
  a.out = static_cast<std::byte*>(recv);
  a.count = send_count;
  a.type = type;
  return impl_->launch({Collective::AllGather, total, total, block, total}, std::move(a));
}

Result<Request> Communicator::reduce_scatter(const void* send, void* recv, std::uint64_t recv_count,
                                             DataType type, ReduceOp op) {
  constexpr std::string_view kOp = "reduce_scatter";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  ORBITE_RETURN_IF_ERROR(check_op(kOp, op));
  const auto n = static_cast<std::uint64_t>(size());
  ORBITE_ASSIGN_OR_RETURN(std::uint64_t total, bytes_of(kOp, recv_count, type, n));
  const std::uint64_t block = total / n;
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "send", send, total));
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "receive", recv, block));
  const void* in_place = send == nullptr ? nullptr
                                         : static_cast<const std::byte*>(send) +
                                               static_cast<std::uint64_t>(rank()) * block;
  ORBITE_RETURN_IF_ERROR(
      check_overlap(kOp, recv, block, send, total, in_place, "recv == send + rank * recv_count"));
  Args a;
  a.in = static_cast<const std::byte*>(send);
  a.out = static_cast<std::byte*>(recv);
  a.count = recv_count;
  a.type = type;
  a.op = op;
  return impl_->launch({Collective::ReduceScatter, total, block, total, block}, std::move(a));
}

Result<Request> Communicator::all_to_all(const void* send, void* recv, std::uint64_t count,
                                         DataType type) {
  constexpr std::string_view kOp = "all_to_all";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  const auto n = static_cast<std::uint64_t>(size());
  ORBITE_ASSIGN_OR_RETURN(std::uint64_t total, bytes_of(kOp, count, type, n));
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "send", send, total));
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "receive", recv, total));
  ORBITE_RETURN_IF_ERROR(check_overlap(kOp, send, total, recv, total, recv, "send == recv"));
  Args a;
  a.in = static_cast<const std::byte*>(send);
  a.out = static_cast<std::byte*>(recv);
  a.count = count;
  a.type = type;
  return impl_->launch({Collective::AllToAll, total, total, total, total}, std::move(a));
}

Result<Request> Communicator::all_to_allv(const void* send,
                                          std::span<const std::uint64_t> send_counts,
                                          std::span<const std::uint64_t> send_displs, void* recv,
                                          std::span<const std::uint64_t> recv_counts,
                                          std::span<const std::uint64_t> recv_displs,
                                          DataType type) {
  constexpr std::string_view kOp = "all_to_allv";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  const auto n = static_cast<std::size_t>(size());
  const std::pair<std::string_view, std::span<const std::uint64_t>> vectors[] = {
      {"send_counts", send_counts},
      {"send_displs", send_displs},
      {"recv_counts", recv_counts},
      {"recv_displs", recv_displs}};
  for (const auto& [name, v] : vectors) {
    if (v.size() != n) {
      return invalid(kOp, std::string(name) + " has " + std::to_string(v.size()) + " entries for " +
                              std::to_string(n) + " ranks");
    }
  }
  std::uint64_t send_end = 0;
  std::uint64_t recv_end = 0;
  for (std::size_t p = 0; p < n; ++p) {
    for (auto [count, displ, end] : {std::tuple{send_counts[p], send_displs[p], &send_end},
                                     std::tuple{recv_counts[p], recv_displs[p], &recv_end}}) {
      ORBITE_ASSIGN_OR_RETURN(std::uint64_t b, bytes_of(kOp, count, type));
      ORBITE_ASSIGN_OR_RETURN(std::uint64_t d, bytes_of(kOp, displ, type));
      if (b > 0) *end = std::max(*end, d + b);
    }
  }
  const auto self = static_cast<std::size_t>(rank());
  if (send_counts[self] != recv_counts[self]) {
    return invalid(kOp, "this rank sends " + std::to_string(send_counts[self]) +
                            " elements to itself but expects " + std::to_string(recv_counts[self]));
  }
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "send", send, send_end));
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "receive", recv, recv_end));
  ORBITE_RETURN_IF_ERROR(
      check_overlap(kOp, send, send_end, recv, recv_end, nullptr, "no in-place all_to_allv"));
  Args a;
  a.in = static_cast<const std::byte*>(send);
  a.out = static_cast<std::byte*>(recv);
  a.type = type;
  a.send_counts.assign(send_counts.begin(), send_counts.end());
  a.send_displs.assign(send_displs.begin(), send_displs.end());
  a.recv_counts.assign(recv_counts.begin(), recv_counts.end());
  a.recv_displs.assign(recv_displs.begin(), recv_displs.end());
  // Every rank runs the exchange (one rank may have nothing to move while others do).
  return impl_->launch(
      {Collective::AllToAll, std::max<std::uint64_t>(1, send_end), recv_end, send_end, recv_end},
      std::move(a));
}

Result<Request> Communicator::gather(const void* send, void* recv, std::uint64_t send_count,
                                     DataType type, int root) {
  constexpr std::string_view kOp = "gather";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  ORBITE_RETURN_IF_ERROR(check_root(kOp, root, size()));
  const auto n = static_cast<std::uint64_t>(size());
  ORBITE_ASSIGN_OR_RETURN(std::uint64_t total, bytes_of(kOp, send_count, type, n));
  const std::uint64_t block = total / n;
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "send", send, block));
  const bool is_root = rank() == root;
  if (is_root) {
    ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "the root's receive", recv, total));
    const void* in_place = recv == nullptr ? nullptr
                                           : static_cast<const std::byte*>(recv) +
                                                 static_cast<std::uint64_t>(root) * block;
    ORBITE_RETURN_IF_ERROR(
        check_overlap(kOp, send, block, recv, total, in_place, "send == recv + root * send_count"));
  }
  Args a;
  a.in = static_cast<const std::byte*>(send);
  a.out = is_root ? static_cast<std::byte*>(recv) : nullptr;
  a.count = send_count;
  a.type = type;
  a.root = root;
  return impl_->launch({Collective::Gather, total, is_root ? total : 0, block, is_root ? total : 0},
                       std::move(a));
}

Result<Request> Communicator::scatter(const void* send, void* recv, std::uint64_t recv_count,
                                      DataType type, int root) {
  constexpr std::string_view kOp = "scatter";
  ORBITE_RETURN_IF_ERROR(check_type(kOp, type));
  ORBITE_RETURN_IF_ERROR(check_root(kOp, root, size()));
  const auto n = static_cast<std::uint64_t>(size());
  ORBITE_ASSIGN_OR_RETURN(std::uint64_t total, bytes_of(kOp, recv_count, type, n));
  const std::uint64_t block = total / n;
  ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "receive", recv, block));
  const bool is_root = rank() == root;
  if (is_root) {
    ORBITE_RETURN_IF_ERROR(check_buffer(kOp, "the root's send", send, total));
    const void* in_place = send == nullptr ? nullptr
                                           : static_cast<const std::byte*>(send) +
                                                 static_cast<std::uint64_t>(root) * block;
    ORBITE_RETURN_IF_ERROR(
        check_overlap(kOp, recv, block, send, total, in_place, "recv == send + root * recv_count"));
  }
  Args a;
  a.in = is_root ? static_cast<const std::byte*>(send) : nullptr;
  a.out = static_cast<std::byte*>(recv);
  a.count = recv_count;
  a.type = type;
  a.root = root;
  return impl_->launch({Collective::Scatter, total, block, is_root ? total : 0, block},
                       std::move(a));
}

Result<Request> Communicator::barrier() {
  return impl_->launch({Collective::Barrier, 0, 0}, Args{});
}

}  // namespace orbite
