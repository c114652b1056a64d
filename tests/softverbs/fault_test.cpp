// Fault injection and port events through softverbs' control API (include/softverbs/control.h):
// port down/up with PORT_ERR/PORT_ACTIVE, WRs failing with RETRY_EXC_ERR while the port is
// down, GID changes with GID_CHANGE, an error CQE on the Nth WR, a dropped connection, late
// completions, disabled memory windows and SEND_WITH_INV, the rate; and the control socket with
// softverbs-ctl. The device state is process-wide, so every test puts it back in TearDown.
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include <softverbs/control.h>

#include "local_fixture.h"

namespace softverbs_test {
namespace {

std::string run(const std::string& cmd) {
  std::string reply;
  const int err = softverbs::control(cmd, &reply);
  EXPECT_EQ(err, 0) << cmd << ": " << reply;
  return reply;
}

class Control : public Local {
 protected:
  void TearDown() override {
    for (const char* c : {"port soft_0 up", "delay soft_0 0", "rate soft_0 100", "enable soft_0 mw",
                          "enable soft_0 send_inv", "mw_strict soft_0 on",
                          "mw_index_limit soft_0 0", "hold_flush soft_0 off"}) {
      run(c);
    }
    release_big();
    Local::TearDown();
  }
  // The next async event of the context within 10 s (IBV_EVENT_DEVICE_FATAL stands for none).
  ibv_event_type next_event() {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return IBV_EVENT_DEVICE_FATAL;
    ibv_async_event e{};
    if (ibv_get_async_event(ctx_, &e) != 0) return IBV_EVENT_DEVICE_FATAL;
    const ibv_event_type t = e.event_type;
    ibv_ack_async_event(&e);
    return t;
  }
  ibv_qp_state qp_state() {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(qp_, &a, IBV_QP_STATE, &ia), 0);
    return a.qp_state;
  }
  // A loopback RC QP over a big region (4 MiB), for WRITEs that stay in flight at a low rate.
  void big_region() {
    big_.assign(4 << 20, 0x5a);
    big_mr_ = ibv_reg_mr(pd_, big_.data(), big_.size(),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(big_mr_, nullptr);
  }
  int write_big(uint64_t id) {
    const size_t half = big_.size() / 2;
    ibv_sge sge{reinterpret_cast<uintptr_t>(big_.data()), static_cast<uint32_t>(half),
                big_mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(big_.data() + half);
    wr.wr.rdma.rkey = big_mr_->rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp_, &wr, &bad);
  }
  void release_big() {
    if (big_mr_ != nullptr) {
      EXPECT_EQ(ibv_dereg_mr(big_mr_), 0);
    }
    big_mr_ = nullptr;
  }

  std::vector<uint8_t> big_;
  ibv_mr* big_mr_ = nullptr;
};

TEST_F(Control, PortDownAndUpRaiseEventsAndShowInQueryPort) {
  ASSERT_TRUE(softverbs::loaded());
  run("port soft_0 down");
  EXPECT_EQ(next_event(), IBV_EVENT_PORT_ERR);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_DOWN);
  EXPECT_EQ(pa.phys_state, 3);  // Disabled
  run("port soft_0 down");      // no change, no event
  run("port soft_0 up");
  EXPECT_EQ(next_event(), IBV_EVENT_PORT_ACTIVE);
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.phys_state, 5);  // LinkUp
}

