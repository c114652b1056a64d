// One process on the default soft_0: device and port attributes, the QP state machine and its
// masks (ibv_modify_qp(3)), posting in the wrong state (ibv_post_send(3)), a loopback QP with a
// completion channel, and CQ overflow. Plain verbs, run against softverbs by LD_LIBRARY_PATH.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sched.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace {

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

TEST_F(Local, DeviceAndPortDescribeTheDefaultConfig) {
  ibv_device_attr d{};
  ASSERT_EQ(ibv_query_device(ctx_, &d), 0);
  EXPECT_EQ(d.phys_port_cnt, 1);
  EXPECT_EQ(d.max_qp_rd_atom, 16);
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dx), 0);
  EXPECT_EQ(dx.orig_attr.max_qp_init_rd_atom, 16);
  ibv_port_attr p{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(p.active_speed, 32);  // EDR: 25 Gb/s per lane
  EXPECT_EQ(p.active_width, 2);   // 4x: 100 Gb/s
  ibv_gid g{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &g), 0);
  const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  EXPECT_EQ(std::memcmp(g.raw, want, 16), 0);
  EXPECT_NE(ibv_query_gid(ctx_, 1, p.gid_tbl_len, &g), 0);
}

TEST_F(Local, RegMrNeedsLocalWriteForRemoteWrite) {
  EXPECT_EQ(ibv_reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);  // the fixture's MR still uses it
}

TEST_F(Local, ModifyQpChecksTransitionsAndMasks) {
  make_qp();
  ibv_qp_attr a = rtr_attr();
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtrMask), EINVAL);  // RESET -> RTR
  a = {};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PORT), EINVAL);  // masks missing
  ASSERT_EQ(to_init(), 0);
  a = rtr_attr();
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtrMask & ~IBV_QP_DEST_QPN), EINVAL);
  a.max_dest_rd_atomic = 17;  // above the device's max_qp_rd_atom
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtrMask), EINVAL);
  a = rtr_attr();
  ASSERT_EQ(ibv_modify_qp(qp_, &a, kRtrMask), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.max_rd_atomic = 17;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtsMask), EINVAL);
  a.max_rd_atomic = 16;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtsMask | IBV_QP_DEST_QPN), EINVAL);  // not allowed here
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtsMask), 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(qp_, &q, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(q.max_rd_atomic, 16);
  a = {};
  a.qp_state = IBV_QPS_RESET;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(qp_->state, IBV_QPS_RESET);
}

TEST_F(Local, PostSendBeforeRtsIsEinval) {
  make_qp();
  EXPECT_EQ(write(0, 8, 1), EINVAL);  // RESET
  ASSERT_EQ(to_init(), 0);
  EXPECT_EQ(write(0, 8, 1), EINVAL);  // INIT
}

TEST_F(Local, LoopbackWriteWakesTheCompletionChannel) {
  ch_ = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch_, nullptr);
  make_qp();
  to_rts();
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  for (size_t i = 0; i < 100; ++i) buf_[i] = static_cast<uint8_t>(i + 1);
  ASSERT_EQ(write(1000, 100, 7), 0);
  pollfd pfd{ch_->fd, POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 10000), 1);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(ch_, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, cq_);
  EXPECT_EQ(ev_ctx, this);
  ibv_ack_cq_events(cq_, 1);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.qp_num, qp_->qp_num);
  EXPECT_EQ(std::memcmp(buf_.data(), buf_.data() + 1000, 100), 0);
}

TEST_F(Local, UnsignaledWritesCompleteSilently) {
  make_qp();
  to_rts();
  ASSERT_EQ(write(100, 10, 1, false), 0);
  ASSERT_EQ(write(200, 10, 2, true), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 2u);
  ibv_wc more{};
  EXPECT_EQ(ibv_poll_cq(cq_, 1, &more), 0);
}

TEST_F(Local, CqOverflowRaisesCqError) {
  make_qp(1);
  to_rts();
  ASSERT_EQ(write(100, 10, 1), 0);
  ASSERT_EQ(write(200, 10, 2), 0);
  ibv_async_event ev{};
  pollfd pfd{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 10000), 1);
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, cq_);
  ibv_ack_async_event(&ev);
}

