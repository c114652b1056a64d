// orbite-coll-probe: the collectives between real processes, one scenario per run (argv[1]).
// Every result is checked against a reference computed here on the host: exactly for integers
// and for float sums, products, minima and maxima (the inputs are small integers, so those are
// exact in every type, float16 included); Avg within one unit in the last place of the type.
// A failed check prints "rank R: FAIL ..." and exits 1; success prints "rank R: PASS <scenario>".
#include <orbite/communicator.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "coll/reduce.h"
#include "coll_probe.h"
#include "p2p_probe.h"

namespace orbite::probe {
namespace {

using namespace std::chrono_literals;
using coll::bfloat16_to_float;
using coll::float_to_bfloat16;
using coll::float_to_half;
using coll::half_to_float;

constexpr DataType kTypes[] = {
    DataType::Int8,   DataType::Uint8,   DataType::Int32,    DataType::Uint32,  DataType::Int64,
    DataType::Uint64, DataType::Float16, DataType::Bfloat16, DataType::Float32, DataType::Float64};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                             ReduceOp::Avg};

bool is_float(DataType t) {
  return t == DataType::Float16 || t == DataType::Bfloat16 || t == DataType::Float32 ||
         t == DataType::Float64;
}
bool is_signed(DataType t) {
  return is_float(t) || t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64;
}

// Element i of a buffer of `t`, as a double (integers exactly).
double load(DataType t, const std::byte* p, std::uint64_t i) {
  auto get = [&]<class T>(T) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    return v;
  };
  switch (t) {
    case DataType::Int8: return get(std::int8_t{});
    case DataType::Uint8: return get(std::uint8_t{});
    case DataType::Int32: return get(std::int32_t{});
    case DataType::Uint32: return get(std::uint32_t{});
    case DataType::Int64: return static_cast<double>(get(std::int64_t{}));
    case DataType::Uint64: return static_cast<double>(get(std::uint64_t{}));
    case DataType::Float16: return half_to_float(get(std::uint16_t{}));
    case DataType::Bfloat16: return bfloat16_to_float(get(std::uint16_t{}));
    case DataType::Float32: return get(float{});
    case DataType::Float64: return get(double{});
  }
  return 0;
}

// Stores v (an integer for integer types: wrapped to the type's width, as the kernels wrap).
void store(DataType t, std::byte* p, std::uint64_t i, double v) {
  auto put = [&]<class T>(T x) { std::memcpy(p + i * sizeof(T), &x, sizeof(T)); };
  const auto w = static_cast<std::int64_t>(v);
  switch (t) {
    case DataType::Int8: return put(static_cast<std::int8_t>(static_cast<std::uint8_t>(w)));
    case DataType::Uint8: return put(static_cast<std::uint8_t>(w));
    case DataType::Int32: return put(static_cast<std::int32_t>(static_cast<std::uint32_t>(w)));
    case DataType::Uint32: return put(static_cast<std::uint32_t>(w));
    case DataType::Int64: return put(w);
    case DataType::Uint64: return put(static_cast<std::uint64_t>(w));
    case DataType::Float16: return put(float_to_half(static_cast<float>(v)));
    case DataType::Bfloat16: return put(float_to_bfloat16(static_cast<float>(v)));
    case DataType::Float32: return put(static_cast<float>(v));
    case DataType::Float64: return put(v);
  }
}

// Input element i of `rank` for a reduction `op`: small integers so that results are exact.
double input(ReduceOp op, DataType t, int rank, std::uint64_t i, int seed) {
  const auto k = static_cast<std::uint64_t>(rank) * 7 + i * 3 + static_cast<std::uint64_t>(seed);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return static_cast<double>(k % 4);
    case ReduceOp::Prod: return static_cast<double>(1 + (k % 5 == 0));
    case ReduceOp::Min:
    case ReduceOp::Max: return static_cast<double>(k % 11) - (is_signed(t) ? 5.0 : 0.0);
  }
  return 0;
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return a + b;
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Min: return std::min(a, b);
    case ReduceOp::Max: return std::max(a, b);
  }
  return 0;
}

