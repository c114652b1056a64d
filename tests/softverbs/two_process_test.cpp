// Two processes (fork) on one soft device: bytes of RDMA WRITE and READ, SEND/RECV, and the RC
// error rules (remote access error, then flushes on both ends). Plain verbs: the binary is
// linked against the system's libibverbs and run with LD_LIBRARY_PATH pointing at softverbs.
// The child is a passive target that only answers commands on a socketpair; the data moves
// between the NICs without a call from it.
#include "send_with_inv.h"
#include "two_process_fixture.h"

namespace softverbs_test {
namespace {

struct Case {
  size_t local_off;
  size_t remote_off;
  size_t len;
};

TEST_F(TwoProcess, WriteAndReadMoveExactlyTheWindow) {
  start();
  const Case cases[] = {{0, 0, 1}, {1, 3, 4097}, {0, 4096, 1 << 20}};
  uint32_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "len " << c.len << " local+" << c.local_off << " remote+" << c.remote_off);
    fill_local(c.local_off, c.len, ++seed);
    ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, c.local_off, c.remote_off, c.len, seed), 0);
    ibv_wc wc = me_.poll();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(wc.wr_id, seed);
    // The child's whole buffer: the window holds our bytes, nothing else moved.
    EXPECT_EQ(ask(kCheck, c.remote_off, c.len, seed).status, 0);

    // READ: the child fills a window (a local call there), we pull it without its help.
    ASSERT_EQ(ask(kFill, c.remote_off, c.len, ++seed).status, 0);
    const size_t lo = c.local_off + 7;
    const std::vector<uint8_t> before = me_.buf;
    ASSERT_EQ(me_.post(IBV_WR_RDMA_READ, lo, c.remote_off, c.len, seed), 0);
    wc = me_.poll();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(wc.byte_len, c.len);
    std::vector<uint8_t> want = before;
    for (size_t i = 0; i < c.len; ++i) want[lo + i] = pattern(seed, i);
    EXPECT_TRUE(me_.buf == want) << "READ bytes differ (or bytes outside the window moved)";
  }
}

TEST_F(TwoProcess, SendLandsInThePostedReceive) {
  start();
  ASSERT_EQ(ask(kPostRecv, 100, 8192, 0).status, 0);
  fill_local(5, 5000, 42);
  ASSERT_EQ(me_.post(IBV_WR_SEND, 5, 0, 5000, 1), 0);
  const ibv_wc wc = me_.poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  const Reply r = ask(kPoll, 0, 0, 0);
  EXPECT_EQ(r.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.value, 5000u);
  EXPECT_EQ(ask(kCheck, 100, 5000, 42).status, 0);
}

// ibv_post_send(3)/ibv_poll_cq(3): a bad rkey completes with REM_ACCESS_ERR, the QP goes to
// ERR, later WRs (in the same list and posted afterwards) and its receives flush in order, and
// the responder's QP goes to ERR too, flushing its posted receive. No byte of the target moves.
TEST_F(TwoProcess, BadRkeyIsRemoteAccessErrorThenFlushOnBothEnds) {
  start();
  ASSERT_EQ(ask(kPostRecv, 0, 64, 0).status, 0);
  // A receive on the requester too: its RQ flushes as well, after its SQ.
  ibv_sge rsge{reinterpret_cast<uintptr_t>(me_.buf.data() + 4096), 64, me_.mr->lkey};
  ibv_recv_wr recv{};
  recv.wr_id = 50;
  recv.sg_list = &rsge;
  recv.num_sge = 1;
  ibv_recv_wr* bad_recv = nullptr;
  ASSERT_EQ(ibv_post_recv(me_.qp, &recv, &bad_recv), 0);
  fill_local(0, 256, 5);
  ibv_sge sge{reinterpret_cast<uintptr_t>(me_.buf.data()), 128, me_.mr->lkey};
  ibv_send_wr second{};
  second.wr_id = 2;
  second.sg_list = &sge;
  second.num_sge = 1;
  second.opcode = IBV_WR_RDMA_WRITE;
  second.send_flags = IBV_SEND_SIGNALED;
  second.wr.rdma.remote_addr = me_.peer.addr;
  second.wr.rdma.rkey = me_.peer.rkey;
  ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, 0, 0, 256, 1, 0x5a5a00, &second), 0);
  ibv_wc wc = me_.poll();
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  wc = me_.poll();
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc.status);
  wc = me_.poll();
  EXPECT_EQ(wc.wr_id, 50u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode & IBV_WC_RECV, IBV_WC_RECV);
  EXPECT_EQ(me_.state(), IBV_QPS_ERR);
  ASSERT_EQ(ibv_post_recv(me_.qp, &recv, &bad_recv), 0);  // posted in ERR: flushed at once
  wc = me_.poll();
  EXPECT_EQ(wc.wr_id, 50u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, 0, 0, 8, 3), 0);
  wc = me_.poll();
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(ask(kState, 0, 0, 0).status, IBV_QPS_ERR);
  EXPECT_EQ(ask(kPoll, 0, 0, 0).status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(ask(kCheck, 0, 0, 0).status, 0);
}

