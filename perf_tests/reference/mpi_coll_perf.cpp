// The Open MPI references of the collective benchmarks: the same sweep, check and table as
// coll_perf_main.cpp (harness/coll_driver), with MPI_Allreduce, MPI_Allgather, MPI_Bcast,
// MPI_Reduce, MPI_Reduce_scatter_block and MPI_Alltoall (MPI_IN_PLACE in place; the
// MPI_I* forms with -z 0). Compiled once per collective with -DORBITE_COLL="all_reduce" etc.
// MPI has no float16, bfloat16 or avg: those are refused as usage errors. The transport is
// chosen by mpirun (--mca btl self,vader or self,tcp); --transport only labels the output.
//
//   mpirun -np 4 --mca pml ob1 --mca btl self,vader build/perf_tests/mpi_all_reduce_perf
//       [-b 8] [-e 64M] [-f 2] [-n 100] [-w 10] [-c 1] [-d float32] [-o sum] [-r 0] [-z 1]
//       [--transport shm] [--json FILE]
#include <mpi.h>

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "harness/coll_driver.h"
#include "harness/harness.h"
#include "reference/mpi_common.h"

#ifndef ORBITE_COLL
#error "compile with -DORBITE_COLL=\"all_reduce\" (or another collective's name)"
#endif