// The expected element: the fold over ranks, stored in the type (wrapping) and read back.
double expected(ReduceOp op, DataType t, int n, std::uint64_t i, int seed) {
  double acc = input(op, t, 0, i, seed);
  for (int r = 1; r < n; ++r) acc = combine(op, acc, input(op, t, r, i, seed));
  std::byte cell[8];
  if (op == ReduceOp::Avg) {
    if (is_float(t)) {
      store(t, cell, 0, acc / n);
      return load(t, cell, 0);
    }
    store(t, cell, 0, acc);
    const double wrapped = load(t, cell, 0);
    return std::trunc(wrapped / n);
  }
  store(t, cell, 0, acc);
  return load(t, cell, 0);
}

bool close_enough(DataType t, ReduceOp op, double got, double want) {
  if (got == want) return true;
  if (op != ReduceOp::Avg || !is_float(t)) return false;
  const double ulp = t == DataType::Float16    ? 0x1p-10
                     : t == DataType::Bfloat16 ? 0x1p-7
                     : t == DataType::Float32  ? 0x1p-23
                                               : 0x1p-52;
  return std::fabs(got - want) <= ulp * std::max(1.0, std::fabs(want));
}

// Spreads (rank, index) over 64 bits: inputs that are not small integers.
std::uint64_t mix_for_probe(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ULL + b * 0xD1B54A32D192ED03ULL + 1;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  return x ^ (x >> 29);
}

std::string label(std::string_view coll, DataType t, const std::string& extra, std::uint64_t count,
                  bool in_place) {
  return std::string(coll) + " " + std::string(to_string(t)) + " " + extra + " count " +
         std::to_string(count) + (in_place ? " in place" : " out of place");
}

// Bytes of rank `rank`'s block `block` for data-movement collectives.
std::uint64_t seed_of(int rank, int block, std::uint64_t count) {
  return static_cast<std::uint64_t>(rank) * 1000003 + static_cast<std::uint64_t>(block) * 7919 +
         count;
}

struct Sizes {
  std::vector<std::uint64_t> counts;
};

// Counts: 0, 1, 7, an odd one, and the pipelining chunk's boundaries (+-1) for the type, plus a
// multi-chunk ring with a remainder.
std::vector<std::uint64_t> counts_for(DataType t, int n, const Communicator& comm, bool thorough) {
  const std::uint64_t chunk =
      std::max<std::uint64_t>(1, comm.config().coll.chunk_bytes / size_of(t));
  std::vector<std::uint64_t> out = {0, 1, 7, 333};
  if (thorough || t == DataType::Float32 || t == DataType::Int8) {
    for (std::uint64_t c :
         {chunk - 1, chunk, chunk + 1, 2 * chunk * static_cast<std::uint64_t>(n) + 5}) {
      out.push_back(c);
    }
  }
  return out;
}

void check_reduced(const std::string& what, DataType t, ReduceOp op, int n, const std::byte* got,
                   std::uint64_t first, std::uint64_t count, int seed) {
  for (std::uint64_t i = 0; i < count; ++i) {
    const double want = expected(op, t, n, first + i, seed);
    const double have = load(t, got, i);
    if (!close_enough(t, op, have, want)) {
      fail(what + ": element " + std::to_string(first + i) + " is " + std::to_string(have) +
           ", expected " + std::to_string(want));
    }
  }
}

void fill_inputs(DataType t, ReduceOp op, int rank, std::byte* p, std::uint64_t first,
                 std::uint64_t count, int seed) {
  for (std::uint64_t i = 0; i < count; ++i) store(t, p, i, input(op, t, rank, first + i, seed));
}

