// One process on the default soft_0: device and port attributes, the QP state machine and its
// masks (ibv_modify_qp(3)), posting in the wrong state (ibv_post_send(3)), a loopback QP with a
// completion channel, and CQ overflow. Plain verbs, run against softverbs by LD_LIBRARY_PATH.
#include <arpa/inet.h>
#include <poll.h>

#include "local_fixture.h"

namespace {

using softverbs_test::Local;

TEST_F(Local, DeviceAndPortDescribeTheDefaultConfig) {
  ibv_device_attr d{};
  ASSERT_EQ(ibv_query_device(ctx_, &d), 0);
  EXPECT_EQ(d.phys_port_cnt, 1);
  EXPECT_EQ(d.max_qp_rd_atom, 16);
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dx), 0);
  EXPECT_EQ(dx.orig_attr.max_qp_init_rd_atom, 16);
  // The extended attributes: the port count and the 64-bit capability flags (the 32 of
  // orig_attr, no extended ones), with memory windows of type 2B and the memory management
  // extensions (local invalidation, SEND_WITH_INV).
  EXPECT_EQ(dx.phys_port_cnt_ex, 1u);
  EXPECT_EQ(dx.device_cap_flags_ex, static_cast<uint64_t>(dx.orig_attr.device_cap_flags));
  const uint64_t want_caps = IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
                             IBV_DEVICE_MEM_MGT_EXTENSIONS | IBV_DEVICE_RC_RNR_NAK_GEN;
  EXPECT_EQ(dx.device_cap_flags_ex & want_caps, want_caps);
  EXPECT_EQ(dx.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW_TYPE_2A, 0u);
  EXPECT_EQ(d.device_cap_flags, dx.orig_attr.device_cap_flags);
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

}  // namespace
