// OrbiTE's copies of an allocation: one non-blocking stream and one completion event, created at
// the first copy. A copy is submitted asynchronously, the event is recorded after it, and the job
// finishes only when the event says so: host bytes are exposed, and staging released, after
// that. A failed submission or record drains the stream; a drain that fails proves nothing, so
// the job fails Unquiesced and the allocation is fenced (its stream, events and the job's staging
// are kept). Destroying the stream or event is never taken as completion.
#include <thread>

#include "cuda/native.h"

namespace orbite::cuda {

Status Allocation::fenced() const {
  std::lock_guard<std::mutex> g(mu_);
  return fence_;
}

void Allocation::fence(const Status& why) {
  if (fence_.ok()) {
    // Every later access fails with the first unproven operation's message.
    fence_ = Status::error(Errc::Unquiesced, "fenced: " + why.message());
  }
}

Status Allocation::drain(const std::string& after) {
  Native& n = *native_;
  // A synchronization reports the failure it waited for; a second one that succeeds proves the
  // stream idle. One that fails again (a context the failure left unusable) proves nothing.
  CUresult rc = n.api->cuStreamSynchronize_(n.stream);
  if (rc != CUDA_SUCCESS) rc = n.api->cuStreamSynchronize_(n.stream);
  if (rc == CUDA_SUCCESS) return {};
  const Status unproven = Status::error(
      Errc::Unquiesced, after + ", and draining its stream failed too (" + result_name(rc) +
                            "): whether the copy still runs is unknown");
  fence(unproven);
  return unproven;
}

Status Allocation::start_next() {
  Native& n = *native_;
  // Another job joins those on the stream only when it and they are all batched.
  auto may_start = [&] {
    if (queued_.empty()) return false;
    if (running_.empty()) return true;
    return queued_.front()->batched && running_.back()->batched && running_.size() < kMaxBatched;
  };
  while (may_start()) {
    if (!fence_.ok()) {
      for (auto& job : queued_) {
        job->status = fence_;
        job->state.store(2, std::memory_order_release);
      }
      queued_.clear();
      return fence_;
    }
    // The first access waits for a recorded producer generation (poll: this never blocks).
    if (recorded_ > consumed_) {
      const CUresult q = n.api->cuEventQuery_(n.ready);
      if (q == CUDA_ERROR_NOT_READY) return {};
      const CUresult w = q == CUDA_SUCCESS ? n.api->cuEventSynchronize_(n.ready) : q;
      if (w != CUDA_SUCCESS) {
        fence(driver_error(w, describe() + ": the wait for its producer generation"));
        continue;  // fails the queue above, keeping the producer's inputs
      }
      consumed_ = recorded_;
      producer_owner_.reset();
    }
    std::shared_ptr<CopyJob> job = std::move(queued_.front());
    queued_.pop_front();
    ContextScope scope(n.api, n.ctx);
    CUresult rc = scope.result();
    if (rc == CUDA_SUCCESS && n.stream == nullptr) {
      rc = n.api->cuStreamCreate_(&n.stream, CU_STREAM_NON_BLOCKING);
      if (rc == CUDA_SUCCESS) rc = n.api->cuEventCreate_(&n.done, CU_EVENT_DISABLE_TIMING);
      if (rc != CUDA_SUCCESS) {
        job->status = driver_error(rc, describe() + ": creating its copy stream or event");
        job->state.store(2, std::memory_order_release);
        continue;
      }
    }
    const auto device = reinterpret_cast<CUdeviceptr>(base_) + job->offset;
    std::string call;
    if (rc == CUDA_SUCCESS) {
      if (job->direction == CopyJob::Direction::ToDevice) {
        call = "cuMemcpyHtoDAsync";
        rc = n.api->cuMemcpyHtoDAsync_(device, job->host, job->length, n.stream);
      } else if (job->direction == CopyJob::Direction::Fill) {
        call = "cuMemsetD8Async";
        rc = n.api->cuMemsetD8Async_(device, job->fill_value, job->length, n.stream);
      } else if (job->direction == CopyJob::Direction::ToPeer) {
        call = "cuMemcpyDtoDAsync";
        rc = n.api->cuMemcpyDtoDAsync_(job->peer, device, job->length, n.stream);
      } else if (job->direction == CopyJob::Direction::FromPeer) {
        call = "cuMemcpyDtoDAsync";
        rc = n.api->cuMemcpyDtoDAsync_(device, job->peer, job->length, n.stream);
      } else {
        call = "cuMemcpyDtoHAsync";
        rc = n.api->cuMemcpyDtoHAsync_(job->host, device, job->length, n.stream);
      }
      if (rc == CUDA_SUCCESS) {
        call = "cuEventRecord";
        rc = n.api->cuEventRecord_(n.done, n.stream);
      }
    } else {
      call = "cuCtxPushCurrent";
    }
    if (rc != CUDA_SUCCESS) {
      const Status failed = driver_error(rc, describe() + ": " + call);
      const Status drained = n.stream != nullptr ? drain(failed.message()) : Status();
      job->status = drained.ok() ? failed : drained;
      job->state.store(2, std::memory_order_release);
      continue;
    }
    job->state.store(1, std::memory_order_release);
    running_.push_back(std::move(job));
  }
  return {};
}

Status Allocation::submit(const std::shared_ptr<CopyJob>& job) {
  if (kind_ != Kind::Device) {
    return Status::error(Errc::Internal, describe() + ": copies are for device memory");
  }
  if (job->length > size_ || job->offset > size_ - job->length) {
    return Status::error(Errc::InvalidArgument,
                         describe() + ": copy of [" + std::to_string(job->offset) + ", +" +
                             std::to_string(job->length) + ") is outside it");
  }
  std::lock_guard<std::mutex> g(mu_);
  if (!fence_.ok()) return fence_;
  job->state.store(0, std::memory_order_relaxed);
  queued_.push_back(job);
  start_next().ignore();  // a failure is the job's status
  return {};
}

void Allocation::drop_finished_parked() {
  for (auto it = parked_.begin(); it != parked_.end();) {
    it = it->first->finished() && it->first->status.code() != Errc::Unquiesced ? parked_.erase(it)
                                                                               : std::next(it);
  }
}

void Allocation::advance() {
  std::lock_guard<std::mutex> g(mu_);
  Native& n = *native_;
  if (!running_.empty()) {
    // The event's latest record follows the last job on the stream: it covers them all.
    const CUresult q = n.api->cuEventQuery_(n.done);
    if (q == CUDA_ERROR_NOT_READY) return;
    Status outcome;
    if (q != CUDA_SUCCESS) {
      // A copy failed on the device (which of a batch, the event cannot say): prove the stream
      // idle before its host bytes are reused.
      const Status failed = driver_error(
          q, describe() + (running_.size() > 1
                               ? ": one of " + std::to_string(running_.size()) + " copies in flight"
                               : std::string(": the copy")));
      const Status drained = drain(failed.message());
      outcome = drained.ok() ? failed : drained;
    }
    for (auto& job : running_) {
      job->status = outcome;
      job->state.store(2, std::memory_order_release);
    }
    running_.clear();
  }
  start_next().ignore();
  if (!parked_.empty()) drop_finished_parked();
}

Status Allocation::wait(CopyJob& job, Deadline deadline) {
  // A chunk's copy takes tens of microseconds, less than one timed sleep costs (the kernel's
  // timer slack alone is 50 us): yield while it is young, then back off to sleeps for a long one.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    advance();
    if (job.finished()) return job.status;
    if (deadline.expired()) {
      return Status::error(Errc::Timeout, describe() + ": a copy of " + std::to_string(job.length) +
                                              " bytes has not finished (it goes on)");
    }
    if (std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void Allocation::park(std::shared_ptr<CopyJob> job, std::shared_ptr<void> keep) {
  std::lock_guard<std::mutex> g(mu_);
  if (job->finished() && job->status.code() != Errc::Unquiesced) return;
  parked_.emplace_back(std::move(job), std::move(keep));
}

Status Allocation::memset(std::uint64_t offset, std::uint64_t length, std::uint8_t value,
                          Deadline deadline) {
  if (kind_ != Kind::Device) {
    return Status::error(Errc::Internal, describe() + ": memset is for device memory");
  }
  if (length > size_ || offset > size_ - length) {
    return Status::error(Errc::InvalidArgument, describe() + ": fill of [" +
                                                    std::to_string(offset) + ", +" +
                                                    std::to_string(length) + ") is outside it");
  }
  // In line with the copies (after the one in flight, and after a pending producer), without
  // holding the allocation's lock while it runs.
  auto job = std::make_shared<CopyJob>();
  job->direction = CopyJob::Direction::Fill;
  job->offset = offset;
  job->length = length;
  job->fill_value = value;
  ORBITE_RETURN_IF_ERROR(submit(job));
  Status st = wait(*job, deadline);
  if (st.code() == Errc::Timeout) park(job, nullptr);
  return st;
}

}  // namespace orbite::cuda