// ibv_post_send(3): a WR that cannot reach its peer completes with RETRY_EXC_ERR once the
// transport retries run out; the QP goes to ERR and later WRs are flushed.
TEST_F(Control, WrPostedWhilePortDownFailsWithRetryExceeded) {
  make_qp();
  to_rts();
  run("port soft_0 down");
  ASSERT_EQ(write(0, 64, 1), 0);
  EXPECT_EQ(poll().status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(qp_state(), IBV_QPS_ERR);
  ASSERT_EQ(write(0, 64, 2), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc.wr_id, 2u);
}

TEST_F(Control, InFlightWriteFailsWhenPortGoesDown) {
  big_region();
  make_qp();
  to_rts();
  run("rate soft_0 0.01");  // 2 MiB at 1.25 MB/s: in flight for over a second
  ASSERT_EQ(write_big(7), 0);
  ASSERT_EQ(write(0, 64, 8), 0);
  run("port soft_0 down");
  ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
  wc = poll();
  EXPECT_EQ(wc.wr_id, 8u);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(qp_state(), IBV_QPS_ERR);
  EXPECT_EQ(next_event(), IBV_EVENT_PORT_ERR);
  release_big();
}

TEST_F(Control, GidChangeRaisesEventAndUpdatesTheTable) {
  run("gid soft_0 1 fe80::5");
  EXPECT_EQ(next_event(), IBV_EVENT_GID_CHANGE);
  ibv_gid g{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 1, &g), 0);
  EXPECT_EQ(g.raw[0], 0xfe);
  EXPECT_EQ(g.raw[1], 0x80);
  EXPECT_EQ(g.raw[15], 0x05);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.gid_tbl_len, 2);
  run("gid soft_0 1 delete");
  EXPECT_EQ(next_event(), IBV_EVENT_GID_CHANGE);
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.gid_tbl_len, 1);
  EXPECT_NE(ibv_query_gid(ctx_, 1, 1, &g), 0);
}

// A GID deleted in the middle of the table leaves an empty (all-zero) entry, as a kernel's
// table does: ibv_query_gid_ex says ENODATA for it (EINVAL beyond the table),
// ibv_query_gid_table leaves it out, and the legacy ibv_query_gid reads it as zeros.
TEST_F(Control, AnEmptyGidEntryIsEnodataAndNotInTheTable) {
  run("gid soft_0 1 fe80::1");
  run("gid soft_0 2 fe80::2");
  run("gid soft_0 1 delete");
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.gid_tbl_len, 3);
  ibv_gid_entry e{};
  EXPECT_EQ(ibv_query_gid_ex(ctx_, 1, 1, &e, 0), ENODATA);
  EXPECT_EQ(ibv_query_gid_ex(ctx_, 1, 3, &e, 0), EINVAL);
  ASSERT_EQ(ibv_query_gid_ex(ctx_, 1, 2, &e, 0), 0);
  EXPECT_EQ(e.gid_index, 2u);
  EXPECT_EQ(e.gid.raw[15], 0x02);
  ibv_gid g{};
  g.raw[0] = 0xff;
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 1, &g), 0);
  const ibv_gid zero{};
  EXPECT_EQ(std::memcmp(g.raw, zero.raw, sizeof(g.raw)), 0);
  ibv_gid_entry table[4]{};
  ASSERT_EQ(ibv_query_gid_table(ctx_, table, 4, 0), 2);
  EXPECT_EQ(table[0].gid_index, 0u);
  EXPECT_EQ(table[1].gid_index, 2u);
  EXPECT_EQ(table[1].gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(ibv_query_gid_table(ctx_, table, 1, 0), -EINVAL);  // two valid entries
  run("gid soft_0 2 delete");
  run("gid soft_0 1 delete");
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.gid_tbl_len, 1);
}

TEST_F(Control, ErrorCompletionOnTheNthWr) {
  make_qp();
  to_rts();
  run("fail_wr soft_0 " + std::to_string(qp_->qp_num) + " 3 REM_OP_ERR");
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_EQ(write(0, 64, id), 0);
  const ibv_wc_status want[] = {IBV_WC_SUCCESS, IBV_WC_SUCCESS, IBV_WC_REM_OP_ERR,
                                IBV_WC_WR_FLUSH_ERR};
  for (uint64_t id = 1; id <= 4; ++id) {
    const ibv_wc wc = poll();
    EXPECT_EQ(wc.wr_id, id);
    EXPECT_EQ(wc.status, want[id - 1]) << "wr " << id;
  }
  EXPECT_EQ(qp_state(), IBV_QPS_ERR);
}

