// rdma-unit-test's MwType2 cases (cases/mw_test.cc in the repository; the issue calls it
// unit/mw_test.cc) that mw_test.cpp does not cover, and the type-2 column of its MWBindTest
// access-flag matrix, on loopback QPs. Each test names its oracle case. Cases that need fake
// structs (a zeroed ibv_mr or ibv_mw that no verb returned, as InvalidMr/InvalidMw/
// DeallocUnknown build them) are not reproduced: softverbs would be reading memory the
// application made up. Their real-object analogues (a region or window of another PD or of
// another context) are tested instead.
#include <algorithm>
#include <string>

#include <softverbs/control.h>

#include "mw_fixture.h"

namespace softverbs_test {
namespace {

constexpr uint32_t kRKey = 1024;  // as in the oracle: a key chosen by the application
constexpr unsigned kRw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// The oracle binds keys of its own choosing (1024, 1028, 10), not keys that keep the window's
// index, so these cases run with softverbs' strict keys off (mw_test.cpp tests them on).
class MwAnyKey : public Mw {
 protected:
  void SetUp() override {
    std::string reply;
    ASSERT_EQ(softverbs::control("mw_strict soft_0 off", &reply), 0) << reply;
    Mw::SetUp();
  }
  void TearDown() override {
    Mw::TearDown();
    std::string reply;
    EXPECT_EQ(softverbs::control("mw_strict soft_0 on", &reply), 0) << reply;
  }
};

// A second, independent setup as the oracle's second CreateBasicSetup(): its own context (its
// own NIC in softverbs), PD, buffer, a plain region and a MW_BIND region registered in the
// fixture's order (so in softverbs their keys equal the fixture's), a window, CQ and QP.
struct OtherContext {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  ibv_mr* bind_mr = nullptr;
  ibv_mw* mw = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);

  bool open() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr || n == 0) return false;
    ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (ctx == nullptr || (pd = ibv_alloc_pd(ctx)) == nullptr) return false;
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | kRw);
    bind_mr =
        ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | kRw | IBV_ACCESS_MW_BIND);
    mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    if (mr == nullptr || bind_mr == nullptr || mw == nullptr || cq == nullptr) return false;
    return (qp = loopback_qp(pd, cq)) != nullptr;
  }
  ~OtherContext() {
    if (mw != nullptr) ibv_dealloc_mw(mw);
    if (qp != nullptr) ibv_destroy_qp(qp);
    if (cq != nullptr) ibv_destroy_cq(cq);
    if (bind_mr != nullptr) ibv_dereg_mr(bind_mr);
    if (mr != nullptr) ibv_dereg_mr(mr);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (ctx != nullptr) ibv_close_device(ctx);
  }
};

// MwType2 UnsignaledBind: an unsignaled bind completes silently; the signaled bind after it is
// the first completion, and both windows work.
TEST_F(MwAnyKey, MwType2UnsignaledBind) {
  ibv_mw* mw2 = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw2, nullptr);
  ASSERT_EQ(post(qp_, bind_wr(mw2, kRKey, bind_mr_, 0, 4096, kRw, /*signaled=*/false, 1)), 0);
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey + 1, bind_mr_, 4096, 4096, kRw, true, 2)), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(mw2->rkey, kRKey);
  EXPECT_EQ(mw_->rkey, kRKey + 1);
  for (size_t i = 0; i < 16; ++i) buf_[60000 + i] = static_cast<uint8_t>(0xa0 + i);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 60000, at(100), kRKey, 8).status, IBV_WC_SUCCESS);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 60008, at(4200), kRKey + 1, 8).status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(buf_.data() + 100, buf_.data() + 60000, 8), 0);
  EXPECT_EQ(std::memcmp(buf_.data() + 4200, buf_.data() + 60008, 8), 0);
  ibv_wc none{};
  EXPECT_EQ(ibv_poll_cq(cq_, 1, &none), 0);
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
}

