#include "process_group.h"

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "../displacements.h"
#include "c10d_store.h"

namespace orbite::torch_backend {

namespace {

using c10d::OpType;
using python::displacements_of;
using std::chrono::milliseconds;

// When the group is destroyed with operations outstanding, how long they may still finish.
constexpr milliseconds kShutdownWait{10'000};
// How long the progress thread blocks in one wait before it looks at every operation again.
constexpr milliseconds kProgressSlice{1};

// One TransferEngine per process, shared by every group while any exists.
std::mutex g_engine_mu;
std::weak_ptr<TransferEngine> g_engine;  // guarded by g_engine_mu

DataType type_of(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return DataType::Float32;
    case at::kDouble: return DataType::Float64;
    case at::kHalf: return DataType::Float16;
    case at::kBFloat16: return DataType::Bfloat16;
    case at::kChar: return DataType::Int8;
    case at::kByte: return DataType::Uint8;
    case at::kInt: return DataType::Int32;
    case at::kLong: return DataType::Int64;
    default:
      TORCH_CHECK(false, "orbite ", op, ": dtype ", t.scalar_type(),
                  " is not supported (float32, float64, float16, bfloat16, int8, uint8, int32, "
                  "int64)");
  }
}

void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "orbite ", op, ": the tensor is on ", t.device(),
              "; only CPU tensors are supported (CUDA memory is not yet)");
  TORCH_CHECK(t.layout() == at::kStrided, "orbite ", op, ": the tensor must be dense (strided)");
  TORCH_CHECK(t.is_contiguous(), "orbite ", op, ": the tensor must be contiguous");
  (void)type_of(t, op);
}

// The one tensor of a list (torch passes one per device; OrbiTE groups have one CPU device).
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "orbite ", op, ": expects one tensor per call, got ",
              tensors.size());
  check_tensor(tensors[0], op);
  return tensors[0];
}

// Every tensor of a list of `size`, each like `like` (dtype and element count).
void check_list(const std::vector<at::Tensor>& list, std::size_t size, const at::Tensor& like,
                const char* op) {
  TORCH_CHECK(list.size() == size, "orbite ", op, ": expects ", size, " tensors, got ",
              list.size());
  for (const at::Tensor& t : list) {
    check_tensor(t, op);
    TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel(), "orbite ", op,
                ": every tensor must have the input's dtype ", like.scalar_type(),
                " and element count ", like.numel(), ", got ", t.scalar_type(), " and ", t.numel());
  }
}

ReduceOp op_of(const c10d::ReduceOp& op, const char* name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::Sum;
    case c10d::ReduceOp::AVG: return ReduceOp::Avg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::Prod;
    case c10d::ReduceOp::MIN: return ReduceOp::Min;
    case c10d::ReduceOp::MAX: return ReduceOp::Max;
    default:
      TORCH_CHECK(false, "orbite ", name, ": reduce op ", static_cast<int>(op.op_),
                  " (BAND, BOR, BXOR or PREMUL_SUM) is not supported; use SUM, PRODUCT, MIN, "
                  "MAX or AVG");
  }
}

std::uint64_t count(const at::Tensor& t) {
  return static_cast<std::uint64_t>(t.numel());
}

// A staging tensor holding `list` end to end.
at::Tensor flatten(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const at::Tensor& t : list) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies `flat`, laid end to end, into the tensors of `list`.
void unflatten(const at::Tensor& flat, std::vector<at::Tensor>& list) {
  std::int64_t at = 0;
  for (at::Tensor& t : list) {
    t.view({-1}).copy_(flat.narrow(0, at, t.numel()));
    at += t.numel();
  }
}

