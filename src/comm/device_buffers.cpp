// Device buffers handed to send/recv (and to the collectives' messages): a CUDA-aware MPI's
// rules. A small one is bounced through host memory on the calling thread (a blocking copy
// through the allocation's stream, its readiness consumed first); a large one is device memory
// the protocol moves with the exposed rendezvous and the staging pipeline.
#include <orbite/cuda.h>

#include "coll/algorithms.h"
#include "comm/communicator_impl.h"
#include "cuda/allocation.h"

namespace orbite::detail {

Status attach_device_buffer(RequestState& s, const void* data, std::uint64_t bytes, bool send) {
  // OrbiTE's pinned host memory with a recorded producer generation: the producer's writes
  // first (a send reads them; a receive must not land under them), waited once, on the caller's
  // thread.
  std::uint64_t pinned_offset = 0;
  if (bytes > 0) {
    if (auto pinned = cuda::find_pinned(data, bytes, &pinned_offset)) {
      ORBITE_RETURN_IF_ERROR(pinned->wait_ready());
    }
  }
  ORBITE_ASSIGN_OR_RETURN(auto view, cuda::device_view_of(data, bytes));
  if (!view) return {};
  // Forced onto nvlink, even a small message is read device to device (never bounced).
  if (bytes > kDeviceBounceBytes || s.options.transport == Transport::Nvlink) {
    s.device = std::move(view->alloc);
    s.device_offset = view->offset;
    return {};
  }
  ORBITE_ASSIGN_OR_RETURN(cuda::CudaMemory mem,
                          cuda::CudaMemory::from_raw_parts(const_cast<void*>(data), bytes));
  auto bounce = std::make_shared<std::vector<std::byte>>(bytes);
  if (send) {
    ORBITE_RETURN_IF_ERROR(mem.copy_to_host(0, bounce->data(), bytes));
    s.src = bounce->data();
  } else {
    s.dst = bounce->data();
    RequestState* self = &s;
    // The message's bytes into the device buffer before the receive is seen complete.
    s.before_complete = [mem, bounce, self]() mutable {
      return mem.copy_from_host(0, bounce->data(), self->bytes_done.load());
    };
  }
  s.keepalive = std::move(bounce);
  return {};
}

}  // namespace orbite::detail

namespace orbite::coll {

Result<Staging> stage_device_buffers(Args& a, std::uint64_t in_bytes, std::uint64_t out_bytes) {
  std::optional<cuda::DeviceView> in, out;
  if (a.in != nullptr && in_bytes > 0) {
    ORBITE_ASSIGN_OR_RETURN(in, cuda::device_view_of(a.in, in_bytes));
  }
  if (a.out != nullptr && out_bytes > 0) {
    ORBITE_ASSIGN_OR_RETURN(out, cuda::device_view_of(a.out, out_bytes));
  }
  if (!in && !out) return Staging{};
  struct Buffers {
    std::vector<std::byte> in, out;
  };
  auto host = std::make_shared<Buffers>();
  Staging staging;
  const auto in_at = reinterpret_cast<std::uintptr_t>(a.in);
  const auto out_at = reinterpret_cast<std::uintptr_t>(a.out);
  // In place: the input lies inside the output (all_reduce send == recv, all_gather's block of
  // the receive buffer, ...), so one host buffer stands for both, starting as the output holds.
  const bool in_place = a.in != nullptr && a.out != nullptr && in_at >= out_at &&
                        in_at + in_bytes <= out_at + out_bytes;
  if (out) {
    ORBITE_ASSIGN_OR_RETURN(cuda::CudaMemory mem,
                            cuda::CudaMemory::from_raw_parts(a.out, out_bytes));
    host->out.resize(out_bytes);
    if (in_place) ORBITE_RETURN_IF_ERROR(mem.copy_to_host(0, host->out.data(), out_bytes));
    std::byte* host_out = host->out.data();
    staging.before_complete = [mem, host_out, out_bytes]() mutable {
      return mem.copy_from_host(0, host_out, out_bytes);
    };
  }
  if (in_place && out) {
    a.in = host->out.data() + (in_at - out_at);
  } else if (in) {
    ORBITE_ASSIGN_OR_RETURN(cuda::CudaMemory mem, cuda::CudaMemory::from_raw_parts(
                                                      const_cast<std::byte*>(a.in), in_bytes));
    host->in.resize(in_bytes);
    ORBITE_RETURN_IF_ERROR(mem.copy_to_host(0, host->in.data(), in_bytes));
    a.in = host->in.data();
  } else if (in_place) {
    // A host input inside a device output cannot be: one allocation is one kind.
    return Status::error(Errc::InvalidArgument, "the input lies inside a device output buffer");
  }
  if (out) a.out = host->out.data();
  staging.buffers = std::move(host);
  return staging;
}

}  // namespace orbite::coll
