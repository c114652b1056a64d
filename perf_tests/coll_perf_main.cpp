// One OrbiTE collective in the style of nccl-tests: compiled once, and each *_perf binary's
// generated main (perf_tests/CMakeLists.txt) calls run_coll_perf with its collective's name:
// "all_reduce" (all_reduce_perf), "all_gather", "broadcast", "reduce", "reduce_scatter" or
// "alltoall". The sweep, check and table are harness/coll_driver's, shared
// with the Open MPI references (reference/mpi_coll_perf.cpp) and Gloo's
// (reference/gloo_all_reduce_perf.cpp); scripts/compare-mpi.sh runs them side by side.
//
//   orbite-run -n 4 build/perf_tests/all_reduce_perf [-b 8] [-e 64M] [-f 2] [-n 100] [-w 10]
//       [-c 1] [-d float32] [-o sum] [-r 0] [-z 1] [--transport unspec|tcp|shm|rdma]
//       [--memory host|cuda|pinned] [--json FILE]
#include <orbite/communicator.h>

#include <string>
#include <utility>
#include <vector>

#include "harness/bench_memory.h"
#include "harness/coll_driver.h"
#include "harness/harness.h"
#include "harness/orbite_bench.h"

namespace {

using orbite::Communicator;
using orbite::Request;
namespace perf = orbite::perf;

// The harness repeats OrbiTE's type and op names so that the references need no OrbiTE; mapping
// through parse_data_type/parse_reduce_op checks that the two lists still agree.
orbite::DataType to_orbite(perf::ElemType type, int rank) {
  auto t = orbite::parse_data_type(perf::type_name(type));
  if (!t.ok()) perf::fatal(rank, "parse_data_type: " + t.status().to_string());
  if (orbite::size_of(*t) != perf::type_size(type) ||
      orbite::to_string(*t) != perf::type_name(type)) {
    perf::fatal(rank, "OrbiTE's data type " + std::string(orbite::to_string(*t)) +
                          " differs from the harness's " + std::string(perf::type_name(type)));
  }
  return *t;
}

orbite::ReduceOp to_orbite(perf::RedOp op, int rank) {
  auto o = orbite::parse_reduce_op(perf::op_name(op));
  if (!o.ok()) perf::fatal(rank, "parse_reduce_op: " + o.status().to_string());
  return *o;
}

// --memory cuda|pinned: the sweep's buffers in device or pinned memory (BenchMemory).
class OrbiteArena final : public perf::CollArena {
 public:
  OrbiteArena(const std::string& kind, std::uint64_t bytes, int rank)
      : memory_(kind, bytes, rank) {}
  [[nodiscard]] std::byte* data() override { return memory_.data(); }
  [[nodiscard]] bool host_accessible() const override { return !memory_.device(); }
  void write(std::uint64_t offset, const std::byte* src, std::uint64_t bytes) override {
    memory_.write(offset, src, bytes);
  }
  void read(std::uint64_t offset, std::byte* dst, std::uint64_t bytes) override {
    memory_.read(offset, dst, bytes);
  }

 private:
  perf::BenchMemory memory_;
};

class OrbiteBackend final : public perf::CollBackend {
 public:
  OrbiteBackend(Communicator& comm, const perf::CollSetup& setup, std::string memory)
      : comm_(comm),
        memory_(std::move(memory)),
        coll_(setup.coll),
        type_(to_orbite(setup.coll_options.type, comm.rank())),
        op_(to_orbite(setup.coll_options.op, comm.rank())),
        root_(setup.coll_options.root),
        what_(std::string(perf::coll_name(setup.coll))),
        slots_(perf::kMaxInFlight) {}

  [[nodiscard]] int rank() const override { return comm_.rank(); }
  [[nodiscard]] int size() const override { return comm_.size(); }

  void run(const perf::CollCall& call) override {
    Request r = post(call);
    perf::wait_ok(comm_.rank(), r, what_);
  }
  void start(int slot, const perf::CollCall& call) override {
    slots_[static_cast<std::size_t>(slot)] = post(call);
  }
  void wait(int slot) override {
    perf::wait_ok(comm_.rank(), slots_[static_cast<std::size_t>(slot)], what_);
    slots_[static_cast<std::size_t>(slot)] = Request();
  }

  std::unique_ptr<perf::CollArena> make_arena(std::uint64_t bytes) override {
    if (memory_ == "host") return nullptr;
    return std::make_unique<OrbiteArena>(memory_, bytes, comm_.rank());
  }

  void barrier() override {
    Request r = perf::value_or_die(comm_.rank(), comm_.barrier(), "barrier");
    perf::wait_ok(comm_.rank(), r, "barrier");
  }
  double max_over_ranks(double value) override { return reduce(value, orbite::ReduceOp::Max); }
  double sum_over_ranks(double value) override { return reduce(value, orbite::ReduceOp::Sum); }

