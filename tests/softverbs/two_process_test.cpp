// Two processes (fork) on one soft device: bytes of RDMA WRITE and READ, SEND/RECV, and the RC
// error rules (remote access error, then flushes on both ends). Plain verbs: the binary is
// linked against the system's libibverbs and run with LD_LIBRARY_PATH pointing at softverbs.
// The child is a passive target that only answers commands on a socketpair; the data moves
// between the NICs without a call from it.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kBuf = (2 << 20) + 4096;
// Registered bytes per side; a test may raise it before start() (the child inherits it).
size_t g_buf = kBuf;

uint8_t pattern(uint32_t seed, size_t i) {
  return static_cast<uint8_t>((i * 131 + seed * 17 + 1) ^ (i >> 8) ^ (seed >> 3));
}

struct Info {
  uint32_t qpn;
  ibv_gid gid;
  uint64_t addr;
  uint32_t rkey;
};

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
  Info peer{};

  // Opens soft_0, registers buf with mr_access and connects an RC QP through sock.
  bool open(int sock, int mr_access) {
    buf.assign(g_buf, 0);
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr || n == 0) return false;
    ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (ctx == nullptr || (pd = ibv_alloc_pd(ctx)) == nullptr) return false;
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(0, i);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), mr_access);
    cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    if (mr == nullptr || cq == nullptr) return false;
    ibv_qp_init_attr ia{};
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = {16, 16, 2, 2, 0};
    if ((qp = ibv_create_qp(pd, &ia)) == nullptr) return false;
    Info mine{qp->qp_num, {}, reinterpret_cast<uintptr_t>(buf.data()), mr->rkey};
    if (ibv_query_gid(ctx, 1, 0, &mine.gid) != 0) return false;
    if (write(sock, &mine, sizeof(mine)) != static_cast<ssize_t>(sizeof(mine))) return false;
    if (read(sock, &peer, sizeof(peer)) != static_cast<ssize_t>(sizeof(peer))) return false;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
      return false;
    }
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer.qpn;
    a.max_dest_rd_atomic = 4;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer.gid;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
      return false;
    }
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
      return false;
    }
    // Both sides RTS before anything is posted: an error WR reaching a responder still on its
    // way to RTS would move it to ERR and make its RTS transition fail.
    char go = 1;
    return write(sock, &go, 1) == 1 && read(sock, &go, 1) == 1;
  }

  ~Side() {
    if (qp != nullptr) ibv_destroy_qp(qp);
    if (cq != nullptr) ibv_destroy_cq(cq);
    if (mr != nullptr) ibv_dereg_mr(mr);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (ctx != nullptr) ibv_close_device(ctx);
  }

  // One completion within 10 s.
  ibv_wc poll() {
    ibv_wc wc{};
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
      if (ibv_poll_cq(cq, 1, &wc) == 1) return wc;
      sched_yield();
    }
    wc.status = IBV_WC_RESP_TIMEOUT_ERR;  // stands for "nothing within 10 s"
    return wc;
  }

  int post(ibv_wr_opcode op, size_t local_off, size_t remote_off, size_t len, uint64_t id,
           uint32_t rkey_xor = 0, ibv_send_wr* next = nullptr) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + local_off), static_cast<uint32_t>(len),
                mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer.addr + remote_off;
    wr.wr.rdma.rkey = peer.rkey ^ rkey_xor;
    wr.next = next;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }

  ibv_qp_state state() {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
    return a.qp_state;
  }
};

// ---- the passive child ----

enum Cmd : uint32_t { kCheck = 1, kFill, kState, kPoll, kPostRecv, kQuit, kDie, kBindMw };
struct Request {
  uint32_t cmd;
  uint32_t seed;
  uint64_t off;
  uint64_t len;
};
struct Reply {
  int32_t status;
  uint32_t value;
  uint32_t flags = 0;  // kPoll: wc_flags; kBindMw: unused
};