// MwType2 UnsignaledBindError: a failing bind completes even when unsignaled (MW_BIND_ERR) and
// moves the QP to ERR.
TEST_F(MwAnyKey, MwType2UnsignaledBindError) {
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey, bind_mr_, 0, 4096, kRw)), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ibv_mw* mw2 = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw2, nullptr);
  ASSERT_EQ(post(qp_, bind_wr(mw2, kRKey, bind_mr_, 0, 4096, kRw, /*signaled=*/false, 1)), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(qp_->state, IBV_QPS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
}

// MwType2 UnsignaledInvalidate: an unsignaled LOCAL_INV completes silently (the READ after it
// is the next completion) and revokes only its window.
TEST_F(MwAnyKey, MwType2UnsignaledInvalidate) {
  ibv_mw* mw2 = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw2, nullptr);
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey, bind_mr_, 0, 4096, kRw)), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ASSERT_EQ(post(qp_, bind_wr(mw2, kRKey + 1, bind_mr_, 0, 4096, kRw)), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ASSERT_EQ(local_inv(qp_, kRKey, /*signaled=*/false), 0);
  ibv_wc wc = rdma(IBV_WR_RDMA_READ, 8192, at(0), kRKey + 1, 64);
  EXPECT_EQ(wc.wr_id, 200u);  // the READ, not the invalidation
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  wc = rdma(IBV_WR_RDMA_READ, 8192, at(0), kRKey, 64);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
}

// MwType2 UnsignaledInvalidateError: an unsignaled LOCAL_INV of a key no window holds still
// completes, with MW_BIND_ERR.
TEST_F(MwAnyKey, MwType2UnsignaledInvalidateError) {
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey, bind_mr_, 0, 4096, kRw)), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ASSERT_EQ(local_inv(qp_, kRKey + 1, /*signaled=*/false, 7), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
}

// MwType2 DoubleUnbind: the second LOCAL_INV of the same key is MW_BIND_ERR.
TEST_F(MwAnyKey, MwType2DoubleUnbind) {
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey, bind_mr_, 0, 4096, kRw)), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ASSERT_EQ(local_inv(qp_, kRKey), 0);
  ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  ASSERT_EQ(local_inv(qp_, kRKey), 0);
  wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
}

// MwType2 InvalidMr, real-object form (the oracle's zeroed fake ibv_mr is not reproduced): a
// region of another PD is MW_BIND_ERR, and the READ after it flushes (the QP is in ERR).
TEST_F(MwAnyKey, MwType2InvalidMrOfAnotherPd) {
  ibv_pd* pd2 = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd2, nullptr);
  ibv_mr* mr2 =
      ibv_reg_mr(pd2, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE | kRw | IBV_ACCESS_MW_BIND);
  ASSERT_NE(mr2, nullptr);
  ASSERT_EQ(post(qp_, bind_wr(mw_, 10, mr2, 0, 4096, kRw)), 0);
  ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
  wc = rdma(IBV_WR_RDMA_READ, 8192, at(0), 10, 64);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ibv_dereg_mr(mr2), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// MwType2 InvalidMr, real-object form: a region of another context is MW_BIND_ERR, even when
// its key equals one of this context's regions (as it does in softverbs, whose keys are per
// context), and no window of this context gets bound.
TEST_F(MwAnyKey, MwType2InvalidMrOfAnotherContext) {
  OtherContext other;
  ASSERT_TRUE(other.open());
  const uint32_t before = mw_->rkey;
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey, other.bind_mr, 0, 4096, kRw)), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(mw_->rkey, before);
  EXPECT_EQ(ibv_dereg_mr(bind_mr_), 0);  // not busy: no window is bound over it
  bind_mr_ = nullptr;
}