// Inline SEND with immediate (no lkey: the bytes are taken at post time) and RDMA WRITE with
// immediate, each consuming a receive on the (loopback) responder.
TEST_F(Local, InlineSendAndWriteWithImmediateConsumeReceives) {
  make_qp();
  to_rts();
  for (uint64_t id : {11u, 12u}) {
    ibv_sge rsge{reinterpret_cast<uintptr_t>(buf_.data() + 2048), 64, mr_->lkey};
    ibv_recv_wr r{};
    r.wr_id = id;
    r.sg_list = &rsge;
    r.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    ASSERT_EQ(ibv_post_recv(qp_, &r, &bad_r), 0);
  }
  char text[] = "inline hello";
  ibv_sge sge{reinterpret_cast<uintptr_t>(text), sizeof(text), 0};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.imm_data = htonl(0x1234);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
  std::memset(text, 0, sizeof(text));  // inline: the buffer is free once posted
  bool send_done = false;
  bool recv_done = false;
  for (int i = 0; i < 2; ++i) {
    const ibv_wc wc = poll();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.opcode == IBV_WC_SEND) {
      send_done = wc.wr_id == 1;
    } else {
      EXPECT_EQ(wc.opcode, IBV_WC_RECV);
      EXPECT_EQ(wc.wr_id, 11u);
      EXPECT_EQ(wc.byte_len, sizeof(text));
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(ntohl(wc.imm_data), 0x1234u);
      EXPECT_EQ(wc.src_qp, qp_->qp_num);
      recv_done = true;
    }
  }
  EXPECT_TRUE(send_done && recv_done);
  EXPECT_STREQ(reinterpret_cast<const char*>(buf_.data() + 2048), "inline hello");

  ibv_sge wsge{reinterpret_cast<uintptr_t>(buf_.data()), 32, mr_->lkey};
  wr = {};
  wr.wr_id = 2;
  wr.sg_list = &wsge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(7);
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf_.data() + 8192);
  wr.wr.rdma.rkey = mr_->rkey;
  ASSERT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
  for (int i = 0; i < 2; ++i) {
    const ibv_wc wc = poll();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.opcode != IBV_WC_RDMA_WRITE) {
      EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
      EXPECT_EQ(wc.wr_id, 12u);
      EXPECT_EQ(ntohl(wc.imm_data), 7u);
    }
  }
  EXPECT_EQ(std::memcmp(buf_.data(), buf_.data() + 8192, 32), 0);
}

// ibv_post_send(3): more WRs than max_send_wr is ENOMEM with bad_wr at the first one refused;
// the WRs before it are posted.
TEST_F(Local, SendQueueDepthIsEnforced) {
  make_qp();
  to_rts();
  std::vector<ibv_sge> sges(9, ibv_sge{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey});
  std::vector<ibv_send_wr> wrs(9);
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i].wr_id = i;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].opcode = IBV_WR_RDMA_WRITE;
    wrs[i].send_flags = IBV_SEND_SIGNALED;
    wrs[i].wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf_.data() + 4096);
    wrs[i].wr.rdma.rkey = mr_->rkey;
    wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, wrs.data(), &bad), ENOMEM);  // max_send_wr is 8
  EXPECT_EQ(bad, &wrs[8]);
  for (uint64_t i = 0; i < 8; ++i) {
    const ibv_wc wc = poll();
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id, i);
  }
}

// ibv_poll_cq(3): a bad lkey is a local protection error; the QP goes to ERR.
TEST_F(Local, BadLkeyIsLocalProtectionError) {
  make_qp();
  to_rts();
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey ^ 0x100};
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf_.data() + 64);
  wr.wr.rdma.rkey = mr_->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &wr, &bad), 0);  // unsignaled: errors complete anyway
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 5u);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(qp_->state, IBV_QPS_ERR);
}

// ---- Type-2B memory windows on a loopback QP (the window is bound through the QP that then
// serves the remote requests, as type 2B requires). Sources: rdma-core tests/test_mr.py
// (type-2 bind, remote and local invalidation, access after invalidation fails with a remote
// access error) and rdma-unit-test mw_test.cc MwType2 (bind, bind on a QP in error flushes).

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
  // Posts a bind of [off, off + len) of bind_mr_ with a fresh key; returns the new rkey.
  uint32_t bind(ibv_mr* mr, size_t off, size_t len, unsigned access) {
    ibv_send_wr wr{};
    wr.wr_id = 100;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw_;
    wr.bind_mw.rkey = ibv_inc_rkey(mw_->rkey);
    wr.bind_mw.bind_info.mr = mr;
    wr.bind_mw.bind_info.addr = reinterpret_cast<uintptr_t>(buf_.data() + off);
    wr.bind_mw.bind_info.length = len;
    wr.bind_mw.bind_info.mw_access_flags = access;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
    return wr.bind_mw.rkey;
  }
  ibv_wc rdma(ibv_wr_opcode op, size_t local_off, uint64_t raddr, uint32_t rkey, size_t len) {
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
    EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
    return poll();
  }
  uint64_t at(size_t off) { return reinterpret_cast<uintptr_t>(buf_.data() + off); }

  ibv_mr* bind_mr_ = nullptr;
  ibv_mw* mw_ = nullptr;
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
  ibv_sge sge{at(0), 16, mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 2;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
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

}  // namespace