// all_to_all counts (elements) of `t` split along dimension 0 by `splits` (rows; empty: equal).
std::vector<std::uint64_t> counts_of(const at::Tensor& t, const std::vector<int64_t>& splits,
                                     int size, const char* side) {
  const std::int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const std::int64_t row = rows == 0 ? 0 : t.numel() / rows;
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(size));
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "orbite alltoall_base: the ", side, " tensor's ", rows,
                " rows do not split evenly over ", size, " ranks");
    std::fill(counts.begin(), counts.end(), static_cast<std::uint64_t>(rows / size * row));
    return counts;
  }
  TORCH_CHECK(splits.size() == static_cast<std::size_t>(size), "orbite alltoall_base: ", side,
              " split sizes has ", splits.size(), " entries for ", size, " ranks");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < splits.size(); ++i) {
    TORCH_CHECK(splits[i] >= 0, "orbite alltoall_base: ", side, " split size ", splits[i],
                " is negative");
    total += splits[i];
    counts[i] = static_cast<std::uint64_t>(splits[i] * row);
  }
  TORCH_CHECK(total == rows, "orbite alltoall_base: ", side, " split sizes add up to ", total,
              " rows, the tensor has ", rows);
  return counts;
}

}  // namespace

WorkOrbite::WorkOrbite(int rank, OpType type, Request request, std::vector<at::Tensor> outputs,
                       std::function<void()> after, milliseconds bound)
    : c10d::Work(rank, type),
      request_(std::move(request)),
      outputs_(std::move(outputs)),
      after_(std::move(after)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      bound_(bound) {}

int WorkOrbite::sourceRank() const {
  const int source = request_.source();
  if (source < 0) return c10d::Work::sourceRank();  // not a finished receive: c10d's error
  return source;
}

bool WorkOrbite::wait(milliseconds timeout) {
  const milliseconds bound = timeout.count() > 0 ? timeout : bound_;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  if (!isCompleted()) {
    (void)request_.wait(bound);  // drives the operation on this thread
    if (request_.done()) finish_once();
  }
  const auto left =
      std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  return c10d::Work::wait(std::max(left, milliseconds(1)));
}

c10::intrusive_ptr<c10::ivalue::Future> WorkOrbite::getFuture() {
  return future_;
}

void WorkOrbite::finish_once() {
  if (claimed_.exchange(true)) return;
  std::exception_ptr error;
  const std::optional<Status> st = request_.status();
  if (st && st->ok()) {
    try {
      if (after_) after_();
    } catch (...) {
      error = std::current_exception();
    }
  } else {
    error = std::make_exception_ptr(std::runtime_error(
        "orbite: " + (st ? st->to_string() : std::string("finished without a status"))));
  }
  complete(error);
}

void WorkOrbite::fail_once(std::exception_ptr error) {
  if (claimed_.exchange(true)) return;
  complete(std::move(error));
}

void WorkOrbite::complete(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

ProcessGroupOrbite::ProcessGroupOrbite(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout) {
  BootstrapConfig config;
  config.timeout = timeout;
  auto boot =
      Bootstrap::from_store(std::make_shared<C10dStore>(store), rank, size, std::nullopt, config);
  TORCH_CHECK(boot.ok(), "orbite: bootstrap from the c10d store: ", boot.status().to_string());
  Result<Communicator> made = Status::error(Errc::Internal, "unset");
  {
    std::lock_guard<std::mutex> lock(g_engine_mu);
    std::shared_ptr<TransferEngine> engine = g_engine.lock();
    made = engine ? Communicator::create(*boot, engine) : Communicator::create(*boot);
    if (made.ok() && !engine) g_engine = made->shared_engine();
  }
  TORCH_CHECK(made.ok(), "orbite: process group of ", size, " ranks: ", made.status().to_string());
  comm_ = std::make_unique<Communicator>(std::move(made).value());
  init();
  progress_ = std::thread([this] { progress_loop(); });
}

ProcessGroupOrbite::~ProcessGroupOrbite() {
  // Python drops the group with the GIL held, and a Future's Python callbacks, which the progress
  // thread may be running, take it: join without it.
  std::optional<pybind11::gil_scoped_release> nogil;
  if (Py_IsInitialized() != 0 && PyGILState_Check() != 0) nogil.emplace();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  progress_.join();
  if (!overdue_.empty()) {
    // OrbiTE may still write into these tensors: they are kept for the life of the process.
    new std::vector<Pending>(std::move(overdue_));
  }
}

milliseconds ProcessGroupOrbite::bound_of(milliseconds timeout) const {
  return timeout.count() > 0 ? timeout : timeout_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::enqueue(OpType type, Result<Request> started,
                                                           std::vector<at::Tensor> outputs,
                                                           std::vector<at::Tensor> borrowed,
                                                           milliseconds timeout,
                                                           std::function<void()> after,
                                                           bool collective) {
  TORCH_CHECK(started.ok(), "orbite ", c10d::opTypeToString(type), ": ",
              started.status().to_string());
  const milliseconds bound = bound_of(timeout);
  auto work = c10::make_intrusive<WorkOrbite>(rank_, type, std::move(started).value(),
                                              std::move(outputs), std::move(after), bound);
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(
        Pending{work, std::move(borrowed), std::chrono::steady_clock::now() + bound, collective});
  }
  cv_.notify_one();
  return work;
}

void ProcessGroupOrbite::progress_loop() {
  std::vector<Pending> active;
  std::optional<std::chrono::steady_clock::time_point> shutdown;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (active.empty() && overdue_.empty()) {
        cv_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
      }
      for (; !incoming_.empty(); incoming_.pop_front()) {
        active.push_back(std::move(incoming_.front()));
      }
      if (stopping_ && !shutdown) shutdown = std::chrono::steady_clock::now() + kShutdownWait;
    }
    if (shutdown) {
      if (active.empty()) return;
      for (Pending& p : active) p.deadline = std::min(p.deadline, *shutdown);
    }
    if (sweep(active)) continue;
    // Nothing finished: block briefly in a collective's wait, which advances every collective of
    // the communicator (point-to-point messages move in the engine's lanes regardless).
    auto it =
        std::find_if(active.begin(), active.end(), [](const Pending& p) { return p.collective; });
    if (it == active.end() && !active.empty()) it = active.begin();
    if (it != active.end()) {
      (void)it->work->request().wait(kProgressSlice);
    } else {
      std::this_thread::sleep_for(kProgressSlice);  // only overdue operations remain
    }
  }
}