// MwType2 InvalidMw, real-object form (the oracle's zeroed fake ibv_mw is not reproduced): a
// window of another PD is MW_BIND_ERR.
TEST_F(MwAnyKey, MwType2InvalidMwOfAnotherPd) {
  ibv_pd* pd2 = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd2, nullptr);
  ibv_mw* mw2 = ibv_alloc_mw(pd2, IBV_MW_TYPE_2);
  ASSERT_NE(mw2, nullptr);
  const uint32_t before = mw2->rkey;
  ASSERT_EQ(post(qp_, bind_wr(mw2, 10, bind_mr_, 0, 4096, kRw)), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(mw2->rkey, before);
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// MwType2 InvalidMw, real-object form: a window of another context is MW_BIND_ERR and binds
// nothing, neither it nor this context's window with the same handle (softverbs numbers
// windows per context): the QP is then not held by a bound window.
TEST_F(MwAnyKey, MwType2InvalidMwOfAnotherContext) {
  OtherContext other;
  ASSERT_TRUE(other.open());
  const uint32_t before = other.mw->rkey;
  ASSERT_EQ(post(qp_, bind_wr(other.mw, kRKey, bind_mr_, 0, 4096, kRw)), 0);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(other.mw->rkey, before);
  EXPECT_EQ(ibv_destroy_qp(qp_), 0);  // EBUSY would mean mw_ got bound through it
  qp_ = nullptr;
}

// MwType2 BindRKeyIsolation: the same key bound in two contexts succeeds in both, and each
// context's key reaches its own memory only.
TEST_F(MwAnyKey, MwType2BindRKeyIsolation) {
  OtherContext other;
  ASSERT_TRUE(other.open());
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey, bind_mr_, 0, 4096, kRw)), 0);
  ibv_wc wc = poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  ibv_send_wr wr = bind_wr(other.mw, kRKey, other.bind_mr, 0, 4096, kRw);
  wr.bind_mw.bind_info.addr = reinterpret_cast<uintptr_t>(other.buf.data());
  ASSERT_EQ(post(other.qp, wr), 0);
  wc = poll_one(other.cq);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);

  std::memset(buf_.data() + 60000, 0xaa, 8);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 60000, at(100), kRKey, 8).status, IBV_WC_SUCCESS);
  std::memset(other.buf.data() + 60000, 0xbb, 8);
  ibv_sge sge{reinterpret_cast<uintptr_t>(other.buf.data() + 60000), 8, other.mr->lkey};
  ibv_send_wr w{};
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(other.buf.data() + 200);
  w.wr.rdma.rkey = kRKey;
  ASSERT_EQ(post(other.qp, w), 0);
  wc = poll_one(other.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  const std::vector<uint8_t> aa(8, 0xaa);
  const std::vector<uint8_t> bb(8, 0xbb);
  EXPECT_EQ(std::memcmp(buf_.data() + 100, aa.data(), 8), 0);
  EXPECT_EQ(std::memcmp(other.buf.data() + 200, bb.data(), 8), 0);
  EXPECT_EQ(std::count(other.buf.begin(), other.buf.end(), 0xaa), 0);
  EXPECT_EQ(std::count(buf_.begin(), buf_.end(), 0xbb), 0);
  EXPECT_EQ(ibv_dealloc_mw(other.mw), 0);  // before its QP goes
  other.mw = nullptr;
}

// MwType2 ChangeQp: after LOCAL_INV on its QP, the window binds through another QP; the new key
// serves only that QP, and the old key is refused there (REM_ACCESS_ERR).
TEST_F(MwAnyKey, MwType2ChangeQp) {
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey, bind_mr_, 0, 4096, kRw)), 0);
  ASSERT_EQ(poll().status, IBV_WC_SUCCESS);
  ASSERT_EQ(local_inv(qp_, kRKey), 0);
  ibv_wc wc = poll();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  ASSERT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  ibv_cq* cq2 = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq2, nullptr);
  ibv_qp* qp2 = loopback_qp(pd_, cq2);
  ASSERT_NE(qp2, nullptr);
  ASSERT_EQ(post(qp2, bind_wr(mw_, 1028, bind_mr_, 0, 4096, kRw)), 0);
  wc = poll_one(cq2);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(rdma_on(qp2, cq2, IBV_WR_RDMA_READ, 8192, at(0), 1028, 64).status, IBV_WC_SUCCESS);
  wc = rdma_on(qp_, cq_, IBV_WR_RDMA_READ, 8192, at(0), 1028, 64);  // not its QP
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  wc = rdma_on(qp2, cq2, IBV_WR_RDMA_READ, 8192, at(0), kRKey, 64);  // the old key
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(ibv_destroy_qp(qp2), EBUSY);  // the window is bound through it
  EXPECT_EQ(ibv_dealloc_mw(mw_), 0);
  mw_ = nullptr;
  EXPECT_EQ(ibv_destroy_qp(qp2), 0);
  EXPECT_EQ(ibv_destroy_cq(cq2), 0);
}

