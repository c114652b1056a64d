// The IBVERBS_1.0 compat versions of the verbs whose default is IBVERBS_1.1. rdma-core keeps
// them for programs built against libibverbs 1.0 (before 2006), whose structs (ibv_device_1_0,
// ibv_context_1_0, ...) wrap the current ones; only such a program binds to these versions.
// softverbs does not emulate that ABI: each version exists, and fails (NULL with errno
// EOPNOTSUPP, or EOPNOTSUPP / -1 as the verb reports errors) or does nothing. Current programs
// bind to the IBVERBS_1.1 definitions in device.cpp and resources.cpp.
#include <infiniband/verbs.h>

#include <cerrno>

// The 1.0 ABI's objects, used only through pointers.
struct ibv_device_1_0;
struct ibv_context_1_0;
struct ibv_pd_1_0;
struct ibv_mr_1_0;
struct ibv_cq_1_0;
struct ibv_srq_1_0;
struct ibv_qp_1_0;
struct ibv_qp_init_attr_1_0;
struct ibv_ah_1_0;

#define SOFTVERBS_COMPAT_1_0(name) extern "C" __attribute__((symver(#name "@IBVERBS_1.0")))

namespace {

template <typename T>
T* unsupported() {
  errno = EOPNOTSUPP;
  return nullptr;
}

int failed() {
  errno = EOPNOTSUPP;
  return -1;
}

}  // namespace

SOFTVERBS_COMPAT_1_0(ibv_get_device_list) ibv_device_1_0** softverbs_get_device_list_1_0(int*) {
  return unsupported<ibv_device_1_0*>();
}
SOFTVERBS_COMPAT_1_0(ibv_free_device_list) void softverbs_free_device_list_1_0(ibv_device_1_0**) {}
SOFTVERBS_COMPAT_1_0(ibv_get_device_name)
const char* softverbs_get_device_name_1_0(ibv_device_1_0*) {
  return unsupported<const char>();
}
SOFTVERBS_COMPAT_1_0(ibv_get_device_guid) __be64 softverbs_get_device_guid_1_0(ibv_device_1_0*) {
  return 0;
}
SOFTVERBS_COMPAT_1_0(ibv_open_device)
ibv_context_1_0* softverbs_open_device_1_0(ibv_device_1_0*) {
  return unsupported<ibv_context_1_0>();
}
SOFTVERBS_COMPAT_1_0(ibv_close_device) int softverbs_close_device_1_0(ibv_context_1_0*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_get_async_event)
int softverbs_get_async_event_1_0(ibv_context_1_0*, ibv_async_event*) {
  return failed();
}
SOFTVERBS_COMPAT_1_0(ibv_ack_async_event) void softverbs_ack_async_event_1_0(ibv_async_event*) {}
SOFTVERBS_COMPAT_1_0(ibv_query_device)
int softverbs_query_device_1_0(ibv_context_1_0*, ibv_device_attr*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_query_port)
int softverbs_query_port_1_0(ibv_context_1_0*, uint8_t, ibv_port_attr*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_query_gid)
int softverbs_query_gid_1_0(ibv_context_1_0*, uint8_t, int, ibv_gid*) {
  return failed();
}
SOFTVERBS_COMPAT_1_0(ibv_query_pkey)
int softverbs_query_pkey_1_0(ibv_context_1_0*, uint8_t, int, __be16*) {
  return failed();
}
SOFTVERBS_COMPAT_1_0(ibv_alloc_pd) ibv_pd_1_0* softverbs_alloc_pd_1_0(ibv_context_1_0*) {
  return unsupported<ibv_pd_1_0>();
}
SOFTVERBS_COMPAT_1_0(ibv_dealloc_pd) int softverbs_dealloc_pd_1_0(ibv_pd_1_0*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_reg_mr)
ibv_mr_1_0* softverbs_reg_mr_1_0(ibv_pd_1_0*, void*, size_t, int) {
  return unsupported<ibv_mr_1_0>();
}
SOFTVERBS_COMPAT_1_0(ibv_dereg_mr) int softverbs_dereg_mr_1_0(ibv_mr_1_0*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_create_cq)
ibv_cq_1_0* softverbs_create_cq_1_0(ibv_context_1_0*, int, void*, ibv_comp_channel*, int) {
  return unsupported<ibv_cq_1_0>();
}
SOFTVERBS_COMPAT_1_0(ibv_resize_cq) int softverbs_resize_cq_1_0(ibv_cq_1_0*, int) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_destroy_cq) int softverbs_destroy_cq_1_0(ibv_cq_1_0*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_get_cq_event)
int softverbs_get_cq_event_1_0(ibv_comp_channel*, ibv_cq_1_0**, void**) {
  return failed();
}
SOFTVERBS_COMPAT_1_0(ibv_ack_cq_events)
void softverbs_ack_cq_events_1_0(ibv_cq_1_0*, unsigned int) {}
SOFTVERBS_COMPAT_1_0(ibv_create_srq)
ibv_srq_1_0* softverbs_create_srq_1_0(ibv_pd_1_0*, ibv_srq_init_attr*) {
  return unsupported<ibv_srq_1_0>();
}
SOFTVERBS_COMPAT_1_0(ibv_modify_srq)
int softverbs_modify_srq_1_0(ibv_srq_1_0*, ibv_srq_attr*, int) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_query_srq) int softverbs_query_srq_1_0(ibv_srq_1_0*, ibv_srq_attr*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_destroy_srq) int softverbs_destroy_srq_1_0(ibv_srq_1_0*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_create_qp)
ibv_qp_1_0* softverbs_create_qp_1_0(ibv_pd_1_0*, ibv_qp_init_attr_1_0*) {
  return unsupported<ibv_qp_1_0>();
}
SOFTVERBS_COMPAT_1_0(ibv_query_qp)
int softverbs_query_qp_1_0(ibv_qp_1_0*, ibv_qp_attr*, int, ibv_qp_init_attr_1_0*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_modify_qp) int softverbs_modify_qp_1_0(ibv_qp_1_0*, ibv_qp_attr*, int) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_destroy_qp) int softverbs_destroy_qp_1_0(ibv_qp_1_0*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_create_ah) ibv_ah_1_0* softverbs_create_ah_1_0(ibv_pd_1_0*, ibv_ah_attr*) {
  return unsupported<ibv_ah_1_0>();
}
SOFTVERBS_COMPAT_1_0(ibv_destroy_ah) int softverbs_destroy_ah_1_0(ibv_ah_1_0*) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_attach_mcast)
int softverbs_attach_mcast_1_0(ibv_qp_1_0*, ibv_gid*, uint16_t) {
  return EOPNOTSUPP;
}
SOFTVERBS_COMPAT_1_0(ibv_detach_mcast)
int softverbs_detach_mcast_1_0(ibv_qp_1_0*, ibv_gid*, uint16_t) {
  return EOPNOTSUPP;
}
