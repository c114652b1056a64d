// The memory-window fixture of softverbs' loopback tests (mw_test.cpp, mw_type2_test.cpp): the
// Local fixture plus a region with IBV_ACCESS_MW_BIND over the same buffer, one type-2 window
// and a loopback RC QP in RTS (type 2B: the window serves the QP it is bound through).
#pragma once

#include "local_fixture.h"

namespace softverbs_test {

class Mw : public Local {
 protected:
  void SetUp() override {
    Local::SetUp();
    if (HasFatalFailure()) return;
    bind_mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
    ASSERT_NE(bind_mr_, nullptr);
    mw_ = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
    ASSERT_NE(mw_, nullptr);
    EXPECT_EQ(mw_->type, IBV_MW_TYPE_2);
    make_qp();
    to_rts();
  }
  void TearDown() override {
    if (mw_ != nullptr) {
      EXPECT_EQ(ibv_dealloc_mw(mw_), 0);
    }
    if (bind_mr_ != nullptr) {
      EXPECT_EQ(ibv_dereg_mr(bind_mr_), 0);
    }
    Local::TearDown();
  }
  // A bind WR of [off, off + len) of buf_ through mr, giving mw the key rkey.
  ibv_send_wr bind_wr(ibv_mw* mw, uint32_t rkey, ibv_mr* mr, size_t off, size_t len,
                      unsigned access, bool signaled = true, uint64_t id = 100) {
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = rkey;
    wr.bind_mw.bind_info.mr = mr;
    wr.bind_mw.bind_info.addr = reinterpret_cast<uintptr_t>(buf_.data() + off);
    wr.bind_mw.bind_info.length = len;
    wr.bind_mw.bind_info.mw_access_flags = access;
    return wr;
  }
  int post(ibv_qp* qp, ibv_send_wr wr) {
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }
  // Posts a bind of [off, off + len) of mr with a fresh key; returns the new rkey.
  uint32_t bind(ibv_mr* mr, size_t off, size_t len, unsigned access) {
    const ibv_send_wr wr = bind_wr(mw_, ibv_inc_rkey(mw_->rkey), mr, off, len, access);
    EXPECT_EQ(post(qp_, wr), 0);
    return wr.bind_mw.rkey;
  }
  // Posts a LOCAL_INV of rkey on qp.
  int local_inv(ibv_qp* qp, uint32_t rkey, bool signaled = true, uint64_t id = 300) {
    ibv_send_wr inv{};
    inv.wr_id = id;
    inv.opcode = IBV_WR_LOCAL_INV;
    inv.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    inv.invalidate_rkey = rkey;
    return post(qp, inv);
  }
  // One signaled RDMA WRITE/READ of len bytes between buf_ + local_off and raddr through qp;
  // returns its completion.
  ibv_wc rdma_on(ibv_qp* qp, ibv_cq* cq, ibv_wr_opcode op, size_t local_off, uint64_t raddr,
                 uint32_t rkey, size_t len) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data() + local_off), static_cast<uint32_t>(len),
                mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 200;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qp, &wr, &bad), 0);
    return poll_one(cq);
  }
  ibv_wc rdma(ibv_wr_opcode op, size_t local_off, uint64_t raddr, uint32_t rkey, size_t len) {
    return rdma_on(qp_, cq_, op, local_off, raddr, rkey, len);
  }
  uint64_t at(size_t off) { return reinterpret_cast<uintptr_t>(buf_.data() + off); }

  ibv_mr* bind_mr_ = nullptr;
  ibv_mw* mw_ = nullptr;
};

}  // namespace softverbs_test
