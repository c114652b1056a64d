// The Gloo reference of all_reduce_perf: the same sweep, check and table (harness/coll_driver),
// with gloo::allreduce and its ring algorithm over Gloo's TCP transport. Ranks come from the
// launcher's environment (orbite-run or mpirun) and meet through a gloo::rendezvous::FileStore
// in a directory on this host. Gloo has no bfloat16 or avg, and no non-blocking form: -z 0 runs
// blocking.
//
//   orbite-run -n 4 build/perf_tests/gloo_all_reduce_perf [-b 8] [-e 64M] [-f 2] [-n 100]
//       [-w 10] [-c 1] [-d float32] [-o sum] [--store-dir DIR] [--hostname 127.0.0.1]
//       [--json FILE]
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/coll_driver.h"
#include "harness/harness.h"

namespace {

namespace perf = orbite::perf;
using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);

template <class T>
ReduceFn reduce_fn(perf::RedOp op) {
  switch (op) {
    case perf::RedOp::Prod: return &gloo::product<T>;
    case perf::RedOp::Min: return &gloo::min<T>;
    case perf::RedOp::Max: return &gloo::max<T>;
    default: return &gloo::sum<T>;  // avg is refused when parsing
  }
}

class GlooBackend final : public perf::CollBackend {
 public:
  GlooBackend(std::shared_ptr<gloo::Context> context, const perf::CollSetup& setup)
      : context_(std::move(context)), type_(setup.coll_options.type), op_(setup.coll_options.op) {}

  [[nodiscard]] int rank() const override { return context_->rank; }
  [[nodiscard]] int size() const override { return context_->size; }

  // The options (and the buffers they register) are made once per buffer set, as an
  // application calling the same all-reduce repeatedly would keep them.
  void run(const perf::CollCall& call) override {
    if (call.count == 0) return;
    if (!cached_ || call.send != last_.send || call.recv != last_.recv ||
        call.count != last_.count || call.in_place != last_.in_place) {
      cached_ = make_options(call);
      last_ = call;
    }
    gloo::allreduce(*cached_);
  }
  void barrier() override {
    gloo::BarrierOptions options(context_);
    gloo::barrier(options);
  }
  double max_over_ranks(double value) override { return reduce(value, &gloo::max<double>); }
  double sum_over_ranks(double value) override { return reduce(value, &gloo::sum<double>); }

 private:
  template <class T>
  std::unique_ptr<gloo::AllreduceOptions> typed_options(const perf::CollCall& call) {
    auto options = std::make_unique<gloo::AllreduceOptions>(context_);
    options->setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    // Without an input, Gloo reduces the output buffer in place.
    if (!call.in_place) {
      options->setInput(reinterpret_cast<T*>(const_cast<std::byte*>(call.send)), call.count);
    }
    options->setOutput(reinterpret_cast<T*>(call.recv), call.count);
    options->setReduceFunction(reduce_fn<T>(op_));
    return options;
  }

  std::unique_ptr<gloo::AllreduceOptions> make_options(const perf::CollCall& call) {
    switch (type_) {
      case perf::ElemType::Int8: return typed_options<std::int8_t>(call);
      case perf::ElemType::Uint8: return typed_options<std::uint8_t>(call);
      case perf::ElemType::Int32: return typed_options<std::int32_t>(call);
      case perf::ElemType::Uint32: return typed_options<std::uint32_t>(call);
      case perf::ElemType::Int64: return typed_options<std::int64_t>(call);
      case perf::ElemType::Uint64: return typed_options<std::uint64_t>(call);
      case perf::ElemType::Float16: return typed_options<gloo::float16>(call);
      case perf::ElemType::Float64: return typed_options<double>(call);
      default: return typed_options<float>(call);  // bfloat16 is refused when parsing
    }
  }

  double reduce(double value, ReduceFn fn) {
    double out = 0;
    gloo::AllreduceOptions options(context_);
    options.setInput(&value, 1);
    options.setOutput(&out, 1);
    options.setReduceFunction(fn);
    gloo::allreduce(options);
    return out;
  }

  std::shared_ptr<gloo::Context> context_;
  perf::ElemType type_;
  perf::RedOp op_;
  std::unique_ptr<gloo::AllreduceOptions> cached_;
  perf::CollCall last_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string store_dir;
  std::string hostname = "127.0.0.1";
  perf::Program program{
      "gloo_all_reduce_perf",
      "The Gloo reference of all_reduce_perf: gloo::allreduce, ring algorithm, TCP transport.\n"
      "Run under a launcher that sets the rank and size (orbite-run -n 4, mpirun -np 4).",
      {perf::ExtraFlag{"--store-dir", "DIR",
                       "an empty directory where the ranks meet (gloo FileStore;\n"
                       "default: $TMPDIR/orbite-gloo-<launcher pid>, removed after)",
                       [&store_dir](std::string_view v) -> std::string {
                         if (v.empty()) return "expected a directory";
                         store_dir = v;
                         return "";
                       }},
       perf::ExtraFlag{"--hostname", "ADDR",
                       "the address this rank's Gloo device listens on (default\n"
                       "127.0.0.1: every rank on this host)",
                       [&hostname](std::string_view v) -> std::string {
                         if (v.empty()) return "expected an address";
                         hostname = v;
                         return "";
                       }}}};
  program.transport_help = "a label for the table (default tcp): Gloo's TCP transport";
  perf::CollSupport support;
  for (int t = 0; t < perf::kElemTypeCount; ++t) {
    if (static_cast<perf::ElemType>(t) != perf::ElemType::Bfloat16) {
      support.types.push_back(static_cast<perf::ElemType>(t));
    }
  }
  support.ops = {perf::RedOp::Sum, perf::RedOp::Prod, perf::RedOp::Min, perf::RedOp::Max};
  support.why = "Gloo has no bfloat16 or avg";
  const int rank = perf::launcher_rank();
  const int size = perf::launcher_size();
  perf::Options defaults;
  defaults.transport = "tcp";
  perf::CollSetup setup = perf::parse_coll_options(argc, argv, perf::Coll::AllReduce, program,
                                                   rank <= 0, support, defaults);
  if (rank < 0 || size < 1) {
    perf::fatal(-1, "no rank in the environment: run under orbite-run or mpirun");
  }
  const bool own_dir = store_dir.empty();
  if (own_dir) {
    const char* tmp = std::getenv("TMPDIR");
    store_dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/orbite-gloo-" +
                std::to_string(static_cast<long long>(getppid()));
  }

  try {
    std::error_code ec;
    std::filesystem::create_directories(store_dir, ec);
    if (ec) perf::fatal(rank, "--store-dir " + store_dir + ": " + ec.message());
    gloo::transport::tcp::attr attr(hostname.c_str());
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::seconds(120));
    gloo::rendezvous::FileStore store(store_dir);
    context->connectFullMesh(store, device);

    GlooBackend backend(context, setup);
    // Connected: the store's files are no longer needed.
    backend.barrier();
    if (own_dir && rank == 0) std::filesystem::remove_all(store_dir, ec);
    perf::RunInfo info{.program = "gloo_all_reduce_perf",
                       .implementation = "gloo",
                       .transport = setup.options.transport,
                       .notes = {"gloo::allreduce, ring algorithm; -z 0 runs blocking"}};
    return perf::run_coll_sweep(backend, setup, std::move(info));
  } catch (const std::exception& e) {
    perf::fatal(rank, std::string("gloo: ") + e.what());
  }
}