// An armed fail_destroy fails that one ibv_destroy_qp call and leaves the QP as it was (OrbiTE's
// test of a failed native teardown keeping its charges); the next call destroys it.
TEST_F(Control, AFailedDestroyLeavesTheQpUsable) {
  make_qp();
  to_rts();
  run("fail_destroy soft_0 " + std::to_string(qp_->qp_num) + " 1 EIO");
  EXPECT_EQ(ibv_destroy_qp(qp_), EIO);
  EXPECT_EQ(qp_state(), IBV_QPS_RTS);
  ASSERT_EQ(write(0, 64, 7), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// fail_poll: the armed ibv_poll_cq calls fail (a negative return) and take nothing, so the
// completion they held back comes to the first poll after them (OrbiTE's poll-failure test).
TEST_F(Control, FailedPollsTakeNothingAndTheCompletionComesAfterThem) {
  make_qp();
  to_rts();
  ASSERT_EQ(write(0, 64, 9), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the completion is there
  run("fail_poll soft_0 2 3");
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(cq_, 0, &wc), 0);  // the first call from now passes (NTH 2)
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ibv_poll_cq(cq_, 1, &wc), -1) << "call " << i;
  const ibv_wc after = poll();
  EXPECT_EQ(after.wr_id, 9u);
  EXPECT_EQ(after.status, IBV_WC_SUCCESS);
  EXPECT_EQ(qp_state(), IBV_QPS_RTS);
  const std::string shown = run("show soft_0");
  EXPECT_NE(shown.find("polls_failed "), std::string::npos) << shown;
}

// The fault is the CQs' that existed when it was armed: a CQ created afterwards polls normally
// (a consumer that replaces a failing CQ set recovers), while the old CQ keeps failing.
TEST_F(Control, FailedPollsSpareACqCreatedAfterTheFault) {
  make_qp();
  run("fail_poll soft_0 1 1000");
  ibv_cq* fresh = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(fresh, nullptr);
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(fresh, 1, &wc), 0);
  EXPECT_EQ(ibv_poll_cq(cq_, 1, &wc), -1);
  EXPECT_EQ(ibv_destroy_cq(fresh), 0);
  for (int i = 0; i < 999; ++i) ibv_poll_cq(cq_, 1, &wc);  // the rest of the run
  EXPECT_EQ(ibv_poll_cq(cq_, 1, &wc), 0);
}

// hold_flush: the WRs a QP's move to ERR flushes never complete (OrbiTE's destruction-window
// test); the error completion that caused it still comes, and the QP can be destroyed.
TEST_F(Control, HeldFlushesNeverComplete) {
  make_qp();
  to_rts();
  run("hold_flush soft_0 on");
  run("fail_wr soft_0 " + std::to_string(qp_->qp_num) + " 1 REM_OP_ERR");
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(write(0, 64, id), 0);
  const ibv_wc first = poll();
  EXPECT_EQ(first.wr_id, 1u);
  EXPECT_EQ(first.status, IBV_WC_REM_OP_ERR);
  EXPECT_EQ(qp_state(), IBV_QPS_ERR);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(cq_, 1, &wc), 0) << "a held flush completed: wr " << wc.wr_id;
  const std::string shown = run("show soft_0");
  EXPECT_NE(shown.find("hold_flush on"), std::string::npos) << shown;
  EXPECT_NE(shown.find("flushes_held 2"), std::string::npos) << shown;
  run("hold_flush soft_0 off");
  EXPECT_EQ(ibv_destroy_qp(qp_), 0);
  qp_ = nullptr;
}

TEST_F(Control, DroppedConnectionFailsTheInFlightWr) {
  big_region();
  make_qp();
  to_rts();
  run("rate soft_0 0.01");
  ASSERT_EQ(write_big(3), 0);
  run("drop soft_0 " + std::to_string(qp_->qp_num));
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(qp_state(), IBV_QPS_ERR);
  release_big();
}