int child_main(int sock, int mr_access) {
  alarm(60);  // never outlive a crashed parent for long
  Side s;
  ibv_mw* mw = nullptr;
  if (!s.open(sock, mr_access)) return 3;
  // What buf holds (not a copy of it: the parent may already be writing into it).
  std::vector<uint8_t> expect(g_buf);
  for (size_t i = 0; i < g_buf; ++i) expect[i] = pattern(0, i);
  Request r{};
  while (read(sock, &r, sizeof(r)) == static_cast<ssize_t>(sizeof(r))) {
    Reply rep{0, 0};
    switch (r.cmd) {
      case kFill:  // a local store by the target application
        for (size_t i = 0; i < r.len; ++i) expect[r.off + i] = pattern(r.seed, i);
        std::memcpy(s.buf.data() + r.off, expect.data() + r.off, r.len);
        break;
      case kCheck:  // the window holds the pattern and no other byte changed
        for (size_t i = 0; i < r.len; ++i) expect[r.off + i] = pattern(r.seed, i);
        rep.status = s.buf == expect ? 0 : 1;
        std::memcpy(expect.data(), s.buf.data(), s.buf.size());
        break;
      case kState: rep.status = s.state(); break;
      case kPoll: {
        const ibv_wc wc = s.poll();
        rep.status = wc.status;
        rep.value = wc.byte_len;
        rep.flags = wc.wc_flags;
        break;
      }
      case kPostRecv: {
        ibv_sge sge{reinterpret_cast<uintptr_t>(s.buf.data() + r.off), static_cast<uint32_t>(r.len),
                    s.mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = 77;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        rep.status = ibv_post_recv(s.qp, &wr, &bad);
        break;
      }
      case kBindMw: {  // bind a type-2B window over [off, off + len) with rights seed
        if (mw == nullptr && (mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2)) == nullptr) return 5;
        ibv_send_wr wr{};
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.bind_mw.mw = mw;
        wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
        wr.bind_mw.bind_info = {s.mr, reinterpret_cast<uintptr_t>(s.buf.data() + r.off), r.len,
                                r.seed};
        ibv_send_wr* bad = nullptr;
        rep.status = ibv_post_send(s.qp, &wr, &bad);
        if (rep.status == 0) rep.status = s.poll().status;
        mw->rkey = wr.bind_mw.rkey;
        rep.value = mw->rkey;
        break;
      }
      case kQuit:
        if (mw != nullptr) ibv_dealloc_mw(mw);
        return 0;
      case kDie: _exit(0);  // no teardown: the connections just break
    }
    if (write(sock, &rep, sizeof(rep)) != static_cast<ssize_t>(sizeof(rep))) return 4;
  }
  return 0;
}

class TwoProcess : public ::testing::Test {
 protected:
  void start(int child_mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                   IBV_ACCESS_REMOTE_READ) {
    signal(SIGPIPE, SIG_IGN);  // a dead child must fail the test, not kill it
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      close(sv[0]);
      _exit(child_main(sv[1], child_mr_access));
    }
    close(sv[1]);
    sock_ = sv[0];
    ASSERT_TRUE(
        me_.open(sock_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ))
        << "no soft device? run with LD_LIBRARY_PATH=<build>/softverbs";
  }
  void TearDown() override {
    g_buf = kBuf;
    if (pid_ > 0) {
      ask(kQuit, 0, 0, 0);
      int status = 0;
      waitpid(pid_, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    }
  }
  Reply ask(Cmd c, uint64_t off, uint64_t len, uint32_t seed) {
    Request r{c, seed, off, len};
    Reply rep{-2, 0};
    if (write(sock_, &r, sizeof(r)) != static_cast<ssize_t>(sizeof(r))) return rep;
    if (c != kQuit && read(sock_, &rep, sizeof(rep)) != static_cast<ssize_t>(sizeof(rep))) {
      rep.status = -3;
      int status = 0;  // the child is gone: say how, and do not wait for it again
      if (pid_ > 0 && waitpid(pid_, &status, 0) == pid_) {
        ADD_FAILURE() << "child died: "
                      << (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                              : "exit " + std::to_string(WEXITSTATUS(status)));
        pid_ = -1;
      }
    }
    return rep;
  }
  void fill_local(size_t off, size_t len, uint32_t seed) {
    for (size_t i = 0; i < len; ++i) me_.buf[off + i] = pattern(seed, i);
  }

  pid_t pid_ = -1;
  int sock_ = -1;
  Side me_;
};

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
  ibv_sge sge{reinterpret_cast<uintptr_t>(me_.buf.data()), 8, me_.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 2;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(me_.qp, &wr, &bad), 0);
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