namespace {

namespace perf = orbite::perf;

void abort_job() {
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void mpi_ok(int rank, int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  perf::fatal(rank, std::string(what) + ": " + std::string(text, static_cast<std::size_t>(len)));
}

MPI_Datatype mpi_type(perf::ElemType type) {
  switch (type) {
    case perf::ElemType::Int8: return MPI_INT8_T;
    case perf::ElemType::Uint8: return MPI_UINT8_T;
    case perf::ElemType::Int32: return MPI_INT32_T;
    case perf::ElemType::Uint32: return MPI_UINT32_T;
    case perf::ElemType::Int64: return MPI_INT64_T;
    case perf::ElemType::Uint64: return MPI_UINT64_T;
    case perf::ElemType::Float64: return MPI_DOUBLE;
    default: return MPI_FLOAT;  // float16 and bfloat16 are refused when parsing
  }
}

MPI_Op mpi_op(perf::RedOp op) {
  switch (op) {
    case perf::RedOp::Prod: return MPI_PROD;
    case perf::RedOp::Min: return MPI_MIN;
    case perf::RedOp::Max: return MPI_MAX;
    default: return MPI_SUM;  // avg is refused when parsing
  }
}

class MpiBackend final : public perf::CollBackend {
 public:
  MpiBackend(int rank, int size, const perf::CollSetup& setup)
      : rank_(rank),
        size_(size),
        coll_(setup.coll),
        type_(mpi_type(setup.coll_options.type)),
        op_(mpi_op(setup.coll_options.op)),
        root_(setup.coll_options.root),
        elem_(perf::type_size(setup.coll_options.type)),
        requests_(perf::kMaxInFlight, MPI_REQUEST_NULL) {}

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }

  void run(const perf::CollCall& call) override { post(call, nullptr); }
  void start(int slot, const perf::CollCall& call) override {
    post(call, &requests_[static_cast<std::size_t>(slot)]);
  }
  void wait(int slot) override {
    mpi_ok(rank_, MPI_Wait(&requests_[static_cast<std::size_t>(slot)], MPI_STATUS_IGNORE),
           "MPI_Wait");
  }
  void barrier() override { mpi_ok(rank_, MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  double max_over_ranks(double value) override { return reduce(value, MPI_MAX); }
  double sum_over_ranks(double value) override { return reduce(value, MPI_SUM); }

  // MPI_Reduce_scatter_block with MPI_IN_PLACE leaves the result at the front of the buffer.
  [[nodiscard]] const std::byte* in_place_result(const perf::CollCall& call) const override {
    return coll_ == perf::Coll::ReduceScatter ? call.send : call.recv;
  }

 private:
  // Blocking when `request` is null (the -z 1 loop measures MPI's blocking collectives, not
  // the non-blocking schedule), else the MPI_I* form.
  void post(const perf::CollCall& c, MPI_Request* request) {
    const int count = static_cast<int>(c.count);
    const void* send = c.in_place ? MPI_IN_PLACE : c.send;
    const bool blocking = request == nullptr;
    int rc = MPI_SUCCESS;
    const char* what = "";
    switch (coll_) {
      case perf::Coll::AllReduce:
        what = "MPI_Allreduce";
        rc = blocking ? MPI_Allreduce(send, c.recv, count, type_, op_, MPI_COMM_WORLD)
                      : MPI_Iallreduce(send, c.recv, count, type_, op_, MPI_COMM_WORLD, request);
        break;
      case perf::Coll::AllGather:
        what = "MPI_Allgather";
        rc = blocking ? MPI_Allgather(send, count, type_, c.recv, count, type_, MPI_COMM_WORLD)
                      : MPI_Iallgather(send, count, type_, c.recv, count, type_, MPI_COMM_WORLD,
                                       request);
        break;
      case perf::Coll::Broadcast: {
        what = "MPI_Bcast";
        // One buffer in MPI: the root sends from its send buffer and, out of place, also copies
        // it to its receive buffer, as ncclBroadcast leaves it.
        void* buffer = c.recv;
        if (rank_ == root_) {
          buffer = const_cast<std::byte*>(c.send);
          if (!c.in_place) std::memcpy(c.recv, c.send, c.count * elem_);
        }
        rc = blocking ? MPI_Bcast(buffer, count, type_, root_, MPI_COMM_WORLD)
                      : MPI_Ibcast(buffer, count, type_, root_, MPI_COMM_WORLD, request);
        break;
      }
      case perf::Coll::Reduce: {
        what = "MPI_Reduce";
        // MPI_IN_PLACE is the root's alone; elsewhere the receive buffer is not used.
        const void* from = c.in_place && rank_ == root_ ? MPI_IN_PLACE : c.send;
        void* to = rank_ == root_ ? c.recv : nullptr;
        rc = blocking ? MPI_Reduce(from, to, count, type_, op_, root_, MPI_COMM_WORLD)
                      : MPI_Ireduce(from, to, count, type_, op_, root_, MPI_COMM_WORLD, request);
        break;
      }
      case perf::Coll::ReduceScatter: {
        what = "MPI_Reduce_scatter_block";
        // In place, MPI reads the whole buffer from the receive argument.
        void* to = c.in_place ? const_cast<std::byte*>(c.send) : c.recv;
        rc = blocking
                 ? MPI_Reduce_scatter_block(send, to, count, type_, op_, MPI_COMM_WORLD)
                 : MPI_Ireduce_scatter_block(send, to, count, type_, op_, MPI_COMM_WORLD, request);
        break;
      }
      case perf::Coll::AllToAll:
        what = "MPI_Alltoall";
        rc = blocking
                 ? MPI_Alltoall(send, count, type_, c.recv, count, type_, MPI_COMM_WORLD)
                 : MPI_Ialltoall(send, count, type_, c.recv, count, type_, MPI_COMM_WORLD, request);
        break;
    }
    mpi_ok(rank_, rc, what);
  }

  double reduce(double value, MPI_Op op) {
    double out = 0;
    mpi_ok(rank_, MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD),
           "MPI_Allreduce of the timings");
    return out;
  }

  int rank_;
  int size_;
  perf::Coll coll_;
  MPI_Datatype type_;
  MPI_Op op_;
  int root_;
  std::size_t elem_;
  std::vector<MPI_Request> requests_;
};

}  // namespace

int main(int argc, char** argv) {
  const auto coll = perf::parse_coll(ORBITE_COLL);
  if (!coll) perf::fatal(-1, std::string("unknown collective ") + ORBITE_COLL);
  const std::string name = "mpi_" + std::string(perf::coll_name(*coll)) + "_perf";
  perf::Program program{name,
                        "The Open MPI reference of " + std::string(perf::coll_name(*coll)) +
                            "_perf. Run under mpirun; the btl chosen there is the transport.",
                        {}};
  program.transport_help =
      "a label for the table (default unspec): mpirun's --mca btl\n"
      "chooses the transport";
  perf::CollSupport support;
  for (int t = 0; t < perf::kElemTypeCount; ++t) {
    const auto type = static_cast<perf::ElemType>(t);
    if (type != perf::ElemType::Float16 && type != perf::ElemType::Bfloat16) {
      support.types.push_back(type);
    }
  }
  support.ops = {perf::RedOp::Sum, perf::RedOp::Prod, perf::RedOp::Min, perf::RedOp::Max};
  support.why = "MPI has no float16, bfloat16 or avg";
  // Parsed before MPI_Init, so that a bad flag exits 2 without a half-started job.
  const perf::CollSetup setup =
      perf::parse_coll_options(argc, argv, *coll, program, perf::launcher_rank() <= 0, support);

  MPI_Init(&argc, &argv);
  perf::set_fatal_hook(abort_job);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const perf::CollShape largest = perf::coll_shape(*coll, perf::size_list(setup.options).back(),
                                                   perf::type_size(setup.coll_options.type), size);
  if (largest.count > static_cast<std::uint64_t>(INT_MAX)) {
    perf::fatal(rank, "counts above " + std::to_string(INT_MAX) + " do not fit an MPI count");
  }

  MpiBackend backend(rank, size, setup);
  perf::RunInfo info{
      .program = name, .implementation = "mpi", .transport = setup.options.transport};
  const int status = perf::run_coll_sweep(backend, setup, std::move(info), [] {
    return std::vector<std::pair<std::string, std::string>>{
        {"library", perf::mpi_library_version()}};
  });
  MPI_Finalize();
  return status;
}
