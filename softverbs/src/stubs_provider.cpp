// The provider interface of rdma-core's libibverbs (IBVERBS_PRIVATE_34), as inert stubs.
// libmlx5.so.1 and libefa.so.1 (which perftest links directly) and librdmacm.so.1 bind to
// these names, so they must exist for such programs to load. softverbs registers no provider
// and has no kernel command channel: a provider's constructor calling verbs_register_driver_34
// is ignored, so no provider ever opens a softverbs device, and each ibv_cmd_* answers as a
// kernel without the command would, with EOPNOTSUPP. Their mlx5dv_*/efadv_* entry points see a
// device that is not theirs (DeviceBox in device.cpp) and fail as they do on any other device.
#include <cerrno>

#include "provider_abi.h"

extern "C" {

bool verbs_allow_disassociate_destroy = false;

// rdma-core prints these only at the level VERBS_LOG_LEVEL asks for; softverbs has nothing to
// log them for.
void __verbs_log(verbs_context*, uint32_t, const char*, ...) {}

void verbs_register_driver_34(const verbs_device_ops*) {}

void* _verbs_init_and_alloc_context(ibv_device*, int, size_t, verbs_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void verbs_uninit_context(verbs_context*) {}
void verbs_set_ops(verbs_context*, const verbs_context_ops*) {}
void verbs_init_cq(ibv_cq*, ibv_context*, ibv_comp_channel*, void*) {}
ibv_context* verbs_open_device(ibv_device*, void*) {
  errno = EOPNOTSUPP;
  return nullptr;
}

int execute_ioctl(ibv_context*, ibv_command_buffer*) {
  return EOPNOTSUPP;
}
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, ibv_command_buffer*) {
  return num_attrs;
}
int ibv_read_ibdev_sysfs_file(char*, size_t, verbs_sysfs_dev*, const char*, ...) {
  errno = EOPNOTSUPP;
  return -1;
}

// ---- the kernel commands: EOPNOTSUPP, as from a kernel that lacks them ----

int ibv_cmd_get_context(verbs_context*, struct ibv_get_context*, size_t,
                        ib_uverbs_get_context_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_context(ibv_context*, ibv_command_buffer*) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_flow_action_esp(ibv_context*, ibv_flow_action_esp_attr*, verbs_flow_action*,
                                   ibv_command_buffer*) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_flow_action_esp(verbs_flow_action*, ibv_flow_action_esp_attr*,
                                   ibv_command_buffer*) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_device_any(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*,
                             size_t, ib_uverbs_ex_query_device_resp*, size_t*) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_port(ibv_context*, uint8_t, ibv_port_attr*, struct ibv_query_port*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_alloc_pd(ibv_context*, ibv_pd*, struct ibv_alloc_pd*, size_t, ib_uverbs_alloc_pd_resp*,
                     size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_dealloc_pd(ibv_pd*) {
  return EOPNOTSUPP;
}
int ibv_cmd_open_xrcd(ibv_context*, verbs_xrcd*, int, ibv_xrcd_init_attr*, struct ibv_open_xrcd*,
                      size_t, ib_uverbs_open_xrcd_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_close_xrcd(verbs_xrcd*) {
  return EOPNOTSUPP;
}
int ibv_cmd_reg_mr(ibv_pd*, void*, size_t, uint64_t, int, verbs_mr*, struct ibv_reg_mr*, size_t,
                   ib_uverbs_reg_mr_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_rereg_mr(verbs_mr*, uint32_t, void*, size_t, uint64_t, int, ibv_pd*,
                     struct ibv_rereg_mr*, size_t, ib_uverbs_rereg_mr_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_dereg_mr(verbs_mr*) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_mr(ibv_pd*, verbs_mr*, uint32_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_advise_mr(ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int, verbs_mr*) {
  return EOPNOTSUPP;
}
int ibv_cmd_alloc_mw(ibv_pd*, ibv_mw_type, ibv_mw*, struct ibv_alloc_mw*, size_t,
                     ib_uverbs_alloc_mw_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_dealloc_mw(ibv_mw*) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_cq(ibv_context*, int, ibv_comp_channel*, int, ibv_cq*, struct ibv_create_cq*,
                      size_t, ib_uverbs_create_cq_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_cq_ex(ibv_context*, const ibv_cq_init_attr_ex*, verbs_cq*,
                         struct ibv_create_cq_ex*, size_t, ib_uverbs_ex_create_cq_resp*, size_t,
                         uint32_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_poll_cq(ibv_cq*, int, ibv_wc*) {
  return EOPNOTSUPP;
}
int ibv_cmd_req_notify_cq(ibv_cq*, int) {
  return EOPNOTSUPP;
}
int ibv_cmd_resize_cq(ibv_cq*, int, struct ibv_resize_cq*, size_t, ib_uverbs_resize_cq_resp*,
                      size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_cq(ibv_cq*) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_cq(ibv_cq*, ibv_modify_cq_attr*, struct ibv_modify_cq*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_srq(ibv_pd*, ibv_srq*, ibv_srq_init_attr*, struct ibv_create_srq*, size_t,
                       ib_uverbs_create_srq_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_srq_ex(ibv_context*, verbs_srq*, ibv_srq_init_attr_ex*, struct ibv_create_xsrq*,
                          size_t, ib_uverbs_create_srq_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_srq(ibv_srq*, ibv_srq_attr*, int, struct ibv_modify_srq*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_srq(ibv_srq*, ibv_srq_attr*, struct ibv_query_srq*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_srq(ibv_srq*) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_qp(ibv_pd*, ibv_qp*, ibv_qp_init_attr*, struct ibv_create_qp*, size_t,
                      ib_uverbs_create_qp_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_qp_ex(ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*, struct ibv_create_qp*,
                         size_t, ib_uverbs_create_qp_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_qp_ex2(ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*, struct ibv_create_qp_ex*,
                          size_t, ib_uverbs_ex_create_qp_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_open_qp(ibv_context*, verbs_qp*, int, ibv_qp_open_attr*, struct ibv_open_qp*, size_t,
                    ib_uverbs_create_qp_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_qp(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*, struct ibv_query_qp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_qp(ibv_qp*, ibv_qp_attr*, int, struct ibv_modify_qp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_qp_ex(ibv_qp*, ibv_qp_attr*, int, struct ibv_modify_qp_ex*, size_t,
                         ib_uverbs_ex_modify_qp_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_qp(ibv_qp*) {
  return EOPNOTSUPP;
}
int ibv_cmd_post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  *bad_wr = wr;
  return EOPNOTSUPP;
}
int ibv_cmd_post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  *bad_wr = wr;
  return EOPNOTSUPP;
}
int ibv_cmd_post_srq_recv(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  *bad_wr = wr;
  return EOPNOTSUPP;
}
int ibv_cmd_create_ah(ibv_pd*, ibv_ah*, ibv_ah_attr*, ib_uverbs_create_ah_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_ah(ibv_ah*) {
  return EOPNOTSUPP;
}
int ibv_cmd_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_flow(ibv_qp*, ibv_flow*, ibv_flow_attr*, void*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_flow(ibv_flow*) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_wq(ibv_context*, ibv_wq_init_attr*, ibv_wq*, struct ibv_create_wq*, size_t,
                      ib_uverbs_ex_create_wq_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_flow_action(verbs_flow_action*) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_wq(ibv_wq*, ibv_wq_attr*, struct ibv_modify_wq*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_wq(ibv_wq*) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_rwq_ind_table(ibv_context*, ibv_rwq_ind_table_init_attr*, ibv_rwq_ind_table*,
                                 ib_uverbs_ex_create_rwq_ind_table_resp*, size_t) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_rwq_ind_table(ibv_rwq_ind_table*) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_counters(ibv_context*, ibv_counters_init_attr*, verbs_counters*,
                            ibv_command_buffer*) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_counters(verbs_counters*) {
  return EOPNOTSUPP;
}
int ibv_cmd_read_counters(verbs_counters*, uint64_t*, uint32_t, uint32_t, ibv_command_buffer*) {
  return EOPNOTSUPP;
}
int ibv_cmd_alloc_dm(ibv_context*, const ibv_alloc_dm_attr*, verbs_dm*, ibv_command_buffer*) {
  return EOPNOTSUPP;
}
int ibv_cmd_free_dm(verbs_dm*) {
  return EOPNOTSUPP;
}
int ibv_cmd_reg_dm_mr(ibv_pd*, verbs_dm*, uint64_t, size_t, unsigned int, verbs_mr*,
                      ibv_command_buffer*) {
  return EOPNOTSUPP;
}

}  // extern "C"
