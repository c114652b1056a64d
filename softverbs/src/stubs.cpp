// Public verbs of rdma-core 44's libibverbs that softverbs does not emulate: SRQs, address
// handles, multicast, re-registration, dma-buf regions, importing objects of another process,
// ECE. They exist so that every program linked against rdma-core loads; each one fails at run
// time as rdma-core does for a verb its provider lacks (EOPNOTSUPP, or NULL with errno set to
// EOPNOTSUPP), or does nothing where the verb returns nothing. The compat IBVERBS_1.0 versions
// are in stubs_compat.cpp, the provider interface in stubs_provider.cpp.
#include <cerrno>

#include "provider_abi.h"

extern "C" {

ibv_srq* ibv_create_srq(ibv_pd*, ibv_srq_init_attr*) {
  errno = EOPNOTSUPP;
  return nullptr;
}
int ibv_modify_srq(ibv_srq*, ibv_srq_attr*, int) {
  return EOPNOTSUPP;
}
int ibv_query_srq(ibv_srq*, ibv_srq_attr*) {
  return EOPNOTSUPP;
}
int ibv_destroy_srq(ibv_srq*) {
  return EOPNOTSUPP;
}

ibv_ah* ibv_create_ah(ibv_pd*, ibv_ah_attr*) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
int ibv_init_ah_from_wc(ibv_context*, uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*) {
  return EOPNOTSUPP;
}
int ibv_destroy_ah(ibv_ah*) {
  return EOPNOTSUPP;
}
int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) {
  return EOPNOTSUPP;
}

int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return EOPNOTSUPP;
}
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return EOPNOTSUPP;
}

int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}

ibv_context* ibv_import_device(int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_dm(ibv_dm*) {}

int ibv_set_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}
int ibv_query_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}

// 0: no promise about the order in which a message's data is placed, as rdma-core answers for
// a provider without the query (softverbs does place it in order, but promises nothing).
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
  return 0;
}

}  // extern "C"

// ibv_register_driver@IBVERBS_1.1: the pre-rdma-core provider registration, kept by rdma-core
// as a compat-only version (no default). Providers of that age cannot run here either.
using ibv_driver_init_func_1_1 = ibv_device* (*)(const char* uverbs_sys_path, int abi_version);
extern "C" __attribute__((symver("ibv_register_driver@IBVERBS_1.1"))) void
softverbs_register_driver_1_1(const char*, ibv_driver_init_func_1_1) {}
