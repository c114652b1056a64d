// The single-process fixture of softverbs' tests: the first device (soft_0 by default), a PD
// and an MR over a 64 KiB buffer; helpers for a loopback RC QP (a QP connected to itself).
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sched.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace softverbs_test {

// An RC QP of pd whose queues use cq, connected to itself and moved to RTS (the loopback
// setup of rdma-unit-test's SetUpSelfConnectedRcQp); nullptr if any step fails.
inline ibv_qp* loopback_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {8, 8, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (qp == nullptr) return nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  bool ok = ibv_modify_qp(
                qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = qp->qp_num;
  a.max_dest_rd_atomic = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  ok = ok && ibv_query_gid(pd->context, 1, 0, &a.ah_attr.grh.dgid) == 0 &&
       ibv_modify_qp(qp, &a,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.max_rd_atomic = 1;
  ok = ok && ibv_modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
  if (!ok) {
    ibv_destroy_qp(qp);
    return nullptr;
  }
  return qp;
}

// One completion of cq within 10 s; status RESP_TIMEOUT_ERR stands for "nothing".
inline ibv_wc poll_one(ibv_cq* cq) {
  ibv_wc wc{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (ibv_poll_cq(cq, 1, &wc) == 1) return wc;
    sched_yield();
  }
  wc.status = IBV_WC_RESP_TIMEOUT_ERR;
  return wc;
}

class Local : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_NE(list, nullptr);
    ASSERT_GE(n, 1) << "no soft device? run with LD_LIBRARY_PATH=<build>/softverbs";
    ASSERT_STREQ(ibv_get_device_name(list[0]), "soft_0");
    ctx_ = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(mr_, nullptr);
  }
  void TearDown() override {
    if (qp_ != nullptr) {
      EXPECT_EQ(ibv_destroy_qp(qp_), 0);
    }
    if (cq_ != nullptr) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (ch_ != nullptr) {
      EXPECT_EQ(ibv_destroy_comp_channel(ch_), 0);
    }
    if (mr_ != nullptr) {
      EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    }
    if (pd_ != nullptr) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_ != nullptr) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
  }
  void make_qp(int cqe = 16) {
    cq_ = ibv_create_cq(ctx_, cqe, this, ch_, 0);
    ASSERT_NE(cq_, nullptr);
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = {8, 8, 1, 1, 0};
    qp_ = ibv_create_qp(pd_, &ia);
    ASSERT_NE(qp_, nullptr);
  }
  int to_init() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    return ibv_modify_qp(qp_, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }
  ibv_qp_attr rtr_attr() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = qp_->qp_num;  // loopback: the QP talks to itself
    a.max_dest_rd_atomic = 1;
    a.ah_attr.is_global = 1;
    EXPECT_EQ(ibv_query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid), 0);
    a.ah_attr.port_num = 1;
    return a;
  }
  static constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  static constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  void to_rts() {
    ASSERT_EQ(to_init(), 0);
    ibv_qp_attr a = rtr_attr();
    ASSERT_EQ(ibv_modify_qp(qp_, &a, kRtrMask), 0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.max_rd_atomic = 1;
    ASSERT_EQ(ibv_modify_qp(qp_, &a, kRtsMask), 0);
  }
  int write(size_t off, size_t len, uint64_t id, bool signaled = true) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data()), static_cast<uint32_t>(len), mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf_.data() + off);
    wr.wr.rdma.rkey = mr_->rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp_, &wr, &bad);
  }
  ibv_wc poll() {
    ibv_wc wc{};
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
      if (ibv_poll_cq(cq_, 1, &wc) == 1) return wc;
      sched_yield();
    }
    wc.status = IBV_WC_RESP_TIMEOUT_ERR;  // stands for "nothing within 10 s"
    return wc;
  }

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_comp_channel* ch_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(1 << 16);
};

}  // namespace softverbs_test
