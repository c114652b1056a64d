// Type-2B memory windows on a loopback QP (the window is bound through the QP that then
// serves the remote requests, as type 2B requires). Sources, named per test: rdma-core
// tests/test_mr.py (type-2 bind, remote and local invalidation, dealloc while bound, access
// after invalidation fails with a remote access error) and rdma-unit-test's MwType2 cases
// (cases/mw_test.cc in the repository; the issue calls it unit/mw_test.cc).
#include <string>
#include <utility>
#include <vector>

#include <softverbs/control.h>

#include "mw_fixture.h"
#include "send_with_inv.h"

namespace {

using softverbs_test::Mw;
using softverbs_test::post_send_with_inv;

// A control command that must succeed (the device state is process-wide: tests that change it
// put it back).
void run(const std::string& cmd) {
  std::string reply;
  EXPECT_EQ(softverbs::control(cmd, &reply), 0) << cmd << ": " << reply;
}

// Runs a command now and its undo when the scope ends, however the test ends.
struct Scoped {
  Scoped(const std::string& cmd, std::string undo) : undo_(std::move(undo)) { run(cmd); }
  ~Scoped() { run(undo_); }
  std::string undo_;
};

TEST_F(Mw, BindWriteReadThenLocalInvalidateRevokes) {
  const uint32_t rkey =
      bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ibv_wc wc = poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(rkey >> 8, mw_->rkey >> 8);  // same window index, new 8-bit key
  for (size_t i = 0; i < 100; ++i) buf_[i] = static_cast<uint8_t>(i ^ 0x5a);
  wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096 + 10), rkey, 100);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(std::memcmp(buf_.data(), buf_.data() + 4106, 100), 0);
  wc = rdma(IBV_WR_RDMA_READ, 20000, at(4096 + 10), rkey, 100);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(std::memcmp(buf_.data(), buf_.data() + 20000, 100), 0);

  ibv_send_wr inv{};
  inv.wr_id = 300;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &inv, &bad), 0);
  wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096), rkey, 8);  // after invalidation: refused
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

TEST_F(Mw, AccessOutsideTheWindowIsRemoteAccessError) {
  const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096 + 1020), rkey, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

TEST_F(Mw, ReadWithoutTheWindowsReadRightIsRemoteAccessError) {
  const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  const ibv_wc wc = rdma(IBV_WR_RDMA_READ, 0, at(4096), rkey, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

TEST_F(Mw, SendWithInvalidateRevokesTheWindow) {
  const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ibv_sge rsge{at(30000), 64, mr_->lkey};
  ibv_recv_wr r{};
  r.wr_id = 1;
  r.sg_list = &rsge;
  r.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(qp_, &r, &bad_r), 0);
  ASSERT_EQ(post_send_with_inv(qp_, at(0), 16, mr_->lkey, rkey, 2), 0);
  for (int i = 0; i < 2; ++i) {
    const ibv_wc wc = poll();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.opcode == IBV_WC_RECV) {
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
      EXPECT_EQ(wc.invalidated_rkey, rkey);
    }
  }
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096), rkey, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

TEST_F(Mw, BindNeedsTheRegionsMwBindRight) {
  bind(mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);  // mr_ has no IBV_ACCESS_MW_BIND
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(qp_->state, IBV_QPS_ERR);
}

TEST_F(Mw, BindOnAQpInErrorFlushes) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE), 0);
  bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc.status);
}

TEST_F(Mw, DeallocWhileBoundRevokesAccess) {
  const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ASSERT_EQ(ibv_dealloc_mw(mw_), 0);
  mw_ = nullptr;
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096), rkey, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

// MwType2 "zero-length bind": allowed; the window then admits no byte.
TEST_F(Mw, ZeroLengthBindAdmitsNothing) {
  const uint32_t rkey = bind(bind_mr_, 4096, 0, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096), rkey, 1);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

// MwType2 "rkey reuse": after invalidation the window binds again under a new key; the old key
// stays refused.
TEST_F(Mw, RebindAfterInvalidationChangesTheKey) {
  const uint32_t first = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ibv_send_wr inv{};
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = first;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &inv, &bad), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  const uint32_t second = bind(bind_mr_, 8192, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  EXPECT_NE(second, first);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 0, at(8192), second, 8).status, IBV_WC_SUCCESS);
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(8192), first, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