void reductions(Context& c, bool thorough) {
  Communicator& comm = c.comm;
  const int n = c.size;
  int seed = 0;
  for (DataType t : kTypes) {
    const std::size_t es = size_of(t);
    for (ReduceOp op : kOps) {
      if (!thorough && op != ReduceOp::Sum && op != ReduceOp::Avg && t != DataType::Float16 &&
          t != DataType::Int8) {
        continue;
      }
      for (std::uint64_t count : counts_for(t, n, comm, thorough)) {
        for (bool in_place : {false, true}) {
          ++seed;
          const std::string extra(to_string(op));
          // all_reduce
          {
            Bytes in(count * es + 1), out(count * es + 1, std::byte{0x5a});
            fill_inputs(t, op, c.rank, in.data(), 0, count, seed);
            std::byte* dst = in_place ? in.data() : out.data();
            const std::string what = label("all_reduce", t, extra, count, in_place);
            run(comm.all_reduce(in.data(), dst, count, t, op), what);
            check_reduced(what, t, op, n, dst, 0, count, seed);
            if (!in_place) check(out[count * es] == std::byte{0x5a}, what + ": wrote past the end");
          }
          // reduce, root varying with the count
          {
            const int root = static_cast<int>(count % static_cast<std::uint64_t>(n));
            Bytes in(count * es + 1), out(count * es + 1);
            fill_inputs(t, op, c.rank, in.data(), 0, count, seed);
            std::byte* dst = in_place ? in.data() : out.data();
            const std::string what =
                label("reduce", t, extra + " root " + std::to_string(root), count, in_place);
            run(comm.reduce(in.data(), dst, count, t, op, root), what);
            if (c.rank == root) check_reduced(what, t, op, n, dst, 0, count, seed);
          }
          // reduce_scatter: block r of the reduction lands on rank r
          {
            const std::uint64_t total = count * static_cast<std::uint64_t>(n);
            Bytes in(total * es + 1), out(count * es + 1);
            fill_inputs(t, op, c.rank, in.data(), 0, total, seed);
            std::byte* dst =
                in_place ? in.data() + static_cast<std::uint64_t>(c.rank) * count * es : out.data();
            const std::string what = label("reduce_scatter", t, extra, count, in_place);
            run(comm.reduce_scatter(in.data(), dst, count, t, op), what);
            check_reduced(what, t, op, n, dst, static_cast<std::uint64_t>(c.rank) * count, count,
                          seed);
          }
        }
      }
    }
  }
}