// MwType2 Type1BindOnType2: ibv_bind_mw (the type-1 verb) on a type-2 window is EINVAL.
TEST_F(MwAnyKey, MwType2Type1BindOnType2) {
  ibv_mw_bind b{};
  b.wr_id = 1;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info = {bind_mr_, at(0), 4096, kRw};
  EXPECT_EQ(ibv_bind_mw(qp_, mw_, &b), EINVAL);
}

// ibv_post_send(3): on an error, bad_wr names the WR refused and the WRs before it are posted,
// so they complete, a bind (executed by the SQ, no message) included.
TEST_F(MwAnyKey, PostSendErrorKeepsTheBindBeforeIt) {
  ibv_send_wr first = bind_wr(mw_, kRKey, bind_mr_, 0, 4096, kRw, true, 1);
  ibv_sge sges[2] = {{at(0), 8, mr_->lkey}, {at(8), 8, mr_->lkey}};
  ibv_send_wr second{};
  second.wr_id = 2;
  second.sg_list = sges;
  second.num_sge = 2;  // max_send_sge is 1
  second.opcode = IBV_WR_RDMA_WRITE;
  second.send_flags = IBV_SEND_SIGNALED;
  second.wr.rdma.remote_addr = at(100);
  second.wr.rdma.rkey = mr_->rkey;
  first.next = &second;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, &first, &bad), EINVAL);
  EXPECT_EQ(bad, &second);
  const ibv_wc wc = poll();
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
}

// The type-2 column of rdma-unit-test's MWBindTest matrix: region rights x window rights ->
// bind status. Where the bind succeeds, the window's rights (not the region's remote rights)
// govern remote access, as the IB model has it (test_mr.py's MWRC relies on it too).
struct BindCase {
  const char* name;
  int mr_access;
  unsigned bind_access;
  ibv_wc_status expected;
  size_t len = 4096;
};

void PrintTo(const BindCase& c, std::ostream* os) {
  *os << c.name;
}

class MwBindMatrix : public MwAnyKey, public ::testing::WithParamInterface<BindCase> {};

TEST_P(MwBindMatrix, BindStatusAndRights) {
  const BindCase& c = GetParam();
  ibv_mr* mr = ibv_reg_mr(pd_, buf_.data() + 4096, 4096, c.mr_access);
  ASSERT_NE(mr, nullptr) << "reg_mr " << c.mr_access;
  ASSERT_EQ(post(qp_, bind_wr(mw_, kRKey, mr, 4096, c.len, c.bind_access)), 0);
  ibv_wc wc = poll();
  EXPECT_EQ(wc.status, c.expected) << ibv_wc_status_str(wc.status);
  if (wc.status == IBV_WC_SUCCESS) {
    const bool can_read = (c.bind_access & IBV_ACCESS_REMOTE_READ) != 0;
    const bool can_write = (c.bind_access & IBV_ACCESS_REMOTE_WRITE) != 0;
    if (can_read) {
      EXPECT_EQ(rdma(IBV_WR_RDMA_READ, 30000, at(4096), kRKey, 64).status, IBV_WC_SUCCESS);
    }
    if (can_write) {
      std::memset(buf_.data() + 40000, 0x77, 64);
      EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, 40000, at(4096), kRKey, 64).status, IBV_WC_SUCCESS);
      EXPECT_EQ(std::memcmp(buf_.data() + 4096, buf_.data() + 40000, 64), 0);
    }
    if (!can_read || !can_write) {  // the right the window lacks is refused
      wc = rdma(can_write ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE, 40000, at(4096), kRKey, 64);
      EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
    }
  }
  EXPECT_EQ(ibv_dealloc_mw(mw_), 0);
  mw_ = nullptr;
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

