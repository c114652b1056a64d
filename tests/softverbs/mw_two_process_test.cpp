// Type-2B memory windows between two processes (the child owns and binds the window, the parent
// is the peer that reaches it), each test named after its source: rdma-core tests/test_mr.py's
// MWTest type-2 cases and rdma-unit-test's MwType2 cases (cases/mw_test.cc). test_mr.py's
// resources are used where it is the source: regions with LOCAL_WRITE | MW_BIND only (no remote
// right) and windows granting REMOTE_WRITE | LOCAL_WRITE, so remote access rests on the
// window's rights alone.
#include "send_with_inv.h"
#include "two_process_fixture.h"

namespace softverbs_test {
namespace {

constexpr int kTestMrPyRegion = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
constexpr uint32_t kTestMrPyWindow = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;

class MwTwoProcess : public TwoProcess {
 protected:
  // A signaled WRITE of the parent's [local_off, +len) to the child's buffer + remote_off
  // through rkey; its completion.
  ibv_wc write_via(uint32_t rkey, size_t local_off, size_t remote_off, size_t len, uint64_t id) {
    EXPECT_EQ(me_.post(IBV_WR_RDMA_WRITE, local_off, remote_off, len, id, me_.peer.rkey ^ rkey), 0);
    return me_.poll();
  }
  ibv_wc read_via(uint32_t rkey, size_t local_off, size_t remote_off, size_t len, uint64_t id) {
    EXPECT_EQ(me_.post(IBV_WR_RDMA_READ, local_off, remote_off, len, id, me_.peer.rkey ^ rkey), 0);
    return me_.poll();
  }
  // The child binds its window over [off, off + len) of its buffer; the window's rkey.
  uint32_t child_binds(size_t off, size_t len, uint32_t rights) {
    const Reply r = ask(kBindMw, off, len, rights);
    EXPECT_EQ(r.status, IBV_WC_SUCCESS) << ibv_wc_status_str(static_cast<ibv_wc_status>(r.status));
    return r.value;
  }
  // After a refused request: both QPs in ERR, and no byte of the child's buffer moved since
  // its last check.
  void expect_both_in_error_and_nothing_moved() {
    EXPECT_EQ(me_.state(), IBV_QPS_ERR);
    EXPECT_EQ(ask(kState, 0, 0, 0).status, IBV_QPS_ERR);
    EXPECT_EQ(ask(kCheck, 0, 0, 0).status, 0);
  }
};

// rdma-unit-test MwType2 Read, across processes: the peer READs through a window granting
// REMOTE_READ and gets the owner's bytes; a READ reaching past the window's end is
// REM_ACCESS_ERR and writes nothing into the peer's buffer.
TEST_F(MwTwoProcess, MwType2RemoteReadThroughAWindow) {
  start(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  const uint32_t rkey = child_binds(4096, 8192, IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(ask(kFill, 4096 + 100, 500, 21).status, 0);
  const std::vector<uint8_t> before = me_.buf;
  ibv_wc wc = read_via(rkey, 3, 4096 + 100, 500, 1);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.byte_len, 500u);
  std::vector<uint8_t> want = before;
  for (size_t i = 0; i < 500; ++i) want[3 + i] = pattern(21, i);
  EXPECT_TRUE(me_.buf == want) << "READ bytes differ (or bytes outside the target moved)";
  wc = read_via(rkey, 1000, 4096 + 8192 - 10, 20, 2);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(me_.buf == want);
  expect_both_in_error_and_nothing_moved();
}

// rdma-core test_mr.py test_mw_type2: each side binds a type-2 window over its region (MW_BIND,
// no remote right) and the other side WRITEs through it, both ways, several times.
TEST_F(MwTwoProcess, TestMrPyMwType2BindAndRdmaBothWays) {
  start(kTestMrPyRegion, kTestMrPyRegion);
  const uint32_t child_key = child_binds(0, 8192, kTestMrPyWindow);
  ibv_mw* mw = ibv_alloc_mw(me_.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = {me_.mr, reinterpret_cast<uintptr_t>(me_.buf.data()), 8192,
                          kTestMrPyWindow};
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(me_.qp, &wr, &bad), 0);
  ibv_wc wc = me_.poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  const uint32_t my_key = mw->rkey;
  for (uint32_t it = 0; it < 3; ++it) {
    SCOPED_TRACE(testing::Message() << "iteration " << it);
    const uint32_t seed = 40 + it;
    fill_local(16384, 1000, seed);
    wc = write_via(child_key, 16384, 100 * it, 1000, it);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(ask(kCheck, 100 * it, 1000, seed).status, 0);
    const std::vector<uint8_t> before = me_.buf;
    ASSERT_EQ(ask(kWriteTo, 20000, 700, seed + 10, my_key, 300 * it).status, IBV_WC_SUCCESS);
    std::vector<uint8_t> want = before;
    for (size_t i = 0; i < 700; ++i) want[300 * it + i] = pattern(seed + 10, i);
    EXPECT_TRUE(me_.buf == want) << "the child's WRITE landed wrong (or moved other bytes)";
  }
  EXPECT_EQ(ask(kCheck, 0, 0, 0).status, 0);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

// The owner invalidates its window with LOCAL_INV, then the peer WRITEs through it: the peer
// gets REM_ACCESS_ERR, both QPs go to ERR, and no byte of the owner's buffer moves (rdma-core
// test_mr.py test_mw_type2_invalidate_local; rdma-unit-test MwType2 Unbind across processes).
TEST_F(MwTwoProcess, TestMrPyMwType2InvalidateLocal) {
  start(kTestMrPyRegion);
  const uint32_t rkey = child_binds(4096, 8192, kTestMrPyWindow);
  fill_local(0, 256, 51);
  ibv_wc wc = write_via(rkey, 0, 4096 + 64, 256, 1);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ask(kCheck, 4096 + 64, 256, 51).status, 0);
  const Reply inv = ask(kLocalInv, 0, 0, 0);
  EXPECT_EQ(inv.status, IBV_WC_SUCCESS);
  EXPECT_EQ(inv.value, static_cast<uint32_t>(IBV_WC_LOCAL_INV));
  fill_local(0, 256, 52);
  wc = write_via(rkey, 0, 4096 + 64, 256, 2);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  expect_both_in_error_and_nothing_moved();
}

// rdma-core test_mr.py test_mw_type2_invalidate_remote: the peer's SEND_WITH_INV invalidates
// the owner's window (the owner's receive reports IBV_WC_WITH_INV and the key); a WRITE through
// it afterwards is REM_ACCESS_ERR and moves nothing.
TEST_F(MwTwoProcess, TestMrPyMwType2InvalidateRemote) {
  start(kTestMrPyRegion);
  const uint32_t rkey = child_binds(0, 4096, kTestMrPyWindow);
  fill_local(0, 64, 61);
  ASSERT_EQ(write_via(rkey, 0, 0, 64, 1).status, IBV_WC_SUCCESS);
  EXPECT_EQ(ask(kCheck, 0, 64, 61).status, 0);
  ASSERT_EQ(ask(kPostRecv, 30000, 64, 0).status, 0);
  ASSERT_EQ(post_send_with_inv(me_.qp, reinterpret_cast<uintptr_t>(me_.buf.data()), 16,
                               me_.mr->lkey, rkey, 2),
            0);
  ibv_wc wc = me_.poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  const Reply recv = ask(kPoll, 0, 0, 0);
  EXPECT_EQ(recv.status, IBV_WC_SUCCESS);
  EXPECT_TRUE(recv.flags & IBV_WC_WITH_INV);
  EXPECT_EQ(ask(kCheck, 30000, 16, 61).status, 0);  // the SEND's bytes, nothing else
  fill_local(0, 64, 62);
  wc = write_via(rkey, 0, 0, 64, 3);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  expect_both_in_error_and_nothing_moved();
}

// rdma-core test_mr.py test_mw_type2_invalidate_dealloc: the owner deallocates its window while
// bound (softverbs allows it: the window is invalidated with it, as mw.cpp's dealloc_mw does);
// a WRITE through its key is then REM_ACCESS_ERR and moves nothing.
TEST_F(MwTwoProcess, TestMrPyMwType2InvalidateDealloc) {
  start(kTestMrPyRegion);
  const uint32_t rkey = child_binds(0, 4096, kTestMrPyWindow);
  fill_local(0, 64, 71);
  ASSERT_EQ(write_via(rkey, 0, 128, 64, 1).status, IBV_WC_SUCCESS);
  EXPECT_EQ(ask(kCheck, 128, 64, 71).status, 0);
  EXPECT_EQ(ask(kDeallocMw, 0, 0, 0).status, 0);
  fill_local(0, 64, 72);
  const ibv_wc wc = write_via(rkey, 0, 128, 64, 2);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  expect_both_in_error_and_nothing_moved();
}

}  // namespace
}  // namespace softverbs_test