void movements(Context& c, bool thorough) {
  Communicator& comm = c.comm;
  const int n = c.size;
  const auto un = static_cast<std::uint64_t>(n);
  for (DataType t : kTypes) {
    const std::size_t es = size_of(t);
    for (std::uint64_t count : counts_for(t, n, comm, thorough)) {
      const std::uint64_t block = count * es;
      for (bool in_place : {false, true}) {
        const std::string ty(to_string(t));
        const int root = static_cast<int>((count + 1) % un);
        // broadcast
        {
          Bytes in(block), out(block);
          if (c.rank == root) fill_pattern(in.data(), block, seed_of(root, 0, count));
          std::byte* dst = in_place && c.rank == root ? in.data() : out.data();
          const std::string what =
              label("broadcast", t, "root " + std::to_string(root), count, in_place);
          run(comm.broadcast(in.data(), dst, count, t, root), what);
          check_pattern(dst, block, seed_of(root, 0, count), what);
        }
        // all_gather
        {
          Bytes in(block), out(block * un);
          std::byte* src =
              in_place ? out.data() + static_cast<std::uint64_t>(c.rank) * block : in.data();
          fill_pattern(src, block, seed_of(c.rank, 0, count));
          const std::string what = label("all_gather", t, "", count, in_place);
          run(comm.all_gather(src, out.data(), count, t), what);
          for (int r = 0; r < n; ++r) {
            check_pattern(out.data() + static_cast<std::uint64_t>(r) * block, block,
                          seed_of(r, 0, count), what + " block " + std::to_string(r));
          }
        }
        // all_to_all: block b of rank r goes to rank b
        {
          Bytes in(block * un), out(block * un);
          for (int b = 0; b < n; ++b) {
            fill_pattern(in.data() + static_cast<std::uint64_t>(b) * block, block,
                         seed_of(c.rank, b, count));
          }
          std::byte* dst = in_place ? in.data() : out.data();
          const std::string what = label("all_to_all", t, "", count, in_place);
          run(comm.all_to_all(in.data(), dst, count, t), what);
          for (int r = 0; r < n; ++r) {
            check_pattern(dst + static_cast<std::uint64_t>(r) * block, block,
                          seed_of(r, c.rank, count), what + " from rank " + std::to_string(r));
          }
        }
        // gather and scatter
        {
          Bytes in(block), out(block * un);
          std::byte* src = in_place && c.rank == root
                               ? out.data() + static_cast<std::uint64_t>(root) * block
                               : in.data();
          fill_pattern(src, block, seed_of(c.rank, 1, count));
          const std::string what =
              label("gather", t, "root " + std::to_string(root), count, in_place);
          run(comm.gather(src, out.data(), count, t, root), what);
          if (c.rank == root) {
            for (int r = 0; r < n; ++r) {
              check_pattern(out.data() + static_cast<std::uint64_t>(r) * block, block,
                            seed_of(r, 1, count), what + " block " + std::to_string(r));
            }
          }
        }
        {
          Bytes in(block * un), out(block);
          if (c.rank == root) {
            for (int r = 0; r < n; ++r) {
              fill_pattern(in.data() + static_cast<std::uint64_t>(r) * block, block,
                           seed_of(root, r + 2, count));
            }
          }
          std::byte* dst = in_place && c.rank == root
                               ? in.data() + static_cast<std::uint64_t>(root) * block
                               : out.data();
          const std::string what =
              label("scatter", t, "root " + std::to_string(root), count, in_place);
          run(comm.scatter(in.data(), dst, count, t, root), what);
          check_pattern(dst, block, seed_of(root, c.rank + 2, count), what);
        }
      }
      // all_to_allv: rank r sends (r + b + count) % 3 * count elements to rank b (some zero).
      {
        auto amount = [&](int from, int to) {
          return static_cast<std::uint64_t>((from + to + static_cast<int>(count % 3)) % 3) * count;
        };
        std::vector<std::uint64_t> sc(un), sd(un), rc(un), rd(un);
        std::uint64_t s_total = 0, r_total = 0;
        for (int p = 0; p < n; ++p) {
          const auto up = static_cast<std::size_t>(p);
          sc[up] = amount(c.rank, p);
          sd[up] = s_total;
          s_total += sc[up] + 1;  // gaps that must stay untouched
          rc[up] = amount(p, c.rank);
          rd[up] = r_total;
          r_total += rc[up] + 1;
        }
        Bytes in(s_total * es), out(r_total * es, std::byte{0x77});
        for (int p = 0; p < n; ++p) {
          const auto up = static_cast<std::size_t>(p);
          fill_pattern(in.data() + sd[up] * es, sc[up] * es, seed_of(c.rank, p + 9, count));
        }
        const std::string what = label("all_to_allv", t, "", count, false);
        run(comm.all_to_allv(in.data(), sc, sd, out.data(), rc, rd, t), what);
        for (int p = 0; p < n; ++p) {
          const auto up = static_cast<std::size_t>(p);
          check_pattern(out.data() + rd[up] * es, rc[up] * es, seed_of(p, c.rank + 9, count),
                        what + " from rank " + std::to_string(p));
          for (std::size_t k = 0; k < es; ++k) {
            check(out[(rd[up] + rc[up]) * es + k] == std::byte{0x77}, what + ": gap overwritten");
          }
        }
      }
    }
  }
  run(comm.barrier(), "barrier");
}

bool thorough_mode() {
  const char* q = std::getenv("COLL_PROBE_QUICK");
  return q == nullptr || std::string(q) != "1";
}

void scenario_matrix(Context& c) {
  const bool thorough = thorough_mode();
  reductions(c, thorough);
  movements(c, thorough);
}

