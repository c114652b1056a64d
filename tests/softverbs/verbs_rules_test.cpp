// Rules of the verbs man pages (ibv_post_send(3), ibv_post_recv(3), ibv_poll_cq(3),
// ibv_get_cq_event(3), ibv_modify_qp(3)) on the loopback fixture; each test names its rule.
// Where the pages leave the outcome open, the comment says which one softverbs gives.
#include <poll.h>

#include "local_fixture.h"

namespace softverbs_test {
namespace {

ibv_qp_state queried_state(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
  return a.qp_state;
}

class Rules : public Local {
 protected:
  // n receives of 64 bytes each, chained, wr_id = first + i.
  void make_recvs(size_t n, uint64_t first) {
    rsges_.assign(n, ibv_sge{reinterpret_cast<uintptr_t>(buf_.data() + 32768), 64, mr_->lkey});
    recvs_.assign(n, ibv_recv_wr{});
    for (size_t i = 0; i < n; ++i) {
      recvs_[i].wr_id = first + i;
      recvs_[i].sg_list = &rsges_[i];
      recvs_[i].num_sge = 1;
      recvs_[i].next = i + 1 < n ? &recvs_[i + 1] : nullptr;
    }
  }
  ibv_send_wr write_wr(uint64_t id, ibv_sge* sge, bool signaled = true) {
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf_.data() + 4096);
    wr.wr.rdma.rkey = mr_->rkey;
    return wr;
  }

  std::vector<ibv_sge> rsges_;
  std::vector<ibv_recv_wr> recvs_;
};

// ibv_post_recv(3): more receives than max_recv_wr is ENOMEM, bad_wr names the first one
// refused; the ones before it are posted (they flush, in order, when the QP enters ERR).
TEST_F(Rules, PostRecvBeyondMaxRecvWrIsEnomem) {
  make_qp();
  ASSERT_EQ(to_init(), 0);
  make_recvs(9, 10);  // max_recv_wr is 8
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(qp_, recvs_.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &recvs_[8]);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE), 0);
  for (uint64_t i = 0; i < 8; ++i) {
    const ibv_wc wc = poll();
    EXPECT_EQ(wc.wr_id, 10 + i);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc.status);
  }
  ibv_wc none{};
  EXPECT_EQ(ibv_poll_cq(cq_, 1, &none), 0);
}

// ibv_post_recv(3): a receive with more than max_recv_sge entries is EINVAL with bad_wr on it.
TEST_F(Rules, PostRecvBeyondMaxRecvSgeIsEinval) {
  make_qp();
  ASSERT_EQ(to_init(), 0);
  make_recvs(2, 1);
  ibv_sge two[2] = {rsges_[0], rsges_[0]};
  recvs_[1].sg_list = two;
  recvs_[1].num_sge = 2;  // max_recv_sge is 1
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(qp_, recvs_.data(), &bad), EINVAL);
  EXPECT_EQ(bad, &recvs_[1]);
}

// ibv_post_recv(3)/ibv_modify_qp(3): receives may be posted from INIT on; in RESET the post
// fails (softverbs: EINVAL, bad_wr on the first WR).
TEST_F(Rules, PostRecvInResetFails) {
  make_qp();
  make_recvs(1, 1);
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(qp_, recvs_.data(), &bad), EINVAL);
  EXPECT_EQ(bad, &recvs_[0]);
  ASSERT_EQ(to_init(), 0);
  bad = nullptr;
  EXPECT_EQ(ibv_post_recv(qp_, recvs_.data(), &bad), 0);
  EXPECT_EQ(bad, nullptr);
}

// ibv_post_send(3): a WR with more than max_send_sge entries is EINVAL with bad_wr on it; the
// WRs before it are posted and complete, the ones after it are not posted.
TEST_F(Rules, PostSendBeyondMaxSendSgeIsEinval) {
  make_qp();
  to_rts();
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey};
  ibv_sge two[2] = {sge, sge};
  ibv_send_wr w[3] = {write_wr(1, &sge), write_wr(2, two), write_wr(3, &sge)};
  w[1].num_sge = 2;  // max_send_sge is 1
  w[0].next = &w[1];
  w[1].next = &w[2];
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, w, &bad), EINVAL);
  EXPECT_EQ(bad, &w[1]);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  ibv_wc none{};
  EXPECT_EQ(ibv_poll_cq(cq_, 1, &none), 0);
}

// ibv_post_send(3): IBV_SEND_INLINE with more bytes than max_inline_data is EINVAL with bad_wr
// on it; exactly max_inline_data bytes are accepted. (softverbs reports 256 whatever was asked.)
TEST_F(Rules, InlineAboveMaxInlineDataIsEinval) {
  make_qp();
  to_rts();
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  ASSERT_EQ(ibv_query_qp(qp_, &a, IBV_QP_CAP, &ia), 0);
  const uint32_t max_inline = ia.cap.max_inline_data;
  ASSERT_GT(max_inline, 0u);
  std::vector<char> data(max_inline + 1, 'x');
  ibv_sge sge{reinterpret_cast<uintptr_t>(data.data()), max_inline + 1, 0};
  ibv_send_wr wr = write_wr(1, &sge);
  wr.send_flags |= IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  sge.length = max_inline;
  bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(std::memcmp(buf_.data() + 4096, data.data(), max_inline), 0);
}

