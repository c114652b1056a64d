// The shared side of the collective benchmarks (all_reduce_perf, all_gather_perf, ...): nccl-tests'
// flags (-d -o -r -z on top of the harness's), its size conventions, bus-bandwidth factors and
// table (out-of-place then in-place on one row), the host-side result check and the timing. A
// backend moves the bytes: OrbiTE (coll_perf_main.cpp), Open MPI (reference/mpi_coll_perf.cpp)
// or Gloo (reference/gloo_all_reduce_perf.cpp). Like the harness it links no communication
// library, so every implementation parses, counts and prints identically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/harness.h"

namespace orbite::perf {

enum class Coll : std::uint8_t { AllReduce, AllGather, Broadcast, Reduce, ReduceScatter, AllToAll };

// The element types and reduction operators of include/orbite/collectives.h, in the same order
// and with the same names, repeated here so that the MPI and Gloo references need no OrbiTE.
enum class ElemType : std::uint8_t {
  Int8,
  Uint8,
  Int32,
  Uint32,
  Int64,
  Uint64,
  Float16,
  Bfloat16,
  Float32,
  Float64,
};
enum class RedOp : std::uint8_t { Sum, Prod, Min, Max, Avg };

inline constexpr int kElemTypeCount = 10;
inline constexpr int kRedOpCount = 5;

std::string_view coll_name(Coll coll);  // "all_reduce"
std::optional<Coll> parse_coll(std::string_view name);
bool coll_has_op(Coll coll);    // all_reduce, reduce, reduce_scatter
bool coll_has_root(Coll coll);  // broadcast, reduce

std::string_view type_name(ElemType type);  // "float32"
std::size_t type_size(ElemType type);
// The names above and nccl-tests' (int8/char, uint8, int32/int, uint32/uint, int64, uint64,
// float16/half/fp16, bfloat16/bf16, float32/float/fp32, float64/double/fp64).
std::optional<ElemType> parse_type(std::string_view name);
std::string_view op_name(RedOp op);  // "sum"
std::optional<RedOp> parse_op(std::string_view name);

struct CollOptions {
  ElemType type = ElemType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  // -z 1 (default): every iteration waits for its collective before the next starts. -z 0: up
  // to kMaxInFlight collectives in flight, each on its own buffers (see the --help text).
  bool blocking = true;
  // -p 1: after the timed loop, time each call of a second loop of as many calls and report
  // percentiles of the per-call time (out-of-place): the tail a mean hides. Needs -z 1.
  bool percentiles = false;
};

// -z 0 keeps at most this many collectives in flight, and fewer when their buffers would pass
// kInFlightBytes together.
inline constexpr int kMaxInFlight = 16;
inline constexpr std::uint64_t kInFlightBytes = 256 * kMiB;

// What one call of the collective moves for a swept SIZE, as nccl-tests counts it: the SIZE is
// divided into elements of the type, and the collectives that split their buffer among the
// ranks (all_gather, reduce_scatter, alltoall) round it down to a multiple of the rank count.
struct CollShape {
  std::uint64_t count = 0;       // the count argument of one call (per rank / per peer)
  std::uint64_t send_bytes = 0;  // each rank's send buffer
  std::uint64_t recv_bytes = 0;  // each rank's receive buffer
  // The "size" column: the larger buffer (nccl-tests' max(sendBytes, recvBytes)).
  [[nodiscard]] std::uint64_t size_bytes() const {
    return send_bytes > recv_bytes ? send_bytes : recv_bytes;
  }
};
CollShape coll_shape(Coll coll, std::uint64_t size, std::size_t elem_size, int ranks);

// busbw = algbw * factor (nccl-tests' PERFORMANCE.md): what each rank's link carries relative to
// the size, so that the figures of different rank counts compare with the hardware's bandwidth.
double bus_factor(Coll coll, int ranks);

// One call's buffers. In place, they alias as NCCL defines it (communicator.h).
struct CollCall {
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  std::uint64_t count = 0;  // CollShape::count
  bool in_place = false;
};

// Where the sweep's buffers live when the backend supplies them (OrbiTE's --memory cuda|pinned);
// otherwise page-aligned host memory. Memory the CPU cannot touch (device memory) is filled and
// checked through write/read, outside the timed loops.
class CollArena {
 public:
  virtual ~CollArena() = default;
  [[nodiscard]] virtual std::byte* data() = 0;
  [[nodiscard]] virtual bool host_accessible() const = 0;
  // Only called when !host_accessible().
  virtual void write(std::uint64_t offset, const std::byte* src, std::uint64_t bytes) = 0;
  virtual void read(std::uint64_t offset, std::byte* dst, std::uint64_t bytes) = 0;
};

// What an implementation provides. The collective, type, op and root of the run are fixed when
// it is made; every call below is collective over all ranks except rank() and size().
class CollBackend {
 public:
  virtual ~CollBackend() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  // Runs one collective to completion.
  virtual void run(const CollCall& call) = 0;
  // -z 0: starts one in `slot` (0 <= slot < kMaxInFlight, not in use), completed by wait(slot).
  // An implementation without non-blocking collectives runs it here.
  virtual void start(int slot, const CollCall& call) {
    (void)slot;
    run(call);
  }
  virtual void wait(int slot) { (void)slot; }
  // The sweep's buffers (`bytes` of them, page-aligned); nullptr: host memory of the driver's.
  virtual std::unique_ptr<CollArena> make_arena(std::uint64_t bytes) {
    (void)bytes;
    return nullptr;
  }
  virtual void barrier() = 0;
  virtual double max_over_ranks(double value) = 0;
  virtual double sum_over_ranks(double value) = 0;
  // Where an in-place call leaves this rank's result, when not at call.recv: MPI's in-place
  // MPI_Reduce_scatter_block leaves it at the start of the buffer.
  [[nodiscard]] virtual const std::byte* in_place_result(const CollCall& call) const {
    return call.recv;
  }
};

// The command line of a collective benchmark.
struct CollSetup {
  Coll coll = Coll::AllReduce;
  Options options;
  CollOptions coll_options;
};

// Which types and operators an implementation supports; a -d or -o outside them is a usage
// error naming the flag. Empty: all.
struct CollSupport {
  std::vector<ElemType> types;
  std::vector<RedOp> ops;
  std::string why;  // "MPI has no float16 or bfloat16"
};

// Parses the harness flags plus -d/--datatype, -o/--op, -r/--root and -z/--blocking. A root
// outside the job's size (when the launcher tells it) is a usage error too. Exits as
// parse_options does.
CollSetup parse_coll_options(int argc, char** argv, Coll coll, Program program, bool print_messages,
                             const CollSupport& support = {}, const Options& defaults = {});

// Lines (key, text) rank 0 adds to the summary once the sweep is done: the library's version, the
// engine's counters.
using SummaryLines = std::function<std::vector<std::pair<std::string, std::string>>()>;

// Runs the sweep on every rank of the backend; rank 0 prints the table (and writes --json).
// `info` names the program, implementation and transport; the rest is filled in here.
// Returns the exit status: 0, or 1 if a result was wrong or the JSON could not be written.
int run_coll_sweep(CollBackend& backend, const CollSetup& setup, RunInfo info,
                   const SummaryLines& summary = {});

}  // namespace orbite::perf