TEST_F(TwoProcess, RangeBeyondTheRegionIsRemoteAccessError) {
  start();
  ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, 0, kBuf - 10, 20, 9), 0);
  const ibv_wc wc = me_.poll();
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(me_.state(), IBV_QPS_ERR);
  EXPECT_EQ(ask(kCheck, 0, 0, 0).status, 0);
}

TEST_F(TwoProcess, ReadWithoutRemoteReadRightIsRemoteAccessError) {
  start(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  const std::vector<uint8_t> before = me_.buf;
  ASSERT_EQ(me_.post(IBV_WR_RDMA_READ, 0, 0, 64, 4), 0);
  const ibv_wc wc = me_.poll();
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_TRUE(me_.buf == before);
  EXPECT_EQ(ask(kState, 0, 0, 0).status, IBV_QPS_ERR);
}

// ibv_poll_cq(3): a SEND longer than the receive: the receive completes with LOC_LEN_ERR, the
// send with REM_INV_REQ_ERR (softverbs' choice among the NAK codes), both QPs in ERR.
TEST_F(TwoProcess, SendLongerThanTheReceiveIsLengthError) {
  start();
  ASSERT_EQ(ask(kPostRecv, 0, 16, 0).status, 0);
  ASSERT_EQ(me_.post(IBV_WR_SEND, 0, 0, 100, 1), 0);
  const ibv_wc wc = me_.poll();
  EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ask(kPoll, 0, 0, 0).status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(ask(kState, 0, 0, 0).status, IBV_QPS_ERR);
  EXPECT_EQ(me_.state(), IBV_QPS_ERR);
}

// A peer that is gone: the next WR fails with RETRY_EXC_ERR (at once here; after the retry
// timeout on hardware) and the QP goes to ERR.
TEST_F(TwoProcess, DeadPeerIsRetryExceeded) {
  start();
  Request r{kDie, 0, 0, 0};
  ASSERT_EQ(write(sock_, &r, sizeof(r)), static_cast<ssize_t>(sizeof(r)));
  int status = 0;
  ASSERT_EQ(waitpid(pid_, &status, 0), pid_);
  pid_ = -1;
  ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, 0, 0, 64, 1), 0);
  ibv_wc wc = me_.poll();
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(me_.state(), IBV_QPS_ERR);
  ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, 0, 0, 64, 2), 0);
  wc = me_.poll();
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

// The upper size: 64 MiB each way, at unaligned offsets, in one WR.
TEST_F(TwoProcess, SixtyFourMebibytesEachWay) {
  g_buf = (64 << 20) + 4096;
  start();
  const size_t len = 64 << 20;
  fill_local(3, len, 77);
  ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, 3, 5, len, 1), 0);
  ibv_wc wc = me_.poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ask(kCheck, 5, len, 77).status, 0);
  ASSERT_EQ(ask(kFill, 1, len, 78).status, 0);
  ASSERT_EQ(me_.post(IBV_WR_RDMA_READ, 2, 1, len, 2), 0);
  wc = me_.poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.byte_len, len);
  size_t wrong = 0;
  for (size_t i = 0; i < len; ++i) wrong += me_.buf[2 + i] != pattern(78, i);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(me_.buf[1], pattern(0, 1));               // below the window: untouched
  EXPECT_EQ(me_.buf[2 + len], pattern(77, len - 1));  // above it: still the WRITE's source
}

// The owner binds a window for its peer (OrbiTE's grant), the peer writes through it, then
// invalidates it remotely with SEND_WITH_INV; a later WRITE is refused and no byte outside the
// window ever moved (rdma-core tests/test_mr.py: remote invalidation, WRITE after invalidation).
TEST_F(TwoProcess, WindowGrantedThenInvalidatedBySendWithInv) {
  start(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
        IBV_ACCESS_MW_BIND);
  const Reply bound = ask(kBindMw, 4096, 8192, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(bound.status, IBV_WC_SUCCESS);
  const uint32_t rkey = bound.value;
  fill_local(0, 100, 31);
  ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, 0, 4096 + 50, 100, 1, me_.peer.rkey ^ rkey), 0);
  ibv_wc wc = me_.poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ask(kCheck, 4096 + 50, 100, 31).status, 0);

  ASSERT_EQ(ask(kPostRecv, 20000, 64, 0).status, 0);
  ASSERT_EQ(post_send_with_inv(me_.qp, reinterpret_cast<uintptr_t>(me_.buf.data()), 8, me_.mr->lkey,
                               rkey, 2),
            0);
  wc = me_.poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  const Reply recv = ask(kPoll, 0, 0, 0);
  EXPECT_EQ(recv.status, IBV_WC_SUCCESS);
  EXPECT_TRUE(recv.flags & IBV_WC_WITH_INV);
  EXPECT_EQ(ask(kCheck, 20000, 8, 31).status, 0);  // the SEND's 8 bytes, nothing else

  ASSERT_EQ(me_.post(IBV_WR_RDMA_WRITE, 0, 4096 + 50, 100, 3, me_.peer.rkey ^ rkey), 0);
  wc = me_.poll();
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ask(kState, 0, 0, 0).status, IBV_QPS_ERR);
  EXPECT_EQ(ask(kCheck, 0, 0, 0).status, 0);  // nothing moved since the last check
}

}  // namespace
}  // namespace softverbs_test