// Late completions keep their order and still wake a completion channel. The delay is a lower
// bound the emulation guarantees, so asserting it cannot flake on a slow machine.
TEST_F(Control, DelayedCompletionsArriveLateInOrderAndWakeTheChannel) {
  ch_ = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch_, nullptr);
  make_qp();
  to_rts();
  run("delay soft_0 50000");
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(write(0, 64, id), 0);
  pollfd p{ch_->fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1) << "no completion event";
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(ch_, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, cq_);
  ibv_ack_cq_events(cq_, 1);
  for (uint64_t id = 1; id <= 3; ++id) {
    const ibv_wc wc = poll();
    EXPECT_EQ(wc.wr_id, id);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  }
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
}

// A provider without memory windows (EFA): no capability, alloc_mw and BIND_MW refused.
TEST_F(Control, DisabledMemoryWindows) {
  run("disable soft_0 mw");
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx_, &da), 0);
  EXPECT_EQ(da.max_mw, 0);
  EXPECT_EQ(da.device_cap_flags & (IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
                                   IBV_DEVICE_MEM_MGT_EXTENSIONS),
            0u);
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dx), 0);
  EXPECT_EQ(dx.device_cap_flags_ex & (IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
                                      IBV_DEVICE_MEM_MGT_EXTENSIONS),
            0u);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd_, IBV_MW_TYPE_2), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  make_qp();
  to_rts();
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.invalidate_rkey = 0x1234;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  run("enable soft_0 mw");
  ibv_mw* mw = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(Control, DisabledSendWithInvalidate) {
  make_qp();
  to_rts();
  run("disable soft_0 send_inv");
  // No SEND_WITH_INV: no memory management extensions; the windows stay.
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dx), 0);
  EXPECT_EQ(dx.device_cap_flags_ex & IBV_DEVICE_MEM_MGT_EXTENSIONS, 0u);
  EXPECT_EQ(dx.orig_attr.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS, 0u);
  EXPECT_NE(dx.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW_TYPE_2B, 0u);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.invalidate_rkey = 0x1234;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  EXPECT_EQ(qp_state(), IBV_QPS_RTS);  // refused at post: nothing changed
}

TEST_F(Control, RateChangesThePortSpeedCodes) {
  run("rate soft_0 25");
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.active_speed, 32);  // EDR, 25 Gb/s per lane
  EXPECT_EQ(pa.active_width, 1);   // 1x
  run("rate soft_0 100");
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.active_speed, 32);
  EXPECT_EQ(pa.active_width, 2);  // 4x
}

TEST_F(Control, BadCommandsNameTheFieldAndChangeNothing) {
  const std::string before = run("show soft_0");
  const struct {
    const char* cmd;
    int err;
    const char* names;
  } cases[] = {
      {"port soft_9 down", EINVAL, "no device 'soft_9'"},
      {"port soft_0 sideways", EINVAL, "'sideways'"},
      {"fail_wr soft_0 * 0", EINVAL, "NTH '0'"},
      {"fail_wr soft_0 * 1 BOGUS", EINVAL, "status 'BOGUS'"},
      {"gid soft_0 0 ::1", EINVAL, "index '0'"},
      {"gid soft_0 1 nonsense", EINVAL, "'nonsense'"},
      {"rate soft_0 -3", EINVAL, "'-3'"},
      {"delay soft_0 soon", EINVAL, "'soon'"},
      {"disable soft_0 atomics", EINVAL, "'atomics'"},
      {"mw_strict soft_0 maybe", EINVAL, "'maybe' is not on or off"},
      {"hold_flush soft_0 maybe", EINVAL, "'maybe' is not on or off"},
      {"mw_index_limit soft_0 many", EINVAL, "'many' is not 0..8388608"},
      {"mw_index_limit soft_0 8388609", EINVAL, "'8388609'"},
      {"fail_destroy soft_0 * 0 EIO", EINVAL, "NTH '0'"},
      {"fail_destroy soft_0 * 1 nope", EINVAL, "'nope' is not an errno value"},
      {"fail_poll soft_0 0", EINVAL, "NTH '0'"},
      {"fail_poll soft_0 1 0", EINVAL, "COUNT '0'"},
      {"fail_poll soft_0 1 2 3", EINVAL, "usage: fail_poll DEV NTH [COUNT]"},
      {"drop soft_0 1234", ENOENT, "no QP 1234"},
      {"reboot soft_0", EINVAL, "unknown command 'reboot'"},
      {"", EINVAL, "empty command"},
  };
  for (const auto& c : cases) {
    std::string reply;
    EXPECT_EQ(softverbs::control(c.cmd, &reply), c.err) << c.cmd;
    EXPECT_EQ(reply.rfind("error: ", 0), 0u) << reply;
    EXPECT_NE(reply.find(c.names), std::string::npos) << c.cmd << " -> " << reply;
  }
  EXPECT_EQ(run("show soft_0"), before);
}