// ibv_get_cq_event(3): one completion channel may serve several CQs; each event names the CQ
// (and its cq_context) that completed.
TEST_F(Rules, OneChannelServesSeveralCqs) {
  ch_ = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch_, nullptr);
  int tags[3] = {0, 1, 2};
  ibv_cq* cqs[3] = {};
  ibv_qp* qps[3] = {};
  for (int i = 0; i < 3; ++i) {
    cqs[i] = ibv_create_cq(ctx_, 8, &tags[i], ch_, 0);
    ASSERT_NE(cqs[i], nullptr);
    qps[i] = loopback_qp(pd_, cqs[i]);
    ASSERT_NE(qps[i], nullptr);
    ASSERT_EQ(ibv_req_notify_cq(cqs[i], 0), 0);
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey};
  for (int i : {2, 0, 1}) {  // one completion at a time, on each CQ in turn
    ibv_send_wr wr = write_wr(static_cast<uint64_t>(i), &sge);
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(qps[i], &wr, &bad), 0);
    pollfd pfd{ch_->fd, POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, 10000), 1);
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(ch_, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(ev_cq, cqs[i]);
    EXPECT_EQ(ev_ctx, &tags[i]);
    ibv_ack_cq_events(ev_cq, 1);
    const ibv_wc wc = poll_one(cqs[i]);
    EXPECT_EQ(wc.wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ibv_destroy_qp(qps[i]), 0);
    EXPECT_EQ(ibv_destroy_cq(cqs[i]), 0);
  }
}

// ibv_poll_cq(3): returns at most num_entries completions, oldest first; completions of one
// QP's SQ come in post order.
TEST_F(Rules, PollCqReturnsAtMostNumEntriesInOrder) {
  make_qp();
  to_rts();
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey};
  std::vector<ibv_send_wr> w(7);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = write_wr(i, &sge);
    w[i].next = i + 1 < w.size() ? &w[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, w.data(), &bad), 0);
  std::vector<uint64_t> ids;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ids.size() < w.size() && std::chrono::steady_clock::now() < end) {
    ibv_wc wc[3] = {};
    const int n = ibv_poll_cq(cq_, 2, wc);
    ASSERT_GE(n, 0);
    ASSERT_LE(n, 2);
    EXPECT_EQ(wc[2].wr_id, 0u);  // never written beyond num_entries
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
      ids.push_back(wc[i].wr_id);
    }
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6}));
}

// ibv_post_send(3)/ibv_poll_cq(3): after a WR completes in error the QP is in ERR and the WRs
// after it, in the same list, complete with WR_FLUSH_ERR in post order, followed by the posted
// receives (softverbs: SQ first, then RQ; flushed WRs complete even when unsignaled).
TEST_F(Rules, WrsAfterAnErrorFlushInPostOrder) {
  make_qp();
  to_rts();
  make_recvs(2, 50);
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(qp_, recvs_.data(), &bad_r), 0);
  ibv_sge good{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey};
  ibv_sge bad_key{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey ^ 0x100};
  std::vector<ibv_send_wr> w = {write_wr(1, &good), write_wr(2, &bad_key),
                                write_wr(3, &good, /*signaled=*/false), write_wr(4, &good),
                                write_wr(5, &good, /*signaled=*/false)};
  for (size_t i = 0; i + 1 < w.size(); ++i) w[i].next = &w[i + 1];
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, w.data(), &bad), 0);
  const std::pair<uint64_t, ibv_wc_status> want[] = {
      {1, IBV_WC_SUCCESS},      {2, IBV_WC_LOC_PROT_ERR}, {3, IBV_WC_WR_FLUSH_ERR},
      {4, IBV_WC_WR_FLUSH_ERR}, {5, IBV_WC_WR_FLUSH_ERR}, {50, IBV_WC_WR_FLUSH_ERR},
      {51, IBV_WC_WR_FLUSH_ERR}};
  for (const auto& [id, status] : want) {
    const ibv_wc wc = poll();
    EXPECT_EQ(wc.wr_id, id);
    EXPECT_EQ(wc.status, status) << "wr " << id << ": " << ibv_wc_status_str(wc.status);
  }
  EXPECT_EQ(queried_state(qp_), IBV_QPS_ERR);
  ibv_wc none{};
  EXPECT_EQ(ibv_poll_cq(cq_, 1, &none), 0);
}

// ibv_modify_qp(3): a transition the state machine does not have (RESET->RTS, RESET->RTR,
// INIT->RTS, RTS->RTR, RTS->INIT) is EINVAL and leaves the state as it was.
TEST_F(Rules, IllegalTransitionIsEinvalAndKeepsTheState) {
  make_qp();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.max_rd_atomic = 1;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtsMask), EINVAL);  // RESET -> RTS
  EXPECT_EQ(queried_state(qp_), IBV_QPS_RESET);
  EXPECT_EQ(qp_->state, IBV_QPS_RESET);
  a = rtr_attr();
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtrMask), EINVAL);  // RESET -> RTR
  EXPECT_EQ(queried_state(qp_), IBV_QPS_RESET);
  ASSERT_EQ(to_init(), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.max_rd_atomic = 1;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtsMask), EINVAL);  // INIT -> RTS
  EXPECT_EQ(queried_state(qp_), IBV_QPS_INIT);
  a = rtr_attr();
  ASSERT_EQ(ibv_modify_qp(qp_, &a, kRtrMask), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.max_rd_atomic = 1;
  ASSERT_EQ(ibv_modify_qp(qp_, &a, kRtsMask), 0);
  a = rtr_attr();
  EXPECT_EQ(ibv_modify_qp(qp_, &a, kRtrMask), EINVAL);  // RTS -> RTR
  a = {};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  EXPECT_EQ(
      ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      EINVAL);  // RTS -> INIT
  EXPECT_EQ(queried_state(qp_), IBV_QPS_RTS);
  EXPECT_EQ(qp_->state, IBV_QPS_RTS);
  EXPECT_EQ(write(100, 8, 9), 0);  // still working
  EXPECT_EQ(poll().status, IBV_WC_SUCCESS);
}

}  // namespace
}  // namespace softverbs_test