// Several collectives outstanding at once, waited for in reverse order, on a parent and its
// split and dup'ed children at the same time.
void scenario_concurrent(Context& c) {
  Communicator& comm = c.comm;
  const int n = c.size;
  auto split = comm.split(c.rank % 2, -c.rank);  // reversed order within a colour
  check_ok(split.status(), "split");
  check(split->has_value(), "split gave no communicator");
  Communicator& half = **split;
  const int half_size = (n + 1 - c.rank % 2) / 2;
  check(half.size() == half_size, "split size " + std::to_string(half.size()));
  // key = -rank: the highest old rank of the colour is new rank 0.
  const int expected_rank = (half_size - 1) - c.rank / 2;
  check(half.rank() == expected_rank, "split rank " + std::to_string(half.rank()) + ", expected " +
                                          std::to_string(expected_rank));
  auto dup = comm.dup();
  check_ok(dup.status(), "dup");
  auto none = comm.split(c.rank == 0 ? kUndefinedColor : 1, 0);
  check_ok(none.status(), "split with kUndefinedColor");
  check(none->has_value() == (c.rank != 0), "kUndefinedColor must give no communicator");

  constexpr int kRounds = 6;
  constexpr std::uint64_t kCount = 70001;  // past the ring threshold, odd
  std::vector<std::vector<std::int64_t>> bufs;
  std::vector<Request> reqs;
  std::vector<std::pair<Communicator*, std::int64_t>> owners;
  for (int k = 0; k < kRounds; ++k) {
    for (Communicator* cm : {&comm, &half, &*dup}) {
      bufs.emplace_back(kCount, static_cast<std::int64_t>(cm->rank() + 1 + k));
      reqs.push_back(accepted(cm->all_reduce(bufs.back().data(), bufs.back().data(), kCount,
                                             DataType::Int64, ReduceOp::Sum),
                              "concurrent all_reduce"));
      const std::int64_t m = cm->size();
      owners.emplace_back(cm, m * (m + 1) / 2 + m * k);
    }
  }
  for (std::size_t i = reqs.size(); i-- > 0;) {
    wait_ok(reqs[i], "concurrent all_reduce " + std::to_string(i));
    for (std::int64_t v : bufs[i]) {
      check(v == owners[i].second, "concurrent all_reduce " + std::to_string(i) + " got " +
                                       std::to_string(v) + ", expected " +
                                       std::to_string(owners[i].second));
    }
  }
  if (none->has_value()) run((*none)->barrier(), "barrier of the split without rank 0");
  run(half.barrier(), "half barrier");
  run(dup->barrier(), "dup barrier");
}

// Errors a rank detects alone: InvalidArgument before anything is sent, and the communicator
// still works afterwards.
void scenario_invalid(Context& c) {
  Communicator& comm = c.comm;
  std::vector<float> a(16), b(16);
  auto bad = [&](Result<Request> r, const std::string& what, const std::string& needle) {
    check(!r.ok(), what + " was accepted");
    check(r.status().code() == Errc::InvalidArgument,
          what + ": " + r.status().to_string() + " is not InvalidArgument");
    check(r.status().message().find(needle) != std::string::npos,
          what + ": '" + r.status().message() + "' does not name '" + needle + "'");
  };
  bad(comm.all_reduce(nullptr, b.data(), 4, DataType::Float32, ReduceOp::Sum), "null send",
      "send buffer is null");
  bad(comm.all_reduce(a.data(), b.data(), 4, static_cast<DataType>(42), ReduceOp::Sum), "bad type",
      "data type 42");
  bad(comm.all_reduce(a.data(), b.data(), 4, DataType::Float32, static_cast<ReduceOp>(9)), "bad op",
      "reduction op 9");
  bad(comm.reduce(a.data(), b.data(), 4, DataType::Float32, ReduceOp::Sum, c.size), "root",
      "root " + std::to_string(c.size));
  bad(comm.broadcast(a.data(), b.data(), 4, DataType::Float32, -1), "negative root", "root -1");
  bad(comm.all_reduce(a.data(), a.data() + 1, 4, DataType::Float32, ReduceOp::Sum), "overlap",
      "overlap");
  bad(comm.all_reduce(a.data(), b.data(), (1ULL << 62), DataType::Float64, ReduceOp::Sum),
      "overflow", "overflows");
  std::vector<std::uint64_t> short_counts(static_cast<std::size_t>(c.size) + 1, 0);
  std::vector<std::uint64_t> zeros(static_cast<std::size_t>(c.size), 0);
  bad(comm.all_to_allv(a.data(), short_counts, zeros, b.data(), zeros, zeros, DataType::Float32),
      "all_to_allv counts", "send_counts has");
  bad(comm.split(-7, 0).status(), "split colour", "color -7");
  // Still usable: a real collective completes on every rank.
  std::vector<std::int32_t> one = {c.rank};
  std::vector<std::int32_t> sum(1);
  run(comm.all_reduce(one.data(), sum.data(), 1, DataType::Int32, ReduceOp::Sum), "after errors");
  check(sum[0] == c.size * (c.size - 1) / 2, "sum after errors");
}

