// Device buffers handed to send/recv (and to the collectives' messages): a CUDA-aware MPI's
// rules. A small one is bounced through host memory on the calling thread (a blocking copy
// through the allocation's stream, its readiness consumed first); a large one is device memory
// the protocol moves with the exposed rendezvous (read over cuda_ipc on one host) or the staging
// pipeline. And the collectives' device buffers: moved directly, or through host stand-ins.
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

namespace {

// A collective's copies within its own device buffers wait at most this long (the bound of the
// bounced copies, CudaMemory's default).
constexpr Duration kLocalCopyBound = std::chrono::seconds(60);

// dst and src are device memory (src's producer readiness waited first): a copy on src's
// allocation's stream, waited for.
Status copy_device_to_device(void* dst, const void* src, std::uint64_t bytes) {
  ORBITE_ASSIGN_OR_RETURN(auto from, cuda::device_view_of(src, bytes));
  if (!from)
    return Status::error(Errc::Internal, "the source of a device copy is not device memory");
  auto job = std::make_shared<cuda::CopyJob>();
  job->direction = cuda::CopyJob::Direction::ToPeer;
  job->offset = from->offset;
  job->peer = reinterpret_cast<std::uint64_t>(dst);
  job->length = bytes;
  ORBITE_RETURN_IF_ERROR(from->alloc->submit(job));
  Status st = from->alloc->wait(*job, Deadline::after(kLocalCopyBound));
  // A copy that outlived its bound goes on with no host memory to keep.
  if (st.code() == Errc::Timeout) from->alloc->park(job, nullptr);
  return st;
}

bool moves_data_only(Collective kind) {
  switch (kind) {
    case Collective::Broadcast:
    case Collective::AllGather:
    case Collective::AllToAll:
    case Collective::Gather:
    case Collective::Scatter: return true;
    default: return false;
  }
}

// `in` / `out`: whether that buffer is device memory.
Result<DeviceBuffers> stage_device_buffers(Args& a, bool in, bool out, std::uint64_t in_bytes,
                                           std::uint64_t out_bytes) {
  struct Buffers {
    std::vector<std::byte> in, out;
  };
  auto host = std::make_shared<Buffers>();
  DeviceBuffers staging;
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
  staging.stand_ins = std::move(host);
  return staging;
}

}  // namespace

Result<DeviceBuffers> prepare_device_buffers(Collective kind, Args& a, std::uint64_t in_bytes,
                                             std::uint64_t out_bytes, bool allow_direct) {
  // Host memory everywhere without a driver in the process (the common case, checked once).
  if (!cuda::driver_in_process()) return DeviceBuffers{};
  std::optional<cuda::DeviceView> in, out;
  const bool has_in = a.in != nullptr && in_bytes > 0;
  const bool has_out = a.out != nullptr && out_bytes > 0;
  if (has_in) {
    ORBITE_ASSIGN_OR_RETURN(in, cuda::device_view_of(a.in, in_bytes));
  }
  if (has_out) {
    ORBITE_ASSIGN_OR_RETURN(out, cuda::device_view_of(a.out, out_bytes));
  }
  if (!in && !out) return DeviceBuffers{};
  const bool all_device = (!has_in || in) && (!has_out || out);
  const bool all_to_all_in_place = kind == Collective::AllToAll && a.in == a.out;
  if (allow_direct && moves_data_only(kind) && all_device && !all_to_all_in_place) {
    DeviceBuffers direct;
    direct.direct = true;
    direct.copy = &copy_device_to_device;
    return direct;
  }
  return stage_device_buffers(a, in.has_value(), out.has_value(), in_bytes, out_bytes);
}

}  // namespace orbite::coll