bool ProcessGroupOrbite::sweep(std::vector<Pending>& active) {
  bool finished = false;
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < active.size();) {
    Pending& p = active[i];
    if (p.work->request().test()) {
      p.work->finish_once();  // unless a waiting thread already did
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
      finished = true;
      continue;
    }
    if (now >= p.deadline) {
      p.work->fail_once(std::make_exception_ptr(std::runtime_error(
          "orbite " + c10d::opTypeToString(p.work->retrieveOpType()) +
          ": timed out; OrbiTE still runs the operation and keeps its tensors")));
      overdue_.push_back(std::move(p));
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
      finished = true;
      continue;
    }
    ++i;
  }
  std::erase_if(overdue_, [](Pending& p) { return p.work->request().test(); });
  return finished;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  at::Tensor& t = single(tensors, "broadcast");
  auto r = comm_->broadcast(t.data_ptr(), t.data_ptr(), count(t), type_of(t, "broadcast"),
                            static_cast<int>(opts.rootRank));
  return enqueue(OpType::BROADCAST, std::move(r), {t}, {t}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  at::Tensor& t = single(tensors, "allreduce");
  auto r = comm_->all_reduce(t.data_ptr(), t.data_ptr(), count(t), type_of(t, "allreduce"),
                             op_of(opts.reduceOp, "allreduce"));
  return enqueue(OpType::ALLREDUCE, std::move(r), {t}, {t}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "orbite allreduce_coalesced: no tensors");
  for (const at::Tensor& t : tensors) {
    check_tensor(t, "allreduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "orbite allreduce_coalesced: every tensor must have one dtype");
  }
  at::Tensor flat = flatten(tensors);
  auto r = comm_->all_reduce(flat.data_ptr(), flat.data_ptr(), count(flat),
                             type_of(flat, "allreduce_coalesced"),
                             op_of(opts.reduceOp, "allreduce_coalesced"));
  std::vector<at::Tensor> borrowed = tensors;
  borrowed.push_back(flat);
  return enqueue(OpType::ALLREDUCE_COALESCED, std::move(r), tensors, std::move(borrowed),
                 opts.timeout, [flat, tensors]() mutable { unflatten(flat, tensors); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  at::Tensor& t = single(tensors, "reduce");
  auto r = comm_->reduce(t.data_ptr(), t.data_ptr(), count(t), type_of(t, "reduce"),
                         op_of(opts.reduceOp, "reduce"), static_cast<int>(opts.rootRank));
  return enqueue(OpType::REDUCE, std::move(r), {t}, {t}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  at::Tensor& in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "orbite allgather: expects one output list, got ",
              outputs.size());
  check_list(outputs[0], static_cast<std::size_t>(size_), in, "allgather");
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  auto r = comm_->all_gather(in.data_ptr(), flat.data_ptr(), count(in), type_of(in, "allgather"));
  std::vector<at::Tensor> out = outputs[0];
  std::vector<at::Tensor> borrowed = out;
  borrowed.push_back(in);
  borrowed.push_back(flat);
  return enqueue(OpType::ALLGATHER, std::move(r), out, std::move(borrowed), opts.timeout,
                 [flat, out]() mutable { unflatten(flat, out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  check_tensor(input, "_allgather_base");
  check_tensor(output, "_allgather_base");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
      "orbite _allgather_base: the output must hold ", size_, " x ", input.numel(), " elements of ",
      input.scalar_type());
  auto r = comm_->all_gather(input.data_ptr(), output.data_ptr(), count(input),
                             type_of(input, "_allgather_base"));
  return enqueue(OpType::_ALLGATHER_BASE, std::move(r), {output}, {output, input}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  at::Tensor& in = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor flat;
  std::vector<at::Tensor> out;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1, "orbite gather: the root expects one output list, got ",
                outputs.size());
    check_list(outputs[0], static_cast<std::size_t>(size_), in, "gather");
    out = outputs[0];
    flat = at::empty({in.numel() * size_}, in.options());
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(),
                "orbite gather: only the root passes output tensors");
  }
  auto r = comm_->gather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, count(in),
                         type_of(in, "gather"), root);
  std::vector<at::Tensor> borrowed = out;
  borrowed.push_back(in);
  if (flat.defined()) borrowed.push_back(flat);
  std::function<void()> after;
  if (flat.defined()) after = [flat, out]() mutable { unflatten(flat, out); };
  return enqueue(OpType::GATHER, std::move(r), out, std::move(borrowed), opts.timeout,
                 std::move(after));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  at::Tensor& out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1, "orbite scatter: the root expects one input list, got ",
                inputs.size());
    check_list(inputs[0], static_cast<std::size_t>(size_), out, "scatter");
    flat = flatten(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(),
                "orbite scatter: only the root passes input tensors");
  }
  auto r = comm_->scatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), count(out),
                          type_of(out, "scatter"), root);
  std::vector<at::Tensor> borrowed{out};
  if (flat.defined()) borrowed.push_back(flat);
  return enqueue(OpType::SCATTER, std::move(r), {out}, std::move(borrowed), opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "orbite reduce_scatter: expects one input list, got ",
              inputs.size());
  check_list(inputs[0], static_cast<std::size_t>(size_), out, "reduce_scatter");
  at::Tensor flat = flatten(inputs[0]);
  auto r =
      comm_->reduce_scatter(flat.data_ptr(), out.data_ptr(), count(out),
                            type_of(out, "reduce_scatter"), op_of(opts.reduceOp, "reduce_scatter"));
  return enqueue(OpType::REDUCE_SCATTER, std::move(r), {out}, {out, flat}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_tensor(input, "_reduce_scatter_base");
  check_tensor(output, "_reduce_scatter_base");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * size_,
      "orbite _reduce_scatter_base: the input must hold ", size_, " x ", output.numel(),
      " elements of ", output.scalar_type());
  auto r = comm_->reduce_scatter(input.data_ptr(), output.data_ptr(), count(output),
                                 type_of(output, "_reduce_scatter_base"),
                                 op_of(opts.reduceOp, "_reduce_scatter_base"));
  return enqueue(OpType::_REDUCE_SCATTER_BASE, std::move(r), {output}, {output, input},
                 opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  check_tensor(input, "alltoall_base");
  check_tensor(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "orbite alltoall_base: input and output dtypes differ");
  const DataType type = type_of(input, "alltoall_base");
  Result<Request> r = Status::error(Errc::Internal, "unset");
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0,
                "orbite alltoall_base: equal splits need input and output of one size, a "
                "multiple of ",
                size_, " (got ", input.numel(), " and ", output.numel(), ")");
    r = comm_->all_to_all(input.data_ptr(), output.data_ptr(), count(input) / size_, type);
  } else {
    const auto sc = counts_of(input, input_split_sizes, size_, "input");
    const auto rc = counts_of(output, output_split_sizes, size_, "output");
    r = comm_->all_to_allv(input.data_ptr(), sc, displacements_of(sc), output.data_ptr(), rc,
                           displacements_of(rc), type);
  }
  return enqueue(OpType::ALLTOALL_BASE, std::move(r), {output}, {output, input}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  const auto n = static_cast<std::size_t>(size_);
  TORCH_CHECK(inputs.size() == n && outputs.size() == n, "orbite alltoall: expects ", n,
              " input and output tensors, got ", inputs.size(), " and ", outputs.size());
  std::vector<std::uint64_t> sc;
  std::vector<std::uint64_t> rc;
  for (std::size_t i = 0; i < n; ++i) {
    check_tensor(inputs[i], "alltoall");
    check_tensor(outputs[i], "alltoall");
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                    outputs[i].scalar_type() == inputs[0].scalar_type(),
                "orbite alltoall: every tensor must have one dtype");
    sc.push_back(count(inputs[i]));
    rc.push_back(count(outputs[i]));
  }
  at::Tensor in = flatten(inputs);
  const auto received = std::accumulate(rc.begin(), rc.end(), std::uint64_t{0});
  at::Tensor out = at::empty({static_cast<std::int64_t>(received)}, inputs[0].options());
  auto r = comm_->all_to_allv(in.data_ptr(), sc, displacements_of(sc), out.data_ptr(), rc,
                              displacements_of(rc), type_of(in, "alltoall"));
  std::vector<at::Tensor> borrowed = outputs;
  borrowed.push_back(in);
  borrowed.push_back(out);
  return enqueue(OpType::ALLTOALL, std::move(r), outputs, std::move(borrowed), opts.timeout,
                 [out, outputs]() mutable { unflatten(out, outputs); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int tag) {
  at::Tensor& t = single(tensors, "send");
  auto r = comm_->isend(t.data_ptr(), t.nbytes(), dst, tag);
  return enqueue(OpType::SEND, std::move(r), {t}, {t}, milliseconds(-1), {}, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  at::Tensor& t = single(tensors, "recv");
  auto r = comm_->irecv(t.data_ptr(), t.nbytes(), src, tag);
  std::function<void()> after;
  if (r.ok()) {
    after = [req = *r, expected = t.nbytes(), src, tag] {
      TORCH_CHECK(req.bytes() == expected, "orbite recv: received ", req.bytes(),
                  " bytes from rank ", src, " (tag ", tag, "), the tensor holds ", expected);
    };
  }
  return enqueue(OpType::RECV, std::move(r), {t}, {t}, milliseconds(-1), std::move(after), false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int tag) {
  at::Tensor& t = single(tensors, "recv");
  auto r = comm_->irecv(t.data_ptr(), t.nbytes(), kAnySource, tag);
  std::function<void()> after;
  if (r.ok()) {
    after = [req = *r, expected = t.nbytes(), tag] {
      TORCH_CHECK(req.bytes() == expected, "orbite recv: received ", req.bytes(),
                  " bytes from rank ", req.source(), " (any source, tag ", tag,
                  "), the tensor holds ", expected);
    };
  }
  return enqueue(OpType::RECVANYSOURCE, std::move(r), {t}, {t}, milliseconds(-1), std::move(after),
                 false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOrbite::barrier(const c10d::BarrierOptions& opts) {
  return enqueue(OpType::BARRIER, comm_->barrier(), {}, {}, opts.timeout);
}

}  // namespace orbite::torch_backend