// The last rank starts a large all_reduce, never waits for it, and dies; every other rank's
// all_reduce must fail with ConnectionLost, well within the wait bound.
void scenario_killed_rank(Context& c) {
  Communicator& comm = c.comm;
  constexpr std::uint64_t kCount = 4 << 20;  // 16 MiB of float32
  std::vector<float> data(kCount, 1.0f);
  // Connections and the first collective established everywhere first.
  run(comm.barrier(), "barrier before the kill");
  if (c.rank == c.size - 1) {
    // The dying rank never starts the all_reduce: if it did, its own start() may already forward
    // everything the others need (they are ahead of it and the ring's data is there), and they
    // would finish before it dies. Without its first sends no other rank can complete, so every
    // other rank is deterministically in the middle of the all_reduce when the peer vanishes.
    std::this_thread::sleep_for(200ms);
    std::printf("rank %d: dying\n", c.rank);
    std::fflush(stdout);
    std::raise(SIGKILL);
  }
  auto req =
      accepted(comm.all_reduce(data.data(), data.data(), kCount, DataType::Float32, ReduceOp::Sum),
               "all_reduce");
  const auto start = std::chrono::steady_clock::now();
  Status st = req.wait(kWait);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  check(st.code() == Errc::ConnectionLost, "all_reduce with a dead rank ended with " +
                                               st.to_string() + " after " + std::to_string(ms) +
                                               " ms");
  std::printf("rank %d: ConnectionLost after %lld ms: %s\n", c.rank, static_cast<long long>(ms),
              st.message().c_str());
  // The communicator's collectives stay broken.
  auto again = comm.barrier();
  check(!again.ok() && again.status().code() == Errc::ConnectionLost,
        "a collective after the failure: " +
            (again.ok() ? std::string("accepted") : again.status().to_string()));
  // The failed all_reduce's messages to live peers may still be posted and read or write `data`
  // until the engine closes (docs/collectives.md, as after an NCCL error), so close it before
  // `data` goes out of scope. Those messages are cancelled: Unquiesced is the expected answer.
  const Status closed = comm.engine().close(std::chrono::seconds(1));
  check(closed.ok() || closed.code() == Errc::Unquiesced, "engine close: " + closed.to_string());
}

// Floating-point results that are not exact (random inputs) are bit-identical on every rank and
// from one call to the next, for each algorithm the rule picks (sizes on both sides of the
// thresholds).
void scenario_determinism(Context& c) {
  Communicator& comm = c.comm;
  for (DataType t : {DataType::Float32, DataType::Float16, DataType::Bfloat16, DataType::Float64}) {
    const std::size_t es = size_of(t);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Avg}) {
      for (std::uint64_t count : {7ULL, 1000ULL, 70001ULL}) {
        Bytes in(count * es);
        for (std::uint64_t i = 0; i < count; ++i) {
          const auto k = mix_for_probe(static_cast<std::uint64_t>(c.rank), i);
          store(t, in.data(), i, 0.5 + static_cast<double>(k % 1000003) / 1000003.0);
        }
        const std::string what =
            label("determinism all_reduce", t, std::string(to_string(op)), count, false);
        Bytes first(count * es), second(count * es);
        run(comm.all_reduce(in.data(), first.data(), count, t, op), what);
        run(comm.all_reduce(in.data(), second.data(), count, t, op), what + " again");
        check(first == second, what + ": two calls differ");
        // Every rank holds the same bits: compare a digest through an all_gather.
        std::uint64_t digest = 1469598103934665603ULL;
        for (std::byte b : first)
          digest = (digest ^ static_cast<std::uint64_t>(b)) * 1099511628211ULL;
        std::vector<std::uint64_t> all(static_cast<std::size_t>(c.size));
        run(comm.all_gather(&digest, all.data(), 1, DataType::Uint64), what + " digests");
        for (int r = 0; r < c.size; ++r) {
          check(all[static_cast<std::size_t>(r)] == digest,
                what + ": rank " + std::to_string(r) + " holds different bits");
        }
      }
    }
  }
}

struct Scenario {
  std::function<void(Context&)> run;
  bool closes_with_barrier;
};

const std::map<std::string_view, Scenario>& scenarios() {
  static const std::map<std::string_view, Scenario> table = {
      {"matrix", {scenario_matrix, true}},
      {"hierarchical_route", {scenario_hierarchical_route, true}},
      {"concurrent", {scenario_concurrent, true}},
      {"invalid", {scenario_invalid, true}},
      {"killed_rank", {scenario_killed_rank, false}},
      {"determinism", {scenario_determinism, true}},
      {"route", {scenario_route, true}},
      {"segment_held", {scenario_segment_held, false}},
  };
  return table;
}

}  // namespace
}  // namespace orbite::probe