// ibv_dereg_mr(3) with a WR still using the region: the NIC reads none of it afterwards (the
// memory is freed at once, so AddressSanitizer would catch a late read); the WR fails.
TEST_F(Control, DeregisteringTheSourceOfAWriteInFlightFailsTheWrite) {
  big_region();
  make_qp();
  to_rts();
  run("rate soft_0 0.01");
  ASSERT_EQ(write_big(5), 0);
  release_big();
  big_ = std::vector<uint8_t>();  // freed
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 5u);
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc.status);
}

TEST_F(Control, DeregisteringTheSourceOfAReadInFlightFailsTheRead) {
  big_region();
  std::vector<uint8_t> dst(2 << 20);
  ibv_mr* dst_mr = ibv_reg_mr(pd_, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(dst_mr, nullptr);
  make_qp();
  to_rts();
  run("rate soft_0 0.01");  // the response leaves the responder at 1.25 MB/s
  ibv_sge sge{reinterpret_cast<uintptr_t>(dst.data()), static_cast<uint32_t>(dst.size()),
              dst_mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 6;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(big_.data());
  wr.wr.rdma.rkey = big_mr_->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp_, &wr, &bad), 0);
  // Deregister once the responder has queued the response (its first bytes have landed).
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (dst[0] != 0x5a && std::chrono::steady_clock::now() < end) sched_yield();
  ASSERT_EQ(dst[0], 0x5a) << "the response never started";
  release_big();
  big_ = std::vector<uint8_t>();  // freed
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 6u);
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ibv_dereg_mr(dst_mr), 0);
}

#if defined(SOFTVERBS_CTL)
// Another process's view: SOFTVERBS_CONTROL_SOCKET (set by the ctest) and softverbs-ctl.
TEST_F(Control, SocketAndCommandLineTool) {
  const char* env = std::getenv("SOFTVERBS_CONTROL_SOCKET");
  if (env == nullptr) GTEST_SKIP() << "SOFTVERBS_CONTROL_SOCKET is not set";
  std::string path = env;
  path.replace(path.find("%p"), 2, std::to_string(getpid()));
  auto ctl = [&](const std::string& args, int* status) {
    std::string out;
    FILE* f = popen((std::string(SOFTVERBS_CTL) + " " + path + " " + args + " 2>&1").c_str(), "r");
    if (f == nullptr) return out;
    char buf[256];
    while (std::fgets(buf, sizeof(buf), f) != nullptr) out += buf;
    *status = pclose(f);
    return out;
  };
  int status = -1;
  EXPECT_EQ(ctl("show soft_0", &status).rfind("ok soft_0 port ACTIVE", 0), 0u);
  EXPECT_EQ(status, 0);
  ctl("port soft_0 down", &status);
  EXPECT_EQ(status, 0);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_DOWN);
  EXPECT_NE(ctl("port soft_0 maybe", &status).find("'maybe'"), std::string::npos);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::remove(path.c_str());
}
#endif

}  // namespace
}  // namespace softverbs_test
