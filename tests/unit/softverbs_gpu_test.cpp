// softverbs' GPU MRs on softcuda's device memory (one process, both libraries loaded as any
// program loads them): ibv_reg_dmabuf_mr on a dma-buf from cuMemGetHandleForAddressRange, and
// ibv_reg_mr of a device pointer through softcuda's peermem hook. Bytes are moved by the NIC
// (a loopback RC QP) and checked through the driver: the CPU never reads device memory.
#include <cuda.h>
#include <gtest/gtest.h>
#include <softcuda/control.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "../softverbs/local_fixture.h"

namespace {

using softverbs_test::loopback_qp;
using softverbs_test::poll_one;

class GpuMr : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_TRUE(softcuda::loaded()) << "run with LD_LIBRARY_PATH naming softcuda and softverbs";
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&cuctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(cuctx_), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&dev_, kBytes), CUDA_SUCCESS);
    // As every GPUDirect user does: a synchronous copy into it has landed when it returns (from
    // pageable memory the driver may otherwise return with the DMA still to come).
    const unsigned int on = 1;
    ASSERT_EQ(cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dev_), CUDA_SUCCESS);
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_NE(list, nullptr);
    ASSERT_GE(n, 1);
    ctx_ = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    qp_ = loopback_qp(pd_, cq_);
    ASSERT_NE(qp_, nullptr);
    host_mr_ =
        ibv_reg_mr(pd_, host_.data(), host_.size(),
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(host_mr_, nullptr);
  }
  void TearDown() override {
    if (qp_ != nullptr) {
      EXPECT_EQ(ibv_destroy_qp(qp_), 0);
    }
    if (host_mr_ != nullptr) {
      EXPECT_EQ(ibv_dereg_mr(host_mr_), 0);
    }
    if (cq_ != nullptr) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (pd_ != nullptr) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_ != nullptr) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
    if (dev_ != 0) {
      EXPECT_EQ(cuMemFree(dev_), CUDA_SUCCESS);
    }
    if (cuctx_ != nullptr) cuDevicePrimaryCtxRelease(0);
  }
  // One signaled WRITE (device -> host) or READ (host -> device) of n bytes between the GPU MR
  // at `dev_at` and the host MR at `host_at`.
  ibv_wc move(ibv_mr* gpu, CUdeviceptr dev_at, std::size_t host_at, std::uint32_t n, bool write) {
    ibv_sge sge{static_cast<std::uint64_t>(dev_at), n, gpu->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(host_.data() + host_at);
    wr.wr.rdma.rkey = host_mr_->rkey;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
    return poll_one(cq_);
  }
  // The NIC carries bytes both ways through `gpu`, which covers [dev_, dev_ + kBytes) at an
  // unaligned offset: device contents go out by WRITE and come back by READ.
  void round_trip(ibv_mr* gpu) {
    std::vector<std::uint8_t> pattern(kBytes);
    for (std::size_t i = 0; i < pattern.size(); ++i)
      pattern[i] = static_cast<std::uint8_t>(i * 7 + 3);
    ASSERT_EQ(cuMemcpyHtoD(dev_, pattern.data(), kBytes), CUDA_SUCCESS);
    const ibv_wc w = move(gpu, dev_ + 17, 100, 5000, true);
    ASSERT_EQ(w.status, IBV_WC_SUCCESS) << ibv_wc_status_str(w.status);
    EXPECT_EQ(std::memcmp(host_.data() + 100, pattern.data() + 17, 5000), 0);
    for (std::size_t i = 0; i < 3000; ++i) host_[20000 + i] = static_cast<std::uint8_t>(i ^ 0x5a);
    const ibv_wc r = move(gpu, dev_ + 4096 + 9, 20000, 3000, false);
    ASSERT_EQ(r.status, IBV_WC_SUCCESS) << ibv_wc_status_str(r.status);
    std::vector<std::uint8_t> back(3000);
    ASSERT_EQ(cuMemcpyDtoH(back.data(), dev_ + 4096 + 9, back.size()), CUDA_SUCCESS);
    EXPECT_EQ(std::memcmp(back.data(), host_.data() + 20000, back.size()), 0);
    // Outside the MR's range: a local protection error, nothing moved.
    const ibv_wc out = move(gpu, dev_ + kBytes - 8, 0, 16, true);
    EXPECT_EQ(out.status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(out.status);
  }

  static constexpr std::size_t kBytes = 64 * 1024;
  CUcontext cuctx_ = nullptr;
  CUdeviceptr dev_ = 0;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* host_mr_ = nullptr;
  std::vector<std::uint8_t> host_ = std::vector<std::uint8_t>(64 * 1024);
};

TEST_F(GpuMr, TheDmabufProbeSeesSupport) {
  // NCCL's probe: fd -1 must fail with EBADF where the kernel has dma-buf MRs (EOPNOTSUPP or
  // EPROTONOSUPPORT where it has not).
  errno = 0;
  EXPECT_EQ(ibv_reg_dmabuf_mr(pd_, 0, 0, 0, -1, 0), nullptr);
  EXPECT_EQ(errno, EBADF);
  // A descriptor that is no dma-buf of the driver's.
  errno = 0;
  EXPECT_EQ(ibv_reg_dmabuf_mr(pd_, 0, 4096, 0, STDIN_FILENO, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(GpuMr, ADmabufMrMovesDeviceBytesAndKeepsItsExactRange) {
  int fd = -1;
  ASSERT_EQ(
      cuMemGetHandleForAddressRange(&fd, dev_, kBytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
      CUDA_SUCCESS);
  // The export is page-granular; the MR is the exact range from offset 0, addressed by the
  // device address (iova).
  errno = 0;
  EXPECT_EQ(ibv_reg_dmabuf_mr(pd_, kBytes - 8, 16, dev_, fd, IBV_ACCESS_LOCAL_WRITE), nullptr)
      << "a range past the dma-buf";
  EXPECT_EQ(errno, EINVAL);
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd_, 0, kBytes - 3, dev_, fd, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  EXPECT_EQ(mr->length, kBytes - 3);
  round_trip(mr);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(close(fd), 0);
}

TEST_F(GpuMr, WithoutPeermemADevicePointerCannotBeRegistered) {
  // softcuda's default device has no peermem module: as get_user_pages on device memory, EFAULT.
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd_, reinterpret_cast<void*>(dev_), kBytes, IBV_ACCESS_LOCAL_WRITE),
            nullptr);
  EXPECT_EQ(errno, EFAULT);
}

// Its own ctest (softverbs_gpu.peermem): SOFTCUDA_CONFIG gives the device a peermem module.
TEST_F(GpuMr, PeermemRegistersADevicePointer) {
  if (std::getenv("SOFTVERBS_GPU_PEERMEM") == nullptr)
    GTEST_SKIP() << "run by softverbs_gpu.peermem";
  ibv_mr* mr = ibv_reg_mr(pd_, reinterpret_cast<void*>(dev_), kBytes, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  round_trip(mr);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

}  // namespace