int main(int argc, char** argv) {
  using namespace orbite::probe;
  if (argc != 2 || scenarios().count(argv[1]) == 0) {
    std::fprintf(stderr, "usage: orbite-coll-probe SCENARIO\nscenarios:");
    for (const auto& [name, s] : scenarios()) {
      std::fprintf(stderr, " %.*s", static_cast<int>(name.size()), name.data());
    }
    std::fprintf(stderr, "\n");
    return 2;
  }
  const std::string name = argv[1];
  if (const char* env_rank = std::getenv("ORBITE_RANK")) set_rank_for_messages(std::atoi(env_rank));
  // COLL_PROBE_HOSTS=k: rank r claims to run on host r % k (ORBITE_HOSTID, read when the engine
  // starts), so that one machine stands in for k hosts whose ranks interleave.
  if (const char* hosts = std::getenv("COLL_PROBE_HOSTS"); hosts != nullptr) {
    const char* env_rank = std::getenv("ORBITE_RANK");
    check(env_rank != nullptr && std::atoi(hosts) > 0, "COLL_PROBE_HOSTS needs ORBITE_RANK");
    const std::string id = "probe-host-" + std::to_string(std::atoi(env_rank) % std::atoi(hosts));
    ::setenv("ORBITE_HOSTID", id.c_str(), 1);
  }
  // COLL_PROBE_RANK_ENV="R:NAME=VALUE": rank R alone runs with NAME=VALUE (a setting the others
  // do not share).
  if (const char* one = std::getenv("COLL_PROBE_RANK_ENV"); one != nullptr) {
    const std::string spec = one;
    const auto colon = spec.find(':');
    const auto eq = spec.find('=', colon == std::string::npos ? 0 : colon);
    const char* env_rank = std::getenv("ORBITE_RANK");
    check(colon != std::string::npos && eq != std::string::npos && env_rank != nullptr,
          "COLL_PROBE_RANK_ENV is RANK:NAME=VALUE and needs ORBITE_RANK");
    if (std::atoi(spec.substr(0, colon).c_str()) == std::atoi(env_rank)) {
      ::setenv(spec.substr(colon + 1, eq - colon - 1).c_str(), spec.substr(eq + 1).c_str(), 1);
    }
  }
  auto boot = orbite::Bootstrap::from_env();
  check_ok(boot.status(), "bootstrap");
  set_rank_for_messages(boot->rank());
  auto comm = orbite::Communicator::create(*boot);
  check_ok(comm.status(), "communicator");
  Context c{*comm, {}, comm->rank(), comm->size()};
  const Scenario& scenario = scenarios().at(name);
  scenario.run(c);
  if (const char* route = std::getenv("COLL_PROBE_ROUTE");
      route != nullptr && std::string_view(route) == "rdma" && c.size > 1) {
    // coll.transport = rdma: every collective message went over RDMA, none over tcp or shm.
    const orbite::EngineStats s = c.comm.engine().stats();
    const orbite::TransportStats& rdma = s.of(orbite::Transport::Rdma);
    const orbite::TransportStats& tcp = s.of(orbite::Transport::Tcp);
    const orbite::TransportStats& shm = s.of(orbite::Transport::Shm);
    check(rdma.frames_sent > 0 && rdma.frames_received > 0 && rdma.bytes_sent > 0 &&
              rdma.bytes_received > 0,
          "route: rdma carried " + std::to_string(rdma.bytes_sent) + " bytes");
    check(tcp.frames_sent + tcp.frames_received + shm.frames_sent + shm.frames_received == 0,
          "route: " + std::to_string(tcp.frames_sent + shm.frames_sent) +
              " tcp or shm frames with coll.transport rdma");
    std::printf("rank %d: route rdma ok (%llu bytes sent)\n", c.rank,
                static_cast<unsigned long long>(rdma.bytes_sent));
  }
  if (scenario.closes_with_barrier) {
    // Every rank done before any engine closes (a peer may still be forwarding).
    check_ok(c.comm.store_barrier(), "store barrier before close");
    check_ok(c.comm.engine().close(std::chrono::seconds(30)), "engine close");
  }
  std::printf("rank %d: PASS %s\n", c.rank, name.c_str());
  std::fflush(stdout);
  return 0;
}
