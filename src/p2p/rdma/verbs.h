// The verbs calls the RDMA transport makes, without one link-time ibv_* symbol: exported verbs go
// through the loader's table (platform/ibv_loader.h), and the verbs that verbs.h implements inline
// dispatch through the context's ops here. (verbs.h's own inline ibv_query_device_ex falls back
// to the exported ibv_query_device, which would put an undefined symbol into liborbite.so.)
#pragma once

#include <orbite/status.h>

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "platform/ibv_loader.h"

namespace orbite::rdma::verbs {

inline int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return qp->context->ops.post_send(qp, wr, bad);
}
inline int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return qp->context->ops.post_recv(qp, wr, bad);
}
inline int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  return cq->context->ops.poll_cq(cq, n, wc);
}
inline int req_notify_cq(ibv_cq* cq, int solicited_only) {
  return cq->context->ops.req_notify_cq(cq, solicited_only);
}
// NULL with errno set (EOPNOTSUPP where the provider has no memory windows).
inline ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (pd->context->ops.alloc_mw == nullptr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  ibv_mw* mw = pd->context->ops.alloc_mw(pd, type);
  return mw;
}
inline int dealloc_mw(ibv_mw* mw) {
  if (mw->context->ops.dealloc_mw == nullptr) return EOPNOTSUPP;
  return mw->context->ops.dealloc_mw(mw);
}
// The extended device query where the provider has it; otherwise the classic one into
// orig_attr, the rest zero (as verbs.h's inline version does, through the loader).
inline int query_device_ex(const IbvApi& api, ibv_context* ctx, ibv_device_attr_ex* attr) {
  std::memset(attr, 0, sizeof(*attr));
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_device_ex);
  if (vctx != nullptr) {
    const int rc = vctx->query_device_ex(ctx, nullptr, attr, sizeof(*attr));
    if (rc != EOPNOTSUPP && rc != ENOSYS) return rc;
  }
  return api.query_device(ctx, &attr->orig_attr);
}

// The name of a completion status (our own table: ibv_wc_status_str is an export).
const char* wc_status_name(int status);
const char* wc_opcode_name(int opcode);

// "what: strerror (errno N)" as an error of `code`.
inline Status errno_status(Errc code, const std::string& what, int err) {
  return Status::error(code,
                       what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

}  // namespace orbite::rdma::verbs