// MwType2 Rebind: a bound window rebinds through its QP; the new key works, the old one not.
TEST_F(Mw, RebindThroughTheSameQpReplacesTheKey) {
  const uint32_t first = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  const uint32_t second = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  EXPECT_EQ(mw_->rkey, second);  // the bind updates mw->rkey
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 0, at(4096), second, 8).status, IBV_WC_SUCCESS);
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096), first, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

// MwType2 BindRKeyReuse/InUseRkey: a key in use by another window cannot be bound again.
TEST_F(Mw, KeyInUseByAnotherWindowIsBindError) {
  const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ibv_mw* other = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(other, nullptr);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = other;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info = {bind_mr_, at(8192), 64, IBV_ACCESS_REMOTE_WRITE};
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
  EXPECT_EQ(poll().status, IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(ibv_dealloc_mw(other), 0);
}

// MwType2 CrossQpInvalidate: LOCAL_INV through another QP is a bind error; the key still works
// through the QP it is bound through.
TEST_F(Mw, InvalidateThroughAnotherQpIsBindError) {
  const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ibv_qp* first = qp_;
  ibv_cq* first_cq = cq_;
  make_qp();
  to_rts();
  ibv_send_wr inv{};
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &inv, &bad), 0);
  EXPECT_EQ(poll().status, IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(ibv_destroy_qp(qp_), 0);
  EXPECT_EQ(ibv_destroy_cq(cq_), 0);
  qp_ = first;
  cq_ = first_cq;
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 0, at(4096), rkey, 8).status, IBV_WC_SUCCESS);
}

// MwType2 DeregMrWhenBound: EBUSY, and the window keeps working.
TEST_F(Mw, DeregOfARegionUnderABoundWindowIsBusy) {
  const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_dereg_mr(bind_mr_), EBUSY);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 0, at(4096), rkey, 8).status, IBV_WC_SUCCESS);
}

// MwType2 "distinct rkeys": two windows never share a key.
TEST_F(Mw, WindowsHaveDistinctKeys) {
  ibv_mw* other = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other->rkey >> 8, mw_->rkey >> 8);
  EXPECT_NE(other->rkey >> 8, mr_->rkey >> 8);
  EXPECT_EQ(ibv_dealloc_mw(other), 0);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd_, IBV_MW_TYPE_1), nullptr);  // type 1 is not emulated
  EXPECT_EQ(errno, EOPNOTSUPP);
}

// ibv_alloc_mw(3): the type is IBV_MW_TYPE_1 or IBV_MW_TYPE_2; anything else is EINVAL.
TEST_F(Mw, AllocOfAnUnknownWindowTypeIsInvalid) {
  for (int type : {0, 3, 255}) {
    errno = 0;
    EXPECT_EQ(ibv_alloc_mw(pd_, static_cast<ibv_mw_type>(type)), nullptr) << type;
    EXPECT_EQ(errno, EINVAL) << type;
  }
}

// ---- strict keys (softverbs' default; mw_type2_test.cpp runs the oracle's keys without) ----

// A bind's rkey keeps the window's index (rkey >> 8); ibv_inc_rkey changes only the key byte.
// Any other index is MW_BIND_ERR, and the window keeps its key.
TEST_F(Mw, StrictBindKeyMustKeepTheWindowsIndex) {
  const uint32_t index = mw_->rkey >> 8;
  EXPECT_EQ(index, mw_->handle);
  const uint32_t before = mw_->rkey;
  ibv_send_wr wr =
      bind_wr(mw_, ibv_inc_rkey(mw_->rkey) ^ 0x100, bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(post(qp_, wr), 0);
  EXPECT_EQ(poll().status, IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(mw_->rkey, before);
  EXPECT_EQ(qp_->state, IBV_QPS_ERR);
}

// 300 rebinds with ibv_inc_rkey wrap the key byte and never leave the index; only the latest
// key works.
TEST_F(Mw, StrictRebindsWithIncrementedKeysStayOnTheIndex) {
  const uint32_t index = mw_->rkey >> 8;
  uint32_t older = 0;
  uint32_t previous = mw_->rkey;
  for (int i = 0; i < 300; ++i) {
    const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(poll().status, IBV_WC_SUCCESS) << "bind " << i;
    ASSERT_EQ(rkey >> 8, index);
    ASSERT_EQ(rkey & 0xff, (previous + 1) & 0xff);
    older = previous;
    previous = rkey;
  }
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 0, at(4096), previous, 8).status, IBV_WC_SUCCESS);
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096), older, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

