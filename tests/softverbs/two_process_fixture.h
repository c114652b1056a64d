// The two-process fixture of softverbs' tests (two_process_test.cpp, mw_two_process_test.cpp):
// the parent forks a passive child; both open soft_0, register a buffer and connect an RC QP
// through a socketpair. The child only answers commands (check or fill its buffer, report its
// QP state, poll, post a receive, bind/invalidate/deallocate a type-2 window, WRITE into the
// parent); the data moves between the NICs without a call from it.
#pragma once

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

#include "rc_connect.h"

namespace softverbs_test {

inline constexpr size_t kBuf = (2 << 20) + 4096;
// Registered bytes per side; a test may raise it before start() (the child inherits it).
inline size_t g_buf = kBuf;

inline uint8_t pattern(uint32_t seed, size_t i) {
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
    if (!softverbs_test::rc_connect(qp, peer.qpn, peer.gid, 4)) return false;
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

enum Cmd : uint32_t {
  kCheck = 1,
  kFill,
  kState,
  kPoll,
  kPostRecv,
  kQuit,
  kDie,
  kBindMw,
  kLocalInv,
  kDeallocMw,
  kWriteTo
};
struct Request {
  uint32_t cmd;
  uint32_t seed;
  uint64_t off;
  uint64_t len;
  uint32_t key = 0;   // kWriteTo: the peer's rkey
  uint64_t roff = 0;  // kWriteTo: offset in the peer's buffer
};
struct Reply {
  int32_t status;
  uint32_t value;
  uint32_t flags = 0;  // kPoll: wc_flags; kBindMw: unused
};

inline int child_main(int sock, int mr_access) {
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
      case kLocalInv: {  // invalidate the window through the QP it is bound through
        if (mw == nullptr) return 6;
        ibv_send_wr wr{};
        wr.opcode = IBV_WR_LOCAL_INV;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.invalidate_rkey = mw->rkey;
        ibv_send_wr* bad = nullptr;
        rep.status = ibv_post_send(s.qp, &wr, &bad);
        if (rep.status == 0) {
          const ibv_wc wc = s.poll();
          rep.status = wc.status;
          rep.value = wc.opcode;
        }
        break;
      }
      case kDeallocMw:
        rep.status = mw != nullptr ? ibv_dealloc_mw(mw) : -1;
        mw = nullptr;
        break;
      case kWriteTo: {  // the child's own WRITE of pattern seed into the peer's memory
        for (size_t i = 0; i < r.len; ++i) expect[r.off + i] = pattern(r.seed, i);
        std::memcpy(s.buf.data() + r.off, expect.data() + r.off, r.len);
        ibv_sge sge{reinterpret_cast<uintptr_t>(s.buf.data() + r.off), static_cast<uint32_t>(r.len),
                    s.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = 88;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = s.peer.addr + r.roff;
        wr.wr.rdma.rkey = r.key;
        ibv_send_wr* bad = nullptr;
        rep.status = ibv_post_send(s.qp, &wr, &bad);
        if (rep.status == 0) rep.status = s.poll().status;
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
  static constexpr int kDefaultAccess =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  void start(int child_mr_access = kDefaultAccess, int parent_mr_access = kDefaultAccess) {
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
    ASSERT_TRUE(me_.open(sock_, parent_mr_access))
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
  Reply ask(Cmd c, uint64_t off, uint64_t len, uint32_t seed, uint32_t key = 0, uint64_t roff = 0) {
    Request r{c, seed, off, len, key, roff};
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

}  // namespace softverbs_test