 private:
  Request post(const perf::CollCall& c) {
    const int rank = comm_.rank();
    switch (coll_) {
      case perf::Coll::AllReduce:
        return perf::value_or_die(rank, comm_.all_reduce(c.send, c.recv, c.count, type_, op_),
                                  "all_reduce");
      case perf::Coll::AllGather:
        return perf::value_or_die(rank, comm_.all_gather(c.send, c.recv, c.count, type_),
                                  "all_gather");
      case perf::Coll::Broadcast:
        return perf::value_or_die(rank, comm_.broadcast(c.send, c.recv, c.count, type_, root_),
                                  "broadcast");
      case perf::Coll::Reduce:
        return perf::value_or_die(rank, comm_.reduce(c.send, c.recv, c.count, type_, op_, root_),
                                  "reduce");
      case perf::Coll::ReduceScatter:
        return perf::value_or_die(rank, comm_.reduce_scatter(c.send, c.recv, c.count, type_, op_),
                                  "reduce_scatter");
      case perf::Coll::AllToAll: break;
    }
    return perf::value_or_die(rank, comm_.all_to_all(c.send, c.recv, c.count, type_), "all_to_all");
  }

  // The benchmark's own bookkeeping goes through the collectives it measures.
  double reduce(double value, orbite::ReduceOp op) {
    double out = 0;
    Request r = perf::value_or_die(comm_.rank(),
                                   comm_.all_reduce(&value, &out, 1, orbite::DataType::Float64, op),
                                   "all_reduce of the timings");
    perf::wait_ok(comm_.rank(), r, "all_reduce of the timings");
    return out;
  }

  Communicator& comm_;
  std::string memory_;  // --memory
  perf::Coll coll_;
  orbite::DataType type_;
  orbite::ReduceOp op_;
  int root_;
  std::string what_;
  std::vector<Request> slots_;
};

}  // namespace

int run_coll_perf(const char* coll_name, int argc, char** argv) {
  const auto coll = perf::parse_coll(coll_name);
  if (!coll) perf::fatal(-1, std::string("unknown collective ") + coll_name);
  const std::string name = std::string(perf::coll_name(*coll)) + "_perf";
  perf::Program program{name,
                        "OrbiTE Communicator::" + std::string(coll_name) +
                            " over all ranks, out-of-place and in-place.\n"
                            "Run under a launcher: orbite-run -n 4 " +
                            name + " [flags]",
                        {}};
  std::string memory = "host";
  program.extra.push_back(perf::memory_flag(&memory));
  std::string metrics_path;
  program.extra.push_back(perf::metrics_flag(&metrics_path));
  program.transport_help =
      "unspec (default): shared memory between same-host ranks, tcp\n"
      "otherwise; tcp: shared memory disabled (shm.enable=false);\n"
      "shm: unspec, refused unless every rank is on this host;\n"
      "rdma: coll.transport=rdma and rdma.enable=on (softverbs\n"
      "on LD_LIBRARY_PATH where there is no RDMA NIC)";
  program.rdma = true;
  const perf::CollSetup setup =
      perf::parse_coll_options(argc, argv, *coll, program, perf::launcher_rank() <= 0);
  const std::string& transport = setup.options.transport;

  auto config = orbite::EngineConfig::load();
  if (!config.ok())
    perf::fatal(perf::launcher_rank(), "configuration: " + config.status().to_string());
  if (transport == "tcp") config->shm.enable = false;
  if (transport == "rdma") {
    config->coll.transport = orbite::Transport::Rdma;
    config->rdma.enable = orbite::rdma::RdmaEnable::On;
  }
  Communicator comm = perf::join_job(*config);
  if (transport == "shm") {
    for (int r = 0; r < comm.size(); ++r) {
      if (!comm.same_host(r)) {
        perf::fatal(comm.rank(), "--transport shm: rank " + std::to_string(r) +
                                     " is on another host (" + comm.peer(r).hostname + ")");
      }
    }
    if (!comm.config().shm.enable) perf::fatal(comm.rank(), "--transport shm: shm.enable is false");
  }

  OrbiteBackend backend(comm, setup, memory);
  perf::RunInfo info{.program = name, .implementation = "orbite", .transport = transport};
  info.notes.push_back(perf::memory_note(memory));
  const int status = perf::run_coll_sweep(backend, setup, std::move(info), [&comm] {
    return std::vector<std::pair<std::string, std::string>>{
        {"engine (rank 0)", perf::describe_engine(comm.engine())}};
  });
  perf::write_metrics(comm.rank(), metrics_path, comm.engine());
  perf::check_ok(comm.rank(), comm.store_barrier(), "final barrier");
  return status;
}