// A freed index is reused by the next window (the lowest free one), which starts at the key
// byte after the last one bound on that index: the old window's last key is refused.
TEST_F(Mw, FreedIndexIsReusedWithAFreshKeyByte) {
  ibv_mw* second = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(second, nullptr);
  const uint32_t index = second->rkey >> 8;
  ibv_send_wr wr =
      bind_wr(second, ibv_inc_rkey(second->rkey), bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(post(qp_, wr), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  const uint32_t old_key = second->rkey;
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 0, at(4096), old_key, 8).status, IBV_WC_SUCCESS);
  ASSERT_EQ(ibv_dealloc_mw(second), 0);

  ibv_mw* third = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->rkey >> 8, index);
  EXPECT_EQ(third->rkey, ibv_inc_rkey(old_key));
  wr = bind_wr(third, ibv_inc_rkey(third->rkey), bind_mr_, 8192, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(post(qp_, wr), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  EXPECT_NE(third->rkey, old_key);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 0, at(8192), third->rkey, 8).status, IBV_WC_SUCCESS);
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096), old_key, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ibv_dealloc_mw(third), 0);
}

// "mw_index_limit DEV N": at most N window indices; the next ibv_alloc_mw is ENOMEM until one
// is freed, and max_mw says N. 0 lifts the limit.
TEST_F(Mw, IndexLimitMakesAllocFailWithEnomem) {
  Scoped limit("mw_index_limit soft_0 3", "mw_index_limit soft_0 0");
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx_, &da), 0);
  EXPECT_EQ(da.max_mw, 3);
  std::vector<ibv_mw*> more;
  for (int i = 0; i < 2; ++i) {  // the fixture's window holds the first index
    more.push_back(ibv_alloc_mw(pd_, IBV_MW_TYPE_2));
    ASSERT_NE(more.back(), nullptr) << i;
  }
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd_, IBV_MW_TYPE_2), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  const uint32_t freed = more[0]->rkey >> 8;
  ASSERT_EQ(ibv_dealloc_mw(more[0]), 0);
  more[0] = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(more[0], nullptr);
  EXPECT_EQ(more[0]->rkey >> 8, freed);
  run("mw_index_limit soft_0 0");
  ibv_mw* beyond = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  EXPECT_NE(beyond, nullptr);
  if (beyond != nullptr) more.push_back(beyond);
  for (ibv_mw* mw : more) EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

// "mw_strict DEV off": any key not in use is accepted (what rdma-unit-test's cases bind).
TEST_F(Mw, StrictKeysCanBeTurnedOff) {
  Scoped strict("mw_strict soft_0 off", "mw_strict soft_0 on");
  ibv_send_wr wr = bind_wr(mw_, 0x1234, bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(post(qp_, wr), 0);
  EXPECT_EQ(poll().status, IBV_WC_SUCCESS);
  EXPECT_EQ(mw_->rkey, 0x1234u);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 0, at(4096), 0x1234, 8).status, IBV_WC_SUCCESS);
}

// MwType2 CrossQpRead/BindType2ReadDiffQp: the window serves only the QP it was bound
// through; another QP of the same PD gets a remote access error.
TEST_F(Mw, WindowIsTiedToTheQpThatBoundIt) {
  const uint32_t rkey = bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ibv_qp* first = qp_;
  ibv_cq* first_cq = cq_;
  cq_ = nullptr;
  make_qp();
  to_rts();
  const ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, at(4096), rkey, 8);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ibv_dealloc_mw(mw_), 0);  // first is busy while the window is bound through it
  mw_ = nullptr;
  EXPECT_EQ(ibv_destroy_qp(first), 0);
  EXPECT_EQ(ibv_destroy_cq(first_cq), 0);
}

// MwType2 DestroyWithType2Bound: EBUSY while a window is bound through the QP.
TEST_F(Mw, DestroyQpWithABoundWindowIsBusy) {
  bind(bind_mr_, 4096, 1024, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_destroy_qp(qp_), EBUSY);
  EXPECT_EQ(ibv_dealloc_mw(mw_), 0);
  mw_ = nullptr;
  EXPECT_EQ(ibv_destroy_qp(qp_), 0);
  qp_ = nullptr;
}

}  // namespace
