// The torch.distributed backend "orbite" (torch 1.13: a c10d::ProcessGroup). Each group is an
// orbite::Communicator bootstrapped from the c10d store torch hands it; all groups of a process
// share one TransferEngine. An operation is started on the calling thread (its first messages
// are posted before it returns) and finished by the group's progress thread, which drives the
// communicator's collectives (OrbiTE's progress rule: they advance while a thread waits on one),
// copies staged results out, and completes the Work and its Future; so DDP's futures complete
// without anyone waiting on them.
#pragma once

#include <orbite/communicator.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace orbite::torch_backend {

// A started operation as torch sees it. Its completion (the `after` step, then the Work and its
// Future) runs exactly once, on whichever thread first sees the request done: a thread in wait(),
// which drives the request itself (no hand-off on the synchronous path), or the progress thread.
class WorkOrbite : public c10d::Work {
 public:
  WorkOrbite(int rank, c10d::OpType type, Request request, std::vector<at::Tensor> outputs,
             std::function<void()> after, std::chrono::milliseconds bound);

  // timeout 0 (c10d's kNoTimeout) or negative: the group's bound, never an unbounded wait.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // A finished receive's sender (dist.recv(src=None) returns it); c10d's error otherwise.
  int sourceRank() const override;

  [[nodiscard]] Request& request() { return request_; }
  // Once the request is done: runs `after` (on success) and completes the Work and its Future,
  // unless another thread already did.
  void finish_once();
  // Fails the Work with `error` unless it is already completed (the request may still run).
  void fail_once(std::exception_ptr error);

 private:
  void complete(std::exception_ptr error);

  Request request_;
  const std::vector<at::Tensor> outputs_;
  const std::function<void()> after_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
  const std::chrono::milliseconds bound_;
  std::atomic<bool> claimed_{false};  // the one completion has been taken
};

class ProcessGroupOrbite : public c10d::ProcessGroup {
 public:
  // Collective over the group's ranks (bounded by `timeout`).
  ProcessGroupOrbite(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  ~ProcessGroupOrbite() override;

  const std::string getBackendName() const override { return "orbite"; }
  [[nodiscard]] std::string describe() const { return comm_->describe(); }
  [[nodiscard]] const Communicator& communicator() const { return *comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // An operation handed to the progress thread: its Work (with the request) and the tensors it
  // borrows (inputs, outputs, staging), kept until the request is done.
  struct Pending {
    c10::intrusive_ptr<WorkOrbite> work;
    std::vector<at::Tensor> borrowed;
    std::chrono::steady_clock::time_point deadline;
    bool collective = true;
  };

  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, Result<Request> started,
                                         std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> borrowed,
                                         std::chrono::milliseconds timeout,
                                         std::function<void()> after = {}, bool collective = true);
  std::chrono::milliseconds bound_of(std::chrono::milliseconds timeout) const;
  void progress_loop();
  // One pass over `active`: completes what is done or past its deadline. True if any finished.
  bool sweep(std::vector<Pending>& active);

  const std::chrono::milliseconds timeout_;
  std::unique_ptr<Communicator> comm_;

  // Lock order: mu_ only (never held while calling OrbiTE or completing a Work).
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> incoming_;  // guarded by mu_
  bool stopping_ = false;         // guarded by mu_
  // Operations whose Work failed on its deadline while OrbiTE still ran them: kept (with their
  // tensors) until their requests finish; owned by the progress thread.
  std::vector<Pending> overdue_;
  std::thread progress_;  // started last, joined first
};

}  // namespace orbite::torch_backend
