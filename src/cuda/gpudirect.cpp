// GPUDirect RDMA's driver side: the device attributes a NIC registration depends on, the
// synchronous-memops attribute and write-ordering check made before one (the guide's "GPUDirect
// RDMA ownership"), and the dma-buf export of an allocation ("GPU Direct registration routes").
#include <unistd.h>

#include "cuda/native.h"

namespace orbite::cuda {

Result<GpuDirectSupport> Allocation::gpudirect_support() const {
  if (kind_ != Kind::Device) {
    return Status::error(Errc::InvalidArgument,
                         describe() + ": GPUDirect RDMA is for device memory");
  }
  const Native& n = *native_;
  GpuDirectSupport out;
  auto attribute = [&](CUdevice_attribute a, const char* name, int* v) -> Status {
    if (CUresult rc = n.api->cuDeviceGetAttribute_(v, a, n.device); rc != CUDA_SUCCESS) {
      return Status::error(
          Errc::Unavailable,
          driver_error(rc, describe() + ": cuDeviceGetAttribute(" + std::string(name) + ")")
              .message());
    }
    return {};
  };
  int v = 0;
  ORBITE_RETURN_IF_ERROR(
      attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, "GPU_DIRECT_RDMA_SUPPORTED", &v));
  out.rdma = v != 0;
  ORBITE_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, "DMA_BUF_SUPPORTED", &v));
  out.dma_buf = v != 0;
  ORBITE_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING,
                                   "GPU_DIRECT_RDMA_WRITES_ORDERING", &out.writes_ordering));
  out.dma_buf_export = n.api->cuMemGetHandleForAddressRange_ != nullptr;
  return out;
}

Status Allocation::prepare_gpudirect() const {
  ORBITE_ASSIGN_OR_RETURN(const GpuDirectSupport s, gpudirect_support());
  if (!s.rdma) {
    return Status::error(Errc::Unavailable,
                         describe() +
                             ": the device does not support GPUDirect RDMA "
                             "(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED is 0)");
  }
  if (s.writes_ordering < CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER) {
    return Status::error(Errc::Unavailable,
                         describe() +
                             ": the device does not order GPUDirect RDMA writes for its own work "
                             "(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING is " +
                             std::to_string(s.writes_ordering) +
                             ", below OWNER); OrbiTE does not flush them");
  }
  const Native& n = *native_;
  const unsigned int on = 1;
  if (CUresult rc = n.api->cuPointerSetAttribute_(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                                  reinterpret_cast<CUdeviceptr>(base_));
      rc != CUDA_SUCCESS) {
    return Status::error(
        Errc::Unavailable,
        driver_error(rc, describe() + ": cuPointerSetAttribute(SYNC_MEMOPS)").message());
  }
  return {};
}

Result<DmabufExport> Allocation::export_dmabuf() const {
  if (kind_ != Kind::Device) {
    return Status::error(Errc::InvalidArgument, describe() + ": only device memory is exported");
  }
  const Native& n = *native_;
  if (n.api->cuMemGetHandleForAddressRange_ == nullptr) {
    return Status::error(Errc::Unavailable,
                         "dma-buf: the driver does not export cuMemGetHandleForAddressRange");
  }
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  DmabufExport out;
  out.base = reinterpret_cast<std::uint64_t>(base_);
  if (out.base % page != 0) {
    return Status::error(Errc::Unavailable, describe() +
                                                ": the allocation's base is not "
                                                "host-page aligned; it cannot be exported");
  }
  out.size = (size_ + page - 1) / page * page;
  int fd = -1;
  // Flags zero: the driver's default mapping (forced PCIe needs a C2C/PCI classification that
  // OrbiTE's topology does not make).
  if (CUresult rc =
          n.api->cuMemGetHandleForAddressRange_(&fd, static_cast<CUdeviceptr>(out.base), out.size,
                                                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
      rc != CUDA_SUCCESS) {
    return Status::error(Errc::Unavailable,
                         driver_error(rc, describe() + ": cuMemGetHandleForAddressRange(" +
                                              std::to_string(out.size) + " bytes, DMA_BUF_FD)")
                             .message());
  }
  out.fd = fd;
  return out;
}

}  // namespace orbite::cuda
