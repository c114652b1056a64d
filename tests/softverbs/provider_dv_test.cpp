// rdma-core's provider libraries linked into a program (as perftest links libmlx5.so.1 and
// libefa.so.1) on softverbs: they load (their constructors call verbs_register_driver_34,
// which softverbs ignores), and their direct-verbs entry points see a device that is not
// theirs and fail as they do on any other provider's device: EOPNOTSUPP, or NULL with errno.
// This program links libmlx5 and libefa; softverbs is its libibverbs.so.1 by LD_LIBRARY_PATH.
#include <gtest/gtest.h>
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cerrno>

namespace {

class ProviderDv : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    list_ = ibv_get_device_list(&n);
    ASSERT_NE(list_, nullptr);
    ASSERT_GE(n, 1);
    ctx_ = ibv_open_device(list_[0]);
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
  }
  void TearDown() override {
    if (cq_ != nullptr) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (pd_ != nullptr) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_ != nullptr) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
    if (list_ != nullptr) ibv_free_device_list(list_);
  }
  ibv_qp_init_attr_ex qp_attr(ibv_qp_type type) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = type;
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.pd = pd_;
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    return a;
  }

  ibv_device** list_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
};

TEST_F(ProviderDv, Mlx5DirectVerbsSeeAForeignDevice) {
  EXPECT_FALSE(mlx5dv_is_supported(list_[0]));
  mlx5dv_context_attr open_attr{};
  errno = 0;
  EXPECT_EQ(mlx5dv_open_device(list_[0], &open_attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  mlx5dv_context dv{};
  EXPECT_EQ(mlx5dv_query_device(ctx_, &dv), EOPNOTSUPP);
  uint32_t in[4] = {};
  uint32_t out[4] = {};
  EXPECT_EQ(mlx5dv_devx_general_cmd(ctx_, in, sizeof(in), out, sizeof(out)), EOPNOTSUPP);
  ibv_qp_init_attr_ex a = qp_attr(IBV_QPT_RC);
  mlx5dv_qp_init_attr dv_attr{};
  errno = 0;
  EXPECT_EQ(mlx5dv_create_qp(ctx_, &a, &dv_attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST_F(ProviderDv, EfaDirectVerbsSeeAForeignDevice) {
  efadv_device_attr attr{};
  EXPECT_EQ(efadv_query_device(ctx_, &attr, sizeof(attr)), EOPNOTSUPP);
  ibv_qp_init_attr_ex a = qp_attr(IBV_QPT_DRIVER);
  efadv_qp_init_attr efa{};
  efa.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
  errno = 0;
  EXPECT_EQ(efadv_create_qp_ex(ctx_, &a, &efa, sizeof(efa)), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

// The plain verbs keep working beside them.
TEST_F(ProviderDv, PlainVerbsStillWork) {
  ibv_qp_init_attr_ex a = qp_attr(IBV_QPT_RC);
  ibv_qp* qp = ibv_create_qp_ex(ctx_, &a);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

}  // namespace