constexpr int kLw = IBV_ACCESS_LOCAL_WRITE;
constexpr int kMwb = IBV_ACCESS_MW_BIND;
constexpr int kRa = IBV_ACCESS_REMOTE_ATOMIC;
constexpr int kRr = IBV_ACCESS_REMOTE_READ;
constexpr int kRwr = IBV_ACCESS_REMOTE_WRITE;
constexpr int kAll = kLw | kMwb | kRa | kRr | kRwr;

INSTANTIATE_TEST_SUITE_P(
    MWBindTest, MwBindMatrix,
    ::testing::Values(
        // MWBindTest AllPermissions: local flags in the window's rights are ignored.
        BindCase{"AllPermissions", kAll, kAll, IBV_WC_SUCCESS},
        // MWBindTest MissingLocalWrite: a read-only window needs no local write.
        BindCase{"MissingLocalWrite", kMwb, kRr, IBV_WC_SUCCESS},
        // MWBindTest MissingBind and NoMrBindAccess: the region needs MW_BIND.
        BindCase{"MissingBind", kLw | kRa | kRr | kRwr, kMwb, IBV_WC_MW_BIND_ERR},
        BindCase{"NoMrBindAccess", kRr, kRr, IBV_WC_MW_BIND_ERR},
        // MwType2 BindType2ReadWithNoLocalWrite: a region with no rights at all.
        BindCase{"NoRegionRights", 0, kRr, IBV_WC_MW_BIND_ERR},
        // MWBindTest MissingRemote{Atomic,Read,Write}: the window may grant a remote right
        // the region lacks.
        BindCase{"MissingRemoteAtomic", kLw | kMwb | kRr | kRwr, kRa, IBV_WC_SUCCESS},
        BindCase{"MissingRemoteRead", kLw | kMwb | kRa | kRwr, kRr, IBV_WC_SUCCESS},
        BindCase{"MissingRemoteWrite", kLw | kMwb | kRa | kRr, kRwr, IBV_WC_SUCCESS},
        // MWBindTest EmptyBind, ReadOnly, WriteOnly.
        BindCase{"EmptyBind", kAll, 0, IBV_WC_SUCCESS},
        BindCase{"ReadOnly", kMwb | kRr, kMwb | kRr, IBV_WC_SUCCESS},
        BindCase{"WriteOnly", kLw | kMwb | kRwr, kLw | kMwb | kRwr, IBV_WC_SUCCESS},
        // Remote write or atomic through a window over a region without local write (the
        // ibv_reg_mr(3) rule carried to windows; rdma-unit-test's Bind*WithNoLocalWrite cases
        // expect MW_BIND_ERR from NICs that report window errors): MW_BIND_ERR.
        BindCase{"RemoteWriteWithoutLocalWrite", kMwb | kRr, kRwr, IBV_WC_MW_BIND_ERR},
        BindCase{"RemoteAtomicWithoutLocalWrite", kMwb | kRr, kRa, IBV_WC_MW_BIND_ERR},
        // No oracle (rdma-unit-test does not test bind ranges): a window longer than its
        // region is MW_BIND_ERR; zero-based windows are not emulated: MW_BIND_ERR.
        BindCase{"BeyondTheRegion", kAll, kRr, IBV_WC_MW_BIND_ERR, 4097},
        BindCase{"ZeroBased", kAll, kRr | IBV_ACCESS_ZERO_BASED, IBV_WC_MW_BIND_ERR}),
    [](const ::testing::TestParamInfo<BindCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace softverbs_test
